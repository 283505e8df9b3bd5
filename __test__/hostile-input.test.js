'use strict'
// Hostile-input differential suite: every exported function, every argument position, about 20
// kinds of hostile value, both backends, against a reference written in this file straight from
// SPEC.md with Node's own path/fs/util/process.kill and the real proper-lockfile (never the js/
// backend). Compared: error class, `code`, message (and fs errors' own keys), the returned value,
// the caller's arrays afterwards, and what the call left on disk.
const { test } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const fsp = require('node:fs/promises')
const os = require('node:os')
const path = require('node:path')
const util = require('node:util')
const lockfile = require('proper-lockfile')
const { backends, rmTree } = require('./helpers.js')

// ---- value kinds ---------------------------------------------------------------------------

const SYM = Symbol('desc')
function namedFunction() {}
const HOST = os.hostname()

/** A fresh object each call: every property read throws. */
function throwingGetter() {
  const o = {}
  for (const k of ['agentId', 'sessionId', 'sessionDir', 'artifactsRoot', 'exitStatus', 'exitCode', 'killed', 'hostname', 'pid', 'entryId', 'startTimeMs', 'mode', 'retries', 'stale', 'realpath', 'maxFiles', 'deadlineMs', 'maxFileBytes']) {
    Object.defineProperty(o, k, { enumerable: true, get: () => { throw new Error(`getter ${k} threw`) } })
  }
  return o
}

/** [name, factory]: a factory gives a fresh value (arrays are mutated by some calls). */
const KINDS = [
  ['null', () => null],
  ['undefined', () => undefined],
  ['NaN', () => NaN],
  ['-0', () => -0],
  ['number 42', () => 42],
  ['number 1.5', () => 1.5],
  ['number 2**31', () => 2 ** 31],
  ['Symbol(desc)', () => SYM],
  ['BigInt', () => 10n],
  ['boxed String', () => new String('abc')], // eslint-disable-line no-new-wrappers
  ['object with toString', () => ({ toString: () => 'objtext' })],
  ['throwing getter', throwingGetter],
  ['Proxy', () => new Proxy({ sessionId: 'px', agentId: 'a:px', artifactsRoot: 'proot', exitCode: null, hostname: HOST, pid: process.pid, entryId: 'e' }, {})],
  ['frozen array', () => Object.freeze(['--mode', 'json', '-p', 'task'])],
  ['NUL-byte string', () => 'a\0b'],
  ['circular object', () => { const c = { n: 1 }; c.self = c; return c }],
  ['function', () => namedFunction],
  ['Date', () => new Date(0)],
  ['empty string', () => ''],
  ['plain string', () => 'plain'],
  ['true', () => true],
  ['array', () => ['x']],
]

// ---- outcomes --------------------------------------------------------------------------------

/** A comparable description of any value (util.inspect never runs getters). */
function describe(v, root) {
  const text = typeof v === 'symbol' ? v.toString() : util.inspect(v, { depth: 6, getters: false, showProxy: false })
  return `${typeof v}:${root ? text.split(root).join('<root>') : text}`
}

function describeError(err, root) {
  if (!(err instanceof Error)) return { thrown: describe(err, root) }
  // Node's messages quote paths through util.inspect, which doubles Windows backslashes.
  const norm = (s) =>
    typeof s === 'string' && root ? s.split(root).join('<root>').split(root.replace(/\\/g, '\\\\')).join('<root>') : s
  return {
    class: err.constructor.name,
    code: err.code,
    // A temp file name carries a random UUID: compare its shape.
    message: norm(err.message).replace(/\.\d+\.[0-9a-f-]{36}\.tmp/g, '.<pid>.<uuid>.tmp'),
    keys: err.code && /^E[A-Z]+$/.test(err.code) ? Object.keys(err) : undefined,
  }
}

async function outcome(call, root, isAsync) {
  let result
  try {
    result = call()
  } catch (err) {
    return { sync: 'throw', error: describeError(err, root) }
  }
  if (isAsync) {
    if (!(result instanceof Promise)) return { sync: 'not a promise', value: describe(result, root) }
    try {
      return { resolved: describe(await result, root) }
    } catch (err) {
      return { rejected: describeError(err, root) }
    }
  }
  return { returned: describe(result, root) }
}

