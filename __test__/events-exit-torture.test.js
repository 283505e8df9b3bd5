'use strict'
// waitForProcessExit's discipline (issue 35): a process that execs, a leader that ends its
// main thread, children that become zombies nobody reaps, a pid handed to a new process, and
// 1,000 concurrent waits in each of two environments (main thread and a worker). Every promise
// settles exactly once and never early: when a wait resolves, the process it named runs no
// more (checked in /proc at that moment on Linux: gone, a zombie, or another process).
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { spawn } = require('node:child_process')
const { Worker } = require('node:worker_threads')
const { root, backends, liveChild, sleep } = require('./helpers.js')
const { within, leaderExitHelper } = require('./events-helpers.js')

const linux = process.platform === 'linux'
const unix = process.platform !== 'win32'

/** Linux: `{ state, threads, start }` of /proc/PID/stat, or undefined once the pid is free. */
function stat(pid) {
  try {
    const text = fs.readFileSync(`/proc/${pid}/stat`, 'latin1')
    const f = text.slice(text.lastIndexOf(')') + 2).split(' ')
    return { state: f[0], threads: Number(f[17]), start: f[19] }
  } catch {
    return undefined
  }
}

/** Whether the process that had start ticks `start` still runs under `pid` (Linux). */
function runs(pid, start) {
  const s = stat(pid)
  return s !== undefined && s.start === start && !((s.state === 'Z' || s.state === 'X') && s.threads <= 1)
}

/**
 * Wait for `pid` with `s` (by pid and, where identities exist, by identity) and record when
 * each settles and whether the process still ran at that moment (Linux: /proc; elsewhere
 * undefined). Returns the promise of `{ settled, ranAtSettle }` per wait.
 */
function follow(s, pid) {
  const start = linux ? stat(pid)?.start : undefined
  const id = s.getProcessIdentity(pid)
  const targets = [pid, ...(id ? [id] : [])]
  return targets.map((target) =>
    s.waitForProcessExit(target).then((v) => ({ value: v, ranAtSettle: linux ? runs(pid, start) : undefined })),
  )
}

