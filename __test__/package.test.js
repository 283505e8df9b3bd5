'use strict'
// A real consumer: `npm pack` the package (with its lifecycle scripts, as a maintainer would),
// install the tarball into a fresh project (no Rust, no @napi-rs/cli there), then require /
// import every subpath and type-check a TypeScript file that imports every public name under
// moduleResolution node16, bundler and node10 (`node`, which only sees typesVersions).
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { spawn, spawnSync } = require('node:child_process')
const { root } = require('./helpers.js')
const { HOSTS, swapBlocks, compose, fileOf } = require('./host-models.js')
const { npmCommand } = require('../scripts/tools.js')
const { runQuickStart, compileAndRunFragments, checkCli } = require('./readme-examples.js')
const { developCommands } = require('../scripts/readme.js')

// This machine's binary (linux-x64-gnu here; the release workflow runs this file on each target's
// own runner): the file the loader picks among the built ones.
const HOST = fs
  .readdirSync(root)
  .filter((n) => n.startsWith(`pi-native.${process.platform}-${process.arch}`) && n.endsWith('.node'))
  .map((n) => n.slice('pi-native.'.length, -'.node'.length))
  .sort()[0]
const npm = (args, opts) => spawnSync(...npmCommand(args), opts)
const SWAPPING = () => fs.readFileSync(path.join(root, 'docs', 'SWAPPING.md'), 'utf8')
// tar reads archives by their name in their own folder: GNU tar (Git Bash's, on Windows) would
// take the drive letter of an absolute Windows path for a remote host.
const tar = (tgz, args, cwd = path.dirname(tgz)) => sh('tar', [args[0], path.basename(tgz), ...args.slice(1)], cwd)

const SUBPATHS = {
  liveness: ['isReloadSessionProcessAlive', 'defaultIsPidAlive', 'checkProcessLiveness', 'getProcessStartTime', 'probePid', 'probePids', 'getProcessIdentity', 'isSameProcess', 'waitForProcessExit', 'exitWatchMode'],
  'session-recovery': ['deriveSessionPaths', 'appendWorkerSessionArgs', 'resolveSessionRecoveryEnabled', 'shouldAttemptSessionRecovery', 'recoverLastAssistantFromSession'],
  'process-matrix-store': ['processMatrixDir', 'entryPath', 'buildEntryId', 'readEntry', 'listEntries', 'writeEntry', 'writeEntryIfUnchanged', 'writeEntryIfUnchangedSync', 'removeEntry', 'removeEntryIfUnchanged', 'sweepOrphanTempFiles', 'watchEntries', 'entryWatchMode'],
  'atomic-file': ['withFileLock', 'withFileLockSync', 'writeFileAtomic', 'writeFileAtomicSync'],
}
const TYPES = {
  liveness: ['IntegrationLockOwner', 'ProcessLiveness', 'ProcessIdentity', 'WaitForProcessExitOptions'],
  'session-recovery': ['SessionRecoveryInfo', 'SessionRecoveryOptions', 'WorkerSessionContext', 'SessionIdentityInput'],
  'process-matrix-store': ['ProcessMatrixEntry', 'ProcessRole', 'ProcessStatus', 'WindDownReason', 'ResourcePointer', 'ResourcePointerKind', 'AgentResumeContext', 'AgentIdentityContract', 'ResumablePayload', 'ProcessTerminalHandoff', 'EntryEvent', 'WatchEntriesOptions'],
  'atomic-file': ['AtomicFileLockOptions', 'AtomicFileWriteOptions'],
}
const ALL = Object.values(SUBPATHS).flat()

function sh(cmd, args, cwd, extra = {}) {
  const r = spawnSync(cmd, args, { cwd, encoding: 'utf8', ...extra })
  assert.equal(r.status, 0, `${cmd} ${args.join(' ')}\n${r.stdout}\n${r.stderr}`)
  return r.stdout
}

let consumer
let tarball
let packRun
let installOutput
let workDir
// The tarball, the consumer and everything the tests build in it go with the run (run alone,
// outside npm test's own temp directory, the file used to leave them in the machine's /tmp).
test.after(() => workDir && fs.rmSync(workDir, { recursive: true, force: true }))
test.before(() => {
  const dir = (workDir = fs.mkdtempSync(path.join(os.tmpdir(), 'pi-native-consumer-')))
  const binary = path.join(root, `pi-native.${HOST}.node`)
  const manifestBefore = fs.readFileSync(path.join(root, 'package.json'))
  const binaryBefore = fs.statSync(binary).mtimeMs
  // Lifecycle scripts on: prepack must not rebuild a current binary, and must strip `prepare`.
  const r = npm(['pack', '--json', '--foreground-scripts', '--pack-destination', dir], { cwd: root, encoding: 'utf8' })
  assert.equal(r.status, 0, `npm pack\n${r.stdout}\n${r.stderr}`)
  const packed = JSON.parse(r.stdout.slice(r.stdout.indexOf('\n[') + 1))
  packRun = {
    output: r.stdout + r.stderr,
    binaryRebuilt: fs.statSync(binary).mtimeMs !== binaryBefore,
    manifestRestored: fs.readFileSync(path.join(root, 'package.json')).equals(manifestBefore),
  }
  tarball = { path: path.join(dir, packed[0].filename), files: packed[0].files.map((f) => f.path) }
  consumer = path.join(dir, 'app')
  fs.mkdirSync(consumer)
  fs.writeFileSync(path.join(consumer, 'package.json'), JSON.stringify({ name: 'app', version: '1.0.0', private: true }))
  const install = npm(['install', '--no-audit', '--no-fund', '--prefer-offline', tarball.path], { cwd: consumer, encoding: 'utf8' })
  assert.equal(install.status, 0, `npm install\n${install.stdout}\n${install.stderr}`)
  installOutput = install.stdout + install.stderr
})