/** Everything under `dir`: relative names (temp-file UUIDs masked) and file contents. */
function tree(dir) {
  const out = []
  const walk = (d, rel) => {
    let names
    try {
      names = fs.readdirSync(d).sort()
    } catch {
      return
    }
    for (const n of names) {
      const p = path.join(d, n)
      const r = path.join(rel, n).replace(/\.\d+\.[0-9a-f-]{36}\.tmp$/, '.<tmp>')
      const st = fs.lstatSync(p)
      if (st.isDirectory()) {
        out.push(`${r}/`)
        walk(p, r)
      } else out.push(`${r}=${fs.readFileSync(p, 'utf8')}`)
    }
  }
  walk(dir, '')
  return out
}

// ---- the reference, from SPEC.md --------------------------------------------------------------

const ref = {}

// A1–A6
const safeId = (v) => /^[A-Za-z0-9_-]+$/.test(v)
// (The parameter is named `raw` because V8's "raw.includes is not a function" names it.)
function refSanitize(raw) {
  const tail = raw.includes(':') ? raw.slice(raw.lastIndexOf(':') + 1) : raw
  return safeId(tail) ? tail : null
}
ref.deriveSessionPaths = (input) => {
  const agent = input.agentId ? refSanitize(input.agentId) : null
  const session = input.sessionId ? refSanitize(input.sessionId) : null
  const id = session ?? agent
  const leaf = agent ?? session
  if (!id || !leaf) return null
  if (input.sessionDir) return { sessionId: id, sessionDir: input.sessionDir }
  if (!input.artifactsRoot) return null
  return { sessionId: id, sessionDir: path.join(input.artifactsRoot, 'sessions', leaf) }
}
// A7–A10: builtArgs first, each array on its own, in place.
function refArm(args, ctx) {
  const add = []
  if (!args.includes('--session-id')) add.push('--session-id', ctx.sessionId)
  if (!args.includes('--session-dir')) add.push('--session-dir', ctx.sessionDir)
  if (!add.length) return false
  const i = args.indexOf('--mode')
  if (i !== -1 && args[i + 1] === 'json' && args[i + 2] === '-p') args.splice(i + 3, 0, ...add)
  else args.push(...add)
  return true
}
ref.appendWorkerSessionArgs = (spawnArgs, builtArgs, ctx) => {
  const a = refArm(builtArgs, ctx)
  const b = refArm(spawnArgs, ctx)
  return a || b
}
// A11 with getCrewEnvBool
ref.resolveSessionRecoveryEnabled = (explicit) => {
  const raw = process.env.PI_CREW_SESSION_RECOVERY
  if (raw !== undefined) {
    const v = raw.trim().toLowerCase()
    if (['1', 'true', 'yes'].includes(v)) return true
    if (['0', 'false', 'no'].includes(v)) return false
  }
  return explicit ?? true
}
// A12
ref.shouldAttemptSessionRecovery = (result, killed) => {
  const s = result.exitStatus
  const code = s && s.exitCode !== undefined ? s.exitCode : result.exitCode
  const k = s && s.killed !== undefined ? s.killed : killed
  return code === null || k === true
}

