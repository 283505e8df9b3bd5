#!/usr/bin/env node
'use strict'
// The test runner, in three modes (docs/DEVELOPING.md, "Test", has the steps and their times):
//
//   node scripts/test.js           # `npm test`: the verdict in minutes (at most 8 on 2 cores)
//   node scripts/test.js --all     # `npm run test:all`: everything CI runs
//   node scripts/test.js --loaded  # the verdict's test steps again beside a CPU hog on every core
//
// `npm test`: build the addon if it is missing or older than its sources, check that the
// committed generated loader/types match the build, lint (actionlint, the rule-ID check, cargo
// fmt, clippy), cargo test, the lock simulator's quick budget (`npm run sim`, once the project
// has that script), and the node suite on the running Node, both backends, with short fuzz and
// torture budgets; `*.isolated.test.js` files run one at a time after the rest.
//
// `--all` runs the same lint and Rust steps, then the node suite on the running Node with the
// long budgets (instead of the short ones), the `*.slow.test.js` files, the network file
// systems (`network-fs*.test.js`) and the fault layer (`faultfs*.test.js`), which need root and
// FUSE and report `skip` with the reason without them, the simulator's soak, the node suite on
// Node 22 and 24 with the short budgets, the loaded rerun, and, where CI built the other
// targets, the registry test, the macOS inspection and the linux-arm64 and win32-x64 suites under
// emulation, these two side by side (each `skip` with the reason where its binaries or tools are
// missing).
//
// Every step runs even if an earlier one failed; the exit code is non-zero if any failed.
const { spawn, spawnSync } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')

const root = path.resolve(__dirname, '..')
const args = process.argv.slice(2)
const MODE = args.includes('--all') ? 'all' : args.includes('--loaded') ? 'loaded' : 'fast'
const unknown = args.filter((a) => !['--all', '--loaded'].includes(a))
if (unknown.length) {
  process.stderr.write(`usage: node scripts/test.js [--all | --loaded]\n(unknown: ${unknown.join(' ')})\n`)
  process.exit(2)
}

// Budgets. Fuzzing and the torture tests are properties run for a time, not a fixed list: the
// verdict spends a little of each, `--all` the long budgets once (on the running Node only).
const SHORT = { PI_NATIVE_FUZZ_SECONDS: '20', PI_NATIVE_TORTURE_SECONDS: '8' }
const LONG = { PI_NATIVE_FUZZ_SECONDS: '100', PI_NATIVE_TORTURE_SECONDS: '30' }
// The lock simulator (`npm run sim`, reading PI_NATIVE_SIM_SECONDS): 60 s in the verdict (2
// minutes of its budget are kept for it), 300 s of soak in `--all`.
const SIM_SHORT = '60'
const SIM_LONG = '300'
// Test files run side by side: most of their time is waiting for children, locks and events,
// and node:test's default on 2 cores (one file at a time) leaves the CPUs idle.
const CONCURRENCY = String(Math.max(2, Math.min(4, os.availableParallelism() + 1)))

const results = []
const t0 = Date.now()

function record(name, ok, seconds, extra = {}) {
  results.push({ name, ok, seconds, ...extra })
}

function run(name, cmd, argv, opts = {}) {
  process.stdout.write(`\n=== ${name}: ${cmd} ${argv.join(' ')}\n`)
  const started = Date.now()
  const r = spawnSync(cmd, argv, { cwd: root, stdio: 'inherit', ...opts })
  return finished(name, started, r.status, r.signal, r.error)
}

/** Record a step that ended (a failure says how); whether it passed. */
function finished(name, started, status, signal, error) {
  const ok = status === 0
  record(name, ok, (Date.now() - started) / 1000)
  if (!ok) process.stdout.write(`=== ${name} FAILED (status ${status}${signal ? `, ${signal}` : ''}${error ? `, ${error.message}` : ''})\n`)
  return ok
}

const skip = (name, why) => record(`${name}: ${why}`, true, 0, { skipped: true })

