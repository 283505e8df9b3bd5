'use strict'
// One process of the fault-layer lock cases (__test__/faultfs-lock.test.js). Its role comes as
// JSON in argv[2]; it reports JSON lines on stdout (each with its pid and the time) and takes
// commands, one per line, on stdin. The backend is the one PI_NATIVE_BACKEND selects, or
// proper-lockfile 4.1.2 itself (role `plf`).
//
// Critical sections are watched from outside the file system under test: on entry a process
// creates `marker` (a file in a local folder) with O_EXCL and removes it on exit, so a second
// holder inside at the same time finds it there (`overlap`). Entry and exit times are reported
// too, for the timeline a failing case prints.
const fs = require('node:fs')
const path = require('node:path')
const readline = require('node:readline')

const root = path.resolve(__dirname, '..')
const arg = JSON.parse(process.argv[2])
const say = (m) => process.stdout.write(JSON.stringify({ ...m, pid: process.pid, t: Date.now() }) + '\n')

// Commands from the test, by name; `command(name)` resolves when that line arrives.
const lines = []
const waiting = []
readline.createInterface({ input: process.stdin }).on('line', (l) => {
  const w = waiting.findIndex((x) => x.name === l)
  if (w >= 0) waiting.splice(w, 1)[0].resolve()
  else lines.push(l)
})
function command(name) {
  const i = lines.indexOf(name)
  if (i >= 0) {
    lines.splice(i, 1)
    return Promise.resolve()
  }
  return new Promise((resolve) => waiting.push({ name, resolve }))
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

// Whether this process holds the marker now; a process that ends inside (crashed, or proper-
// lockfile's default onCompromised throwing) gives it back as it goes, and says when.
let ownMarker = false
process.on('exit', (code) => {
  if (ownMarker) fs.rmSync(arg.marker, { force: true })
  say({ exit: code })
})

/** Enter the critical section: claim the marker (an `overlap` when someone else holds it). */
function enter(label) {
  let own = false
  try {
    fs.closeSync(fs.openSync(arg.marker, 'wx'))
    own = true
  } catch (err) {
    if (err.code !== 'EEXIST') throw err
  }
  ownMarker = own
  say({ in: label, overlap: !own })
  return () => {
    if (own) fs.rmSync(arg.marker, { force: true })
    ownMarker = false
    say({ out: label })
  }
}

/** The body of one critical section: hold, and bump the counter file if there is one. */
async function body(label) {
  const leave = enter(label)
  try {
    const before = arg.counter ? Number(fs.readFileSync(arg.counter, 'utf8')) : 0
    if (arg.until) await command(arg.until)
    else await sleep(arg.holdMs ?? 0)
    if (arg.counter) {
      fs.writeFileSync(arg.counter, String(before + 1))
      say({ wrote: before + 1 })
    }
    return before + 1
  } finally {
    leave()
  }
}

const schedule = (retries) => ({ retries, factor: 2, minTimeout: 25, maxTimeout: 500, randomize: false })

const roles = {
  /**
   * `rounds` withFileLock calls, one after another. With `gate`, each call after the first
   * waits for that command (the test lets it go once the faults are over).
   */
  async hold() {
    const { withFileLock } = require(root)
    for (let i = 0; i < (arg.rounds ?? 1); i++) {
      if (i > 0 && arg.gate) {
        say({ gate: i })
        await command(arg.gate)
      }
      say({ waiting: i })
      const started = Date.now()
      try {
        const v = await withFileLock(arg.file, () => body(i), { retries: arg.retries })
        say({ done: i, value: v, ms: Date.now() - started })
      } catch (e) {
        say({ done: i, error: e.code ?? e.message, ms: Date.now() - started })
      }
    }
  },

  /** The same with proper-lockfile 4.1.2 itself, as the original store calls it. */
  async plf() {
    const lockfile = require('proper-lockfile')
    for (let i = 0; i < (arg.rounds ?? 1); i++) {
      say({ waiting: i })
      const started = Date.now()
      let release
      try {
        release = await lockfile.lock(arg.file, {
          realpath: false,
          stale: undefined,
          retries: schedule(arg.retries ?? 10),
          // Told, not crashed: the run goes on and the checker sees what it did.
          onCompromised: (err) => say({ compromised: i, error: err.code }),
        })
      } catch (e) {
        say({ done: i, error: e.code ?? e.message, ms: Date.now() - started })
        continue
      }
      let v
      try {
        v = await body(i)
      } finally {
        // As the store does (B15): a release that fails does not mask the outcome.
        await release().catch((e) => say({ releaseError: i, error: e.code }))
      }
      say({ done: i, value: v, ms: Date.now() - started })
    }
  },

  /**
   * `increments` compare-and-swap bumps of entry `entryId`'s `pid` field through
   * writeEntryIfUnchanged: read, then write the next value if the entry is still what was read.
   * Each read is reported (`read`); with `step`, each CAS then waits for the command `step`.
   */
  async cas() {
    const store = require(path.join(root, 'lib', 'process-matrix-store.js'))
    let done = 0
    while (done < (arg.increments ?? 1)) {
      const current = await store.readEntry(arg.agentDir, arg.entryId)
      say({ read: current.pid })
      if (arg.step) await command('step')
      const next = { ...current, pid: current.pid + 1 }
      const started = Date.now()
      try {
        const ok = await store.writeEntryIfUnchanged(arg.agentDir, arg.entryId, current, next)
        say({ cas: ok, from: current.pid, ms: Date.now() - started })
        if (ok) done++
      } catch (e) {
        say({ cas: null, error: e.code ?? e.message, from: current.pid, ms: Date.now() - started })
        if (!['ECOMPROMISED', 'ELOCKED', 'EIO', 'ERR_PI_NATIVE_INCOHERENT'].includes(e.code)) break
      }
    }
    say({ finished: done })
  },

  /** One writeEntry of `entry` into `agentDir`: how it ended, after how long. */
  async write() {
    const store = require(path.join(root, 'lib', 'process-matrix-store.js'))
    const started = Date.now()
    try {
      await store.writeEntry(arg.agentDir, arg.entry)
      say({ written: true, ms: Date.now() - started })
    } catch (e) {
      say({ written: false, error: e.code ?? e.message, ms: Date.now() - started })
    }
  },

  /**
   * `entries` writeEntry calls at once (each its own lock), then, on the command `measure`, one
   * local `fs.promises.readFile` of `local` (libuv's pool): how long it took.
   */
  async pool() {
    const store = require(path.join(root, 'lib', 'process-matrix-store.js'))
    const writes = arg.entries.map((e) => store.writeEntry(arg.agentDir, e).then(() => 'ok', (err) => err.code ?? err.message))
    say({ writing: arg.entries.length })
    await command('measure')
    const t = process.hrtime.bigint()
    await fs.promises.readFile(arg.local)
    say({ readFileMs: Number(process.hrtime.bigint() - t) / 1e6 })
    say({ writes: await Promise.all(writes) })
  },

  /**
   * One withFileLock holder for `holdMs`, and meanwhile `n` more withFileLock calls on the same
   * file: how many threads the process had at most, how each call ended and after how long,
   * and how soon after the first release the next call got in.
   */
  async crowd() {
    const { withFileLock } = require(root)
    const threads = () => fs.readdirSync('/proc/self/task').length
    const baseline = threads()
    let maxThreads = baseline
    const sampler = setInterval(() => (maxThreads = Math.max(maxThreads, threads())), 20)
    let inside
    const firstIn = new Promise((r) => (inside = r))
    let releasedAt = 0
    const first = withFileLock(arg.file, async () => {
      inside()
      await sleep(arg.holdMs)
      releasedAt = Date.now()
    })
    await firstIn
    let nextIn = 0
    const calls = []
    for (let i = 0; i < arg.n; i++) {
      const s = Date.now()
      calls.push(
        withFileLock(arg.file, () => {
          nextIn ||= Date.now()
        }).then(
          () => ({ ms: Date.now() - s }),
          (e) => ({ error: e.code ?? e.message, ms: Date.now() - s }),
        ),
      )
    }
    say({ crowd: arg.n, baseline })
    await first
    const results = await Promise.all(calls)
    clearInterval(sampler)
    maxThreads = Math.max(maxThreads, threads())
    const errors = {}
    for (const r of results) if (r.error) errors[r.error] = (errors[r.error] ?? 0) + 1
    const locked = results.filter((r) => r.error === 'ELOCKED').map((r) => r.ms)
    say({ maxThreads, baseline, errors, ok: results.filter((r) => !r.error).length, elockedMs: locked.length ? [Math.min(...locked), Math.max(...locked)] : null, handoffMs: nextIn ? nextIn - releasedAt : null })
  },

  /** watchEntries on `agentDir` (option `initial`): every event, as it comes. */
  async watch() {
    const { watchEntries } = require(path.join(root, 'lib', 'process-matrix-store.js'))
    const ac = new AbortController()
    command('stop').then(() => ac.abort())
    say({ watching: true })
    try {
      for await (const ev of watchEntries(arg.agentDir, { initial: arg.initial, signal: ac.signal })) {
        say({ event: ev.type, entryId: ev.entryId })
      }
    } catch (e) {
      if (e.name !== 'AbortError') say({ watchError: e.code ?? e.message })
    }
    say({ finished: true })
    process.exit(0)
  },
}

roles[arg.role]().then(
  () => process.exit(0),
  (e) => {
    say({ crashed: String(e?.stack ?? e) })
    process.exit(1)
  },
)
