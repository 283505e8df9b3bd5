'use strict'
// Supervision events (issue 29): waitForProcessExit and watchEntries, on both backends, with
// real processes (children, grandchildren the test does not reap, zombies) and writes from
// other processes. Oracles: the process's real fate (killed by the test, reaped or not), and
// readEntry/fs for what an event must carry.
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { spawn, spawnSync } = require('node:child_process')
const { root, backends, sleep, liveChild, reapedPid, zombie, rmTree, scanFiles: scanWith } = require('./helpers.js')
const { makeEntry, tempAgentDir, matrixDir } = require('./store-fixtures.js')
const { within } = require('./events-helpers.js')
const events = require('../lib/contract/events.js')

const isWin = process.platform === 'win32'
const native = require('../lib/binding.js').loadNative()
const binding = require('../index.js')

/** Remove a temp tree; on Windows a folder whose watch just ended may take a moment to go. */

/** A process that is not this one's child (its parent exits at once): `{ pid }`. */
async function grandchild() {
  if (isWin) {
    const c = liveChild()
    await new Promise((r) => c.once('spawn', r))
    return { pid: c.pid, kill: () => c.kill('SIGKILL') }
  }
  const r = spawnSync('sh', ['-c', 'sleep 60 >/dev/null 2>&1 & echo $!'], { encoding: 'utf8' })
  const pid = Number(r.stdout.trim())
  return { pid, kill: () => process.kill(pid, 'SIGKILL') }
}