test('npm pack: no rebuild of a current binary, no prepare script in the packed manifest, the repo manifest restored', () => {
  assert.equal(packRun.binaryRebuilt, false, packRun.output)
  assert.doesNotMatch(packRun.output, /napi build|Compiling pi-native/)
  assert.match(packRun.output, /the addon is newer than its sources; not rebuilding/)
  assert.equal(packRun.manifestRestored, true)
  assert.ok(!fs.existsSync(path.join(root, '.cache', 'package.json.prepack')))
  const packedManifest = JSON.parse(tar(tarball.path, ['-xzOf', 'package/package.json']))
  for (const s of ['prepare', 'prepack', 'postpack', 'preinstall', 'install', 'postinstall']) {
    assert.equal(packedManifest.scripts?.[s], undefined, `packed manifest has no ${s} script`)
  }
  const installed = JSON.parse(fs.readFileSync(path.join(consumer, 'node_modules', 'pi-native', 'package.json'), 'utf8'))
  assert.deepEqual(installed.exports, require('../package.json').exports)
  assert.deepEqual(installed.typesVersions, require('../package.json').typesVersions)
  // Installing the tarball runs nothing and warns about nothing.
  assert.doesNotMatch(installOutput, /install-scripts|EBADENGINE|npm warn/i, installOutput)
})

test(`the tarball carries the loader, the types, the JS layers and the ${HOST} binary — and no sources`, () => {
  const files = tarball.files
  for (const f of ['package.json', 'index.js', 'index.d.ts', `pi-native.${HOST}.node`, 'lib/index.js', 'lib/index.d.ts', 'js/index.js', 'bin/pi-native.js', 'README.md', 'SECURITY.md']) {
    assert.ok(files.includes(f), `${f} in tarball`)
  }
  for (const sub of Object.keys(SUBPATHS)) assert.ok(files.includes(`lib/${sub}.d.ts`))
  assert.ok(!files.some((f) => f.startsWith('src/') || f.startsWith('__test__/') || f.startsWith('target/') || f.startsWith('bench/')), files.join(' '))
  const installed = path.join(consumer, 'node_modules', 'pi-native')
  assert.ok(fs.existsSync(path.join(installed, `pi-native.${HOST}.node`)))
  assert.ok(!fs.existsSync(path.join(consumer, 'node_modules', '@napi-rs')), 'no build tooling installed')
})

test('a host that installed the tarball passes npm ci, and so does this repository', () => {
  // Host CI runs `npm ci` on the lockfile that installing the tarball wrote; npm ci refuses a
  // lockfile that lacks an entry for any dependency the package names (an optional one that no
  // registry has yet included). A sibling folder keeps the lockfile's `file:../…` path valid.
  const host = path.join(path.dirname(consumer), 'host-ci')
  fs.mkdirSync(host)
  for (const f of ['package.json', 'package-lock.json']) fs.copyFileSync(path.join(consumer, f), path.join(host, f))
  sh(...npmCommand(['ci', '--no-audit', '--no-fund', '--prefer-offline']), host)
  assert.ok(fs.existsSync(path.join(host, 'node_modules', 'pi-native', `pi-native.${HOST}.node`)))
  // The repository's own lockfile is in sync with its manifest (npm ci --dry-run checks only that).
  sh(...npmCommand(['ci', '--dry-run', '--ignore-scripts', '--no-audit', '--no-fund']), root)
})

