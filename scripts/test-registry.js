#!/usr/bin/env node
'use strict'
// `npm install pi-native` from a real registry: a private verdaccio on 127.0.0.1 (pinned in
// scripts/verdaccio/, installed on demand into .cache/verdaccio/), the packages that
// scripts/pack-all.sh makes from the seven binaries scripts/build-targets.sh built, and fresh
// consumers that install them:
//   a) on this machine: exactly pi-native and pi-native-linux-x64-gnu (beside proper-lockfile's
//      own closure), the native backend, one call of each capability (the supervision events
//      told by the kernel: pidfd, inotify);
//   b) with npm's --os/--cpu/--libc for the six other targets (the two musl ones as an Alpine
//      host asks): exactly the matching package;
//   c) for an unsupported OS (--os=freebsd): no binary package, and here the JS backend with
//      exactly one PI_NATIVE_JS_FALLBACK warning (events by probing and fs.watch);
//   d) the consumers' lockfiles pass `npm ci` in clean copies.
// `pi-native*` packages are local-only in the registry (published there, never looked up
// upstream); every other package is proxied to the registry this machine's npm uses.
// Every npm call of the test runs with a per-run userconfig, globalconfig and cache inside a temp
// directory, so the user's npmrc, auth and cache are never read or written; the temp directory
// and the registry process are removed at the end, also on failure or interruption.
//   node scripts/test-registry.js        # build first: scripts/build-targets.sh
const { spawn, spawnSync } = require('node:child_process')
const crypto = require('node:crypto')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')

const root = path.resolve(__dirname, '..')
const VERSION = require('../package.json').version
const HOST_TARGET = 'linux-x64-gnu' // this machine (CI's)
// Foreign platforms as npm's --os/--cpu/--libc flags, and the one package each must get.
const FOREIGN = [
  { target: 'linux-arm64-gnu', flags: ['--os=linux', '--cpu=arm64', '--libc=glibc'] },
  { target: 'linux-x64-musl', flags: ['--os=linux', '--cpu=x64', '--libc=musl'] },
  { target: 'linux-arm64-musl', flags: ['--os=linux', '--cpu=arm64', '--libc=musl'] },
  { target: 'darwin-arm64', flags: ['--os=darwin', '--cpu=arm64'] },
  { target: 'darwin-x64', flags: ['--os=darwin', '--cpu=x64'] },
  { target: 'win32-x64-msvc', flags: ['--os=win32', '--cpu=x64'] },
]
const TARGETS = fs.readdirSync(path.join(root, 'npm')).sort()

let passed = 0
let failed = 0
const started = Date.now()
const elapsed = () => `${((Date.now() - started) / 1000).toFixed(1)}s`

function log(line) {
  process.stdout.write(`${line}\n`)
}

/** One named assertion: prints `ok`/`not ok` with the reason, counts it, never throws. */
function check(name, fn) {
  try {
    const note = fn()
    passed++
    log(`ok   ${name}${note ? ` (${note})` : ''}`)
    return true
  } catch (err) {
    failed++
    log(`FAIL ${name}: ${err && err.message ? err.message : err}`)
    return false
  }
}

function assertEqual(actual, expected, what) {
  const a = JSON.stringify(actual)
  const e = JSON.stringify(expected)
  if (a !== e) throw new Error(`${what}: got ${a}, expected ${e}`)
}

// Commands still running (npm installs in flight when a signal arrives): cleanup ends them before
// it removes the directory they work in.
const running = new Set()

/** Runs a command to completion without blocking the event loop; resolves {status, stdout, stderr}. */
function run(cmd, args, opts = {}) {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], ...opts })
    running.add(child)
    child.on('close', () => running.delete(child))
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (d) => (stdout += d))
    child.stderr.on('data', (d) => (stderr += d))
    child.on('error', (err) => resolve({ status: -1, stdout, stderr: `${stderr}${err.message}` }))
    child.on('close', (status, signal) => resolve({ status: signal ? -1 : status, stdout, stderr }))
  })
}