// Each step's temp files go to a directory of its own (TMPDIR, which os.tmpdir() reads on
// Unix), removed after the step: a test that leaves a temp directory behind, or a test process
// killed mid-way, leaves nothing in the machine's /tmp.
function ownTmp(name, bin, argv, env = {}) {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'pi-native-test-'))
  // Shared like /tmp itself: some tests run children under an unprivileged uid.
  fs.chmodSync(tmp, 0o1777)
  try {
    return run(name, bin, argv, { env: { ...process.env, ...env, TMPDIR: tmp, TMP: tmp, TEMP: tmp } })
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true })
  }
}

const { binaryState } = require('./build-if-stale.js')
const { napiCommand, npmCommand } = require('./tools.js')

// ---- the test files, by kind ---------------------------------------------------------------------
// Explicit file lists: `node --test <dir>` means different things on Node 20 and 22+.
const testFiles = fs
  .readdirSync(path.join(root, '__test__'))
  .filter((n) => n.endsWith('.test.js') || n.endsWith('.test.mjs'))
  .sort()
  .map((n) => path.join('__test__', n))
const base = (f) => path.basename(f)
// `*.isolated.test.js` bound wall-clock behaviour (event-loop gaps, deadlines under load): they
// run one at a time after the rest, so sibling test files cannot stall them from outside.
const isolated = testFiles.filter((f) => base(f).endsWith('.isolated.test.js'))
// Servers, mounts and fault layers on this machine: root and FUSE, minutes of wall clock; the
// rules they test are the addon's, the same on every Node line: run once, alone, in `--all`.
const networkFs = testFiles.filter((f) => base(f).startsWith('network-fs'))
const faultFs = testFiles.filter((f) => base(f).startsWith('faultfs'))
// `*.slow.test.js`: minutes each (200,000 entries, …): `--all` only.
const slow = testFiles.filter((f) => base(f).endsWith('.slow.test.js'))
const shared = testFiles.filter((f) => ![...isolated, ...networkFs, ...faultFs, ...slow].includes(f))

/** The node suite on one Node binary: the shared files side by side, then each isolated one alone. */
function nodeSuite(bin, label, env) {
  ownTmp(`node tests (${label})`, bin, ['--test', `--test-concurrency=${CONCURRENCY}`, ...shared], env)
  for (const f of isolated) ownTmp(`node tests (${label}) ${base(f)}`, bin, ['--test', f], env)
}

/** The lock simulator, once the project has it (`npm run sim`). */
function sim(label, seconds) {
  const scripts = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')).scripts ?? {}
  if (!scripts.sim) return skip(`lock simulator (${label})`, 'no "sim" script in package.json yet')
  ownTmp(`lock simulator (${label}, ${seconds} s)`, ...npmCommand(['run', 'sim']), { PI_NATIVE_SIM_SECONDS: seconds })
}

// ---- a CPU hog on every core (the loaded run) ------------------------------------------------------
function startHogs() {
  const n = os.availableParallelism()
  const hogs = []
  for (let i = 0; i < n; i++) hogs.push(spawn(process.execPath, ['-e', 'for (;;) {}'], { stdio: 'ignore' }))
  process.stdout.write(`\n=== loaded: ${n} CPU hogs (pids ${hogs.map((h) => h.pid).join(' ')})\n`)
  const stop = () => {
    for (const h of hogs) h.kill('SIGKILL')
  }
  process.on('exit', stop)
  return stop
}

// ---- the steps ----------------------------------------------------------------------------------------
function lintAndRust() {
  if (binaryState() !== null) run('build', ...napiCommand(['build', '--platform', '--release']))
  const inGit = spawnSync('git', ['rev-parse', '--is-inside-work-tree'], { cwd: root }).status === 0
  if (inGit) run('generated loader and types match the build', 'git', ['diff', '--exit-code', '--', 'index.js', 'index.d.ts'])
  const noLint = require('./lint-workflows.js').unsupported()
  if (noLint) skip('actionlint (.github/workflows)', noLint)
  else run('actionlint (.github/workflows)', process.execPath, [path.join('scripts', 'lint-workflows.js')])
  // Every rule ID a comment or doc page cites must be defined in docs/ARCHITECTURE.md's table.
  run('rule IDs cited in comments and docs are defined (scripts/check-rule-ids.js)', process.execPath, [path.join('scripts', 'check-rule-ids.js')])
  run('cargo fmt', 'cargo', ['fmt', '--check'])
  // The workspace (the addon and tools/faultfs, the fault layer; a stub binary on other OSes),
  // the lock simulator's command included (feature `sim`).
  run('cargo clippy', 'cargo', ['clippy', '--workspace', '--all-targets', '--features', 'pi-native/sim', '--quiet', '--', '-D', 'warnings'])
  ownTmp('cargo test', 'cargo', ['test', '--workspace', '--quiet'])
}