// C0–C4 on process.kill itself
const kill = (pid) => {
  try {
    process.kill(pid, 0)
    return null
  } catch (err) {
    return err
  }
}
ref.isReloadSessionProcessAlive = (pid) => {
  if (pid === undefined || !Number.isFinite(pid) || pid <= 0) return false
  const e = kill(pid)
  return e === null || e.code === 'EPERM'
}
ref.defaultIsPidAlive = (owner) => {
  if (owner.hostname !== os.hostname()) return true
  const e = kill(owner.pid)
  return e === null || (Boolean(e) && e.code === 'EPERM')
}
ref.checkProcessLiveness = (pid) => {
  if (pid === undefined || !Number.isInteger(pid) || pid <= 0) return { pid, alive: false, detail: 'no pid recorded' }
  const e = kill(pid)
  if (e === null) return { pid, alive: true, detail: 'process is alive' }
  if (e.code === 'EPERM') return { pid, alive: true, detail: 'process exists but permission is denied' }
  if (e.code === 'ESRCH') return { pid, alive: false, detail: 'process does not exist' }
  return { pid, alive: false, detail: e.message }
}
ref.getProcessStartTime = (pid) => {
  if (kill(pid) !== null) return undefined
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8')
    const rest = stat.slice(stat.lastIndexOf(')') + 1)
    if (stat.lastIndexOf(')') < 0) return undefined
    const n = Number(rest.trim().split(/\s+/)[19])
    return Number.isFinite(n) ? Math.floor(n * 100) : undefined
  } catch {
    return undefined
  }
}
// New API (README / COMPATIBILITY.md): TypeErrors naming the argument; 'invalid' outside int32 > 0.
const posPid = (x) => Number.isInteger(x) && x > 0 && x <= 2147483647
const needNumber = (v, name) => {
  if (typeof v !== 'number') throw new TypeError(`The "${name}" argument must be of type number`)
  return v
}
function refState(pid) {
  const e = kill(pid)
  if (e !== null && e.code !== 'EPERM') return 'dead'
  try {
    const s = fs.readFileSync(`/proc/${pid}/stat`, 'latin1')
    if (/^[ZXx]$/.test(s.slice(s.lastIndexOf(')') + 2, s.lastIndexOf(')') + 3))) return 'zombie'
  } catch {}
  return e === null ? 'alive' : 'eperm'
}
ref.probePid = (pid) => (posPid(needNumber(pid, 'pid')) ? refState(pid) : 'invalid')
ref.probePids = (pids) => {
  if (!Array.isArray(pids)) throw new TypeError('The "pids" argument must be an array of numbers')
  return pids.map((p, i) => (posPid(needNumber(p, `pids[${i}]`)) ? refState(p) : 'invalid'))
}
const IDENTITY_MSG = 'The "identity" argument must be an object with numeric "pid" and "startTimeMs"'
ref.getProcessIdentity = (pid) => {
  if (!posPid(needNumber(pid, 'pid'))) return undefined
  return refState(pid) === 'dead' ? undefined : 'some identity'
}
ref.isSameProcess = (identity) => {
  if (identity === null || typeof identity !== 'object') throw new TypeError(IDENTITY_MSG)
  const { pid, startTimeMs } = identity
  if (typeof pid !== 'number' || typeof startTimeMs !== 'number') throw new TypeError(IDENTITY_MSG)
  return posPid(pid) && pid === process.pid && startTimeMs === ownStartMs
}

// B1–B2
ref.processMatrixDir = (a) => path.join(a, 'state', 'process-matrix')
ref.entryPath = (a, id) => path.join(ref.processMatrixDir(a), String(id) + '.json')
ref.buildEntryId = (role, s) => String(role) + '-' + String(s)

