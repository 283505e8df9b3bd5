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
const { spawnSync } = require('node:child_process')
const { root } = require('./helpers.js')

const SUBPATHS = {
  liveness: ['isReloadSessionProcessAlive', 'defaultIsPidAlive', 'checkProcessLiveness', 'getProcessStartTime', 'probePid', 'probePids', 'getProcessIdentity', 'isSameProcess'],
  'session-recovery': ['deriveSessionPaths', 'appendWorkerSessionArgs', 'resolveSessionRecoveryEnabled', 'shouldAttemptSessionRecovery', 'recoverLastAssistantFromSession'],
  'process-matrix-store': ['processMatrixDir', 'entryPath', 'buildEntryId', 'readEntry', 'listEntries', 'writeEntry', 'writeEntryIfUnchanged', 'writeEntryIfUnchangedSync', 'removeEntry', 'removeEntryIfUnchanged', 'sweepOrphanTempFiles'],
  'atomic-file': ['withFileLock', 'withFileLockSync', 'writeFileAtomic', 'writeFileAtomicSync'],
}
const TYPES = {
  liveness: ['IntegrationLockOwner', 'ProcessLiveness', 'ProcessIdentity'],
  'session-recovery': ['SessionRecoveryInfo', 'SessionRecoveryOptions', 'WorkerSessionContext', 'SessionIdentityInput'],
  'process-matrix-store': ['ProcessMatrixEntry', 'ProcessRole', 'ProcessStatus', 'WindDownReason', 'ResourcePointer', 'ResourcePointerKind', 'AgentResumeContext', 'AgentIdentityContract', 'ResumablePayload', 'ProcessTerminalHandoff'],
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
test.before(() => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pi-native-consumer-'))
  const binary = path.join(root, 'pi-native.linux-x64-gnu.node')
  const manifestBefore = fs.readFileSync(path.join(root, 'package.json'))
  const binaryBefore = fs.statSync(binary).mtimeMs
  // Lifecycle scripts on: prepack must not rebuild a current binary, and must strip `prepare`.
  const r = spawnSync('npm', ['pack', '--json', '--foreground-scripts', '--pack-destination', dir], { cwd: root, encoding: 'utf8' })
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
  const install = spawnSync('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline', tarball.path], { cwd: consumer, encoding: 'utf8' })
  assert.equal(install.status, 0, `npm install\n${install.stdout}\n${install.stderr}`)
  installOutput = install.stdout + install.stderr
})

test('npm pack: no rebuild of a current binary, no prepare script in the packed manifest, the repo manifest restored', () => {
  assert.equal(packRun.binaryRebuilt, false, packRun.output)
  assert.doesNotMatch(packRun.output, /napi build|Compiling pi-native/)
  assert.match(packRun.output, /the addon is newer than its sources; not rebuilding/)
  assert.equal(packRun.manifestRestored, true)
  assert.ok(!fs.existsSync(path.join(root, '.cache', 'package.json.prepack')))
  const packedManifest = JSON.parse(spawnSync('tar', ['-xzOf', tarball.path, 'package/package.json'], { encoding: 'utf8' }).stdout)
  for (const s of ['prepare', 'prepack', 'postpack', 'preinstall', 'install', 'postinstall']) {
    assert.equal(packedManifest.scripts?.[s], undefined, `packed manifest has no ${s} script`)
  }
  const installed = JSON.parse(fs.readFileSync(path.join(consumer, 'node_modules', 'pi-native', 'package.json'), 'utf8'))
  assert.deepEqual(installed.exports, require('../package.json').exports)
  assert.deepEqual(installed.typesVersions, require('../package.json').typesVersions)
  // Installing the tarball runs nothing and warns about nothing.
  assert.doesNotMatch(installOutput, /install-scripts|EBADENGINE|npm warn/i, installOutput)
})

test('the tarball carries the loader, the types, the JS layers and the linux-x64-gnu binary — and no sources', () => {
  const files = tarball.files
  for (const f of ['package.json', 'index.js', 'index.d.ts', 'pi-native.linux-x64-gnu.node', 'lib/index.js', 'lib/index.d.ts', 'js/index.js', 'bin/pi-native.js', 'README.md']) {
    assert.ok(files.includes(f), `${f} in tarball`)
  }
  for (const sub of Object.keys(SUBPATHS)) assert.ok(files.includes(`lib/${sub}.d.ts`))
  assert.ok(!files.some((f) => f.startsWith('src/') || f.startsWith('__test__/') || f.startsWith('target/') || f.startsWith('bench/')), files.join(' '))
  const installed = path.join(consumer, 'node_modules', 'pi-native')
  assert.ok(fs.existsSync(path.join(installed, 'pi-native.linux-x64-gnu.node')))
  assert.ok(!fs.existsSync(path.join(consumer, 'node_modules', '@napi-rs')), 'no build tooling installed')
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
const lockOpts: AtomicFileLockOptions = { retries: 0, realpath: false, stale: 2000 }
const writeOpts: AtomicFileWriteOptions = { mode: 0o600 }
const n: number = withFileLockSync('/f', () => 1, lockOpts)
const p: Promise<string> = withFileLock('/f', async () => 'x')
writeFileAtomicSync('/f', 'x', writeOpts); const w: Promise<void> = writeFileAtomic('/f', 'x')
export { b, state, alive, l, st, same, states, changed, on, rec, dir, all, sync, n, p, w }
`
  fs.writeFileSync(path.join(consumer, 'index.ts'), body)
  // The README's delegate body for pi-adaptative's store.ts must compile as printed.
  const readme = fs.readFileSync(path.join(root, 'README.md'), 'utf8')
  const storeTs = /```ts\n(import \* as native from "pi-native\/process-matrix-store";[\s\S]*?)```/.exec(readme)[1]
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