/** Like run, but throws with the command's output when it fails. */
async function mustRun(cmd, args, opts) {
  const r = await run(cmd, args, opts)
  if (r.status !== 0) {
    throw new Error(`${cmd} ${args.join(' ')} exited with ${r.status}\n${r.stdout}\n${r.stderr}`.trimEnd())
  }
  return r
}

// --- the registry --------------------------------------------------------------------------------

/** Installs the pinned verdaccio into .cache/verdaccio/ unless that lockfile is already installed. */
async function ensureVerdaccio() {
  const src = path.join(__dirname, 'verdaccio')
  const dir = path.join(root, '.cache', 'verdaccio')
  const lock = fs.readFileSync(path.join(src, 'package-lock.json'))
  const stamp = path.join(dir, '.installed-lock-sha256')
  const want = crypto.createHash('sha256').update(lock).digest('hex')
  const have = fs.existsSync(stamp) ? fs.readFileSync(stamp, 'utf8') : ''
  if (have === want && fs.existsSync(path.join(dir, 'node_modules', 'verdaccio', 'package.json'))) return dir
  fs.rmSync(dir, { recursive: true, force: true })
  fs.mkdirSync(dir, { recursive: true })
  fs.copyFileSync(path.join(src, 'package.json'), path.join(dir, 'package.json'))
  fs.writeFileSync(path.join(dir, 'package-lock.json'), lock)
  // With the machine's own npm configuration (its registry): this is an ordinary install. No
  // install scripts: verdaccio is only run, and none of its dependencies needs a build step.
  await mustRun('npm', ['ci', '--ignore-scripts', '--no-audit', '--no-fund', '--prefer-offline'], { cwd: dir })
  fs.writeFileSync(stamp, want)
  return dir
}

/** The machine npm's value of a config key ('' when unset). */
async function npmConfig(key) {
  const r = await mustRun('npm', ['config', 'get', key], { cwd: root })
  const v = r.stdout.trim()
  return v === 'null' || v === 'undefined' ? '' : v
}

/**
 * Starts verdaccio with storage and config in `work`; resolves {url, stop}. The config is JSON,
 * which is YAML too.
 */
async function startRegistry(verdaccioDir, work, upstream) {
  const config = {
    storage: path.join(work, 'storage'),
    auth: { htpasswd: { file: path.join(work, 'htpasswd'), max_users: 1 } },
    uplinks: { upstream: { url: upstream, timeout: '60s' } },
    packages: {
      // Local only: no `proxy`, so a name that was not published here is a 404, never a
      // package of the same name from upstream.
      'pi-native*': { access: '$all', publish: '$authenticated', unpublish: '$authenticated' },
      // Everything else comes from upstream, and nothing else can be published here.
      '**': { access: '$all', proxy: 'upstream' },
    },
    web: { enable: false },
    log: { type: 'stdout', format: 'pretty', level: 'warn' },
  }
  const configFile = path.join(work, 'verdaccio.yaml')
  fs.writeFileSync(configFile, JSON.stringify(config, null, 2))
  const logFile = path.join(work, 'verdaccio.log')
  const logFd = fs.openSync(logFile, 'a')
  // The machine's npm may trust extra CAs (its `cafile`); verdaccio's upstream requests are
  // Node's own, which read NODE_EXTRA_CA_CERTS.
  const env = { ...process.env }
  if (!env.NODE_EXTRA_CA_CERTS) {
    const cafile = await npmConfig('cafile')
    if (cafile) env.NODE_EXTRA_CA_CERTS = cafile
  }
  const child = spawn(process.execPath, [path.join(__dirname, 'verdaccio', 'serve.js'), verdaccioDir, configFile], {
    stdio: ['ignore', logFd, logFd, 'ipc'],
    env,
  })
  fs.closeSync(logFd)
  let exited = false
  const exit = new Promise((resolve) => child.on('exit', (code, signal) => ((exited = true), resolve(signal || code))))
  const stop = async () => {
    if (exited) return
    child.kill('SIGTERM')
    const killer = setTimeout(() => child.kill('SIGKILL'), 5000)
    await exit
    clearTimeout(killer)
  }
  // Stopped at cleanup from here on, also when it never listens: a child left running would keep
  // this process alive through its IPC channel.
  registryProcess = child
  cleanups.push(stop)
  const port = await Promise.race([
    new Promise((resolve) => child.once('message', (m) => resolve(m.port))),
    exit.then((how) => {
      throw new Error(`verdaccio exited (${how}) before listening:\n${fs.readFileSync(logFile, 'utf8')}`)
    }),
    new Promise((_, reject) => setTimeout(() => reject(new Error('verdaccio did not listen within 60 s')), 60_000).unref()),
  ])
  return { url: `http://127.0.0.1:${port}/`, host: `127.0.0.1:${port}`, stop, logFile, child }
}