test('scripts/pack-all.sh: the fat tarball names no optionalDependencies; the registry main package names every target package and carries no binary', { skip: process.platform === 'win32' && 'pack-all.sh is a bash script; releases pack on Linux' }, () => {
  const out = fs.mkdtempSync(path.join(os.tmpdir(), 'pi-native-pack-all-'))
  try {
    sh(path.join(root, 'scripts', 'pack-all.sh'), [out], root)
    const manifestOf = (tgz) => JSON.parse(tar(tgz, ['-xzOf', 'package/package.json']))
    const filesOf = (tgz) => tar(tgz, ['-tzf']).trim().split('\n').sort()
    const { version } = require('../package.json')
    const fat = path.join(out, `pi-native-${version}.tgz`)
    const registry = path.join(out, 'registry', `pi-native-${version}.tgz`)
    assert.equal(manifestOf(fat).optionalDependencies, undefined)
    assert.equal(manifestOf(fat).scripts.prepare, undefined)
    const targets = fs.readdirSync(path.join(root, 'npm')).sort()
    assert.equal(targets.length, 7)
    const reg = manifestOf(registry)
    assert.deepEqual(reg.optionalDependencies, Object.fromEntries(targets.map((t) => [`pi-native-${t}`, version])))
    assert.equal(reg.scripts.prepare, undefined)
    assert.deepEqual(filesOf(registry), filesOf(fat).filter((f) => !f.endsWith('.node')))
    assert.ok(filesOf(fat).includes(`package/pi-native.${HOST}.node`))
    const own = path.join(out, `pi-native-${HOST}-${version}.tgz`)
    assert.deepEqual(filesOf(own).filter((f) => !f.endsWith('.md')), ['package/LICENSE', 'package/package.json', `package/pi-native.${HOST}.node`])
    assert.equal(tar(own, ['-xzOf', 'package/LICENSE']), fs.readFileSync(path.join(root, 'LICENSE'), 'utf8'))
  } finally {
    fs.rmSync(out, { recursive: true, force: true })
  }
})

test('require: root and every subpath, native backend, every name a function', () => {
  const script = `
    const names = ${JSON.stringify(SUBPATHS)}
    const rootMod = require('pi-native')
    const out = { backend: rootMod.backend, missing: [] }
    for (const [sub, list] of Object.entries(names)) {
      const m = require('pi-native/' + sub)
      for (const n of list) {
        if (typeof m[n] !== 'function') out.missing.push(sub + '.' + n)
        if (rootMod[n] !== m[n]) out.missing.push('root.' + n)
      }
    }
    out.alive = rootMod.isReloadSessionProcessAlive(process.pid)
    console.log(JSON.stringify(out))`
  const out = JSON.parse(sh(process.execPath, ['-e', script], consumer))
  assert.deepEqual(out, { backend: 'native', missing: [], alive: true })
})

test('ESM: named imports and `export *` re-exports of every subpath see every name', () => {
  for (const [sub, names] of Object.entries(SUBPATHS)) {
    fs.writeFileSync(path.join(consumer, `reexport-${sub}.mjs`), `export * from 'pi-native/${sub}'\n`)
  }
  const lines = Object.entries(SUBPATHS).map(
    ([sub, names]) => `import { ${names.join(', ')} } from 'pi-native/${sub}'\nimport * as re_${sub.replace(/-/g, '_')} from './reexport-${sub}.mjs'`,
  )
  const checks = Object.entries(SUBPATHS).map(
    ([sub, names]) => `for (const n of ${JSON.stringify(names)}) if (typeof re_${sub.replace(/-/g, '_')}[n] !== 'function') missing.push('${sub}.' + n)`,
  )
  fs.writeFileSync(
    path.join(consumer, 'esm.mjs'),
    `${lines.join('\n')}\nimport { backend } from 'pi-native'\nconst missing = []\n${checks.join('\n')}\nconsole.log(JSON.stringify({ backend, missing, alive: isReloadSessionProcessAlive(process.pid), id: buildEntryId('master', 's') }))\n`,
  )
  const out = JSON.parse(sh(process.execPath, ['esm.mjs'], consumer))
  assert.deepEqual(out, { backend: 'native', missing: [], alive: true, id: 'master-s' })
})