for (const [name, s] of backends()) {
  test(`${name}: a process that execs is the same process: the wait goes on until it ends`, { skip: !unix && 'exec of a running process is POSIX' }, async () => {
    // sh reads a line, then replaces itself with sleep (same pid, same start time).
    const child = spawn('sh', ['-c', 'read x; exec sleep 60'], { stdio: ['pipe', 'ignore', 'ignore'] })
    await new Promise((r) => child.once('spawn', r))
    try {
      const waits = follow(s, child.pid)
      child.stdin.write('go\n')
      if (linux) {
        for (let i = 0; i < 300 && fs.readFileSync(`/proc/${child.pid}/comm`, 'utf8').trim() !== 'sleep'; i++) await sleep(10)
        assert.equal(fs.readFileSync(`/proc/${child.pid}/comm`, 'utf8').trim(), 'sleep', 'exec happened')
      }
      assert.equal(await within(Promise.race(waits), 600), undefined, 'pending across the exec')
      child.kill('SIGKILL')
      const out = await within(Promise.all(waits), 5000)
      assert.deepEqual(out?.value.map((w) => w.value), waits.map(() => true))
      for (const w of out.value) assert.notEqual(w.ranAtSettle, true, 'settled while it ran')
    } finally {
      child.kill('SIGKILL')
    }
  })

  test(`${name}: children that turn zombie (nobody reaps them) end their waits, not before`, { skip: !unix && 'zombies are POSIX' }, async () => {
    // Each sleeper's parent execs a long sleep and never reaps it: it stays a zombie.
    const holders = []
    const pids = []
    for (let i = 0; i < 5; i++) {
      const h = spawn('sh', ['-c', `sleep 0.${3 + i} & echo $!; exec sleep 60`], { stdio: ['ignore', 'pipe', 'ignore'] })
      holders.push(h)
      pids.push(await new Promise((r) => h.stdout.once('data', (d) => r(Number(String(d).trim())))))
    }
    try {
      const waits = pids.flatMap((pid) => follow(s, pid))
      const out = await within(Promise.all(waits), 5000)
      assert.ok(out, 'every wait ended')
      for (const w of out.value) {
        assert.equal(w.value, true)
        assert.notEqual(w.ranAtSettle, true, 'settled while it ran')
      }
      if (linux) for (const pid of pids) assert.equal(stat(pid)?.state, 'Z', 'still an unreaped zombie')
    } finally {
      for (const h of holders) h.kill('SIGKILL')
    }
  })

  test(`${name}: a leader that ended its main thread (pthread_exit): its waits end with its last thread`, { skip: leaderExitHelper().skip }, async () => {
    const kids = []
    for (let i = 0; i < 3; i++) {
      const c = spawn(leaderExitHelper().bin, [], { stdio: ['pipe', 'pipe', 'ignore'] })
      await new Promise((r) => c.stdout.once('data', r))
      kids.push(c)
    }
    try {
      if (linux) for (const c of kids) for (let i = 0; i < 300 && stat(c.pid)?.state !== 'Z'; i++) await sleep(10)
      const waits = kids.map((c) => follow(s, c.pid))
      assert.equal(await within(Promise.race(waits.flat()), 600), undefined)
      for (const [i, c] of kids.entries()) {
        c.stdin.end()
        const out = await within(Promise.all(waits[i]), 5000)
        assert.ok(out, 'ended with its last thread')
        for (const w of out.value) assert.notEqual(w.ranAtSettle, true)
        for (const later of waits.slice(i + 1)) assert.equal(await within(Promise.race(later), 50), undefined, 'the others go on')
      }
    } finally {
      for (const c of kids) c.kill('SIGKILL')
    }
  })

  // ns_last_pid steers the kernel's next pid (root, Linux): the identity of the first process
  // must not be taken for the second.
  test(`${name}: a pid handed to a new process: the old identity has ended, the new process is waited for`, { skip: !linux && 'ns_last_pid is Linux-only' }, async (t) => {
    const first = liveChild(30)
    await new Promise((r) => first.once('spawn', r))
    const pid = first.pid
    const old = s.getProcessIdentity(pid)
    if (!old) return t.skip('this backend reads no identities here')
    const oldWait = s.waitForProcessExit(old)
    first.kill('SIGKILL')
    await new Promise((r) => first.once('exit', r))
    assert.deepEqual(await within(oldWait, 5000), { value: true })
    await sleep(20) // the next process starts at a later clock tick
    let second
    for (let attempt = 0; attempt < 50 && !second; attempt++) {
      try {
        fs.writeFileSync('/proc/sys/kernel/ns_last_pid', String(pid - 1))
      } catch (err) {
        return t.skip(`cannot steer pids (${err.code}: needs root)`)
      }
      const c = liveChild(30)
      await new Promise((r) => c.once('spawn', r))
      if (c.pid === pid) second = c
      else c.kill('SIGKILL')
    }
    if (!second) return t.skip(`pid ${pid} was not handed out again in 50 tries`)
    try {
      // The old identity names a process that has ended: at once, even though the pid runs.
      assert.deepEqual(await within(s.waitForProcessExit(old), 1000), { value: true })
      // The pid (and the new identity) name the new process: pending until it ends.
      const waits = follow(s, pid)
      assert.equal(await within(Promise.race(waits), 600), undefined)
      second.kill('SIGKILL')
      const out = await within(Promise.all(waits), 5000)
      assert.deepEqual(out?.value.map((w) => w.value), waits.map(() => true))
    } finally {
      second.kill('SIGKILL')
    }
  })
}

