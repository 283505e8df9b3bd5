'use strict'
// Differential tests of pi-native/liveness against Node itself: an oracle written straight
// from SPEC.md §2.C that calls process.kill(pid, 0), over a generated set of pids in known
// states, for both backends.
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { spawnSync } = require('node:child_process')
const { Worker } = require('node:worker_threads')
const { backends, liveChild, reapedPid, zombie, worldReadableCopy, worldExecutableNode, sleep, root } = require('./helpers.js')

// Windows: the fixtures here are POSIX processes (an `sh` that leaves a zombie, /proc reads) and
// the oracle's C4 spawns PowerShell, which Wine lacks. Windows liveness is checked against
// process.kill by platform.test.js instead.
if (process.platform === 'win32') {
  test('liveness differential suite', { skip: 'POSIX fixtures (zombies, /proc); see platform.test.js' }, () => {})
  return
}

// ---- the oracle: SPEC C0–C4 verbatim, built on process.kill --------------------------------

/** Outcome of process.kill(pid, 0): 'ok' or the thrown error. */
function kill0(pid) {
  try {
    process.kill(pid, 0)
    return 'ok'
  } catch (err) {
    return err
  }
}
const aliveOrEperm = (r) => r === 'ok' || (r instanceof Error && r.code === 'EPERM')

const oracle = {
  isReloadSessionProcessAlive(pid) {
    if (pid === undefined || typeof pid !== 'number' || !Number.isFinite(pid) || pid <= 0) return false
    return aliveOrEperm(kill0(pid))
  },
  defaultIsPidAlive(owner) {
    return owner.hostname !== os.hostname() ? true : aliveOrEperm(kill0(owner.pid))
  },
  checkProcessLiveness(pid) {
    if (pid === undefined || !Number.isInteger(pid) || pid <= 0) return { pid, alive: false, detail: 'no pid recorded' }
    const r = kill0(pid)
    if (r === 'ok') return { pid, alive: true, detail: 'process is alive' }
    const detail = {
      EPERM: 'process exists but permission is denied',
      ESRCH: 'process does not exist',
    }[r.code]
    return { pid, alive: r.code === 'EPERM', detail: detail ?? r.message }
  },
  getProcessStartTime(pid) {
    if (kill0(pid) !== 'ok') return undefined
    let text
    try {
      text = fs.readFileSync(`/proc/${pid}/stat`, 'utf8')
    } catch {
      return undefined
    }
    const i = text.lastIndexOf(')')
    if (i < 0) return undefined
    const n = Number(text.slice(i + 1).trim().split(/\s+/)[19])
    return Number.isFinite(n) ? Math.floor(n * 100) : undefined
  },
}

/** The generated pid set: every shape SPEC C0–C4 distinguishes, plus random pids. */
function pidValues(extra) {
  const values = [
    process.pid,
    process.ppid,
    0,
    -0,
    -1,
    1,
    1.5,
    -1.5,
    2 ** 31,
    2 ** 31 - 1,
    -(2 ** 31),
    2 ** 32 + process.pid,
    1e21,
    Number.MAX_SAFE_INTEGER,
    NaN,
    Infinity,
    -Infinity,
    undefined,
    null,
    true,
    false,
    '',
    ' ',
    'abc',
    String(process.pid),
    ` ${process.pid} `,
    `0x${process.pid.toString(16)}`,
    '1.5',
    [],
    [process.pid],
    {},
    { valueOf: () => process.pid },
    ...extra,
  ]
  // Seeded pseudo-random pids across the pid space (most dead, some alive).
  let seed = 0x5eed
  for (let i = 0; i < 60; i++) {
    seed = (seed * 1103515245 + 12345) & 0x7fffffff
    values.push(1 + (seed % 4194304))
  }
  return values
}

/** deepStrictEqual plus same own-key order (the spec fixes property order). */
function assertSame(actual, expected, label) {
  assert.deepStrictEqual(actual, expected, label)
  if (actual && typeof actual === 'object') assert.deepStrictEqual(Object.keys(actual), Object.keys(expected), label)
}

const describeValue = (v) => (typeof v === 'string' ? JSON.stringify(v) : typeof v === 'object' && v ? `object ${JSON.stringify(v)}` : String(v))

let fixtures
test.before(async () => {
  const children = [liveChild(), liveChild()]
  const reaped = [await reapedPid(), await reapedPid()]
  const z = await zombie()
  fixtures = { children, reaped, zombie: z, pids: [...children.map((c) => c.pid), ...reaped, z.pid] }
})
test.after(() => {
  for (const c of fixtures.children) c.kill('SIGKILL')
  fixtures.zombie.holder.kill('SIGKILL')
})

