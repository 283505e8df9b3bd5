#!/usr/bin/env node
'use strict'
// `npm test`: build the addon if it is missing or older than its sources, check that the
// committed generated loader/types match the build, then lint (actionlint on the workflows,
// cargo fmt, clippy), cargo test and node tests on Node 20 (this one, with the whole fuzz
// budget), 22 and 24.
// Every step runs; the exit code is non-zero if any failed.
const { spawnSync } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')

const root = path.resolve(__dirname, '..')
const results = []

function run(name, cmd, args, opts = {}) {
  process.stdout.write(`\n=== ${name}: ${cmd} ${args.join(' ')}\n`)
  const started = Date.now()
  const r = spawnSync(cmd, args, { cwd: root, stdio: 'inherit', ...opts })
  const ok = r.status === 0
  results.push({ name, ok, seconds: (Date.now() - started) / 1000 })
  if (!ok) process.stdout.write(`=== ${name} FAILED (status ${r.status}${r.error ? `, ${r.error.message}` : ''})\n`)
  return ok
}

const { binaryState } = require('./build-if-stale.js')

const { napiCommand } = require('./tools.js')
if (binaryState() !== null) run('build', ...napiCommand(['build', '--platform', '--release']))

const inGit = spawnSync('git', ['rev-parse', '--is-inside-work-tree'], { cwd: root }).status === 0
if (inGit) run('generated loader and types match the build', 'git', ['diff', '--exit-code', '--', 'index.js', 'index.d.ts'])

// Each step's temp files go to a directory of its own (TMPDIR, which os.tmpdir() reads on
// Unix), removed after the step: a test that leaves a temp directory behind, or a test process
// killed mid-way, leaves nothing in the machine's /tmp.
function ownTmp(name, bin, args, env = {}) {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'pi-native-test-'))
  // Shared like /tmp itself: some tests run children under an unprivileged uid.
  fs.chmodSync(tmp, 0o1777)
  try {
    run(name, bin, args, { env: { ...process.env, ...env, TMPDIR: tmp, TMP: tmp, TEMP: tmp } })
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true })
  }
}
const noLint = require('./lint-workflows.js').unsupported()
if (noLint) results.push({ name: `actionlint (.github/workflows): ${noLint}`, ok: true, skipped: true, seconds: 0 })
else run('actionlint (.github/workflows)', process.execPath, [path.join('scripts', 'lint-workflows.js')])
// Every rule ID a comment or doc page cites must be defined in docs/ARCHITECTURE.md's table.
run('rule IDs cited in comments and docs are defined (scripts/check-rule-ids.js)', process.execPath, [path.join('scripts', 'check-rule-ids.js')])
run('cargo fmt', 'cargo', ['fmt', '--check'])
// The workspace: the addon and tools/faultfs (the fault layer; on other OSes a stub binary).
run('cargo clippy', 'cargo', ['clippy', '--workspace', '--all-targets', '--quiet', '--', '-D', 'warnings'])
ownTmp('cargo test', 'cargo', ['test', '--workspace', '--quiet'])
// Explicit file list: `node --test <dir>` means different things on Node 20 and 22+.
const testFiles = fs
  .readdirSync(path.join(root, '__test__'))
  .filter((n) => n.endsWith('.test.js') || n.endsWith('.test.mjs'))
  .sort()
  .map((n) => path.join('__test__', n))
// `*.isolated.test.js` bound wall-clock behaviour (event-loop gaps, deadlines under load): they
// run one at a time after the rest, so sibling test processes cannot stall them from outside.
const isolated = testFiles.filter((f) => f.endsWith('.isolated.test.js'))
// The network file systems (`network-fs*.test.js`: servers and FUSE mounts on this machine,
// minutes of wall clock) run once, on this Node line, alone: the lock rules they test are the
// addon's, the same on every Node line.
const networkFs = testFiles.filter((f) => path.basename(f).startsWith('network-fs'))
const shared = testFiles.filter((f) => !isolated.includes(f) && !networkFs.includes(f))
function nodeTests(bin, version, env, { withNetworkFs = false } = {}) {
  ownTmp(`node tests (Node ${version})`, bin, ['--test', ...shared], env)
  for (const f of isolated) ownTmp(`node tests (Node ${version}) ${path.basename(f)}`, bin, ['--test', f], env)
  if (!withNetworkFs) return
  const { KINDS, unavailable } = require('../__test__/two-mounts.js')
  const served = KINDS.filter((k) => !unavailable(k))
  for (const k of KINDS.filter((x) => !served.includes(x))) {
    results.push({ name: `network file system ${k}: ${unavailable(k)}`, ok: true, skipped: true, seconds: 0 })
  }
  for (const f of networkFs) ownTmp(`node tests (Node ${version}) ${path.basename(f)}: ${served.join(', ') || 'local folder only'}`, bin, ['--test', f], env)
}
// The fuzz budget (__test__/fuzz.test.js, 100 s) is spent once, on this first line; the other
// lines keep that file's default of a few seconds, enough to catch what differs with the Node
// version (util.isDeepStrictEqual compares constructors from Node 22 on, prototypes before).
// Likewise the watchEntries torture runs 30 s per backend here, 15 s on the other lines.
nodeTests(
  process.execPath,
  process.versions.node,
  {
    PI_NATIVE_FUZZ_SECONDS: process.env.PI_NATIVE_FUZZ_SECONDS ?? '100',
    PI_NATIVE_TORTURE_SECONDS: process.env.PI_NATIVE_TORTURE_SECONDS ?? '30',
  },
  { withNetworkFs: true },
)

// The same suite on the hosts' Node lines (N-API is ABI-stable: the one binary serves all).
// Each comes from PI_NATIVE_NODE_<major> or the platform's npm package (scripts/node-versions.js);
// where neither exists (macOS arm64 without PI_NATIVE_NODE_<major>), the line is skipped and
// the summary says so.
const { nodeFor } = require('./node-versions.js')
for (const major of (process.env.PI_NATIVE_TEST_NODES ?? '22,24').split(',').filter(Boolean)) {
  let bin
  try {
    bin = nodeFor(major)
  } catch (err) {
    results.push({ name: `node tests (Node ${major})`, ok: false, seconds: 0 })
    process.stdout.write(`=== Node ${major} unavailable: ${err.message}\n`)
    continue
  }
  if (!bin) {
    results.push({ name: `node tests (Node ${major}): no Node ${major} package for ${process.platform}-${process.arch}; set PI_NATIVE_NODE_${major}`, ok: true, skipped: true, seconds: 0 })
    continue
  }
  const version = spawnSync(bin, ['--version'], { encoding: 'utf8' }).stdout.trim()
  // PI_NATIVE_TEST_EXTRA_NODE: a check whose outcome cannot depend on the Node running it (the
  // other TypeScript compilers of package.test.js) runs on the first line only.
  nodeTests(bin, version.replace(/^v/, ''), { PI_NATIVE_TEST_EXTRA_NODE: version })
}

process.stdout.write('\n=== summary\n')
for (const r of results) process.stdout.write(`${r.skipped ? 'skip' : r.ok ? 'ok  ' : 'FAIL'} ${r.name} (${r.seconds.toFixed(1)} s)\n`)
const failed = results.filter((r) => !r.ok).length
const skipped = results.filter((r) => r.skipped).length
process.stdout.write(`steps: ${results.length - failed - skipped} ok, ${failed} failed${skipped ? `, ${skipped} skipped` : ''}\n`)
process.exit(failed ? 1 : 0)
