'use strict'
// Per-platform semantics (SPEC C0–C4, B18, B19, G6) checked against Node's own oracles on
// whatever platform runs the suite: Linux x64 natively, Linux arm64 under qemu, Windows x64
// under Wine (scripts/test-arm64.sh, scripts/test-windows.sh). Every assertion holds on every
// platform; where the platforms differ, the expected value comes from Node on that platform.
const test = require('node:test')
const assert = require('node:assert/strict')
const { spawn } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const lockfile = require('proper-lockfile')
const { backends, liveChild } = require('./helpers.js')
const { makeEntry, tempAgentDir } = require('./store-fixtures.js')

/** process.kill(pid, 0) as an outcome: 'ok' or the error code. */
function nodeProbe(pid) {
  try {
    process.kill(pid, 0)
    return 'ok'
  } catch (err) {
    return err.code
  }
}

/** The pid of a child (this very Node binary, so it exists on every platform) after it exited. */
async function exitedChildPid() {
  const child = spawn(process.execPath, ['-e', ''], { stdio: 'ignore' })
  await new Promise((r) => child.once('exit', r))
  return child.pid
}

const lib = {
  liveness: require('../lib/liveness.js'),
  store: require('../lib/process-matrix-store.js'),
  atomic: require('../lib/atomic-file.js'),
}

test(`the native backend is loaded on ${process.platform}-${process.arch}`, () => {
  assert.equal(require('../lib/binding.js').backend, 'native')
})

/** C1–C3 written from SPEC.md on top of process.kill: the oracle on every platform. */
const oracle = {
  isReloadSessionProcessAlive(pid) {
    if (typeof pid !== 'number' || !Number.isFinite(pid) || pid <= 0) return false
    const r = probeOutcome(pid)
    return r === 'ok' || r.code === 'EPERM'
  },
  defaultIsPidAlive(owner) {
    if (owner.hostname !== os.hostname()) return true
    const r = probeOutcome(owner.pid)
    return r === 'ok' || r.code === 'EPERM'
  },
  checkProcessLiveness(pid) {
    if (pid === undefined || !Number.isInteger(pid) || pid <= 0) return { pid, alive: false, detail: 'no pid recorded' }
    const r = probeOutcome(pid)
    if (r === 'ok') return { pid, alive: true, detail: 'process is alive' }
    if (r.code === 'EPERM') return { pid, alive: true, detail: 'process exists but permission is denied' }
    if (r.code === 'ESRCH') return { pid, alive: false, detail: 'process does not exist' }
    return { pid, alive: false, detail: r.message }
  },
}

function probeOutcome(pid) {
  try {
    process.kill(pid, 0)
    return 'ok'
  } catch (err) {
    return err
  }
}

for (const [name, s] of backends()) {
  test(`${name}: C1–C3 agree with process.kill on pids in every state and shape`, async () => {
    const child = liveChild(30)
    await new Promise((r) => child.once('spawn', r))
    const gone = await exitedChildPid()
    const pids = [process.pid, process.ppid, child.pid, gone, 0, -1, -process.pid, 1, 4, 1.5, -0, 2 ** 31, 2 ** 31 - 1,
      -(2 ** 31), NaN, Infinity, 1e21, undefined, null, '12', String(process.pid), true, {}, 4194305, 99999]
    try {
      for (const pid of pids) {
        const label = `pid=${typeof pid === 'string' ? JSON.stringify(pid) : String(pid)}`
        assert.deepStrictEqual(s.isReloadSessionProcessAlive(pid), oracle.isReloadSessionProcessAlive(pid), `C1 ${label}`)
        const c3 = s.checkProcessLiveness(pid)
        assert.deepStrictEqual(c3, oracle.checkProcessLiveness(pid), `C3 ${label}`)
        assert.deepStrictEqual(Object.keys(c3), ['pid', 'alive', 'detail'])
        for (const hostname of [os.hostname(), `${os.hostname()}-other`, os.hostname().toUpperCase(), undefined]) {
          const owner = { pid, hostname }
          assert.equal(s.defaultIsPidAlive(owner), oracle.defaultIsPidAlive(owner), `C2 ${label} host=${hostname}`)
        }
      }
    } finally {
      child.kill()
    }
  })

  test(`${name}: kill probe agrees with process.kill (own pid, pid 0, exited child)`, async () => {
    const gone = await exitedChildPid()
    for (const pid of [process.pid, 0, gone]) {
      const want = nodeProbe(pid)
      const c3 = s.checkProcessLiveness(pid)
      if (pid <= 0) {
        assert.equal(c3.detail, 'no pid recorded')
      } else if (want === 'ok') {
        assert.deepEqual(c3, { pid, alive: true, detail: 'process is alive' })
      } else {
        assert.equal(want, 'ESRCH')
        assert.deepEqual(c3, { pid, alive: false, detail: 'process does not exist' })
      }
      assert.equal(s.defaultIsPidAlive({ hostname: os.hostname(), pid }), want === 'ok' || want === 'EPERM')
      assert.equal(s.isReloadSessionProcessAlive(pid), pid > 0 && (want === 'ok' || want === 'EPERM'))
    }
    assert.equal(s.probePid(process.pid), 'alive')
    assert.equal(s.probePid(gone), 'dead')
  })

  test(`${name}: defaultIsPidAlive compares with os.hostname() exactly`, async () => {
    const gone = await exitedChildPid()
    assert.equal(s.defaultIsPidAlive({ hostname: os.hostname(), pid: gone }), false)
    assert.equal(s.defaultIsPidAlive({ hostname: `${os.hostname()}x`, pid: gone }), true)
  })

  // The JS fallback's identity API reads /proc only (its legacy C4 spawns ps / PowerShell).
  const noJsIdentity = name === 'js' && process.platform !== 'linux' && 'the JS backend reads start times from /proc only'
  test(`${name}: start times are the real process start on ${process.platform}`, { skip: noJsIdentity }, () => {
    const started = Date.now() - process.uptime() * 1000
    const id = s.getProcessIdentity(process.pid)
    assert.equal(id.pid, process.pid)
    // Generous bound: the clock estimate and the OS record differ by scheduling only.
    assert.ok(Math.abs(id.startTimeMs - started) < 5000, `${id.startTimeMs} vs ${started}`)
    assert.equal(s.isSameProcess({ pid: process.pid, startTimeMs: id.startTimeMs }), true)
    assert.equal(s.isSameProcess({ pid: process.pid, startTimeMs: id.startTimeMs - 1000 }), false)
    const legacy = s.getProcessStartTime(process.pid)
    assert.equal(typeof legacy, 'number')
    if (process.platform === 'linux') return // floor(ticks × 100): covered by liveness.test.js
    // darwin and win32: epoch ms at whole-second resolution (the originals parse `ps` /
    // PowerShell date text).
    assert.equal(legacy % 1000, 0)
    assert.equal(legacy, Math.floor(id.startTimeMs / 1000) * 1000)
  })
}