test('TypeScript: every public name type-checks under moduleResolution node16, bundler and node10', () => {
  const imports = Object.entries(SUBPATHS).map(
    ([sub, names]) => `import { ${names.join(', ')} } from 'pi-native/${sub}'\nimport type { ${TYPES[sub].join(', ')} } from 'pi-native/${sub}'`,
  )
  const body = `
${imports.join('\n')}
import { backend, probePid as rootProbe } from 'pi-native'
const b: 'native' | 'js' = backend
const state: 'alive' | 'dead' | 'zombie' | 'eperm' | 'invalid' = rootProbe(1)
const owner: IntegrationLockOwner = { pid: 1, hostname: 'h', token: 't', acquiredAt: 'now' }
const alive: boolean = isReloadSessionProcessAlive(undefined) || defaultIsPidAlive(owner)
const l: ProcessLiveness = checkProcessLiveness(1)
const st: number | undefined = getProcessStartTime(1)
const id: ProcessIdentity | undefined = getProcessIdentity(1)
const same: boolean = id ? isSameProcess(id) : false
const states = probePids([1, 2]); probePid(3)
const ctx: WorkerSessionContext | null = deriveSessionPaths({ agentId: 'a', artifactsRoot: '/r' } satisfies SessionIdentityInput)
const changed: boolean = ctx ? appendWorkerSessionArgs([], [], ctx) : false
const on: boolean = resolveSessionRecoveryEnabled(undefined) && shouldAttemptSessionRecovery({ exitCode: null }, false)
const opts: SessionRecoveryOptions = { deadlineMs: 100 }
const rec: Promise<SessionRecoveryInfo | null> = recoverLastAssistantFromSession('/d', 's', opts)
const kind: ResourcePointerKind = 'repository'
const ptr: ResourcePointer = { id: 'p', kind, uri: 'u', readOnly: true }
const rc: AgentResumeContext = { provider: 'pi', sessionId: 's', cwd: '/', resourceProfileNames: [], contextPointers: [ptr] }
const agent: AgentIdentityContract = { agentId: 'a', resumeContext: rc }
const role: ProcessRole = 'master'
const status: ProcessStatus = 'running'
const reason: WindDownReason = 'parent_lost'
const resumable: ResumablePayload = { agent, lastCode: status }
const terminal: ProcessTerminalHandoff = { code: null, signal: null, observedAt: 'x' }
const entry: ProcessMatrixEntry = { entryId: buildEntryId(role, 's'), role, agent, pid: 1, hostname: 'h', startedAt: 'x', heartbeatAt: 'x', status, windDownReason: reason, resumable, terminal }
const dir: string = processMatrixDir('/a') + entryPath('/a', 'e')
const all: Promise<unknown>[] = [readEntry('/a', 'e'), listEntries('/a'), writeEntry('/a', entry), writeEntryIfUnchanged('/a', 'e', undefined, entry), removeEntry('/a', 'e'), removeEntryIfUnchanged('/a', entry), sweepOrphanTempFiles('/a')]
const sync: boolean = writeEntryIfUnchangedSync('/a', entry, entry)
const ac = new AbortController()
const waitOpts: WaitForProcessExitOptions = { signal: ac.signal, ref: false }
const ended: Promise<true> = waitForProcessExit(id ?? 1, waitOpts)
const watchOpts: WatchEntriesOptions = { signal: ac.signal }
const events: AsyncIterable<EntryEvent> = watchEntries('/a', watchOpts)
const modes: string[] = [exitWatchMode(), entryWatchMode()]
const lockOpts: AtomicFileLockOptions = { retries: 0, realpath: false, stale: 2000 }
const writeOpts: AtomicFileWriteOptions = { mode: 0o600 }
const n: number = withFileLockSync('/f', () => 1, lockOpts)
const p: Promise<string> = withFileLock('/f', async () => 'x')
writeFileAtomicSync('/f', 'x', writeOpts); const w: Promise<void> = writeFileAtomic('/f', 'x')
export { b, state, alive, l, st, same, states, changed, on, rec, dir, all, sync, n, p, w, ended, events, modes }
`
  fs.writeFileSync(path.join(consumer, 'index.ts'), body)
  // docs/SWAPPING.md's delegate body for pi-adaptative's store.ts must compile as printed.
  const storeTs = swapBlocks(SWAPPING()).find((b) => b.key.endsWith('/process-matrix/store.ts')).body
  fs.writeFileSync(path.join(consumer, 'store.ts'), storeTs)
  const tsc = path.join(root, 'node_modules', 'typescript', 'bin', 'tsc')
  for (const [name, compilerOptions] of [
    ['node16', { module: 'node16', moduleResolution: 'node16' }],
    ['bundler', { module: 'esnext', moduleResolution: 'bundler' }],
    // node10 ignores `exports`: the subpaths resolve through typesVersions only.
    ['node10', { module: 'commonjs', moduleResolution: 'node' }],
  ]) {
    const config = { compilerOptions: { ...compilerOptions, strict: true, noEmit: true, skipLibCheck: false, types: [], target: 'es2022' }, files: ['index.ts', 'store.ts'] }
    fs.writeFileSync(path.join(consumer, `tsconfig.${name}.json`), JSON.stringify(config))
    sh(process.execPath, [tsc, '-p', `tsconfig.${name}.json`], consumer)
  }
  assert.ok(ALL.length > 20)
})