// B3–B19 over Node's fs and proper-lockfile 4.1.2 with the store's options. Validation (V1–V20)
// is reduced to the one valid fixture the suite writes.
const LOCK = { realpath: false, stale: undefined, retries: { retries: 10, factor: 2, minTimeout: 25, maxTimeout: 500, randomize: false } }
let validFixture
const refRead = async (file) => {
  try {
    const v = JSON.parse(await fsp.readFile(file, 'utf8'))
    return util.isDeepStrictEqual(v, validFixture) ? v : undefined
  } catch {
    return undefined
  }
}
const refReadSync = (file) => {
  try {
    const v = JSON.parse(fs.readFileSync(file, 'utf8'))
    return util.isDeepStrictEqual(v, validFixture) ? v : undefined
  } catch {
    return undefined
  }
}
const serialize = (e) => JSON.stringify(e, null, '\t') + '\n'
async function refAtomic(file, text, options = {}) {
  await fsp.mkdir(path.dirname(file), { recursive: true })
  const mode = options.mode ?? 0o666 // read when the temp file is created (B19)
  const tmp = `${file}.${process.pid}.${require('node:crypto').randomUUID()}.tmp`
  try {
    const fh = await fsp.open(tmp, 'wx', mode)
    try {
      await fh.writeFile(text)
    } finally {
      await fh.close()
    }
    await fsp.rename(tmp, file)
  } catch (err) {
    await fsp.unlink(tmp).catch(() => {})
    throw err
  }
}
function refAtomicSync(file, text, options = {}) {
  fs.mkdirSync(path.dirname(file), { recursive: true })
  const mode = options.mode ?? 0o666
  const tmp = `${file}.${process.pid}.${require('node:crypto').randomUUID()}.tmp`
  try {
    const fd = fs.openSync(tmp, 'wx', mode)
    try {
      fs.writeFileSync(fd, text)
    } finally {
      fs.closeSync(fd)
    }
    fs.renameSync(tmp, file)
  } catch (err) {
    try {
      fs.unlinkSync(tmp)
    } catch {}
    throw err
  }
}
/** Run `fn` while a sync lock is held; release errors are ignored (B15). */
function heldSync(release, fn) {
  try {
    return fn()
  } finally {
    attempt(release)
  }
}
/** Call `f`, swallowing what it throws. */
function attempt(f) {
  try {
    f()
  } catch {}
}
async function refLocked(file, fn, options = LOCK) {
  const release = await lockfile.lock(file, options)
  try {
    return await fn()
  } finally {
    await release().catch(() => {})
  }
}
ref.readEntry = async (a, id) => refRead(ref.entryPath(a, id))
ref.listEntries = async (a) => {
  let dir, names
  try {
    dir = ref.processMatrixDir(a)
    names = await fsp.readdir(dir)
  } catch {
    return []
  }
  const out = []
  for (const n of names.sort()) if (n.endsWith('.json')) {
    const v = await refRead(path.join(dir, n))
    if (v !== undefined) out.push(v)
  }
  return out
}
ref.writeEntry = async (a, entry) => {
  const file = ref.entryPath(a, entry.entryId)
  await fsp.mkdir(path.dirname(file), { recursive: true })
  await refLocked(file, () => refAtomic(file, serialize(entry)))
}
ref.writeEntryIfUnchanged = async (a, id, expected, next) => {
  if (next.entryId !== id) throw new TypeError(`Process-matrix replacement entry '${next.entryId}' does not match '${id}'.`)
  const file = ref.entryPath(a, id)
  await fsp.mkdir(path.dirname(file), { recursive: true })
  return refLocked(file, async () => {
    if (!util.isDeepStrictEqual(await refRead(file), expected)) return false
    await refAtomic(file, serialize(next))
    return true
  })
}
ref.writeEntryIfUnchangedSync = (a, expected, next) => {
  if (next.entryId !== expected.entryId) {
    throw new TypeError(`Process-matrix replacement entry '${next.entryId}' does not match '${expected.entryId}'.`)
  }
  const file = ref.entryPath(a, expected.entryId)
  fs.mkdirSync(path.dirname(file), { recursive: true })
  return heldSync(lockfile.lockSync(file, { realpath: false, stale: undefined }), () => {
    if (!util.isDeepStrictEqual(refReadSync(file), expected)) return false
    refAtomicSync(file, serialize(next))
    return true
  })
}
ref.removeEntry = async (a, id) => {
  const file = ref.entryPath(a, id)
  await fsp.mkdir(path.dirname(file), { recursive: true })
  await refLocked(file, () => fsp.rm(file, { force: true }).catch(() => {}))
}
ref.removeEntryIfUnchanged = async (a, expected) => {
  const file = ref.entryPath(a, expected.entryId)
  await fsp.mkdir(path.dirname(file), { recursive: true })
  return refLocked(file, async () => {
    if (!util.isDeepStrictEqual(await refRead(file), expected)) return false
    await fsp.rm(file, { force: true })
    return true
  })
}
ref.withFileLock = async (file, fn, options = {}) => {
  await fsp.mkdir(path.dirname(file), { recursive: true })
  return refLocked(file, fn, {
    realpath: options.realpath ?? false,
    stale: options.stale,
    retries: { retries: options.retries ?? 10, factor: 2, minTimeout: 25, maxTimeout: 500, randomize: false },
  })
}
ref.withFileLockSync = (file, fn, options = {}) => {
  fs.mkdirSync(path.dirname(file), { recursive: true })
  const attempts = Math.max(1, options.retries ?? 10) + 1 // B18: the attempt count comes first
  assert.ok(attempts >= 2)
  return heldSync(lockfile.lockSync(file, { realpath: options.realpath ?? false, stale: options.stale }), fn)
}
ref.writeFileAtomic = async (file, content, options) => refAtomic(file, content, options)
ref.writeFileAtomicSync = (file, content, options) => refAtomicSync(file, content, options)