// 1,000 waits in a worker and 1,000 on the main thread, over the same 20 children: a tenth
// by identity, a tenth aborted before the deaths. Each settles once: resolved (never before its
// process was killed) or rejected with its signal's reason.
const MANY = `
const { workerData, parentPort } = require('node:worker_threads')
const s = require(workerData.lib)
${many.toString()}
many(s, workerData.pids, (m) => parentPort.postMessage(m))
`

/** Start 1,000 waits over `pids`; `report` gets 'ready', then the tally once all settled. */
function many(s, pids, report) {
  const tally = { resolved: 0, rejected: 0, wrongReason: 0, early: 0, settledTwice: 0 }
  const killedAt = new Map()
  const reason = new Error('stop')
  const ac = new AbortController()
  const settled = new Set()
  const all = []
  for (let i = 0; i < 1000; i++) {
    const pid = pids[i % pids.length]
    const id = i % 10 === 1 ? s.getProcessIdentity(pid) : undefined
    const signal = i % 10 === 2 ? ac.signal : undefined
    const once = (kind) => {
      if (settled.has(i)) tally.settledTwice++
      settled.add(i)
      tally[kind]++
    }
    all.push(
      s.waitForProcessExit(id ?? pid, { signal }).then(
        () => {
          once('resolved')
          if (!killedAt.has(pid)) tally.early++
        },
        (err) => {
          once('rejected')
          if (err !== reason) tally.wrongReason++
        },
      ),
    )
  }
  ac.abort(reason)
  report({ ready: true })
  // The parent says which pids it has killed, before it kills them.
  return {
    killed: (pid) => killedAt.set(pid, Date.now()),
    done: Promise.all(all).then(() => report(tally)),
  }
}

for (const [name, s] of backends()) {
  test(`${name}: 1,000 waits in each of two environments settle exactly once, never early`, async () => {
    const kids = Array.from({ length: 20 }, () => liveChild())
    await Promise.all(kids.map((k) => new Promise((r) => k.once('spawn', r))))
    const pids = kids.map((k) => k.pid)
    const lib = path.join(root, name === 'native' ? 'lib/native.js' : 'js/index.js')
    // The worker acknowledges each kill notice, so that no kill comes before it has noted it
    // (under qemu a fixed pause was not enough: its waits then counted as early).
    const worker = new Worker(
      MANY.replace(
        'many(s, workerData.pids, (m) => parentPort.postMessage(m))',
        'const m = many(s, workerData.pids, (x) => parentPort.postMessage(x)); parentPort.on("message", (pid) => { m.killed(pid); parentPort.postMessage({ noted: pid }) })',
      ),
      { eval: true, workerData: { lib, pids } },
    )
    try {
      const messages = []
      const noted = new Set()
      worker.on('message', (m) => (m && m.noted !== undefined ? noted.add(m.noted) : messages.push(m)))
      let mine
      const main = many(s, pids, (m) => (mine = m))
      for (let i = 0; i < 500 && messages.length === 0; i++) await sleep(10)
      assert.deepEqual(messages[0], { ready: true })
      await sleep(300) // nothing has ended: nothing resolves
      assert.deepEqual(mine, { ready: true })
      assert.equal(messages.length, 1)
      for (const k of kids) {
        main.killed(k.pid)
        worker.postMessage(k.pid)
      }
      for (let i = 0; i < 1000 && noted.size < kids.length; i++) await sleep(10)
      assert.equal(noted.size, kids.length, 'the worker noted every kill before it happens')
      for (const k of kids) k.kill('SIGKILL')
      await within(main.done, 10000)
      for (let i = 0; i < 1000 && messages.length < 2; i++) await sleep(10)
      const expected = { resolved: 900, rejected: 100, wrongReason: 0, early: 0, settledTwice: 0 }
      assert.deepEqual(mine, expected)
      assert.deepEqual(messages[1], expected)
    } finally {
      for (const k of kids) k.kill('SIGKILL')
      await worker.terminate()
    }
  })
}