const current = `Node ${process.versions.node}`

function fast(label = current) {
  sim(label === current ? 'quick' : `quick, ${label}`, SIM_SHORT)
  nodeSuite(process.execPath, label, SHORT)
}

function loaded() {
  const stop = startHogs()
  try {
    ownTmp('cargo test (loaded)', 'cargo', ['test', '--workspace', '--quiet'])
    fast(`${current}, loaded`)
  } finally {
    stop()
  }
}

/** A Node line other than the running one (the hosts' 22 and 24). */
function otherNode(major) {
  const { nodeFor } = require('./node-versions.js')
  let bin
  try {
    bin = nodeFor(major)
  } catch (err) {
    record(`node tests (Node ${major})`, false, 0)
    process.stdout.write(`=== Node ${major} unavailable: ${err.message}\n`)
    return
  }
  if (!bin) return skip(`node tests (Node ${major})`, `no Node ${major} package for ${process.platform}-${process.arch}; set PI_NATIVE_NODE_${major}`)
  const version = spawnSync(bin, ['--version'], { encoding: 'utf8' }).stdout.trim()
  // PI_NATIVE_TEST_EXTRA_NODE: a check whose outcome cannot depend on the Node running it (the
  // other TypeScript compilers of package.test.js) runs on the first line only.
  nodeSuite(bin, `Node ${version.replace(/^v/, '')}`, { ...SHORT, PI_NATIVE_TEST_EXTRA_NODE: version })
}

/** The network file systems, alone: the ones this machine can serve, the others listed as skipped. */
function networkFileSystems() {
  if (networkFs.length === 0) return
  const { KINDS, unavailable } = require('../__test__/two-mounts.js')
  const served = KINDS.filter((k) => !unavailable(k))
  for (const k of KINDS.filter((x) => !served.includes(x))) skip(`network file system ${k}`, unavailable(k))
  for (const f of networkFs) ownTmp(`node tests ${base(f)}: ${served.join(', ') || 'local folder only'}`, process.execPath, ['--test', f], LONG)
}

/**
 * A CI step of the other targets: runs where its inputs exist, else says what is missing.
 * Returns the command to run (`[name, cmd, argv]`), or undefined when it was skipped.
 */
function crossStep(name, script, needs) {
  const missing = needs.filter((f) => !fs.existsSync(path.join(root, f)))
  if (missing.length) return skip(name, `${missing.join(', ')} not built (scripts/build-targets.sh)`)
  if (process.platform !== 'linux' || process.arch !== 'x64') return skip(name, 'the cross chain runs on Linux x64')
  return [name, script.endsWith('.js') ? process.execPath : 'bash', [script]]
}

/**
 * Steps run side by side (each `[name, cmd, argv]`, undefined ones left out), each step's output
 * kept in a file and printed whole when it ends, so the logs do not interleave. Used for the
 * emulated suites: most of their wall clock is one emulated thread and waits, so two of them
 * share 2 cores well (and their tests hold under load, which the loaded run asks of every test).
 */