// A13–A26 for a directory holding one complete session; options per the new API's checks.
const RECOVERY_KEYS = ['maxFileBytes', 'deadlineMs', 'maxFiles']
ref.recoverLastAssistantFromSession = async (dir, sessionId, options) => {
  if (options !== undefined && options !== null) {
    if (typeof options !== 'object') throw new TypeError('The "options" argument must be an object')
    for (const key of RECOVERY_KEYS) {
      const v = options[key]
      if (v === undefined) continue
      const integer = key === 'maxFiles'
      if (typeof v !== 'number' || Number.isNaN(v) || v < 0 || (integer && !Number.isInteger(v))) {
        throw new TypeError(`The "options.${key}" property must be a non-negative number${integer ? ' (integer)' : ''}`)
      }
    }
  }
  let names
  try {
    names = fs.readdirSync(dir).filter((n) => n.endsWith('.jsonl'))
  } catch {
    return null
  }
  if (names.length !== 1) return null
  const limits = { maxFileBytes: 67108864, deadlineMs: 5000, maxFiles: 3, ...(options ?? {}) }
  const cap = limits.maxFileBytes ?? 67108864
  const files = limits.maxFiles ?? 3
  if (files < 1 || Buffer.byteLength(SESSION_TEXT) > cap || !((limits.deadlineMs ?? 5000) > 0)) return null
  return {
    sessionId: sessionId ?? names[0].replace(/\.jsonl$/, ''),
    sessionFile: path.join(dir, names[0]),
    text: 'answer',
    timestamp: '2026-01-01T00:00:01.000Z',
    stopReason: 'stop',
  }
}
const SESSION_TEXT =
  '{"type":"session","version":3,"id":"sid","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/"}\n' +
  '{"type":"message","id":"a","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"assistant","content":[{"type":"text","text":"answer"}],"stopReason":"stop"}}\n'

// pi-native's maintenance call (README): the path TypeError, then only dead writers' old temps.
ref.sweepOrphanTempFiles = async (agentDir, minAgeMs) => {
  const dir = ref.processMatrixDir(agentDir)
  if (minAgeMs !== undefined && (typeof minAgeMs !== 'number' || !(minAgeMs >= 0))) {
    throw new TypeError('The "minAgeMs" argument must be a non-negative number')
  }
  try {
    fs.readdirSync(dir)
  } catch {
    return []
  }
  return [] // the sandbox holds no temp files
}

// ---- the cases ----------------------------------------------------------------------------------

let ownStartMs
const entry = (sessionId = 's1') => ({
  entryId: `worker-${sessionId}`,
  role: 'worker',
  agent: { agentId: 'a1', resumeContext: { provider: 'pi', sessionId, cwd: '/w', resourceProfileNames: [], contextPointers: [] } },
  pid: 4242,
  hostname: 'h',
  startedAt: '2026-01-01T00:00:00.000Z',
  heartbeatAt: '2026-01-01T00:00:00.000Z',
  status: 'running',
})
validFixture = entry()

/**
 * Every exported function with a template of good arguments; `at` replaces position `i` (or a
 * property inside an object argument, `i.prop`). `disk` marks calls that touch the sandbox.
 */
