'use strict'
// Issue 41's defects 4 and 5 met by a real process through the fault layer (tools/faultfs,
// docs/FAULT-LAYER.md): where the native backend's waits and network retries run. Both bound
// wall-clock behaviour (a latency, a handoff), so they run one at a time after the rest
// (*.isolated.test.js). The other defects: faultfs-lock.test.js.
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const faultfs = require('./faultfs.js')
const { makeEntry } = require('./store-fixtures.js')
const { setup, LOCK_RE, sec } = require('./faultfs-procs.js')

const skip = faultfs.available() || false
const { tmp, mount, start } = setup(test, 'faultfs-threads')

// Defect 4: the fast path's network retries run on libuv's pool. Four writeEntry calls (four
// locks) each make a look the server does not answer (the stat that reads back a new lock,
// ENOTCONN for 5 s: the engine looks again for up to 6 s) and wait there, holding all four
// threads of the pool if they run on it: a local fs.promises.readFile of the same process waits
// for them. (A refused release rmdir no longer keeps a call for long: the release gives up after
// a few looks and leaves its directory to be reclaimed.) The issue asks for at most 50 ms; the
// bound here is generous (a loaded machine), the value is printed.
const READFILE_BOUND_MS = Number(process.env.PI_NATIVE_FAULTFS_READFILE_MS || 1000)
test('native: writeEntry retries in a stat ENOTCONN window do not hold libuv\'s pool: a local readFile stays fast (defect 4)', { skip, timeout: 60_000 }, async () => {
  const backing = tmp('d4')
  // The folder exists (in a fresh one the first locks are decided local: faultfs-lock.test.js,
  // "the first writeEntry into a fresh folder").
  fs.mkdirSync(path.join(backing, 'state', 'process-matrix'), { recursive: true })
  const m = await mount(backing, 'pool')
  const local = path.join(tmp('d4-local'), 'local.txt')
  fs.writeFileSync(local, 'local')
  const window = await m.addRule({ op: 'getattr', path: LOCK_RE, kind: 'error', errno: 'ENOTCONN', for_ms: 5000 })
  const entries = ['a', 'b', 'c', 'd'].map((s) => makeEntry('worker', s))
  const started = Date.now()
  const p = start('pool', { label: 'P', agentDir: m.dir, entries, local }, { PI_NATIVE_BACKEND: 'native', UV_THREADPOOL_SIZE: '4' })
  // All four calls are in the window (each has had a look refused) before the read.
  await faultfs.waitFor('four looks refused', async () => new Set((await m.log()).filter((e) => e.rule === window).map((e) => e.path)).size >= 4, 20_000)
  const windowOpen = (await m.hits(window)).active
  p.send('measure')
  const { readFileMs } = await p.when((x) => 'readFileMs' in x, 'the local read', 30_000)
  const { writes } = await p.when((x) => 'writes' in x, 'the writes', 30_000)
  await p.done
  console.log(`defect 4: local readFile took ${readFileMs.toFixed(1)} ms during the window (issue: at most 50); writes ${JSON.stringify(writes)}; ${sec(Date.now() - started)}`)
  assert.ok(windowOpen, 'the read was asked for while the window was open')
  assert.ok(readFileMs <= READFILE_BOUND_MS, `a local readFile took ${readFileMs.toFixed(0)} ms while four writeEntry calls looked again at their locks`)
  assert.deepEqual(writes, ['ok', 'ok', 'ok', 'ok'])
})

// Defect 5: one parked thread per waiting acquisition. N withFileLock calls (default 600; the
// issue's target is 10,000: PI_NATIVE_FAULTFS_WAITERS) wait for one lock in a faultfs folder
// held 1 s: the process's threads stay bounded, no call ends ELOCKED before its retry budget
// (B17: 3275 ms of waits) is spent, and the first release is seen within a poll interval.
const WAITERS = Number(process.env.PI_NATIVE_FAULTFS_WAITERS || 600)
const MAX_THREADS = Number(process.env.PI_NATIVE_FAULTFS_MAX_THREADS || 64)
test(`native: ${WAITERS} waiters on one lock in a faultfs folder: bounded threads, no early ELOCKED, the release seen promptly (defect 5)`, { skip, timeout: 120_000 }, async () => {
  const backing = tmp('d5')
  const m = await mount(backing, 'crowd')
  const started = Date.now()
  const p = start('crowd', { label: 'crowd', file: path.join(m.dir, 'f.json'), n: WAITERS, holdMs: 1000 }, { PI_NATIVE_BACKEND: 'native' })
  const r = await p.when((x) => 'maxThreads' in x, 'the results', 100_000)
  await p.done
  console.log(`defect 5 (${WAITERS} waiters): ${JSON.stringify(r)}; ${sec(Date.now() - started)}`)
  const early = r.elockedMs && r.elockedMs[0] < 3275 - 50
  assert.ok(r.maxThreads <= MAX_THREADS, `${r.maxThreads} threads (baseline ${r.baseline}) while ${WAITERS} calls waited`)
  assert.ok(!early, `ELOCKED after ${r.elockedMs?.[0]} ms, before the retry budget was spent: ${JSON.stringify(r.errors)}`)
  assert.ok(r.handoffMs !== null && r.handoffMs <= 1000, `the next call got in ${r.handoffMs} ms after the first release`)
})
