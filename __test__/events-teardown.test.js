'use strict'
// Supervision events belong to the JS environment that made them (issue 29): a worker
// terminated with exit waits and entry watches pending takes them along — no watch, no waiter
// thread, no pidfd or inotify descriptor left — while the main thread's own waits carry on.
const test = require('node:test')
const { isDeepStrictEqual } = require('node:util')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { Worker } = require('node:worker_threads')
const { root, sleep, liveChild } = require('./helpers.js')
const { makeEntry, tempAgentDir } = require('./store-fixtures.js')

const binding = require('../index.js')

const WORKER = `
const { workerData, parentPort } = require('node:worker_threads')
const s = require(workerData.lib)
for (const pid of workerData.pids) s.waitForProcessExit(pid).then(() => parentPort.postMessage('exit ' + pid))
;(async () => {
  const it = s.watchEntries(workerData.agentDir)
  parentPort.postMessage('ready')
  for await (const ev of it) parentPort.postMessage('entry ' + ev.entryId)
})()
`

/**
 * The folder watches one watchEntries iteration holds: it follows the path, so every folder of
 * it that exists is watched (from the root down to the matrix folder, or the first one missing).
 */
function folderWatches(agentDir) {
  const folders = [path.join(agentDir, 'state', 'process-matrix')]
  while (path.dirname(folders[0]) !== folders[0]) folders.unshift(path.dirname(folders[0]))
  let n = 0
  while (n < folders.length && fs.existsSync(folders[n])) n++
  return n
}

/** Threads of the supervision waiter, and the pidfd / inotify descriptors of this process. */
function osResources() {
  if (process.platform !== 'linux') return undefined
  const threads = fs.readdirSync('/proc/self/task').filter((t) => {
    try {
      return fs.readFileSync(`/proc/self/task/${t}/comm`, 'utf8').startsWith('pi-native-supe')
    } catch {
      return false
    }
  }).length
  let pidfds = 0
  let inotify = 0
  for (const fd of fs.readdirSync('/proc/self/fd')) {
    let target
    try {
      target = fs.readlinkSync(`/proc/self/fd/${fd}`)
    } catch {
      continue
    }
    if (target === 'anon_inode:[pidfd]') pidfds++
    if (target === 'anon_inode:inotify') inotify++
  }
  return { threads, pidfds, inotify }
}

test('native: a terminated worker takes its exit waits and entry watches along; the main thread keeps its own', async () => {
  const kids = Array.from({ length: 8 }, () => liveChild())
  await Promise.all(kids.map((k) => new Promise((r) => k.once('spawn', r))))
  const pids = kids.map((k) => k.pid)
  const agentDir = tempAgentDir()
  const before = binding.supervisionState()
  const resourcesBefore = osResources()

  // The main thread waits for the first child too.
  const s = require('../lib/binding.js').loadNative()
  const mine = s.waitForProcessExit(pids[0])

  const workers = [0, 1].map(() => new Worker(WORKER, { eval: true, workerData: { lib: path.join(root, 'lib', 'native.js'), pids, agentDir } }))
  const messages = workers.map(() => [])
  workers.forEach((w, i) => w.on('message', (m) => messages[i].push(m)))
  await Promise.all(workers.map((w) => new Promise((r) => w.once('message', r))))
  // Two workers × (8 exit waits + one iteration's folder watches), plus the main thread's wait.
  assert.equal(binding.supervisionState().watches, before.watches + 2 * (8 + folderWatches(agentDir)) + 1)
  assert.equal(binding.supervisionState().waiterRunning, true)
  // The watch works before the teardown.
  await s.writeEntry(agentDir, makeEntry('master', 'seen'))
  for (let i = 0; i < 100 && !messages.every((m) => m.includes('entry master-seen')); i++) await sleep(20)
  assert.ok(messages.every((m) => m.includes('entry master-seen')), JSON.stringify(messages))

  await Promise.all(workers.map((w) => w.terminate()))
  assert.equal(binding.supervisionState().watches, before.watches + 1, 'only the main thread wait is left')

  // The children die: the main thread hears of its own, and nothing of the workers runs.
  for (const k of kids) k.kill('SIGKILL')
  assert.equal(await mine, true)
  await s.writeEntry(agentDir, makeEntry('master', 'after'))
  // The waiter lets its last watch go on its own thread: wait for it, with a deadline.
  for (const deadline = Date.now() + 15_000; !isDeepStrictEqual(binding.supervisionState(), before) && Date.now() < deadline; ) await sleep(20)
  assert.deepEqual(binding.supervisionState(), before, 'no watch left, and the waiter is gone with the last one')
  if (resourcesBefore) {
    // The waiter's thread and descriptors are released when its last watch goes.
    let now = osResources()
    for (let i = 0; i < 50 && now.threads > resourcesBefore.threads; i++) {
      await sleep(20)
      now = osResources()
    }
    assert.deepEqual(now, resourcesBefore)
  }
  fs.rmSync(agentDir, { recursive: true, force: true })
})

test('native: a worker holding the only watches stops the waiter (thread, descriptors) before terminate() resolves', async () => {
  const kids = Array.from({ length: 4 }, () => liveChild())
  await Promise.all(kids.map((k) => new Promise((r) => k.once('spawn', r))))
  const agentDir = tempAgentDir()
  const before = binding.supervisionState()
  const resourcesBefore = osResources()
  assert.equal(before.waiterRunning, false, 'no watch of another test is left')
  const w = new Worker(WORKER, { eval: true, workerData: { lib: path.join(root, 'lib', 'native.js'), pids: kids.map((k) => k.pid), agentDir } })
  try {
    await new Promise((r) => w.once('message', r))
    assert.deepEqual(binding.supervisionState(), { ...before, watches: 4 + folderWatches(agentDir), waiterRunning: true })
    if (resourcesBefore) {
      // A new thread takes its name once it runs, which a loaded machine may delay.
      let now = osResources()
      for (let i = 0; i < 50 && now.threads === resourcesBefore.threads; i++) {
        await sleep(20)
        now = osResources()
      }
      assert.equal(now.threads, resourcesBefore.threads + 1, 'one waiter thread for every watch')
    }
  } finally {
    await w.terminate()
  }
  // Nothing to wait for: the teardown joined the thread and closed the descriptors.
  assert.deepEqual(binding.supervisionState(), before)
  if (resourcesBefore) assert.deepEqual(osResources(), resourcesBefore)
  for (const k of kids) k.kill('SIGKILL')
  fs.rmSync(agentDir, { recursive: true, force: true })
})

test('js: a terminated worker with probed waits and fs.watch watches ends cleanly', async () => {
  const kids = Array.from({ length: 4 }, () => liveChild())
  await Promise.all(kids.map((k) => new Promise((r) => k.once('spawn', r))))
  const agentDir = tempAgentDir()
  const w = new Worker(WORKER, { eval: true, workerData: { lib: path.join(root, 'js', 'index.js'), pids: kids.map((k) => k.pid), agentDir } })
  await new Promise((r) => w.once('message', r))
  assert.equal(await w.terminate(), 1)
  for (const k of kids) k.kill('SIGKILL')
  await sleep(400) // past a probe interval: nothing of the worker's may run
  fs.rmSync(agentDir, { recursive: true, force: true })
})
