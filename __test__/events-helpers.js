'use strict'
// Helpers of the supervision-event tests: a bounded wait on a promise, and a consumer of
// watchEntries that keeps the view its events build and checks each event as it comes.
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { spawnSync } = require('node:child_process')
const { isDeepStrictEqual } = require('node:util')

/** Settles within `ms`? `{ value }` / `{ error }`, or undefined while still pending. */
async function within(promise, ms) {
  let timer
  const late = new Promise((r) => (timer = setTimeout(r, ms)))
  const out = await Promise.race([promise.then((value) => ({ value }), (error) => ({ error })), late])
  clearTimeout(timer)
  return out
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

/**
 * Consume `iterable` as a supervisor would: the view (entryId → entry) its events build, every
 * event in `events`, and `faults`: a `change` that repeats the state already in the view. (A
 * `remove` of an entry the view does not hold is allowed: it says the entry is not at the path,
 * and the consumer may know the entry from elsewhere, its own listing.) `delayMs` makes it a slow
 * consumer (a pause after each event; a function gives each pause); `check(event)` may return
 * a fault of its own; `pause()`/`resume()` stop and restart its reading.
 */
function consume(iterable, { delayMs = 0, check } = {}) {
  const view = new Map()
  const events = []
  const faults = []
  const waiters = new Set()
  let paused = null
  const state = { view, events, faults, error: undefined, ended: false }
  const wake = () => {
    for (const w of waiters) w()
  }
  state.done = (async () => {
    try {
      for await (const ev of iterable) {
        events.push(ev)
        const fault = check?.(ev)
        if (fault) faults.push(fault)
        if (ev.type === 'remove') {
          view.delete(ev.entryId)
        } else {
          if (view.has(ev.entryId) && isDeepStrictEqual(view.get(ev.entryId), ev.entry)) faults.push(`change of ${ev.entryId} to the state the view holds`)
          view.set(ev.entryId, ev.entry)
        }
        wake()
        const delay = typeof delayMs === 'function' ? delayMs() : delayMs
        if (delay > 0) await sleep(delay)
        if (paused) await paused.promise
      }
    } catch (err) {
      state.error = err
    }
    state.ended = true
    wake()
  })()
  state.pause = () => {
    if (!paused) {
      let resolve
      const promise = new Promise((r) => (resolve = r))
      paused = { promise, resolve }
    }
  }
  state.resume = () => {
    const p = paused
    paused = null
    p?.resolve()
  }
  /** Resolves once `pred(state)` holds (checked after each event and every 25 ms). */
  state.until = async (pred, ms = 5000, what = 'a condition') => {
    const deadline = Date.now() + ms
    while (!pred(state)) {
      if (Date.now() > deadline) {
        throw new Error(`timed out waiting for ${what}; events: ${JSON.stringify(events.map((e) => [e.type, e.entryId]))}, faults: ${faults}`)
      }
      await new Promise((r) => {
        const w = () => {
          waiters.delete(w)
          r()
        }
        waiters.add(w)
        setTimeout(w, 25)
      })
    }
  }
  /** The view as `{ entryId: entry }`, entries that are invalid files (undefined) left out. */
  state.valid = () => Object.fromEntries([...view].filter(([, e]) => e !== undefined).sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0)))
  return state
}

/** `{ entryId: entry }` of what listEntries answers for `agentDir` now (the oracle). */
async function listing(s, agentDir) {
  const entries = await s.listEntries(path.resolve(agentDir))
  return Object.fromEntries(entries.map((e) => [e.entryId, e]).sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0)))
}

/**
 * Wait until the consumer's view equals a fresh listing (re-listed each time it is compared);
 * fails with both after `ms`. Asserts no fault was seen.
 */
async function converges(s, c, agentDir, ms = 5000, what = 'the view to equal the listing') {
  const deadline = Date.now() + ms
  for (;;) {
    const want = await listing(s, agentDir)
    if (isDeepStrictEqual(c.valid(), want)) break
    if (Date.now() > deadline) {
      assert.deepEqual(Object.keys(c.valid()), Object.keys(want), `${what}; events: ${JSON.stringify(c.events.map((e) => [e.type, e.entryId]))}`)
      assert.deepEqual(c.valid(), want, what)
    }
    await sleep(25)
  }
  assert.deepEqual(c.faults, [])
}

// The main thread starts a thread that reads stdin until EOF, says "ready", and ends itself
// with pthread_exit: the process lives as long as stdin stays open.
const SOURCE = `
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>
static void *reader(void *arg) {
  char c;
  (void)arg;
  while (read(0, &c, 1) > 0) {}
  return NULL;
}
int main(void) {
  pthread_t t;
  if (pthread_create(&t, NULL, reader, NULL) != 0) return 2;
  printf("ready\\n");
  fflush(stdout);
  pthread_exit(NULL);
}
`

let leaderExit

/**
 * A program whose main thread ends with pthread_exit while another thread reads stdin until EOF
 * (it prints "ready" first): `{ bin }`, compiled once per test process, or `{ skip }` with the
 * reason where no C compiler works.
 */
function leaderExitHelper() {
  if (leaderExit) return leaderExit
  if (process.platform === 'win32') return (leaderExit = { skip: 'no pthread_exit on Windows (ExitThread is another route)' })
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pi-native-leader-'))
  fs.writeFileSync(path.join(dir, 'leader.c'), SOURCE)
  const bin = path.join(dir, 'leader')
  const cc = spawnSync('cc', ['-O1', '-pthread', '-o', bin, path.join(dir, 'leader.c')], { encoding: 'utf8' })
  process.on('exit', () => fs.rmSync(dir, { recursive: true, force: true }))
  if (cc.error || cc.status !== 0) return (leaderExit = { skip: `no working C compiler (${cc.error?.code ?? cc.stderr.trim()})` })
  return (leaderExit = { bin })
}


module.exports = { within, sleep, consume, listing, converges, leaderExitHelper }