test("TypeScript 4.7, 5.x and the current releases: the published types compile under each release's defaults (no target or lib), skipLibCheck off, for module commonjs, node16 and bundler", {
  skip: process.env.PI_NATIVE_TEST_EXTRA_NODE && 'the compilers answer the same whatever Node runs them: checked on the first Node line of npm test',
}, async () => {
  // A consumer that sets nothing but `module` gets the compiler's default target and lib: ES5
  // (ES3 on 4.7) up to 5.x, which have no async iterables; 6.0 and later default to a recent ES.
  const { TYPESCRIPT_VERSIONS, tscCommand } = require('../scripts/typescript-versions.js')
  const dir = path.join(consumer, 'ts-defaults')
  fs.mkdirSync(dir)
  fs.symlinkSync(path.join(consumer, 'node_modules'), path.join(dir, 'node_modules'), 'junction')
  const lines = Object.entries(SUBPATHS).map(([sub, names]) => {
    const ns = sub.replace(/-/g, '_')
    return `import { ${names.map((n) => `${n} as ${ns}_${n}`).join(', ')} } from 'pi-native/${sub}'\n` +
      `import type { ${TYPES[sub].map((t) => `${t} as ${ns}_${t}`).join(', ')} } from 'pi-native/${sub}'\n` +
      `export const ${ns} = [${names.map((n) => `${ns}_${n}`).join(', ')}]\n` +
      `export type ${ns}_types = [${TYPES[sub].map((t) => `${ns}_${t}`).join(', ')}]`
  })
  fs.writeFileSync(
    path.join(dir, 'index.ts'),
    `${lines.join('\n')}\nimport * as rootModule from 'pi-native'\nexport const backend = rootModule.backend\n` +
      `export const watch = [liveness_waitForProcessExit(1, { signal: new AbortController().signal }), process_matrix_store_watchEntries('/a', {})]\n`,
  )
  const runs = []
  for (const version of TYPESCRIPT_VERSIONS) {
    // `bundler` resolution exists from 5.0 on.
    const modules = version.startsWith('4.') ? ['commonjs', 'node16'] : ['commonjs', 'node16', 'bundler']
    for (const mod of modules) {
      const compilerOptions = mod === 'bundler' ? { module: 'esnext', moduleResolution: 'bundler' } : { module: mod }
      const config = `tsconfig.${version}.${mod}.json`
      fs.writeFileSync(path.join(dir, config), JSON.stringify({ compilerOptions: { ...compilerOptions, noEmit: true, skipLibCheck: false }, files: ['index.ts'] }))
      runs.push({ what: `TypeScript ${version}, module ${mod}`, command: tscCommand(version, ['-p', config]) })
    }
  }
  // The compilers run side by side (each is one single-threaded process).
  const failures = []
  let next = 0
  const worker = async () => {
    while (next < runs.length) {
      const { what, command } = runs[next++]
      const child = spawn(command[0], command[1], { cwd: dir })
      let out = ''
      child.stdout.on('data', (d) => (out += d))
      child.stderr.on('data', (d) => (out += d))
      const status = await new Promise((resolve) => child.once('close', resolve))
      if (status !== 0) failures.push(`${what}:\n${out}`)
    }
  }
  await Promise.all(Array.from({ length: Math.max(2, os.availableParallelism()) }, worker))
  assert.deepEqual(failures.sort(), [])
})

// The README's swap blocks, each put into a model of the real host file it is written for
// (host-models.js), compiled under the hosts' settings and run: as ES modules (both hosts are
// `"type": "module"`, tsc 5.9, nodenext, strict, verbatimModuleSyntax, `.ts` import extensions)
// and as CommonJS, where a store export is replaced the way `vi.spyOn` replaces it.
const HOST_TSC = {
  target: 'es2022',
  module: 'nodenext',
  moduleResolution: 'nodenext',
  strict: true,
  isolatedModules: true,
  allowImportingTsExtensions: true,
  rewriteRelativeImportExtensions: true,
  noUncheckedSideEffectImports: true,
  skipLibCheck: false,
  types: [],
}

/** Write every model, with its block from `blocks` (key → body) in it, and its siblings under `dir`; the list of files. */
function writeHostTree(dir, blocks) {
  const files = []
  const put = (key, text) => {
    const file = path.join(dir, fileOf(key))
    fs.mkdirSync(path.dirname(file), { recursive: true })
    fs.writeFileSync(file, text)
    files.push(path.relative(dir, file))
  }
  for (const [key, model] of Object.entries(HOSTS)) {
    put(key, compose(model.file, blocks.get(key)))
    for (const [sibling, text] of Object.entries(model.siblings)) put(sibling, text)
  }
  return files
}

/** tsc over `files` in `dir` with the hosts' options plus `options`; the spawnSync result. */
function tscHost(dir, files, options) {
  fs.writeFileSync(path.join(dir, 'tsconfig.json'), JSON.stringify({ compilerOptions: { ...HOST_TSC, ...options }, files }))
  const tsc = path.join(root, 'node_modules', 'typescript', 'bin', 'tsc')
  return spawnSync(process.execPath, [tsc, '-p', 'tsconfig.json'], { cwd: dir, encoding: 'utf8' })
}