/** Registers the one user the registry allows and returns its token (npm's legacy adduser call). */
async function createUser(url) {
  const name = 'pi-native-ci'
  const password = crypto.randomBytes(18).toString('base64url')
  const res = await fetch(`${url}-/user/org.couchdb.user:${name}`, {
    method: 'PUT',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ _id: `org.couchdb.user:${name}`, name, password, type: 'user', roles: [], date: new Date().toISOString() }),
  })
  const body = await res.json().catch(() => ({}))
  if (res.status !== 201 || typeof body.token !== 'string') throw new Error(`adduser: HTTP ${res.status} ${JSON.stringify(body)}`)
  return body.token
}

// --- consumers -----------------------------------------------------------------------------------

/** npm's environment for this run: nothing from the caller's npm (config, auth, cache). */
function npmEnv(work, userconfig) {
  const env = {}
  for (const [k, v] of Object.entries(process.env)) if (!/^npm_/i.test(k)) env[k] = v
  return {
    ...env,
    npm_config_userconfig: userconfig,
    npm_config_globalconfig: path.join(work, 'empty-globalconfig'),
    npm_config_cache: path.join(work, 'npm-cache'),
    npm_config_update_notifier: 'false',
    npm_config_audit: 'false',
    npm_config_fund: 'false',
  }
}

/** Top-level package names in `dir`/node_modules (scoped ones as @scope/name), sorted. */
function installedNames(dir) {
  const nm = path.join(dir, 'node_modules')
  if (!fs.existsSync(nm)) return []
  const names = []
  for (const n of fs.readdirSync(nm)) {
    if (n.startsWith('.')) continue
    if (n.startsWith('@')) for (const s of fs.readdirSync(path.join(nm, n))) names.push(`${n}/${s}`)
    else names.push(n)
  }
  return names.sort()
}

/**
 * The packages that pi-native's own (non-optional) dependencies need, read from each installed
 * package's package.json: what node_modules must hold beside the pi-native packages.
 */
function dependencyClosure(dir) {
  const seen = new Set()
  const pkg = (name) => JSON.parse(fs.readFileSync(path.join(dir, 'node_modules', name, 'package.json'), 'utf8'))
  const visit = (name) => {
    if (seen.has(name)) return
    seen.add(name)
    for (const dep of Object.keys(pkg(name).dependencies ?? {})) visit(dep)
  }
  for (const dep of Object.keys(pkg('pi-native').dependencies ?? {})) visit(dep)
  return [...seen].sort()
}