const CASES = [
  { fn: 'deriveSessionPaths', args: () => [{ agentId: 'x:agent', sessionId: 'sid', artifactsRoot: 'root' }], props: ['agentId', 'sessionId', 'sessionDir', 'artifactsRoot'] },
  { fn: 'appendWorkerSessionArgs', args: () => [['node', 'cli', '--mode', 'json', '-p', 't'], ['--mode', 'json', '-p', 't'], { sessionId: 'i', sessionDir: 'd' }], props: [] },
  { fn: 'resolveSessionRecoveryEnabled', args: () => [true] },
  { fn: 'shouldAttemptSessionRecovery', args: () => [{ exitCode: 0, exitStatus: { exitCode: 1, killed: false } }, false], props: ['exitCode', 'exitStatus'] },
  { fn: 'processMatrixDir', args: () => ['agent'] },
  { fn: 'entryPath', args: () => ['agent', 'id'] },
  { fn: 'buildEntryId', args: () => ['worker', 's'] },
  { fn: 'isReloadSessionProcessAlive', args: () => [process.pid] },
  { fn: 'defaultIsPidAlive', args: () => [{ hostname: HOST, pid: process.pid }], props: ['hostname', 'pid'] },
  { fn: 'checkProcessLiveness', args: () => [process.pid] },
  { fn: 'getProcessStartTime', args: () => [process.pid] },
  { fn: 'probePid', args: () => [process.pid] },
  { fn: 'probePids', args: () => [[process.pid, 1]] },
  { fn: 'getProcessIdentity', args: () => [process.pid], identityOnly: true },
  { fn: 'isSameProcess', args: () => [{ pid: process.pid, startTimeMs: ownStartMs }], props: ['pid', 'startTimeMs'] },
  { fn: 'readEntry', args: (r) => [r, 'worker-s1'], disk: true, async: true },
  { fn: 'listEntries', args: (r) => [r], disk: true, async: true },
  { fn: 'writeEntry', args: (r) => [r, entry('s2')], disk: true, async: true, props: ['entryId'] },
  { fn: 'writeEntryIfUnchanged', args: (r) => [r, 'worker-s1', entry(), entry()], disk: true, async: true },
  { fn: 'writeEntryIfUnchangedSync', args: (r) => [r, entry(), entry()], disk: true },
  { fn: 'removeEntry', args: (r) => [r, 'worker-s1'], disk: true, async: true },
  { fn: 'removeEntryIfUnchanged', args: (r) => [r, entry()], disk: true, async: true },
  { fn: 'withFileLock', args: (r) => [path.join(r, 'sub', 'f'), () => 'done', {}], disk: true, async: true, props: ['retries', 'stale', 'realpath'] },
  { fn: 'withFileLockSync', args: (r) => [path.join(r, 'sub', 'f'), () => 'done', {}], disk: true },
  { fn: 'writeFileAtomic', args: (r) => [path.join(r, 'sub', 'f'), 'text', { mode: 0o644 }], disk: true, async: true },
  { fn: 'writeFileAtomicSync', args: (r) => [path.join(r, 'sub', 'f'), 'text', { mode: 0o644 }], disk: true },
  { fn: 'recoverLastAssistantFromSession', args: (r) => [path.join(r, 'sessions'), 'sid', { maxFiles: 2 }], disk: true, async: true, props: ['maxFiles', 'deadlineMs', 'maxFileBytes'] },
  { fn: 'sweepOrphanTempFiles', args: (r) => [r, 1000], disk: true, async: true },
]

/** All (case, position, kind) triples; a position is an argument index or `index.prop`. */
function* variants() {
  for (const c of CASES) {
    const n = c.args('R').length
    const positions = []
    for (let i = 0; i < n; i++) positions.push({ i })
    const objIndex = c.fn === 'writeEntry' ? 1 : c.fn === 'recoverLastAssistantFromSession' ? 2 : 0
    for (const prop of c.props ?? []) positions.push({ i: objIndex, prop })
    for (const pos of positions) for (const [kind, make] of KINDS) yield { c, pos, kind, make }
  }
}

// Values whose effect depends on a real fs path or a live process are left out where the
// reference cannot be made to agree by construction (documented with each skip).
function skip({ c, pos, kind }) {
  // A proper-lockfile `lockSync` of a path whose parent was just created can race nothing; but
  // callbacks other than functions are called by the original and throw "fn is not a function".
  if (c.fn === 'getProcessIdentity' && kind === 'number 42') return true // an unrelated pid's identity is not stable
  // A deadline of a few ms races the scan: either answer is right.
  if (c.fn === 'recoverLastAssistantFromSession' && pos.prop === 'deadlineMs' && (kind === 'number 1.5' || kind === 'number 42')) return true
  return false
}

function callWith(impl, c, pos, value, root) {
  const args = c.args(root)
  if (pos.prop === undefined) args[pos.i] = value
  else args[pos.i] = { ...args[pos.i], [pos.prop]: value }
  const f = impl[c.fn]
  return { args, call: () => f(...args) }
}