test('docs/SWAPPING.md swap blocks compile in models of the real host files (ESM and CommonJS) and run, calling the swapped names', () => {
  const blocks = new Map(swapBlocks(SWAPPING()).map((b) => [b.key, b.body]))
  assert.deepEqual([...blocks.keys()].sort(), Object.keys(HOSTS).sort())
  for (const [key, body] of blocks) {
    for (const line of body.split('\n').filter((l) => l.startsWith('import '))) assert.match(line, /;$/, `${key}: one line per import`)
  }

  // ES modules, as the hosts build and run them.
  const esm = path.join(consumer, 'host-esm')
  fs.mkdirSync(esm)
  fs.writeFileSync(path.join(esm, 'package.json'), JSON.stringify({ type: 'module' }))
  const esmFiles = writeHostTree(esm, blocks)
  const esmBuild = tscHost(esm, esmFiles, { verbatimModuleSyntax: true, outDir: 'out', rootDir: '.' })
  assert.equal(esmBuild.status, 0, esmBuild.stdout + esmBuild.stderr)
  const session = path.join('sessions', 'helper')
  const driver = `
    import os from 'node:os'; import fs from 'node:fs'; import path from 'node:path'
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'pi-native-host-esm-'))
    const out = (f) => './out/' + f.replace(' ', '/').replace(/\\.ts$/, '.js')
    const m = async (f) => import(out(f))
    const A = 'pi-adaptative packages/coding-agent/src'
    // A session with one complete answer, where the worker's recovery looks.
    fs.mkdirSync(path.join(tmp, ${JSON.stringify(session)}), { recursive: true })
    fs.writeFileSync(path.join(tmp, ${JSON.stringify(session)}, '2026-07-19T12-00-00-000Z_helper.jsonl'),
      JSON.stringify({ type: 'session', version: 3, id: 'helper', timestamp: '2026-07-19T12:00:00.000Z', cwd: '/' }) + '\\n' +
      JSON.stringify({ type: 'message', id: 'a1', parentId: null, timestamp: '2026-07-19T12:00:01.000Z', message: { role: 'assistant', content: [{ type: 'text', text: 'done' }], stopReason: 'stop' } }) + '\\n')
    const child = await (await m('pi-crew src/runtime/child-pi/child-pi.ts')).runChild({ agentId: '01_02-agent:helper', artifactsRoot: tmp }, true)
    const agent = { agentId: 'a', resumeContext: { provider: 'pi', sessionId: 's1', cwd: '/', resourceProfileNames: [], contextPointers: [{ id: 'p', kind: 'repository', uri: 'u', readOnly: true, metadata: { n: [1, { k: null }] } }] } }
    const runtime = await m(A + '/core/process-matrix/runtime.ts')
    const beat = await runtime.registerAndBeat(tmp, agent, process.pid)
    const closed = runtime.closeOnExit(tmp, beat)
    const pruned = await runtime.pruneClosed(tmp)
    const json = (await m(A + '/core/util/json-store.ts')).updateJsonSync(path.join(tmp, 'new', 'dir', 'x.json'), '{"a":1}')
    const index = await m(A + '/index.ts')
    const liveness = await import('pi-native/liveness')
    const reload = index.getPendingReloadBlockers([{ key: 'me', pid: process.pid }, { key: 'gone', pid: 2 ** 22 + 12345 }, { key: 'none' }])
    const worktree = await m(A + '/core/worktree-sync/store.ts')
    await worktree.writeLane(tmp, { laneKey: 'l1', branch: 'pi/wt/l1', worktreePath: '/w', status: 'active', createdAt: 'x', updatedAt: 'x' })
    const owner = { pid: 2 ** 22 + 12345, hostname: os.hostname(), token: 't0', acquiredAt: 'x' }
    const takeover = await worktree.acquireIntegrationLock(tmp, owner, { pid: process.pid, hostname: os.hostname() })
    const foreign = await worktree.acquireIntegrationLock(tmp, { ...owner, hostname: os.hostname() + '-other' }, { pid: process.pid, hostname: os.hostname() })
    const view = await m('pi-crew src/runtime/status-view.ts')
    const registry = (await m('pi-crew src/runtime/orphan-worker-registry.ts')).registerWorker(process.pid, process.ppid)
    console.log(JSON.stringify({
      tmp, child, beat, closed, pruned, json,
      written: fs.readFileSync(path.join(tmp, 'new', 'dir', 'x.json'), 'utf8'),
      lane: fs.existsSync(path.join(tmp, 'lanes', 'l1.json')),
      reExported: index.isReloadSessionProcessAlive === liveness.isReloadSessionProcessAlive,
      reload, takeover, foreign,
      self: view.describePid(process.pid), none: view.describePid(undefined), stale: [view.stale(process.pid), view.stale(2 ** 22 + 12345)],
      registry, start: liveness.getProcessStartTime(process.pid),
    }))`
  fs.writeFileSync(path.join(esm, 'driver.mjs'), driver)
  const out = JSON.parse(sh(process.execPath, ['driver.mjs'], esm))
  const tmp = out.tmp
  const sessionDir = path.join(tmp, session)
  assert.deepEqual(out.child.ctx, { sessionId: 'helper', sessionDir })
  assert.equal(out.child.changed, true)
  assert.deepEqual(out.child.builtArgs, ['--mode', 'json', '-p', '--session-id', 'helper', '--session-dir', sessionDir, 'task.md'])
  assert.deepEqual(out.child.result.recoveredFromSession, {
    sessionId: 'helper',
    sessionFile: path.join(sessionDir, '2026-07-19T12-00-00-000Z_helper.jsonl'),
    text: 'done',
    timestamp: '2026-07-19T12:00:01.000Z',
    stopReason: 'stop',
  })
  assert.equal(out.beat.heartbeatAt, '2026-07-19T12:00:30.000Z')
  assert.deepEqual(out.beat.agent.resumeContext.contextPointers[0].metadata, { n: [1, { k: null }] })
  assert.equal(out.closed, true)
  assert.deepEqual(out.pruned, ['master-s1'])
  assert.equal(out.json, 7)
  assert.equal(out.written, '{"a":1}')
  assert.equal(out.lane, true)
  assert.equal(out.reExported, true)
  assert.deepEqual(out.reload, { agentDir: '~/.pi/agent', blockers: ['me'] })
  assert.deepEqual(out.takeover, { acquired: true, takeover: true, token: 'token-1' })
  assert.equal(out.foreign.acquired, false)
  assert.equal(out.foreign.holderAlive, true)
  assert.equal(out.self, 'alive: process is alive')
  assert.equal(out.none, 'dead: no pid recorded')
  assert.deepEqual(out.stale, [false, true])
  assert.equal(out.registry.startTime, out.start)
  assert.equal(typeof out.start, 'number')
  assert.equal(out.registry.registry, '~/.pi/state/orphan-workers.json')

  // CommonJS output: the store's exports stay own, replaceable properties, and the runtime's calls
  // go through the replacement (what `vi.spyOn(store, …)` needs; a re-exported binding would be a
  // getter that cannot be redefined).
  const cjs = path.join(consumer, 'host-cjs')
  fs.mkdirSync(cjs)
  const cjsFiles = writeHostTree(cjs, blocks)
  const cjsBuild = tscHost(cjs, cjsFiles, { module: 'node16', moduleResolution: 'node16', outDir: 'out', rootDir: '.' })
  assert.equal(cjsBuild.status, 0, cjsBuild.stdout + cjsBuild.stderr)
  const spyDriver = `
    const os = require('node:os'); const fs = require('node:fs'); const path = require('node:path')
    const dir = './out/pi-adaptative/packages/coding-agent/src/core/process-matrix/'
    const store = require(dir + 'store.js'); const runtime = require(dir + 'runtime.js')
    // What tinyspy (vitest's spyOn) does: redefine the own property, keeping its descriptor.
    function spyOn(obj, name) {
      const d = Object.getOwnPropertyDescriptor(obj, name)
      const original = d.get ? d.get() : d.value
      const spy = (...args) => { spy.calls.push(typeof args[1] === 'string' ? args[1] : args[1].entryId); return original(...args) }
      spy.calls = []
      Object.defineProperty(obj, name, d.get ? { ...d, get: () => spy } : { ...d, value: spy })
      return spy
    }
    ;(async () => {
      const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'pi-native-host-cjs-'))
      const spies = ['writeEntry', 'writeEntryIfUnchanged', 'readEntry'].map((n) => spyOn(store, n))
      const agent = { agentId: 'a', resumeContext: { provider: 'pi', sessionId: 's2', cwd: '/', resourceProfileNames: [], contextPointers: [] } }
      const beat = await runtime.registerAndBeat(tmp, agent, process.pid)
      console.log(JSON.stringify({ calls: spies.map((s) => s.calls), heartbeatAt: beat && beat.heartbeatAt }))
    })().catch((e) => { console.error(e); process.exit(1) })`
  fs.writeFileSync(path.join(cjs, 'spy.js'), spyDriver)
  const spied = JSON.parse(sh(process.execPath, ['spy.js'], cjs))
  assert.deepEqual(spied, { calls: [['master-s2'], ['master-s2'], ['master-s2']], heartbeatAt: '2026-07-19T12:00:30.000Z' })
})