for (const [name, s] of backends()) {
  test(`${name}: exitWatchMode says how exits are watched`, () => {
    const expected = name === 'js' ? 'probe' : { linux: 'pidfd', darwin: 'kqueue', win32: 'process-handle' }[process.platform]
    assert.equal(s.exitWatchMode(), expected)
    assert.equal(s.entryWatchMode(), name === 'js' ? 'fs.watch' : { linux: 'inotify', darwin: 'kqueue', win32: 'ReadDirectoryChangesW' }[process.platform])
  })

  test(`${name}: waitForProcessExit resolves true when a process it did not spawn is killed, not before`, async (t) => {
    const g = await grandchild()
    const wait = s.waitForProcessExit(g.pid)
    assert.equal(await within(wait, 300), undefined, 'pending while alive')
    const t0 = Date.now()
    g.kill()
    assert.deepEqual(await within(wait, 15_000), { value: true })
    // How soon (kernel routes at once, probing within its interval) is the bench's: docs/BENCHMARKS.md.
    t.diagnostic?.(`told after ${Date.now() - t0} ms`)
  })

  test(`${name}: a child killed and reaped by Node, and many at once`, async () => {
    const kids = Array.from({ length: 40 }, () => liveChild())
    await Promise.all(kids.map((k) => new Promise((r) => k.once('spawn', r))))
    const waits = kids.map((k) => s.waitForProcessExit(k.pid))
    const identityWaits = kids.slice(0, 5).map((k) => {
      const id = s.getProcessIdentity(k.pid)
      return id ? s.waitForProcessExit(id) : s.waitForProcessExit(k.pid)
    })
    assert.equal(await within(Promise.race(waits), 200), undefined)
    for (const k of kids) k.kill('SIGKILL')
    assert.deepEqual(await within(Promise.all([...waits, ...identityWaits]), 5000), { value: Array(45).fill(true) })
    if (name === 'native') assert.equal(binding.supervisionState().watches, 0)
  })

  test(`${name}: an ended process answers at once (reaped, zombie, pid now someone else)`, async () => {
    const dead = await reapedPid()
    assert.deepEqual(await within(s.waitForProcessExit(dead), 50), { value: true })
    if (!isWin) {
      // Zombies (and the sh that makes one) are Unix.
      const z = await zombie()
      try {
        assert.deepEqual(await within(s.waitForProcessExit(z.pid), 50), { value: true }, 'a zombie has ended')
      } finally {
        z.holder.kill('SIGKILL')
      }
    }
    const me = s.getProcessIdentity(process.pid)
    if (me) {
      // The same pid, another start time: the process that identity named is gone.
      assert.deepEqual(await within(s.waitForProcessExit({ pid: me.pid, startTimeMs: me.startTimeMs - 1000 }), 50), { value: true })
      const ac = new AbortController()
      const self = s.waitForProcessExit(me, { ref: false, signal: ac.signal })
      assert.equal(await within(self, 100), undefined, 'this process is alive')
      ac.abort()
      await self.catch(() => {})
    }
  })

  test(`${name}: an AbortSignal rejects the wait with its reason and ends it`, async () => {
    const c = liveChild()
    await new Promise((r) => c.once('spawn', r))
    try {
      const before = binding.supervisionState().watches
      const pre = AbortSignal.abort()
      const err = await s.waitForProcessExit(c.pid, { signal: pre }).catch((e) => e)
      assert.equal(err, pre.reason)
      assert.equal(err.name, 'AbortError')
      const ac = new AbortController()
      const wait = s.waitForProcessExit(c.pid, { signal: ac.signal })
      if (name === 'native') assert.equal(binding.supervisionState().watches, before + 1)
      const reason = new Error('changed my mind')
      ac.abort(reason)
      assert.deepEqual(await within(wait, 100), { error: reason })
      assert.equal(binding.supervisionState().watches, before, 'the watch was freed')
      const timeout = s.waitForProcessExit(c.pid, { signal: AbortSignal.timeout(30) })
      assert.equal((await within(timeout, 2000)).error.name, 'TimeoutError')
    } finally {
      c.kill('SIGKILL')
    }
  })

  test(`${name}: one signal shared by many waits and watches: one listener, no MaxListenersExceededWarning, all end`, async () => {
    const kids = Array.from({ length: 3 }, () => liveChild())
    await Promise.all(kids.map((k) => new Promise((r) => k.once('spawn', r))))
    const warnings = []
    const onWarning = (w) => warnings.push(w)
    process.on('warning', onWarning)
    const a = tempAgentDir()
    const before = name === 'native' ? binding.supervisionState().watches : 0
    try {
      const ac = new AbortController()
      const { getEventListeners } = require('node:events')
      const waits = []
      for (let i = 0; i < 30; i++) waits.push(s.waitForProcessExit(kids[i % kids.length].pid, { signal: ac.signal }))
      const watches = Array.from({ length: 12 }, () => s.watchEntries(a, { signal: ac.signal }))
      assert.equal(getEventListeners(ac.signal, 'abort').length, 1)
      // One wait ending on its own leaves the others listening.
      kids[0].kill('SIGKILL')
      for (let i = 0; i < waits.length; i += kids.length) assert.deepEqual(await within(waits[i], 5000), { value: true })
      assert.equal(getEventListeners(ac.signal, 'abort').length, 1)
      const reason = new Error('stop them all')
      ac.abort(reason)
      for (let i = 0; i < waits.length; i++) {
        if (i % kids.length !== 0) assert.deepEqual(await within(waits[i], 1000), { error: reason })
      }
      for (const it of watches) await assert.rejects(it.next(), (e) => e === reason)
      assert.equal(getEventListeners(ac.signal, 'abort').length, 0)
      // A signal whose every wait ended keeps no listener.
      const ac2 = new AbortController()
      const w2 = s.waitForProcessExit(kids[1].pid, { signal: ac2.signal })
      kids[1].kill('SIGKILL')
      assert.deepEqual(await within(w2, 5000), { value: true })
      assert.equal(getEventListeners(ac2.signal, 'abort').length, 0)
      // process.emitWarning emits on the next tick: one macrotask later every warning is in.
      await new Promise((r) => setImmediate(r))
      assert.deepEqual(warnings.filter((w) => w.name === 'MaxListenersExceededWarning'), [])
      if (name === 'native') assert.equal(binding.supervisionState().watches, before)
    } finally {
      process.off('warning', onWarning)
      for (const k of kids) k.kill('SIGKILL')
      await rmTree(a)
    }
  })

  test(`${name}: invalid targets and options reject with a TypeError naming them (never throw)`, async () => {
    const bad = [0, -1, 1.5, 2 ** 31, NaN, '123', null, undefined, {}, { pid: 1 }, { pid: 0, startTimeMs: 1 }, { pid: 1, startTimeMs: NaN }, [1]]
    for (const target of bad) {
      let p
      assert.doesNotThrow(() => (p = s.waitForProcessExit(target)))
      const err = await p.catch((e) => e)
      assert.ok(err instanceof TypeError, `${String(target)}: ${err}`)
      assert.match(err.message, /target/)
      assert.match(err.code, /^ERR_INVALID_ARG_(TYPE|VALUE)$/)
    }
    for (const [options, named] of [
      ['x', /"options" argument/],
      [{ signal: {} }, /"options\.signal" property must be an instance of AbortSignal/],
      [{ signal: null }, /options\.signal/],
      [{ ref: 'yes' }, /"options\.ref" property must be of type boolean/],
    ]) {
      const err = await s.waitForProcessExit(process.pid, options).catch((e) => e)
      assert.ok(err instanceof TypeError)
      assert.match(err.message, named)
    }
    // Node's own wording for the signal option, as fs.watch reports it.
    let nodes
    try {
      fs.watch(root, { signal: {} })
    } catch (e) {
      nodes = e
    }
    const ours = await s.waitForProcessExit(process.pid, { signal: {} }).catch((e) => e)
    assert.equal(ours.message, nodes.message)
    assert.equal(ours.code, nodes.code)
  })

  test(`${name}: a pending wait keeps the event loop alive, unless ref is false`, async () => {
    const g = await grandchild()
    try {
      const script = (ref) => `
        process.env.PI_NATIVE_BACKEND = ${JSON.stringify(name)}
        const s = require(${JSON.stringify(path.join(root, 'lib', 'index.js'))})
        s.waitForProcessExit(${g.pid}, { ref: ${ref} }).then(() => console.log('exited'))`
      const unref = spawnSync(process.execPath, ['-e', script(false)], { encoding: 'utf8', timeout: 10000 })
      assert.equal(unref.status, 0, unref.stderr)
      assert.equal(unref.stdout, '', 'the process ended without waiting')
      const held = spawn(process.execPath, ['-e', script(true)], { stdio: ['ignore', 'pipe', 'inherit'] })
      let out = ''
      held.stdout.on('data', (d) => (out += d))
      const ended = new Promise((r) => held.once('exit', (code) => r(code)))
      assert.equal(await within(ended, 1500), undefined, 'still waiting for the process')
      g.kill()
      assert.deepEqual(await within(ended, 5000), { value: 0 })
      assert.equal(out, 'exited\n')
    } finally {
      try {
        g.kill()
      } catch {}
    }
  })
}