const USE_JS = `
'use strict'
// Loads pi-native as a host would and calls each capability once; prints what happened as JSON.
const assert = require('node:assert')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const warnings = []
process.on('warning', (w) => warnings.push(w.code || w.name))
;(async () => {
  const pi = require('pi-native')
  const live = require('pi-native/liveness')
  const recovery = require('pi-native/session-recovery')
  const store = require('pi-native/process-matrix-store')
  const atomic = require('pi-native/atomic-file')
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'pi-native-consumer-'))
  try {
    const calls = {}
    calls.liveness = [live.isReloadSessionProcessAlive(process.pid), live.checkProcessLiveness(process.pid).alive]
    const sessions = path.join(tmp, 'sessions')
    fs.mkdirSync(sessions)
    const lines = [
      { type: 'session', version: 3, id: 's1', timestamp: '2026-01-01T00:00:00.000Z', cwd: tmp },
      { type: 'message', id: 'a', parentId: null, timestamp: '2026-01-01T00:00:01.000Z', message: { role: 'user', content: 'hi', timestamp: 1 } },
      { type: 'message', id: 'b', parentId: 'a', timestamp: '2026-01-01T00:00:02.000Z',
        message: { role: 'assistant', content: [{ type: 'text', text: 'recovered text' }], stopReason: 'stop', timestamp: 2 } },
    ]
    fs.writeFileSync(path.join(sessions, '2026-01-01T00-00-00-000Z_s1.jsonl'), lines.map((l) => JSON.stringify(l)).join('\\n') + '\\n')
    const info = await recovery.recoverLastAssistantFromSession(sessions, 's1')
    calls.recovery = info && info.text
    const agentDir = path.join(tmp, 'agent')
    const entry = {
      entryId: store.buildEntryId('worker', 's1'), role: 'worker',
      agent: { agentId: 'a1', resumeContext: { provider: 'pi', sessionId: 's1', cwd: tmp, resourceProfileNames: [], contextPointers: [] } },
      pid: process.pid, hostname: os.hostname(), startedAt: '2026-01-01T00:00:00.000Z',
      heartbeatAt: '2026-01-01T00:00:00.000Z', status: 'running',
    }
    // Supervision events: a watch of the matrix started before the write sees it.
    const watch = store.watchEntries(agentDir)
    const first = watch.next()
    await store.writeEntry(agentDir, entry)
    calls.store = (await store.readEntry(agentDir, entry.entryId))?.pid === process.pid
    let timer
    const event = await Promise.race([first, new Promise((_, reject) => (timer = setTimeout(() => reject(new Error('watchEntries: no event within 10 s')), 10_000)))])
    clearTimeout(timer)
    await watch.return()
    calls.watchEntries = [event.value.type, event.value.entryId === entry.entryId, event.value.entry?.pid === process.pid]
    const child = require('node:child_process').spawn(process.execPath, ['-e', 'setTimeout(() => {}, 200)'], { stdio: 'ignore' })
    calls.waitForProcessExit = await live.waitForProcessExit(child.pid)
    const modes = { exit: live.exitWatchMode(), entries: store.entryWatchMode() }
    const file = path.join(tmp, 'deep', 'state.json')
    await atomic.withFileLock(file, () => atomic.writeFileAtomic(file, 'atomic'))
    calls.atomicFile = fs.readFileSync(file, 'utf8')
    // The binary that was loaded, if any (its path tells which package it came from).
    const binaries = Object.keys(require.cache).filter((f) => f.endsWith('.node')).map((f) => path.relative(process.cwd(), f))
    await new Promise((r) => setImmediate(r)) // let emitted warnings arrive
    console.log(JSON.stringify({ backend: pi.backend, calls, modes, binaries, warnings }))
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true })
  }
})().catch((err) => { console.error(err); process.exit(1) })
`

const EXPECTED_CALLS = {
  liveness: [true, true],
  recovery: 'recovered text',
  store: true,
  watchEntries: ['change', true, true],
  waitForProcessExit: true,
  atomicFile: 'atomic',
}
// How the events are told on this machine (Linux): by the kernel through the addon, by fs.watch
// and probing in the JS backend.
const EXPECTED_MODES = { native: { exit: 'pidfd', entries: 'inotify' }, js: { exit: 'probe', entries: 'fs.watch' } }