for (const [name, impl] of backends()) {
  test(`${name}: legacy functions agree with process.kill on every generated pid`, () => {
    const host = os.hostname()
    let compared = 0
    for (const pid of pidValues(fixtures.pids)) {
      const label = `${name} pid=${describeValue(pid)}`
      assertSame(impl.isReloadSessionProcessAlive(pid), oracle.isReloadSessionProcessAlive(pid), `C1 ${label}`)
      assertSame(impl.checkProcessLiveness(pid), oracle.checkProcessLiveness(pid), `C3 ${label}`)
      assertSame(impl.getProcessStartTime(pid), oracle.getProcessStartTime(pid), `C4 ${label}`)
      for (const owner of [
        { pid, hostname: host, token: 't', acquiredAt: 'x' },
        { pid, hostname: 'some-other-host', token: 't', acquiredAt: 'x' },
        { pid, hostname: host.toUpperCase() === host ? host.toLowerCase() : host.toUpperCase() },
        { pid },
        { pid, hostname: 42 },
      ]) {
        assertSame(impl.defaultIsPidAlive(owner), oracle.defaultIsPidAlive(owner), `C2 ${label} host=${owner.hostname}`)
      }
      compared++
    }
    assert.ok(compared > 90)
  })

  test(`${name}: known states give the documented legacy answers`, () => {
    const [child] = fixtures.children
    assert.equal(impl.isReloadSessionProcessAlive(child.pid), true)
    assert.deepEqual(impl.checkProcessLiveness(fixtures.reaped[0]), {
      pid: fixtures.reaped[0],
      alive: false,
      detail: 'process does not exist',
    })
    // Zombies answer kill(pid, 0): the legacy functions keep calling them alive (W-C1 kept).
    assert.equal(impl.isReloadSessionProcessAlive(fixtures.zombie.pid), true)
    assert.deepEqual(impl.checkProcessLiveness(undefined), { pid: undefined, alive: false, detail: 'no pid recorded' })
    assert.ok(Object.hasOwn(impl.checkProcessLiveness(undefined), 'pid'))
    assert.equal(
      impl.checkProcessLiveness(2 ** 31).detail,
      'The "pid" argument must be of type number. Received type number (2147483648)',
    )
    // pid 0 / -1 are not guarded in defaultIsPidAlive (W-C3 kept).
    assert.equal(impl.defaultIsPidAlive({ pid: 0, hostname: os.hostname() }), true)
    assert.throws(() => impl.defaultIsPidAlive(undefined), {
      name: 'TypeError',
      message: "Cannot read properties of undefined (reading 'hostname')",
    })
    // Legacy unit: floor(ticks × 100), not milliseconds.
    const stat = fs.readFileSync(`/proc/${child.pid}/stat`, 'utf8')
    const ticks = Number(stat.slice(stat.lastIndexOf(')') + 1).trim().split(/\s+/)[19])
    assert.equal(impl.getProcessStartTime(child.pid), Math.floor(ticks * 100))
    assert.equal(impl.getProcessStartTime(fixtures.reaped[0]), undefined)
  })

  test(`${name}: probePid tells alive, dead, zombie and invalid apart`, () => {
    assert.equal(impl.probePid(process.pid), 'alive')
    assert.equal(impl.probePid(fixtures.children[0].pid), 'alive')
    assert.equal(impl.probePid(fixtures.reaped[0]), 'dead')
    assert.equal(impl.probePid(fixtures.zombie.pid), 'zombie')
    for (const bad of [0, -1, 1.5, 2 ** 31, NaN, Infinity]) assert.equal(impl.probePid(bad), 'invalid', String(bad))
    const pids = [process.pid, fixtures.reaped[1], fixtures.zombie.pid, 0]
    assert.deepEqual(impl.probePids(pids), pids.map((p) => impl.probePid(p)))
  })

  test(`${name}: new APIs throw a TypeError naming the argument`, () => {
    for (const bad of [undefined, null, '1', {}, 1n]) {
      assert.throws(() => impl.probePid(bad), { name: 'TypeError', message: /"pid"/ })
      assert.throws(() => impl.getProcessIdentity(bad), { name: 'TypeError', message: /"pid"/ })
    }
    assert.throws(() => impl.probePids('1,2'), { name: 'TypeError', message: /"pids"/ })
    assert.throws(() => impl.probePids([1, '2']), { name: 'TypeError', message: /"pids\[1\]"/ })
    for (const bad of [undefined, null, 5, { pid: 1 }, { pid: '1', startTimeMs: 1 }]) {
      assert.throws(() => impl.isSameProcess(bad), { name: 'TypeError', message: /"identity"/ })
    }
  })

  test(`${name}: identity start time is the real start, and reuse/exit is detected`, async () => {
    const before = Date.now()
    const child = liveChild(30)
    await new Promise((r) => child.once('spawn', r))
    const after = Date.now()
    const id = impl.getProcessIdentity(child.pid)
    assert.equal(id.pid, child.pid)
    assert.equal(id.state, 'alive')
    assert.ok(id.startTimeMs >= before - 2000 && id.startTimeMs <= after + 2000, `${id.startTimeMs} vs ${before}..${after}`)
    assert.equal(impl.isSameProcess(id), true)
    assert.equal(impl.isSameProcess({ pid: id.pid, startTimeMs: id.startTimeMs - 10 }), false, 'reused pid')
    child.kill('SIGKILL')
    await new Promise((r) => child.once('exit', r))
    assert.equal(impl.isSameProcess(id), false)
    assert.equal(impl.getProcessIdentity(child.pid), undefined)
    const zid = impl.getProcessIdentity(fixtures.zombie.pid)
    assert.equal(zid.state, 'zombie')
    assert.equal(impl.isSameProcess(zid), false)
  })

  // Native keeps per-process answers (start times, stat handles): a pid that has been reaped and
  // handed to a new process must be answered for the new one. ns_last_pid steers the kernel's
  // next pid; it needs root (CAP_SYS_ADMIN) and another fork may take the number first, so it is
  // retried, and the test skips only when the number cannot be reused at all.
  test(`${name}: a reused pid is answered for its new process`, { skip: process.platform !== 'linux' && 'ns_last_pid is Linux-only' }, async (t) => {
    const lastPid = '/proc/sys/kernel/ns_last_pid'
    const first = liveChild(30)
    await new Promise((r) => first.once('spawn', r))
    const pid = first.pid
    const old = { c4: impl.getProcessStartTime(pid), id: impl.getProcessIdentity(pid) }
    assert.equal(old.c4, oracle.getProcessStartTime(pid))
    assert.equal(impl.getProcessStartTime(pid), old.c4, 'asked again, same process')
    first.kill('SIGKILL')
    await new Promise((r) => first.once('exit', r))
    assert.equal(impl.getProcessStartTime(pid), undefined, 'reaped')
    // The legacy unit has clock-tick (10 ms) resolution: start the next process ticks later.
    await sleep(50)
    let second
    for (let attempt = 0; attempt < 50 && !second; attempt++) {
      try {
        fs.writeFileSync(lastPid, String(pid - 1))
      } catch (err) {
        t.skip(`cannot steer pids (${err.code}: needs root)`)
        return
      }
      const c = liveChild(30)
      await new Promise((r) => c.once('spawn', r))
      if (c.pid === pid) second = c
      else c.kill('SIGKILL')
    }
    if (!second) {
      t.skip(`pid ${pid} was not handed out again in 50 tries`)
      return
    }
    try {
      const c4 = impl.getProcessStartTime(pid)
      assert.equal(c4, oracle.getProcessStartTime(pid))
      assert.notEqual(c4, old.c4, 'the new process started later')
      assert.equal(impl.getProcessStartTime(pid), c4, 'and it is kept for the new process')
      assert.equal(impl.isSameProcess(old.id), false)
      assert.equal(impl.getProcessIdentity(pid).startTimeMs > old.id.startTimeMs, true)
    } finally {
      second.kill('SIGKILL')
    }
  })
}