test('the probing fallback: a pid the kernel will not watch is probed at the documented interval', async () => {
  // A backend whose kernel route refuses every pid (as for EPERM, a kernel without pidfds).
  const calls = []
  const { waitForProcessExit, exitWatchMode } = events.createExitWaits({
    exitWatch: { mode: () => 'pidfd', open: () => ({ add: (pid) => (calls.push(pid), -1), cancel() {}, ref() {} }) },
    ended: events.probeEnded(native),
  })
  assert.equal(exitWatchMode(), 'pidfd')
  const g = await grandchild()
  const wait = waitForProcessExit(g.pid)
  assert.equal(await within(wait, 3 * events.EXIT_PROBE_INTERVAL_MS), undefined)
  g.kill()
  // Only the probe can tell it (the kernel route refused the pid); how soon is the bench's.
  assert.deepEqual(await within(wait, 15_000), { value: true })
  assert.deepEqual(calls, [g.pid])
})

// ---- watchEntries ---------------------------------------------------------------------------------

/** Collects events of an iteration into an array, with their arrival times. */
function collect(it) {
  const got = []
  const waiters = []
  const done = (async () => {
    try {
      for await (const ev of it) {
        got.push({ ...ev, at: performance.timeOrigin + performance.now() })
        for (const w of waiters.splice(0)) w()
      }
    } catch (err) {
      got.error = err
    }
    for (const w of waiters.splice(0)) w()
  })()
  const until = async (pred, ms = 5000, what = '') => {
    const deadline = Date.now() + ms
    while (!pred(got)) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}: ${JSON.stringify(got.map((e) => [e.type, e.entryId]))}`)
      await new Promise((r) => {
        waiters.push(r)
        setTimeout(r, 50)
      })
    }
  }
  return { got, done, until }
}

const WRITER = `
const s = require(process.argv[1])
const [agentDir, entryJson, n] = process.argv.slice(2)
;(async () => {
  const entry = JSON.parse(entryJson)
  for (let i = 0; i < Number(n); i++) {
    await s.writeEntry(agentDir, { ...entry, heartbeatAt: new Date(Date.UTC(2026, 0, 1, 0, 0, i)).toISOString() })
    console.log(performance.timeOrigin + performance.now())
    await new Promise((r) => setTimeout(r, 40))
  }
})()`

for (const [name, s] of backends()) {
  test(`${name}: watchEntries sees each of another process's writes, in order, each as readEntry has it`, async (t) => {
    const a = tempAgentDir()
    fs.mkdirSync(matrixDir(a), { recursive: true })
    await s.writeEntry(a, makeEntry('master', 'before'))
    const ac = new AbortController()
    const c = collect(s.watchEntries(a, { signal: ac.signal }))
    t.after(() => ac.abort()) // a failure must not leave the watch holding the process
    const entry = makeEntry('worker', 'w1')
    // The writer runs while this process's event loop is free to take the events.
    const writer = spawn(process.execPath, ['-e', WRITER, path.join(root, 'lib', 'index.js'), a, JSON.stringify(entry), '10'], { stdio: ['ignore', 'pipe', 'inherit'] })
    let out = ''
    writer.stdout.on('data', (d) => (out += d))
    assert.equal(await new Promise((r) => writer.once('exit', r)), 0)
    const written = out.trim().split('\n').map(Number)
    await c.until((g) => g.some((e) => e.entry?.heartbeatAt === '2026-01-01T00:00:09.000Z'), 15_000, 'the last write')
    ac.abort()
    await c.done
    assert.equal(c.got.error.name, 'AbortError')
    assert.ok(c.got.every((e) => e.type === 'change' && e.entryId === 'worker-w1'), 'nothing about the entry written before the call')
    assert.deepEqual(c.got.at(-1).entry, await s.readEntry(a, 'worker-w1'))
    // The writes were seen in order, none twice (the writer paused 40 ms between them). How soon
    // after each landed is the bench's ("Supervision events", docs/BENCHMARKS.md): here it is
    // only reported.
    const beats = c.got.map((e) => e.entry.heartbeatAt)
    assert.deepEqual(beats, [...new Set(beats)].sort(), 'in order, no repeats')
    const lags = c.got.map((e) => e.at - written[Number(e.entry.heartbeatAt.slice(17, 19))]).sort((x, y) => x - y)
    t.diagnostic(`lags after each write (ms): ${lags.map((l) => l.toFixed(1)).join(' ')}`)
    await rmTree(a)
  })

  test(`${name}: watchEntries: change, remove, invalid files; temp files and lock folders say nothing`, async (t) => {
    const a = tempAgentDir()
    const dir = matrixDir(a)
    fs.mkdirSync(dir, { recursive: true })
    const it = s.watchEntries(a)
    t.after(() => it.return())
    const c = collect(it)
    fs.mkdirSync(path.join(dir, 'master-x.json.lock'))
    fs.writeFileSync(path.join(dir, `master-x.json.${process.pid}.00000000-0000-4000-8000-000000000000.tmp`), '{}')
    fs.writeFileSync(path.join(dir, 'notes.txt'), 'x')
    // No event for a lock folder, a temp file or a stray file: the first event is the write after
    // them (the kernel tells the notices in order).
    const e = makeEntry('master', 'x')
    await s.writeEntry(a, e)
    await c.until((g) => g.length >= 1, 15_000, 'the write')
    assert.deepEqual(c.got.map(({ type, entryId, entry }) => ({ type, entryId, entry })), [{ type: 'change', entryId: 'master-x', entry: e }])
    fs.writeFileSync(path.join(dir, 'master-x.json'), '{ not json')
    await c.until((g) => g.length >= 2, 5000, 'the broken file')
    assert.deepEqual(c.got[1].type, 'change')
    assert.equal(c.got[1].entry, undefined)
    assert.ok(Object.hasOwn(c.got[1], 'entry'))
    await s.removeEntry(a, 'master-x')
    await c.until((g) => g.length >= 3, 5000, 'the removal')
    assert.deepEqual(c.got.slice(2).map(({ type, entryId, entry }) => ({ type, entryId, entry })), [{ type: 'remove', entryId: 'master-x', entry: undefined }])
    // `return()` (what `break` calls) ends it: the loop finishes, nothing more arrives.
    assert.deepEqual(await it.return(), { value: undefined, done: true })
    await c.done
    assert.equal(c.got.error, undefined)
    // Its loop has ended (c.done): a later write cannot reach it, and next() says done.
    await s.writeEntry(a, e)
    assert.equal(c.got.length, 3)
    assert.deepEqual(await it.next(), { value: undefined, done: true })
    await rmTree(a)
  })

  test(`${name}: watchEntries coalesces a burst per entry and loses no last state`, async (t) => {
    const a = tempAgentDir()
    fs.mkdirSync(matrixDir(a), { recursive: true })
    const it = s.watchEntries(a)
    t.after(() => it.return())
    const e = makeEntry('worker', 'burst')
    for (let i = 0; i < 30; i++) await s.writeEntry(a, { ...e, taskRef: `step-${i}` })
    await s.writeEntry(a, makeEntry('worker', 'other'))
    await sleep(200) // all notices are in; nothing has been asked for yet
    // One event per entry: its latest state.
    const seen = [(await it.next()).value, (await it.next()).value]
    assert.deepEqual(
      seen.map((v) => [v.entryId, v.entry.taskRef]),
      [
        ['worker-burst', 'step-29'],
        ['worker-other', undefined],
      ],
    )
    // A state that goes back to what was last yielded is no news; one that differs is.
    await s.writeEntry(a, { ...e, taskRef: 'step-x' })
    await s.writeEntry(a, { ...e, taskRef: 'step-29' })
    await sleep(200)
    const next = it.next()
    assert.equal(await within(next, 400), undefined)
    await s.writeEntry(a, { ...e, taskRef: 'step-30' })
    assert.equal((await within(next, 5000)).value.value.entry.taskRef, 'step-30')
    await it.return()
    await rmTree(a)
  })

  // Wine keeps a removed folder that is watched (stat included) until its watch closes, and tells
  // neither that watch nor its parent's before then: the removal cannot be followed there.
  const wineKeepsWatchedFolders = process.env.PI_NATIVE_EMULATED === 'wine' && 'Wine: a watched folder removed stays, unannounced, until its watch closes'
  test(`${name}: watchEntries waits for a folder that does not exist yet, and follows it when it is made again`, async (t) => {
    const a = path.join(tempAgentDir(), 'agent-not-yet')
    const ac = new AbortController()
    const c = collect(s.watchEntries(a, { signal: ac.signal }))
    try {
      await sleep(100)
      const e = makeEntry('master', 'm')
      await s.writeEntry(a, e) // makes agent-not-yet/state/process-matrix
      await c.until((g) => g.length >= 1, 5000, 'the first entry')
      assert.deepEqual(c.got[0].entry, e)
      if (wineKeepsWatchedFolders) {
        t.skip(`the rest: ${wineKeepsWatchedFolders}`)
      } else {
        // Windows deletes a folder that is open (watched) only once it is closed: rm retries.
        fs.rmSync(path.join(a, 'state'), { recursive: true, maxRetries: 20, retryDelay: 50 })
        await c.until((g) => g.some((x) => x.type === 'remove'), 5000, 'the removal with its folder')
        await s.writeEntry(a, makeEntry('worker', 'again'))
        await c.until((g) => g.some((x) => x.entryId === 'worker-again'), 5000, 'an entry in the new folder')
        await s.writeEntry(a, { ...makeEntry('worker', 'again'), status: 'closed' })
        await c.until((g) => g.some((x) => x.entry?.status === 'closed'), 5000, 'a change in the new folder')
      }
    } finally {
      ac.abort()
      await c.done
    }
    if (name === 'native') assert.equal(binding.supervisionState().watches, 0)
    await rmTree(path.dirname(a))
  })

  test(`${name}: watchEntries: invalid arguments reject the first next(); an aborted signal ends it at once`, async () => {
    for (const [args, re] of [
      [[123], /"path" argument must be of type string/],
      [['/a', 'x'], /"options" argument/],
      [['/a', { signal: 1 }], /options\.signal/],
    ]) {
      const it = s.watchEntries(...args)
      const err = await it.next().catch((x) => x)
      assert.ok(err instanceof TypeError, String(err))
      assert.match(err.message, re)
      assert.deepEqual(await it.next(), { value: undefined, done: true })
    }
    const pre = AbortSignal.abort()
    assert.equal(await s.watchEntries(tempAgentDir(), { signal: pre }).next().catch((x) => x), pre.reason)
  })

  test(`${name}: an open watchEntries keeps the event loop alive; leaving the loop lets the process end`, async () => {
    const a = tempAgentDir()
    const script = `
      process.env.PI_NATIVE_BACKEND = ${JSON.stringify(name)}
      const s = require(${JSON.stringify(path.join(root, 'lib', 'index.js'))})
      ;(async () => {
        for await (const ev of s.watchEntries(${JSON.stringify(a)})) { console.log(ev.type, ev.entryId); break }
      })()`
    const child = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] })
    let out = ''
    child.stdout.on('data', (d) => (out += d))
    const ended = new Promise((r) => child.once('exit', (code) => r(code)))
    assert.equal(await within(ended, 1500), undefined, 'watching')
    await s.writeEntry(a, makeEntry('master', 'wake'))
    assert.deepEqual(await within(ended, 5000), { value: 0 })
    assert.equal(out, 'change master-wake\n')
    await rmTree(a)
  })
}