test('paths are the host platform\'s path.join / path.resolve (G6)', () => {
  const s = lib.store
  for (const a of ['agent', path.join(os.tmpdir(), 'a'), 'x/../y//z', `.${path.sep}rel`]) {
    assert.equal(s.processMatrixDir(a), path.join(a, 'state', 'process-matrix'))
    assert.equal(s.entryPath(a, 'master-s'), path.join(a, 'state', 'process-matrix', 'master-s.json'))
  }
})

test('atomic write: content, mode as fs.writeFileSync applies it, no temp left (B19)', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pi-native-platform-'))
  const target = path.join(dir, 'sub', 'f.json')
  lib.atomic.writeFileAtomicSync(target, 'one')
  lib.atomic.writeFileAtomicSync(target, 'two')
  assert.equal(fs.readFileSync(target, 'utf8'), 'two')
  assert.deepEqual(fs.readdirSync(path.dirname(target)), ['f.json'])
  // A read-only mode: Node's own create with the same mode is the oracle.
  const ro = path.join(dir, 'ro.json')
  const oracle = path.join(dir, 'oracle.json')
  lib.atomic.writeFileAtomicSync(ro, 'x', { mode: 0o444 })
  fs.writeFileSync(oracle, 'x', { mode: 0o444, flag: 'wx' })
  assert.equal(fs.statSync(ro).mode, fs.statSync(oracle).mode)
  for (const f of [ro, oracle]) fs.chmodSync(f, 0o666)
  fs.rmSync(dir, { recursive: true, force: true })
})

test('locks: the directory proper-lockfile uses, contention both ways (B18, L1)', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pi-native-platform-'))
  const file = path.join(dir, 'locked.json')
  const lockDir = `${path.resolve(file)}.lock`
  lib.atomic.withFileLockSync(file, () => {
    assert.ok(fs.statSync(lockDir).isDirectory())
    assert.equal(lockfile.checkSync(file, { realpath: false }), true)
  })
  assert.equal(fs.existsSync(lockDir), false)
  const release = lockfile.lockSync(file, { realpath: false })
  // Two attempts 25 ms apart: well inside the 2 s staleness of the foreign lock.
  assert.throws(() => lib.atomic.withFileLockSync(file, () => 1, { retries: 1 }), { code: 'ELOCKED' })
  release()
  assert.equal(lib.atomic.withFileLockSync(file, () => 7), 7)
  fs.rmSync(dir, { recursive: true, force: true })
})

test('store round trip: native writes, the JS backend reads the same entry', async () => {
  const [[, native], [, js]] = backends()
  const a = tempAgentDir()
  const e = makeEntry('worker', 'plat-1')
  await native.writeEntry(a, e)
  assert.deepStrictEqual(await js.readEntry(a, e.entryId), e)
  assert.deepStrictEqual(await native.listEntries(a), [e])
  assert.equal(native.writeEntryIfUnchangedSync(a, e, { ...e, status: 'closed' }), true)
  assert.equal((await js.readEntry(a, e.entryId)).status, 'closed')
  await native.removeEntry(a, e.entryId)
  assert.deepStrictEqual(await js.listEntries(a), [])
})

test('fs errors carry the platform\'s code, errno and message (rename over a directory)', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pi-native-platform-'))
  const target = path.join(dir, 'd.json')
  fs.mkdirSync(path.join(target, 'inner'), { recursive: true })
  const src = path.join(dir, 'src.tmp')
  fs.writeFileSync(src, 'x')
  let want
  try {
    fs.renameSync(src, target)
  } catch (err) {
    want = err
  }
  let got
  try {
    lib.atomic.writeFileAtomicSync(target, 'x')
  } catch (err) {
    got = err
  }
  assert.ok(want && got)
  // EISDIR -21 on Linux, EISDIR -21 on macOS, EPERM -4048 on Windows: Node's own numbers.
  for (const key of ['code', 'errno', 'syscall']) assert.equal(got[key], want[key], key)
  assert.equal(got.message.split(',')[0], want.message.split(',')[0])
  assert.equal(got.dest, target)
  assert.deepEqual(fs.readdirSync(dir).sort(), ['d.json', 'src.tmp'])
  fs.rmSync(dir, { recursive: true, force: true })
})