/** Runs USE_JS in a consumer; resolves its JSON report and the count of warnings on stderr. */
async function useConsumer(dir, env) {
  fs.writeFileSync(path.join(dir, 'use.js'), USE_JS)
  // The consumer's environment, minus what would choose the backend for it.
  const { PI_NATIVE_BACKEND, ...clean } = env
  const r = await mustRun(process.execPath, ['use.js'], { cwd: dir, env: clean })
  const report = JSON.parse(r.stdout.trim().split('\n').pop())
  report.stderrFallbackWarnings = (r.stderr.match(/\[PI_NATIVE_JS_FALLBACK\]/g) || []).length
  return report
}

function newConsumer(work, name) {
  const dir = path.join(work, 'consumers', name)
  fs.mkdirSync(dir, { recursive: true })
  fs.writeFileSync(path.join(dir, 'package.json'), `${JSON.stringify({ name: `consumer-${name}`, version: '1.0.0', private: true }, null, 2)}\n`)
  return dir
}

function piNames(names) {
  return names.filter((n) => n === 'pi-native' || n.startsWith('pi-native-'))
}

function lockfile(dir) {
  return JSON.parse(fs.readFileSync(path.join(dir, 'package-lock.json'), 'utf8'))
}

/** Checks shared by every consumer that installed pi-native: the lockfile and the packages in it. */
function checkLockfile(label, dir, registry) {
  const lock = lockfile(dir)
  check(`${label}: lockfile names pi-native@${VERSION} and all ${TARGETS.length} binary packages as optional, with their os/cpu/libc`, () => {
    const main = lock.packages['node_modules/pi-native']
    if (!main || main.version !== VERSION) throw new Error(`pi-native entry: ${JSON.stringify(main)}`)
    assertEqual(Object.keys(main.optionalDependencies ?? {}).sort(), TARGETS.map((t) => `pi-native-${t}`), 'optionalDependencies')
    for (const t of TARGETS) {
      const e = lock.packages[`node_modules/pi-native-${t}`]
      if (!e) throw new Error(`no entry for pi-native-${t}`)
      const sub = JSON.parse(fs.readFileSync(path.join(root, 'npm', t, 'package.json'), 'utf8'))
      assertEqual([e.version, e.optional, e.os, e.cpu, e.libc], [VERSION, true, sub.os, sub.cpu, sub.libc], `pi-native-${t}`)
    }
  })
  check(`${label}: every package in the lockfile resolves to the test registry`, () => {
    const other = Object.entries(lock.packages)
      .filter(([k, e]) => k !== '' && !(e.resolved ?? '').startsWith(registry))
      .map(([k, e]) => `${k} -> ${e.resolved}`)
    if (other.length) throw new Error(other.join(', '))
    return `${Object.keys(lock.packages).length - 1} entries`
  })
}