const scanFiles = (dir) => scanWith(binding, dir)

test('watchEntries polls a folder whose notifications miss remote changes', async (tc) => {
  // A network mount is simulated: the folder watch says nothing, the file system is "remote".
  let next = 1
  const quiet = { mode: () => 'none', open: () => ({ add: () => next++, cancel() {}, ref() {} }) }
  // The scans made so far: the call's own listing, then, the folder being remote, the polled
  // baseline; every later scan is a poll.
  let scans = 0
  let scanned = () => {}
  const scan = (dir) =>
    scanFiles(dir).then((files) => {
      scans++
      scanned()
      return new Map(files.map((f) => [f.name, f.sig]))
    })
  const { watchEntries } = events.createEntryWatches({ dirWatch: quiet, scan, isRemote: async () => true, readEntry: native.readEntry })
  const a = tempAgentDir()
  await native.writeEntry(a, makeEntry('master', 'old'))
  const ac = new AbortController()
  const c = collect(watchEntries(a, { signal: ac.signal }))
  tc.after(() => ac.abort())
  // The changes are made once the polled baseline is in (a change before it is part of it).
  // Nothing notifies (the folder watch is quiet): only a poll can tell them, within deadlines.
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${scans} scans after 15 s`)), 15_000)
    scanned = () => scans >= 2 && (clearTimeout(timer), setImmediate(resolve)) // after the watch took the listing in
    scanned()
  })
  await native.writeEntry(a, makeEntry('worker', 'remote'))
  await native.removeEntry(a, 'master-old')
  await c.until((g) => g.length >= 2, 15_000, 'the polled changes')
  assert.deepEqual(c.got.map((e) => [e.type, e.entryId]).sort(), [
    ['change', 'worker-remote'],
    ['remove', 'master-old'],
  ])
  ac.abort()
  await c.done
  await rmTree(a)
})

test('native: the folder scan and the remote test of the addon', async () => {
  const a = tempAgentDir()
  assert.deepEqual(await scanFiles(matrixDir(a)), [])
  await native.writeEntry(a, makeEntry('master', 'x'))
  fs.writeFileSync(path.join(matrixDir(a), 'stray.txt'), '')
  // In UTF-16 order of the names, cut into pieces of at most 48 KiB (names of ~60 bytes).
  for (let i = 0; i < 3000; i++) fs.writeFileSync(path.join(matrixDir(a), `w-${String(i).padStart(4, '0')}-${'x'.repeat(48)}.json`), '')
  fs.writeFileSync(path.join(matrixDir(a), '\u{1f600}.json'), '')
  fs.writeFileSync(path.join(matrixDir(a), '\uff61.json'), '')
  const chunks = await binding.dirScan(matrixDir(a))
  const sizes = []
  for (let c = chunks.takeChunk(); c !== null; c = chunks.takeChunk()) sizes.push(Buffer.byteLength(c))
  assert.ok(sizes.length >= 3 && sizes.every((n) => n <= 48 * 1024), `${sizes}`)
  const files = await scanFiles(matrixDir(a))
  const names = files.map((f) => f.name)
  assert.deepEqual(names, [...names].sort())
  assert.deepEqual(names.filter((n) => !n.startsWith('w-')), ['master-x.json', '\u{1f600}.json', '\uff61.json'])
  assert.equal(names.length, 3003)
  // A local folder is never polled: its names come without signatures (no stat per file).
  assert.deepEqual(new Set(files.map((f) => f.sig)), new Set(['']))
  assert.equal(await binding.dirIsRemote(a), false, 'a temp folder is local')
  await rmTree(a)
})

test('js backend: its network and FUSE file systems are those of the addon (src/platform/fs_kind/linux.rs)', () => {
  const src = fs.readFileSync(path.join(root, 'src', 'platform', 'fs_kind', 'linux.rs'), 'utf8')
  const table = src.slice(src.indexOf('const REMOTE:'), src.indexOf('];', src.indexOf('const REMOTE:')))
  const magics = [...table.matchAll(/\(\s*(0x[0-9a-f_]+)\s*,/gi)].map((m) => Number(m[1].replaceAll('_', '')))
  assert.ok(magics.length >= 10, `parsed ${magics.length} magics`)
  const { REMOTE_MAGIC } = require('../js/events.js')
  assert.deepEqual([...REMOTE_MAGIC].sort((a, b) => a - b), magics.sort((a, b) => a - b))
})

test('a folder watch the OS stops serving ends the iteration with its error (the consumer sees it)', async () => {
  // A backend whose watch fails after its start, as ReadDirectoryChangesW does on a handle
  // error: the contract layer hands the error to the pending next().
  let notify
  let next = 1
  const failing = { mode: () => 'none', open: (onEvent) => ((notify = onEvent), { add: () => next++, cancel() {}, ref() {} }) }
  const scan = async () => new Map()
  const { watchEntries } = events.createEntryWatches({ dirWatch: failing, scan, isRemote: async () => false, readEntry: native.readEntry })
  const it = watchEntries(tempAgentDir())
  const pending = it.next()
  const err = Object.assign(new Error("EIO: i/o error, watch 'x'"), { code: 'EIO', syscall: 'watch' })
  notify(next - 1, null, err)
  assert.deepEqual(await within(pending, 1000), { error: err })
  assert.deepEqual(await it.next(), { value: undefined, done: true })
})