async function runOne(impl, v, root) {
  const { args, call } = callWith(impl, v.c, v.pos, v.make(), root)
  if (v.c.disk) {
    await rmTree(root)
    fs.mkdirSync(root, { recursive: true })
    // One valid entry and one other file, so reads, lists and CAS have something to see.
    const dir = path.join(root, 'state', 'process-matrix')
    fs.mkdirSync(dir, { recursive: true })
    fs.writeFileSync(path.join(dir, 'worker-s1.json'), serialize(entry()))
    fs.mkdirSync(path.join(root, 'sessions'))
    fs.writeFileSync(path.join(root, 'sessions', '2026-01-01T00-00-00-000Z_sid.jsonl'), SESSION_TEXT)
  }
  const cwd = process.cwd()
  fs.mkdirSync(root, { recursive: true })
  process.chdir(root) // relative paths land in the sandbox (and are compared there)
  let out
  try {
    out = await outcome(call, root, v.c.async)
  } finally {
    process.chdir(cwd)
  }
  if (v.c.identityOnly && out.returned && !out.returned.startsWith('undefined')) out = { returned: 'some identity' }
  return {
    out,
    after: v.c.fn === 'appendWorkerSessionArgs' ? args.map((a) => describe(a)) : undefined,
    disk: v.c.disk ? tree(root) : undefined,
  }
}

test('hostile input: every export × every position × every value kind, both backends, vs SPEC reference', async () => {
  ownStartMs = require('../lib/binding.js').loadNative().getProcessIdentity(process.pid).startTimeMs
  delete process.env.PI_CREW_SESSION_RECOVERY
  const base = fs.mkdtempSync(path.join(os.tmpdir(), 'pi-native-hostile-'))
  const refRoot = path.join(base, 'ref')
  const implRoot = path.join(base, 'impl')
  const mismatches = []
  let calls = 0
  try {
    for (const v of variants()) {
      if (skip(v)) continue
      const expected = await runOne(ref, v, refRoot)
      for (const [name, impl] of backends()) {
        const got = await runOne(impl, v, implRoot)
        calls++
        // Paths in messages and results differ only by the sandbox root.
        // Roots appear raw, and doubled by util.inspect (Windows backslashes) in described values.
        const esc = (r) => r.replace(/\\/g, '\\\\')
        const norm = (x) =>
          [implRoot, refRoot, esc(implRoot), esc(refRoot), esc(esc(implRoot)), esc(esc(refRoot))].reduce(
            (acc, r) => acc.split(r).join('<root>'),
            String(JSON.stringify(x)),
          )
        if (norm(got) !== norm(expected)) {
          const where = v.pos.prop === undefined ? `arg ${v.pos.i}` : `arg ${v.pos.i}.${v.pos.prop}`
          const short = (x) => norm({ ...x, disk: undefined }) + (norm(x.disk) === norm(expected.disk) ? '' : ` disk ${norm(x.disk)}`)
          mismatches.push(`${name} ${v.c.fn} ${where} = ${v.kind}\n  expected ${short(expected)}\n  got      ${short(got)}`)
        }
      }
    }
  } finally {
    await rmTree(base)
  }
  const KNOWN = new Set()
  if (process.platform === 'win32') {
    // An empty file path: Node's own Windows rename error names the temp file by its absolute
    // path; the native one names it as given (COMPATIBILITY.md, per-platform table).
    KNOWN.add('native writeFileAtomic arg 0 = empty string')
    KNOWN.add('native writeFileAtomicSync arg 0 = empty string')
  }
  const unexpected = mismatches.filter((m) => !KNOWN.has(m.split('\n')[0]))
  if (unexpected.length) {
    assert.fail(`${unexpected.length} of ${calls} calls differ from the reference:\n${unexpected.join('\n')}`)
  }
  assert.ok(calls > 1500, `only ${calls} calls`)
})

test('hostile input: resolveSessionRecoveryEnabled reads process.env at call time, both backends', () => {
  for (const [name, impl] of backends()) {
    for (const raw of [undefined, '', ' yes\u00a0', 'NO', 'off', '1', '\ufefftrue']) {
      if (raw === undefined) delete process.env.PI_CREW_SESSION_RECOVERY
      else process.env.PI_CREW_SESSION_RECOVERY = raw
      for (const [, make] of KINDS) {
        const value = make()
        const want = ref.resolveSessionRecoveryEnabled(value)
        assert.equal(impl.resolveSessionRecoveryEnabled(value), want, `${name} env=${JSON.stringify(raw)}`)
      }
    }
  }
  delete process.env.PI_CREW_SESSION_RECOVERY
})