test('the host models catch a swap that breaks the host build: a liveness block that imports the type the file already has', () => {
  // The block the README once gave for worktree-sync/store.ts: it imported IntegrationLockOwner
  // again, next to the file's own `import type` from ./codes.ts (TS2300 in the host's tsc).
  const blocks = new Map(swapBlocks(SWAPPING()).map((b) => [b.key, b.body]))
  blocks.set(
    'pi-adaptative packages/coding-agent/src/core/worktree-sync/store.ts',
    'import { defaultIsPidAlive, type IntegrationLockOwner } from "pi-native/liveness";\nexport { defaultIsPidAlive, type IntegrationLockOwner };\n',
  )
  const dir = path.join(consumer, 'host-broken')
  fs.mkdirSync(dir)
  fs.writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ type: 'module' }))
  const r = tscHost(dir, writeHostTree(dir, blocks), { verbatimModuleSyntax: true, noEmit: true })
  assert.notEqual(r.status, 0)
  assert.equal((r.stdout.match(/worktree-sync\/store\.ts\(\d+,\d+\): error TS2300: Duplicate identifier 'IntegrationLockOwner'/g) ?? []).length, 2, r.stdout)
})

// The README as a new user meets it (readme-examples.js): its install line and quick start run
// as printed in fresh `npm init -y` projects, its CLI synopsis run from the install; the
// fragments of docs/GUIDE.md compiled and run with the host's names set.
const README = () => fs.readFileSync(path.join(root, 'README.md'), 'utf8')

test('README install and quick start: in a fresh `npm init -y` project each, the install line and every quick-start variant (CommonJS, ES module, TypeScript nodenext) run exactly as printed, on both backends, with no name injected', async () => {
  await runQuickStart(workDir, tarball.path, README())
})

test('docs/GUIDE.md fragments: every ```js fragment and ```ts fragment compiles (tsc --strict, nodenext) and runs against the installed tarball; an exit hook closes the entry that is on disk', async () => {
  await compileAndRunFragments(consumer, fs.readFileSync(path.join(root, 'docs', 'GUIDE.md'), 'utf8'))
})

test('README CLI: every command and option of the synopsis runs from the installed package (npx), with the exit code the README documents', async () => {
  await checkCli(consumer, README(), npmCommand)
})