test('the binding\'s kill0 answers as process.kill(pid, 0) and refuses a non-number', () => {
  const binding = require('../index.js')
  const pids = [process.pid, process.ppid, 0, -1, 1, 2 ** 31 - 1, -(2 ** 31), ...fixtures.pids]
  for (const pid of pids) {
    const r = kill0(pid)
    assert.equal(binding.kill0(pid), r === 'ok' ? 0 : r.errno, `pid ${pid}`)
  }
  for (const bad of [[], ['1'], [undefined], [null]]) {
    assert.throws(() => binding.kill0(...bad), { code: 'NumberExpected' }, `kill0(${bad.map(String)})`)
  }
})

test('native and js backends agree on identities', () => {
  const [[, native], [, js]] = backends()
  for (const pid of [process.pid, process.ppid, fixtures.children[0].pid, fixtures.zombie.pid]) {
    assert.deepEqual(native.getProcessIdentity(pid), js.getProcessIdentity(pid))
  }
})

test('EPERM: under an unprivileged uid, pid 1 and root processes are "alive but not ours"', { skip: process.getuid?.() !== 0 && 'needs root to drop privileges' }, () => {
  const dir = worldReadableCopy()
  try {
    const script = `
      const os = require('os')
      const { loadNative, loadJs } = require(${JSON.stringify(path.join(dir, 'lib', 'binding.js'))})
      const kill0 = (pid) => { try { process.kill(pid, 0); return 'ok' } catch (e) { return e.code } }
      const out = { raw: {}, native: {}, js: {} }
      for (const pid of [1, ${process.pid}]) {
        out.raw[pid] = kill0(pid)
        for (const [n, impl] of [['native', loadNative()], ['js', loadJs()]]) {
          out[n][pid] = {
            c1: impl.isReloadSessionProcessAlive(pid),
            c2: impl.defaultIsPidAlive({ pid, hostname: os.hostname() }),
            c3: impl.checkProcessLiveness(pid),
            c4: impl.getProcessStartTime(pid),
            probe: impl.probePid(pid),
          }
        }
      }
      console.log(JSON.stringify(out))`
    const r = spawnSync(worldExecutableNode(dir), ['-e', script], { uid: 65534, gid: 65534, encoding: 'utf8', cwd: dir })
    assert.equal(r.error, undefined, String(r.error))
    assert.equal(r.status, 0, r.stderr)
    const out = JSON.parse(r.stdout)
    for (const pid of ['1', String(process.pid)]) {
      assert.equal(out.raw[pid], 'EPERM', 'the oracle itself must see EPERM')
      const expected = {
        c1: true,
        c2: true,
        c3: { pid: Number(pid), alive: true, detail: 'process exists but permission is denied' },
        probe: 'eperm',
      }
      for (const n of ['native', 'js']) assert.deepEqual(out[n][pid], expected, `${n} pid ${pid}`)
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
})

test('the public modules: subpath, root, ESM, backend and writable exports', async () => {
  const sub = require('pi-native/liveness')
  const rootMod = require('pi-native')
  assert.equal(rootMod.backend, 'native')
  assert.equal(rootMod.probePid, sub.probePid)
  const esm = await import('pi-native/liveness')
  assert.equal(esm.isReloadSessionProcessAlive(process.pid), true)
  const esmRoot = await import('pi-native')
  assert.equal(esmRoot.backend, 'native')
  const desc = Object.getOwnPropertyDescriptor(sub, 'checkProcessLiveness')
  assert.equal(desc.writable, true)
  assert.equal(desc.configurable, true)
})

test('PI_NATIVE_BACKEND=js forces the fallback; a missing binary falls back with one warning', () => {
  const forced = spawnSync(process.execPath, ['-e', "const m=require('pi-native'); console.log(m.backend, m.probePid(process.pid))"], {
    cwd: root,
    env: { ...process.env, PI_NATIVE_BACKEND: 'js' },
    encoding: 'utf8',
  })
  assert.equal(forced.stdout.trim(), 'js alive', forced.stderr)

  // A copy without the .node file: the loader must warn once and use js/.
  const dir = worldReadableCopy()
  try {
    const binaries = fs.readdirSync(dir).filter((n) => n.endsWith('.node'))
    for (const n of binaries) fs.rmSync(path.join(dir, n))
    const r = spawnSync(
      process.execPath,
      ['-e', "const m=require('./lib/index.js'); require('./lib/liveness.js'); console.log(m.backend, m.isReloadSessionProcessAlive(process.pid))"],
      { cwd: dir, encoding: 'utf8', env: { ...process.env, PI_NATIVE_BACKEND: '' } },
    )
    assert.equal(r.stdout.trim(), 'js true')
    assert.equal(r.stderr.match(/PI_NATIVE_JS_FALLBACK/g)?.length, 1, r.stderr)

    // A binary that exists but cannot be loaded: __test__/binary-load.test.js.
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
})

test('worker_threads: a worker loads the addon, uses it and exits, twice', async () => {
  for (let round = 0; round < 2; round++) {
    const worker = new Worker(
      `const { parentPort } = require('node:worker_threads')
       const m = require(${JSON.stringify(path.join(root, 'lib', 'index.js'))})
       parentPort.postMessage({ backend: m.backend, state: m.probePid(process.pid), alive: m.checkProcessLiveness(process.pid).alive })`,
      { eval: true },
    )
    // Listen for 'exit' from the start: a worker that exits quickly has its last message drained
    // and 'exit' emitted in one go, before a listener added after 'message' could see it.
    const exited = new Promise((r) => worker.once('exit', r))
    const msg = await new Promise((resolve, reject) => {
      worker.once('message', resolve)
      worker.once('error', reject)
    })
    assert.deepEqual(msg, { backend: 'native', state: 'alive', alive: true })
    assert.equal(await exited, 0)
  }
  await sleep(10)
  assert.equal(require('pi-native').probePid(process.pid), 'alive')
})