function checkNodeModules(label, dir, target) {
  const names = installedNames(dir)
  const want = target ? ['pi-native', `pi-native-${target}`] : ['pi-native']
  return check(`${label}: node_modules holds exactly ${want.join(' + ')} of the pi-native packages`, () => {
    assertEqual(piNames(names), want, 'pi-native packages')
    // The hidden lockfile npm keeps in node_modules lists what is actually installed.
    const hidden = JSON.parse(fs.readFileSync(path.join(dir, 'node_modules', '.package-lock.json'), 'utf8'))
    assertEqual(piNames(Object.keys(hidden.packages).map((k) => k.replace(/^node_modules\//, ''))).sort(), want, 'node_modules/.package-lock.json')
    const others = names.filter((n) => !want.includes(n))
    assertEqual(others, dependencyClosure(dir), "the other packages against pi-native's dependency closure")
    const binaries = fs.readdirSync(path.join(dir, 'node_modules', 'pi-native')).filter((f) => f.endsWith('.node'))
    assertEqual(binaries, [], 'binaries inside the main package')
    return `all: ${names.join(' ')}`
  })
}

/**
 * The Linux binary that a consumer's binary package installed passes scripts/inspect-linux.sh
 * (glibc ≤ 2.17 for -gnu; musl only for -musl): the registry carries the binaries that ship.
 */
function checkLinuxBinary(label, dir, target) {
  check(`${label}: the installed pi-native.${target}.node passes scripts/inspect-linux.sh`, () => {
    const file = path.join(dir, 'node_modules', `pi-native-${target}`, `pi-native.${target}.node`)
    const r = spawnSync(path.join(root, 'scripts', 'inspect-linux.sh'), [file], { encoding: 'utf8' })
    if (r.status !== 0) throw new Error(`${r.stdout}${r.stderr}`)
    return r.stdout.split('\n').filter((l) => /highest glibc|exported by musl|loaded by musl/.test(l)).map((l) => l.trim()).join('; ')
  })
}

function checkUse(label, report, backend) {
  check(`${label}: require('pi-native').backend === '${backend}'`, () => assertEqual(report.backend, backend, 'backend'))
  check(`${label}: one call of each capability (liveness, recovery, store, watchEntries, waitForProcessExit, atomic-file)`, () => assertEqual(report.calls, EXPECTED_CALLS, 'results'))
  check(`${label}: events told by ${EXPECTED_MODES[backend].exit} and ${EXPECTED_MODES[backend].entries}`, () => assertEqual(report.modes, EXPECTED_MODES[backend], 'exitWatchMode / entryWatchMode'))
  if (backend === 'native') {
    check(`${label}: the binary came from pi-native-${HOST_TARGET}, with no warning`, () => {
      assertEqual(report.binaries, [`node_modules/pi-native-${HOST_TARGET}/pi-native.${HOST_TARGET}.node`], 'loaded binaries')
      assertEqual(report.warnings, [], 'warnings')
    })
  } else {
    check(`${label}: no binary loaded, exactly one PI_NATIVE_JS_FALLBACK warning`, () => {
      assertEqual(report.binaries, [], 'loaded binaries')
      assertEqual(report.warnings, ['PI_NATIVE_JS_FALLBACK'], 'warnings (process "warning" events)')
      assertEqual(report.stderrFallbackWarnings, 1, 'PI_NATIVE_JS_FALLBACK lines on stderr')
    })
  }
}

// --- main ------------------------------------------------------------------------------------------

async function main(work) {
  // The binaries, and what pack-all.sh makes of them.
  const missing = TARGETS.filter((t) => !fs.existsSync(path.join(root, `pi-native.${t}.node`)))
  if (!check(`all ${TARGETS.length} binaries are built`, () => assertEqual(missing, [], 'missing (run scripts/build-targets.sh)'))) return
  const dist = path.join(work, 'dist')
  await mustRun(path.join(root, 'scripts', 'pack-all.sh'), [dist], { cwd: root })
  const tarballs = TARGETS.map((t) => path.join(dist, `pi-native-${t}-${VERSION}.tgz`))
  const mainTarball = path.join(dist, 'registry', `pi-native-${VERSION}.tgz`)
  if (!check(`scripts/pack-all.sh made the ${TARGETS.length} per-target packages and the registry main package`, () => {
    assertEqual([...tarballs, mainTarball].filter((f) => !fs.existsSync(f)).map((f) => path.relative(dist, f)), [], 'missing')
  })) return
  log(`packed (${elapsed()})`)

  // Read before any npm call of the test runs with its own config: the machine's own files.
  const upstream = await npmConfig('registry')
  const userFiles = [await npmConfig('userconfig'), await npmConfig('globalconfig')]
  const fingerprint = () => userFiles.map((f) => (fs.existsSync(f) ? crypto.createHash('sha256').update(fs.readFileSync(f)).digest('hex') : 'absent'))
  const before = fingerprint()

  const verdaccioDir = await ensureVerdaccio()
  log(`verdaccio ready in ${path.relative(root, verdaccioDir)} (${elapsed()})`)
  const registry = await startRegistry(verdaccioDir, work, upstream)
  log(`registry: ${registry.url} (storage in ${work}), upstream ${upstream} (${elapsed()})`)
  try {
    await consumersAgainst(work, registry, tarballs, mainTarball)
  } catch (err) {
    failed++
    log(`FAIL ${err.stack || err}`)
  }
  if (failed) log(`--- verdaccio log (last 40 lines)\n${fs.readFileSync(registry.logFile, 'utf8').split('\n').slice(-40).join('\n')}`)
  check("the user's npmrc files are untouched", () => assertEqual(fingerprint(), before, `hashes of ${userFiles.join(', ')}`))
}

async function consumersAgainst(work, registry, tarballs, mainTarball) {
  fs.writeFileSync(path.join(work, 'empty-globalconfig'), '')
  const publisherRc = path.join(work, 'publisher.npmrc')
  const consumerRc = path.join(work, 'consumer.npmrc')
  const token = await createUser(registry.url)
  fs.writeFileSync(publisherRc, `registry=${registry.url}\n//${registry.host}/:_authToken=${token}\n`, { mode: 0o600 })
  // Consumers install anonymously, as a host would from a public registry.
  fs.writeFileSync(consumerRc, `registry=${registry.url}\n`)
  const pubEnv = npmEnv(work, publisherRc)
  const env = npmEnv(work, consumerRc)

  // Publish: the binary packages first, the main package last (as a release does).
  for (const tgz of [...tarballs, mainTarball]) {
    await mustRun('npm', ['publish', tgz], { cwd: work, env: pubEnv })
  }
  const packument = async (name) => {
    const res = await fetch(`${registry.url}${name}`)
    return { status: res.status, body: res.status === 200 ? await res.json() : null }
  }
  const published = {}
  for (const name of ['pi-native', ...TARGETS.map((t) => `pi-native-${t}`)]) published[name] = await packument(name)
  check(`published pi-native and the ${TARGETS.length} binary packages at ${VERSION}`, () => {
    for (const [name, p] of Object.entries(published)) {
      assertEqual([p.status, p.body?.['dist-tags']?.latest], [200, VERSION], name)
      const tarball = p.body.versions[VERSION].dist.tarball
      if (!tarball.startsWith(registry.url)) throw new Error(`${name} tarball at ${tarball}`)
    }
    const optional = published['pi-native'].body.versions[VERSION].optionalDependencies
    assertEqual(optional, Object.fromEntries(TARGETS.map((t) => [`pi-native-${t}`, VERSION])), 'pi-native optionalDependencies')
  })
  const notHere = await packument('pi-native-freebsd-x64')
  const proxied = await packument('proper-lockfile')
  check('pi-native* names are local-only (an unpublished one is a 404), other names come from upstream', () => {
    assertEqual(notHere.status, 404, 'pi-native-freebsd-x64')
    assertEqual(proxied.status, 200, 'proper-lockfile')
    if (!proxied.body.versions['4.1.2']) throw new Error('proper-lockfile@4.1.2 not in the proxied packument')
  })
  log(`published (${elapsed()})`)

  const install = (dir, flags) => mustRun('npm', ['install', `pi-native@${VERSION}`, ...flags], { cwd: dir, env })

  // a) this machine.
  const native = newConsumer(work, 'native')
  await install(native, [])
  log(`a) installed on this machine (${elapsed()})`)
  checkNodeModules('a) linux-x64', native, HOST_TARGET)
  checkLockfile('a) linux-x64', native, registry.url)
  checkLinuxBinary('a) linux-x64', native, HOST_TARGET)
  checkUse('a) linux-x64', await useConsumer(native, env), 'native')

  // b) the other targets, c) an unsupported OS: installed side by side (npm waits on the network
  // and on the registry more than on the CPU).
  const others = [...FOREIGN, { target: null, flags: ['--os=freebsd', '--cpu=x64'] }]
  const dirs = others.map((o) => newConsumer(work, o.flags.map((f) => f.split('=')[1]).join('-')))
  await Promise.all(others.map((o, i) => install(dirs[i], o.flags)))
  log(`b), c) installed for ${dirs.map((d) => path.basename(d)).join(', ')} (${elapsed()})`)
  for (const [i, o] of others.entries()) {
    const label = `${o.target ? 'b' : 'c'}) ${o.flags.join(' ')}`
    checkNodeModules(label, dirs[i], o.target)
    checkLockfile(label, dirs[i], registry.url)
    if (o.target?.startsWith('linux-')) checkLinuxBinary(label, dirs[i], o.target)
  }
  checkUse('c) --os=freebsd, loaded on this machine', await useConsumer(dirs.at(-1), env), 'js')

  // d) npm ci from the lockfiles, in clean copies: this machine's, and one written for darwin-arm64
  // (a lockfile is the same on every platform: npm ci here still installs this machine's package).
  for (const [label, from] of [['native', native], ['darwin-arm64', dirs[others.findIndex((o) => o.target === 'darwin-arm64')]]]) {
    const copy = path.join(work, 'consumers', `ci-from-${label}`)
    fs.mkdirSync(copy)
    for (const f of ['package.json', 'package-lock.json']) fs.copyFileSync(path.join(from, f), path.join(copy, f))
    const lockBefore = fs.readFileSync(path.join(copy, 'package-lock.json'))
    const r = await run('npm', ['ci'], { cwd: copy, env })
    const ok = check(`d) npm ci with the ${label} consumer's lockfile, in a clean copy`, () => {
      if (r.status !== 0) throw new Error(`exit ${r.status}\n${r.stderr}`)
      if (!lockBefore.equals(fs.readFileSync(path.join(copy, 'package-lock.json')))) throw new Error('npm ci changed the lockfile')
    })
    if (!ok) continue
    checkNodeModules(`d) npm ci (${label} lockfile)`, copy, HOST_TARGET)
    checkUse(`d) npm ci (${label} lockfile)`, await useConsumer(copy, env), 'native')
  }
  log(`consumers done (${elapsed()})`)
}

// Cleanup runs once, on the normal path, on an exception and on SIGINT/SIGTERM/SIGHUP; a second
// call waits for the first one's end.
const cleanups = []
let cleaning = null
let registryProcess = null
function cleanup() {
  cleaning ??= (async () => {
    await Promise.all(
      [...running].map(
        (child) =>
          new Promise((resolve) => {
            child.once('close', resolve)
            child.kill('SIGTERM')
            setTimeout(() => child.kill('SIGKILL'), 5000).unref()
          }),
      ),
    )
    for (const fn of cleanups.reverse()) {
      try {
        await fn()
      } catch (err) {
        log(`cleanup: ${err.message}`)
      }
    }
  })()
  return cleaning
}
for (const [sig, code] of [['SIGINT', 130], ['SIGTERM', 143], ['SIGHUP', 129]]) {
  process.on(sig, () => {
    log(`${sig}: stopping the registry and removing the temp directory`)
    cleanup().finally(() => process.exit(code))
  })
}

;(async () => {
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'pi-native-registry-'))
  cleanups.push(() => fs.rmSync(work, { recursive: true, force: true }))
  // Every child's temp files (pack-all.sh's staging, npm's, the consumers') go inside it too.
  const tmp = path.join(work, 'tmp')
  fs.mkdirSync(tmp)
  Object.assign(process.env, { TMPDIR: tmp, TMP: tmp, TEMP: tmp })
  log(`registry test: pi-native ${VERSION}, work directory ${work}`)
  try {
    await main(work)
  } catch (err) {
    failed++
    log(`FAIL ${err.stack || err}`)
  } finally {
    await cleanup()
  }
  check('the registry is stopped and the work directory removed', () => {
    if (registryProcess && registryProcess.exitCode === null && registryProcess.signalCode === null) throw new Error('verdaccio still runs')
    if (fs.existsSync(work)) throw new Error(`${work} still exists`)
  })
  log(`registry test took ${elapsed()}`)
  log(`${passed} passed, ${failed} failed`)
  process.exitCode = failed ? 1 : 0
})()
