'use strict'
// What a review of the lock and settle code found, each pinned by the behaviour it breaks:
// - a refresh that stalls between its check and its touch must not adopt the lock of the
//   process that took over (strace delays the holder's touch by 3 s);
// - waiters share one inotify instance per process, and still succeed when the kernel refuses
//   every instance;
// - a recovery promise whose settling side ends without an answer rejects instead of keeping
//   its process alive forever.
// Native backend.
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { spawn, spawnSync } = require('node:child_process')
const { root, sleep } = require('./helpers.js')

const native = require('../lib/native.js')
const binding = require('../index.js')

const made = []
const tmp = (name) => {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), `pi-native-${name}-`))
  made.push(d)
  return d
}
test.after(() => {
  for (const d of made) fs.rmSync(d, { recursive: true, force: true })
})

const has = (cmd, args = ['--version']) => spawnSync(cmd, args, { stdio: 'ignore' }).status === 0
const linux = process.platform === 'linux'

/** Start a node script (argv[1] = a JSON argument); lines of its stdout are JSON messages. */
function start(prefix, script, arg, env = {}) {
  const file = path.join(tmp('script'), 'child.js')
  fs.writeFileSync(file, script)
  const child = spawn(prefix[0] ?? process.execPath, [...prefix.slice(1), ...(prefix.length ? [process.execPath] : []), file, JSON.stringify(arg)], {
    env: { ...process.env, PI_NATIVE_BACKEND: 'native', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  const messages = []
  const waiters = []
  let buf = ''
  let err = ''
  child.stdout.on('data', (d) => {
    buf += d
    for (let i = buf.indexOf('\n'); i >= 0; i = buf.indexOf('\n')) {
      const m = JSON.parse(buf.slice(0, i))
      buf = buf.slice(i + 1)
      messages.push(m)
      for (const w of waiters.splice(0)) w()
    }
  })
  child.stderr.on('data', (d) => (err += d))
  const done = new Promise((resolve) => child.once('close', (code) => resolve({ code, messages, err })))
  /** Resolves with the first message `pick` accepts (waiting for it if need be). */
  const when = async (pick) => {
    for (;;) {
      const m = messages.find(pick)
      if (m) return m
      if (child.exitCode !== null) throw new Error(`child exited (${child.exitCode}) without it: ${err}`)
      await new Promise((r) => {
        waiters.push(r)
        setTimeout(r, 200)
      })
    }
  }
  return { child, done, when }
}

const HOLD = `
const { withFileLock } = require(${JSON.stringify(root)})
const [file, ms] = JSON.parse(process.argv[2])
const say = (m) => process.stdout.write(JSON.stringify(m) + '\\n')
withFileLock(file, async () => {
  say({ in: Date.now() })
  await new Promise((r) => setTimeout(r, ms))
  say({ out: Date.now() })
  return 'done'
}).then((r) => say({ ok: r }), (e) => say({ error: e.code || e.message }))
`

test(
  'a refresh stalled 3 s between its check and its touch gets ECOMPROMISED and leaves the taker alone',
  { skip: !linux ? 'strace fault injection: Linux only' : !has('strace', ['-V']) && 'strace is not installed', timeout: 60_000 },
  async () => {
    const file = path.join(tmp('stall'), 'f.json')
    // A: every utimensat after its first (the lock's token, set as it is made) lands 3 s after
    // it is made: its refreshes' futimens.
    const a = start(['strace', '-f', '-qq', '-o', '/dev/null', '-e', 'trace=utimensat', '-e', 'inject=utimensat:delay_enter=3000000:when=2+'], HOLD, [file, 9000])
    const aIn = await a.when((m) => 'in' in m)
    await sleep(Math.max(0, aIn.in + 2600 - Date.now()))
    // B: takes the lock over once A's mtime is 2 s old (legitimately: A has not refreshed).
    const b = start([], HOLD, [file, 4000])
    const [ra, rb] = await Promise.all([a.done, b.done])
    const result = (r) => r.messages.find((m) => 'ok' in m || 'error' in m)
    assert.deepEqual(result(rb), { ok: 'done' }, `B keeps its lock and its result: ${rb.err}`)
    assert.deepEqual(result(ra), { error: 'ECOMPROMISED' }, `A is told: ${ra.err}`)
    const bIn = rb.messages.find((m) => 'in' in m).in
    assert.ok(bIn - aIn.in >= 2000, 'B took over only after the stale threshold')
    assert.ok(!fs.existsSync(`${file}.lock`), 'nothing left behind')
  },
)

// A lock directory this process made and then could not remove. Its set-up failed (the network
// rule's precision probe: utimensat), and so did the clean-up's rmdir, for longer than the
// transient retries last: an smbnetfs EIO window, seen in CI, where the directory then kept
// every caller out (its own maker too) until stale plus the attribute-cache bound. strace fails
// the first utimensat with EIO, and holds the first rmdir 7 s before failing it with EIO. The
// calls are synchronous: strace counts per thread, and all of them run on the JS thread.
const ORPHAN = `
const { withFileLockSync } = require(${JSON.stringify(root)})
const [file] = JSON.parse(process.argv[2])
const say = (m) => process.stdout.write(JSON.stringify(m) + '\\n')
for (let i = 0; i < 2; i++) {
  const started = Date.now()
  try {
    say({ ok: withFileLockSync(file, () => 'done'), ms: Date.now() - started })
  } catch (e) {
    say({ error: e.code || e.message, syscall: e.syscall, ms: Date.now() - started })
  }
}
`
test(
  'native: a lock directory its own failed clean-up left behind is removed by the next call, not waited out',
  { skip: !linux ? 'strace fault injection: Linux only' : !has('strace', ['-V']) && 'strace is not installed', timeout: 60_000 },
  async () => {
    const file = path.join(tmp('orphan'), 'f.json')
    const lock = `${file}.lock`
    // rmdir, or unlinkat(AT_REMOVEDIR) where there is no rmdir syscall (arm64, under qemu).
    const traced = ['strace', '-f', '-qq', '-o', '/dev/null', '-e', 'trace=utimensat,rmdir,unlinkat', '-e', 'inject=utimensat:error=EIO:when=1', '-e', 'inject=rmdir,unlinkat:error=EIO:delay_enter=7000000:when=1', '-P', lock]
    const env = { PI_NATIVE_LOCK_FS: 'network', PI_NATIVE_ATTRIBUTE_CACHE_MS: '60000' }
    const { messages, err } = await start(traced, ORPHAN, [file], env).done
    assert.equal(messages.length, 2, err)
    const [first, second] = messages
    // The first call fails with its set-up's error (as the original's would), after the
    // clean-up's rmdir was held and refused.
    assert.deepEqual([first.error, first.syscall], ['EIO', 'utime'], JSON.stringify(first))
    assert.ok(first.ms >= 6900, `the clean-up's rmdir was held (the call took ${first.ms} ms)`)
    // The second finds the directory the first left, knows it for its own, and takes the lock
    // at once (it used to wait out stale plus the 60 s bound: ELOCKED).
    assert.equal(second.ok, 'done', JSON.stringify(second))
    assert.ok(!fs.existsSync(lock), 'nothing left behind')
  },
)

// Two takers of one stale lock (L3's check-then-remove race, open in proper-lockfile's protocol):
// the later one's rmdir can remove the directory the first has just made, before the first
// stamps it. The first's stamp then meets ENOENT. Its lock was taken from under it: contention,
// retried on the schedule (a sync CAS used to throw `ENOENT, utime`, seen in CI on SMB, where
// two writers waited out one lock together). strace holds the CAS's first stamp of the lock
// directory 3 s; meanwhile the test removes the directory, as the other taker would.
const CAS_SYNC = `
const lib = require(${JSON.stringify(path.join(root, 'lib', 'index.js'))})
const [agentDir, file] = JSON.parse(process.argv[2])
const say = (m) => process.stdout.write(JSON.stringify(m) + '\\n')
const cur = JSON.parse(require('node:fs').readFileSync(file, 'utf8'))
try {
  say({ ok: lib.writeEntryIfUnchangedSync(agentDir, cur, { ...cur, taskRef: 'bumped' }) })
} catch (e) {
  say({ error: e.code || e.message, syscall: e.syscall })
}
`
test(
  'native: a sync CAS whose new lock directory another taker removed before its stamp retries, not ENOENT',
  { skip: !linux ? 'strace fault injection: Linux only' : !has('strace', ['-V']) && 'strace is not installed', timeout: 60_000 },
  async () => {
    const { makeEntry } = require('./store-fixtures.js')
    const agentDir = tmp('robbed')
    const entry = makeEntry('worker', 'robbed', { taskRef: 'first' })
    await native.writeEntry(agentDir, entry)
    const file = native.entryPath(agentDir, entry.entryId)
    const lock = `${file}.lock`
    const traced = ['strace', '-f', '-qq', '-o', '/dev/null', '-e', 'trace=utimensat', '-e', 'inject=utimensat:delay_enter=3000000:when=1', '-P', lock]
    const c = start(traced, CAS_SYNC, [agentDir, file])
    // The directory made, its stamp held: removed, as by the other taker's rmdir.
    const deadline = Date.now() + 20_000
    while (!fs.existsSync(lock)) {
      assert.ok(Date.now() < deadline && c.child.exitCode === null, 'the CAS made its lock directory')
      await sleep(2)
    }
    fs.rmdirSync(lock)
    const { messages, err } = await c.done
    assert.deepEqual(messages, [{ ok: true }], err)
    assert.equal(JSON.parse(fs.readFileSync(file, 'utf8')).taskRef, 'bumped')
    assert.ok(!fs.existsSync(lock), 'nothing left behind')
  },
)

// A holder whose refreshes all fail (an SMB client's EIO window outlasting the stale threshold),
// with nobody taking its lock: it is told ECOMPROMISED, and its release removes its directory,
// still there as it last set it (L2c). It used to leave it, and under the network rule every
// caller, its own process too, then waited 62 s to judge it stale: the slow SMB CAS runs. strace
// fails every openat of the lock directory (each refresh opens it) with EIO.
const EXPIRED = `
const { withFileLock } = require(${JSON.stringify(root)})
const [file] = JSON.parse(process.argv[2])
const say = (m) => process.stdout.write(JSON.stringify(m) + '\\n')
;(async () => {
  for (const ms of [3000, 0]) {
    const started = Date.now()
    try {
      say({ ok: await withFileLock(file, () => new Promise((r) => setTimeout(() => r('done'), ms))), ms: Date.now() - started })
    } catch (e) {
      say({ error: e.code || e.message, ms: Date.now() - started, left: require('node:fs').existsSync(file + '.lock') })
    }
  }
})()
`
test(
  'native: a holder whose refreshes failed past the threshold, its lock not taken, gets ECOMPROMISED and removes its own directory',
  { skip: !linux ? 'strace fault injection: Linux only' : !has('strace', ['-V']) && 'strace is not installed', timeout: 60_000 },
  async () => {
    const file = path.join(tmp('expired'), 'f.json')
    const lock = `${file}.lock`
    const traced = ['strace', '-f', '-qq', '-o', '/dev/null', '-e', 'trace=openat', '-e', 'inject=openat:error=EIO', '-P', lock]
    const env = { PI_NATIVE_LOCK_FS: 'network', PI_NATIVE_ATTRIBUTE_CACHE_MS: '60000' }
    const { messages, err } = await start(traced, EXPIRED, [file], env).done
    assert.equal(messages.length, 2, err)
    const [first, second] = messages
    assert.deepEqual([first.error, first.left], ['ECOMPROMISED', false], `told, and nothing left behind: ${JSON.stringify(first)}`)
    // The next call gets in at once (it used to find the directory left and wait out stale
    // plus the 60 s bound: ELOCKED after its retries).
    assert.equal(second.ok, 'done', JSON.stringify(second))
    assert.ok(second.ms < 1000, `the next call waited ${second.ms} ms`)
    assert.ok(!fs.existsSync(lock), 'nothing left behind')
  },
)

// The waits between attempts follow each failed attempt, as proper-lockfile's (node-retry's
// timers) do: an attempt that takes long in the file system (a network client retrying) does
// not eat the waits that follow it. The schedule used to run from the first attempt, so after
// a slow one the rest came in a burst and the call gave up as soon as it had begun waiting.
// strace holds the first mkdir of the lock directory 1.5 s; the lock is held meanwhile.
const WAITER = `
const { withFileLock } = require(${JSON.stringify(root)})
const [file] = JSON.parse(process.argv[2])
const say = (m) => process.stdout.write(JSON.stringify(m) + '\\n')
const started = Date.now()
withFileLock(file, () => 'in').then((r) => say({ ok: r, ms: Date.now() - started }), (e) => say({ error: e.code, ms: Date.now() - started }))
`
for (const backend of ['native', 'js']) {
  test(
    `${backend}: after a slow attempt the waits of the schedule still follow (B17: ELOCKED after the slow attempt plus 3.3 s)`,
    { skip: !linux ? 'strace fault injection: Linux only' : !has('strace', ['-V']) && 'strace is not installed', timeout: 60_000 },
    async () => {
      const file = path.join(tmp('slow-attempt'), 'f.json')
      let release
      const held = new Promise((inside) => native.withFileLock(file, () => (inside(), new Promise((r) => (release = r)))))
      await held
      try {
        const traced = ['strace', '-f', '-qq', '-o', '/dev/null', '-e', 'trace=mkdir,mkdirat', '-e', 'inject=mkdir,mkdirat:delay_enter=1500000:when=1', '-P', `${file}.lock`]
        const { messages, err } = await start(traced, WAITER, [file], { PI_NATIVE_BACKEND: backend }).done
        const r = messages[0]
        assert.equal(r?.error, 'ELOCKED', `${JSON.stringify(r)} ${err}`)
        assert.ok(r.ms >= 1500 + 3275 - 100, `ELOCKED after ${r.ms} ms: the waits after the 1.5 s attempt were cut short`)
      } finally {
        release()
      }
    },
  )
}

/** Inotify instances a process holds now (Linux: its fds that are anon_inode:inotify). */
const WAITERS = `
const fs = require('node:fs')
const path = require('node:path')
const { withFileLock } = require(${JSON.stringify(root)})
const binding = require(${JSON.stringify(path.join(root, 'index.js'))})
const [dir, n] = JSON.parse(process.argv[2])
const say = (m) => process.stdout.write(JSON.stringify(m) + '\\n')
const inotify = () => fs.readdirSync('/proc/self/fd').filter((fd) => {
  try { return fs.readlinkSync('/proc/self/fd/' + fd) === 'anon_inode:inotify' } catch { return false }
}).length
const started = Date.now()
const calls = []
for (let i = 0; i < n; i++) calls.push(withFileLock(path.join(dir, 'f' + i + '.json'), () => Date.now() - started).then((ms) => ({ ms }), (e) => ({ error: e.code })))
setTimeout(() => say({ waiting: inotify(), folders: binding.lockWatchedFolders() }), 900)
Promise.all(calls).then((results) => say({ results, after: inotify() }))
`

/** Hold `n` locks in `dir` from this process for `ms`, while `child` waits for them. */
async function holdWhile(dir, n, ms, child) {
  let release
  const released = new Promise((r) => (release = r))
  const held = []
  for (let i = 0; i < n; i++) {
    held.push(
      new Promise((inside) => {
        native.withFileLock(path.join(dir, `f${i}.json`), () => {
          inside()
          return released
        })
      }),
    )
  }
  await Promise.all(held)
  const c = child()
  const waiting = await c.when((m) => 'waiting' in m)
  await sleep(ms)
  release()
  const { messages, err } = await c.done
  return { waiting, final: messages.find((m) => 'results' in m), err }
}

test(
  '30 waiting withFileLock calls share one inotify instance, and all get their lock when it is freed',
  { skip: !linux && 'counts inotify instances through /proc', timeout: 60_000 },
  async () => {
    const dir = tmp('waiters')
    const r = await holdWhile(dir, 30, 300, () => start([], WAITERS, [dir, 30]))
    assert.ok(r.waiting.waiting <= 2, `inotify instances while 30 calls wait: ${r.waiting.waiting}`)
    assert.equal(r.waiting.folders, 1, 'one folder watched, for all 30')
    assert.ok(r.final, r.err)
    assert.deepEqual(r.final.results.filter((x) => x.error), [], 'every call got its lock')
  },
)

const canUnshare = linux && spawnSync('unshare', ['-U', '-r', 'sh', '-c', 'echo 0 > /proc/sys/user/max_inotify_instances'], { stdio: 'ignore' }).status === 0

test(
  'with no inotify instance to be had (a user namespace allowing none), waits still succeed, on the schedule',
  { skip: !canUnshare && 'needs unshare -U and a writable /proc/sys/user/max_inotify_instances', timeout: 60_000 },
  async () => {
    const dir = tmp('noinotify')
    fs.chmodSync(dir, 0o777)
    const r = await holdWhile(dir, 10, 300, () =>
      start(['unshare', '-U', '-r', 'sh', '-c', 'echo 0 > /proc/sys/user/max_inotify_instances && exec "$@"', 'sh'], WAITERS, [dir, 10]),
    )
    assert.equal(r.waiting.waiting, 0, 'the kernel gave no instance')
    assert.equal(r.waiting.folders, 0, 'nothing watched')
    assert.ok(r.final, r.err)
    assert.deepEqual(r.final.results.filter((x) => x.error), [], `every call got its lock: ${r.err}`)
    assert.doesNotMatch(r.err, /Error/)
  },
)

test('a recovery promise whose settling side ends without an answer rejects, and its process exits on its own', { timeout: 30_000 }, async () => {
  assert.equal(binding.recoverySettlesThroughOutbox(), true, 'settles through the outbox under Node')
  await assert.rejects(binding.outboxUnsettledProbe(), { code: 'ERR_PI_NATIVE_UNSETTLED' })
  const script = `
    const binding = require(${JSON.stringify(path.join(root, 'index.js'))})
    require(${JSON.stringify(root)})
    binding.outboxUnsettledProbe().then(() => console.log('resolved'), (e) => console.log(e.code))
  `
  const r = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', timeout: 20_000 })
  assert.equal(r.signal, null, 'exited on its own')
  assert.equal(r.stdout.trim(), 'ERR_PI_NATIVE_UNSETTLED')
})

test('a withFileLock callback that can never settle keeps its lock through garbage collection, until exit (L8)', { timeout: 30_000 }, () => {
  const file = path.join(tmp('gc'), 'a.json')
  const script = `
    const fs = require('node:fs')
    const { withFileLock } = require(${JSON.stringify(root)})
    withFileLock(${JSON.stringify(file)}, () => new Promise(() => {}))
    setTimeout(() => {
      for (let i = 0; i < 5; i++) gc()
      setTimeout(() => console.log(fs.existsSync(${JSON.stringify(`${file}.lock`)})), 300)
    }, 300)
  `
  const r = spawnSync(process.execPath, ['--expose-gc', '-e', script], { encoding: 'utf8', timeout: 20_000, env: { ...process.env, PI_NATIVE_BACKEND: 'native' } })
  assert.equal(r.stdout.trim(), 'true', `held after gc: ${r.stderr}`)
  assert.ok(!fs.existsSync(`${file}.lock`), 'removed at exit')
})

// The refresh scheduler looks at the held locks every 250 ms: it must run only while a lock is
// held (or being taken), not for the rest of the host's life, and come back for the next lock
// (which must still be refreshed: held for 3 s, past the 2 s stale threshold, its mtime moves).
test('the lock refresh scheduler ends when no lock is left and starts again for the next one', { skip: !linux && 'thread names from /proc/self/task', timeout: 30_000 }, () => {
  const dir = tmp('scheduler')
  const script = `
    const fs = require('node:fs')
    const lib = require(${JSON.stringify(path.join(root, 'lib', 'index.js'))})
    const dir = ${JSON.stringify(dir)}
    const names = () => fs.readdirSync('/proc/self/task').map((t) => { try { return fs.readFileSync('/proc/self/task/' + t + '/comm', 'utf8').trim() } catch { return '' } })
    const scheduler = () => names().filter((n) => n === 'pi-native-locks').length
    const wait = (ms) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms)
    const out = { before: scheduler() }
    // A new thread names itself once it runs: wait for the name (up to 2 s on a loaded machine).
    const named = () => { for (let i = 0; i < 100 && scheduler() === 0; i++) wait(20); return scheduler() }
    lib.withFileLockSync(dir + '/a.txt', () => { out.holding = named() })
    wait(700)
    out.idle = scheduler()
    lib.withFileLock(dir + '/b.txt', async () => {
      out.again = named()
      const m0 = fs.statSync(dir + '/b.txt.lock').mtimeMs
      await new Promise((r) => setTimeout(r, 3000))
      out.refreshed = fs.statSync(dir + '/b.txt.lock').mtimeMs > m0
    }).then(() => {
      wait(700)
      out.end = scheduler()
      console.log(JSON.stringify(out))
    })
  `
  const r = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', env: { ...process.env, PI_NATIVE_BACKEND: 'native' } })
  assert.equal(r.status, 0, r.stderr)
  assert.deepEqual(JSON.parse(r.stdout), { before: 0, holding: 1, idle: 0, again: 1, refreshed: true, end: 0 })
})

// The async withFileLock gives its lock back off the JS thread: the lock directory's stat and
// rmdir may wait on a network file system (an SMB client's EIO window held a holder's event
// loop for 2.2 s in CI) or hang on a dead mount. strace makes the rmdir of the lock take 1.5 s.
const RELEASE = `
const { withFileLock } = require(${JSON.stringify(root)})
const [file] = JSON.parse(process.argv[2])
const say = (m) => process.stdout.write(JSON.stringify(m) + '\\n')
let maxGap = 0
let last = Date.now()
const tick = setInterval(() => { const now = Date.now(); maxGap = Math.max(maxGap, now - last); last = now }, 10)
let out
withFileLock(file, async () => {
  await new Promise((r) => setTimeout(r, 100))
  out = Date.now()
  maxGap = 0
  return 'done'
}).then((r) => {
  const releaseMs = Date.now() - out
  // One more tick first: a release that held the JS thread shows as the gap before it.
  setTimeout(() => {
    clearInterval(tick)
    say({ ok: r, releaseMs, maxGap })
  }, 30)
}, (e) => say({ error: e.code || e.message }))
`
for (const backend of ['native', 'js']) {
  test(
    `${backend}: withFileLock's release waits for a slow rmdir off the JS thread`,
    { skip: !linux ? 'strace fault injection: Linux only' : !has('strace', ['-V']) && 'strace is not installed', timeout: 30_000 },
    async () => {
      const file = path.join(tmp('release'), 'f.json')
      // rmdir, or unlinkat(AT_REMOVEDIR) where there is no rmdir syscall (arm64, under qemu).
      const traced = ['strace', '-f', '-qq', '-o', '/dev/null', '-e', 'trace=rmdir,unlinkat', '-e', 'inject=rmdir,unlinkat:delay_enter=1500000', '-P', `${file}.lock`]
      const { messages, err } = await start(traced, RELEASE, [file], { PI_NATIVE_BACKEND: backend }).done
      const r = messages.find((m) => 'ok' in m || 'error' in m)
      assert.equal(r?.ok, 'done', err)
      assert.ok(r.releaseMs >= 1400, `the rmdir was delayed (release took ${r.releaseMs} ms)`)
      assert.ok(r.maxGap < 500, `the event loop stood still ${r.maxGap} ms during the release`)
      assert.ok(!fs.existsSync(`${file}.lock`), 'nothing left behind')
    },
  )
}