async function runSideBySide(steps) {
  const logs = fs.mkdtempSync(path.join(os.tmpdir(), 'pi-native-steps-'))
  try {
    await Promise.all(
      steps.filter(Boolean).map(([name, cmd, argv], i) => {
        process.stdout.write(`\n=== ${name}: ${cmd} ${argv.join(' ')} (started beside the others; its output follows when it ends)\n`)
        const log = path.join(logs, `${i}.log`)
        const fd = fs.openSync(log, 'w')
        const started = Date.now()
        return new Promise((resolve) => {
          const c = spawn(cmd, argv, { cwd: root, stdio: ['ignore', fd, fd] })
          const done = (status, signal, error) => {
            fs.closeSync(fd)
            process.stdout.write(`\n=== ${name}: output\n${fs.readFileSync(log, 'utf8')}`)
            finished(name, started, status, signal, error)
            resolve()
          }
          c.on('error', (e) => done(null, null, e))
          c.on('close', (status, signal) => done(status, signal))
        })
      }),
    )
  } finally {
    fs.rmSync(logs, { recursive: true, force: true })
  }
}

async function all() {
  sim('soak', SIM_LONG)
  nodeSuite(process.execPath, `${current}, long budgets`, LONG)
  for (const f of slow) ownTmp(`node tests ${base(f)}`, process.execPath, ['--test', f], LONG)
  networkFileSystems()
  // The fault layer with issue 41's crowd: 10,000 waiters on one lock (npm test's run has 600).
  for (const f of faultFs) ownTmp(`node tests ${base(f)}`, process.execPath, ['--test', f], { ...LONG, PI_NATIVE_FAULTFS_WAITERS: '10000' })
  // The hosts' Node lines (N-API is ABI-stable: the one binary serves all). Each comes from
  // PI_NATIVE_NODE_<major> or the platform's npm package (scripts/node-versions.js); where
  // neither exists (macOS arm64 without PI_NATIVE_NODE_<major>) the line is skipped.
  for (const major of (process.env.PI_NATIVE_TEST_NODES ?? '22,24').split(',').filter(Boolean)) otherNode(major)
  loaded()
  const built = ['pi-native.linux-x64-gnu.node', 'pi-native.linux-arm64-gnu.node', 'pi-native.linux-x64-musl.node', 'pi-native.linux-arm64-musl.node', 'pi-native.win32-x64-msvc.node', 'pi-native.darwin-arm64.node', 'pi-native.darwin-x64.node']
  const step = (...a) => {
    const s = crossStep(...a)
    if (s) run(...s)
  }
  step('registry install: verdaccio, the seven binary packages and the main package, fresh consumers', path.join('scripts', 'test-registry.js'), built)
  step('macOS binaries inspection', path.join('scripts', 'inspect-darwin.sh'), ['pi-native.darwin-arm64.node', 'pi-native.darwin-x64.node'])
  await runSideBySide([
    crossStep('linux-arm64 suite under qemu', path.join('scripts', 'test-arm64.sh'), ['pi-native.linux-arm64-gnu.node']),
    crossStep('win32-x64 suite under Wine', path.join('scripts', 'test-windows.sh'), ['pi-native.win32-x64-msvc.node']),
  ])
}

async function main() {
  if (MODE === 'loaded') {
    // A binary older than its sources would be rebuilt by the packing test, under the others' feet.
    if (binaryState() !== null) run('build', ...napiCommand(['build', '--platform', '--release']))
    loaded()
  } else {
    lintAndRust()
    if (MODE === 'fast') fast()
    else await all()
  }
  summary()
}

function summary() {
  process.stdout.write(`\n=== summary (${MODE === 'fast' ? 'npm test' : MODE === 'all' ? 'npm run test:all' : 'loaded rerun'}, ${((Date.now() - t0) / 60000).toFixed(1)} min)\n`)
  for (const r of results) process.stdout.write(`${r.skipped ? 'skip' : r.ok ? 'ok  ' : 'FAIL'} ${r.name} (${r.seconds.toFixed(1)} s)\n`)
  const failed = results.filter((r) => !r.ok).length
  const skipped = results.filter((r) => r.skipped).length
  process.stdout.write(`steps: ${results.length - failed - skipped} ok, ${failed} failed${skipped ? `, ${skipped} skipped` : ''}\n`)
  process.exit(failed ? 1 : 0)
}

main().catch((err) => {
  process.stderr.write(`${err.stack}\n`)
  process.exit(1)
})