test('README develop block: npm install, npm test, npm run test:all — .ci/run runs the first and the last, read from the README', () => {
  assert.deepEqual(developCommands(README()), { install: 'npm install', test: 'npm test', all: 'npm run test:all' })
  const ci = fs.readFileSync(path.join(root, '.ci', 'run'), 'utf8')
  for (const which of ['install', 'all']) {
    const name = new RegExp(`^(\\w+)=\\$\\(node scripts/readme\\.js develop ${which}\\)$`, 'm').exec(ci)?.[1]
    assert.ok(name, `.ci/run reads the README's ${which} command`)
    assert.match(ci, new RegExp(`^eval "\\$${name}"$`, 'm'), `.ci/run runs the README's ${which} command`)
  }
  assert.doesNotMatch(ci, /^\s*npm (?:install|ci|test)\b/m, '.ci/run has no npm install or npm test of its own')
})

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens. */
const anchorOf = (heading) => heading.trim().toLowerCase().replace(/[^\p{L}\p{N}\s_-]/gu, '').replace(/\s/g, '-')

test('the installed package carries LICENSE (MIT) and every page its docs link to: each relative link and #anchor of each shipped .md resolves inside node_modules/pi-native', () => {
  const installed = path.join(consumer, 'node_modules', 'pi-native')
  const manifest = JSON.parse(fs.readFileSync(path.join(installed, 'package.json'), 'utf8'))
  assert.equal(manifest.license, 'MIT')
  const license = fs.readFileSync(path.join(installed, 'LICENSE'), 'utf8')
  assert.match(license, /^MIT License\n\nCopyright \(c\) \d{4} pi-native contributors\n/)
  assert.match(license, /THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND/)
  const pages = tarball.files.filter((f) => f.endsWith('.md'))
  for (const page of ['README.md', 'COMPATIBILITY.md', 'CHANGELOG.md', 'docs/ARCHITECTURE.md']) assert.ok(pages.includes(page), `${page} is shipped`)
  const broken = []
  let links = 0
  for (const page of pages) {
    const text = fs.readFileSync(path.join(installed, page), 'utf8')
    for (const [, target] of text.matchAll(/\]\(([^)\s]+)\)/g)) {
      if (/^[a-z]+:/i.test(target)) continue
      links++
      const [file, anchor] = target.split('#')
      const dest = file ? path.join(path.dirname(path.join(installed, page)), file) : path.join(installed, page)
      if (!fs.existsSync(dest)) broken.push(`${page}: ${target} (no such file)`)
      else if (anchor && dest.endsWith('.md')) {
        const anchors = [...fs.readFileSync(dest, 'utf8').matchAll(/^#{1,6} (.*)$/gm)].map((m) => anchorOf(m[1]))
        if (!anchors.includes(anchor)) broken.push(`${page}: ${target} (no such heading)`)
      }
    }
  }
  assert.deepEqual(broken, [])
  assert.ok(links >= 8, `${links} relative links checked`)
  // Where the project lives, for npm's page and `npm bugs`; the release workflow names the
  // GitHub repository it runs in (a fork publishes under its own) in every manifest it packs.
  assert.deepEqual(manifest.repository, { type: 'git', url: 'git+https://github.com/pi-native/pi-native.git' })
  assert.deepEqual(manifest.bugs, { url: 'https://github.com/pi-native/pi-native/issues' })
  assert.equal(manifest.homepage, 'https://github.com/pi-native/pi-native#readme')
  assert.deepEqual(manifest.engines, { node: '>= 20' })
  const workflow = fs.readFileSync(path.join(root, '.github', 'workflows', 'ci.yml'), 'utf8')
  assert.match(workflow, /REPO_URL: \$\{\{ github\.server_url \}\}\/\$\{\{ github\.repository \}\}/)
  assert.match(workflow, /npm pkg set repository\.type=git "repository\.url=git\+\$REPO_URL\.git" "homepage=\$REPO_URL#readme"/)
})

test('no EBADENGINE on npm install: every non-optional package in the lockfile accepts this Node; the SDK oracle stays 1.6.0 in its own lockfile', () => {
  // npm warns once per non-optional package whose engines.node rejects the running Node
  // (arborist's engine check); optional ones are skipped silently. Same rule here.
  const semver = require('semver')
  const lock = require('../package-lock.json')
  const rejecting = Object.entries(lock.packages)
    .filter(([name, p]) => name && !p.optional && p.engines?.node && !semver.satisfies(process.versions.node, p.engines.node))
    .map(([name, p]) => `${name} (${p.engines.node})`)
  assert.deepEqual(rejecting, [])
  assert.ok(!Object.keys(lock.packages).some((k) => k.includes('@earendil-works')), 'the SDK is not in the root tree')
  const oracle = require('./oracle/package-lock.json')
  assert.equal(oracle.packages['node_modules/@earendil-works/pi-coding-agent'].version, '1.6.0')
  assert.equal(require('./oracle/package.json').dependencies['@earendil-works/pi-coding-agent'], '1.6.0')
})
