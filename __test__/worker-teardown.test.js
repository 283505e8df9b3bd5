'use strict'
// Lifetimes follow the JS environment (issue 9): workers whose store operations and
// withFileLock wait on a lock another process holds are terminated mid-wait. Their waits must
// end, nothing of theirs may land on disk after terminate() resolves, the lock must be free for
// everyone once the other process lets go, and nothing may be left behind.
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { spawn } = require('node:child_process')
const { Worker } = require('node:worker_threads')
const { root, sleep } = require('./helpers.js')
const { makeEntry } = require('./store-fixtures.js')

const WORKER = `
const { workerData, parentPort } = require('node:worker_threads')
const fs = require('node:fs')
const s = require(workerData.lib)
const { agentDir, entry, kind } = workerData
const next = { ...entry, status: 'closed', taskRef: 'from-terminated-worker-' + kind }
const op =
  kind === 'c' ? () => s.writeEntryIfUnchanged(agentDir, entry.entryId, entry, next)
  : kind === 'w' ? () => s.writeEntry(agentDir, next)
  : () => s.withFileLock(s.entryPath(agentDir, entry.entryId), () => fs.writeFileSync(s.entryPath(agentDir, entry.entryId), 'from-terminated-worker-lock'))
op().then(() => parentPort.postMessage('settled'), () => parentPort.postMessage('settled'))
parentPort.postMessage('waiting')
`

/** A process that holds `file`'s lock with proper-lockfile (kept fresh) until told to let go. */
function foreignHolder(file) {
  const script = `
    const lockfile = require(${JSON.stringify(path.join(root, 'node_modules', 'proper-lockfile'))})
    lockfile.lock(${JSON.stringify(file)}, { realpath: false, stale: undefined }).then((release) => {
      console.log('HELD')
      process.stdin.once('data', () => release().then(() => { console.log('RELEASED') }))
    })`
  const child = spawn(process.execPath, ['-e', script], { stdio: ['pipe', 'pipe', 'inherit'] })
  const lines = []
  const waiters = []
  child.stdout.on('data', (d) => {
    for (const l of String(d).split('\n').filter(Boolean)) {
      lines.push(l)
      for (const w of waiters.splice(0)) w()
    }
  })
  const seen = async (line) => {
    while (!lines.includes(line)) await new Promise((r) => waiters.push(r))
  }
  return { child, seen }
}

for (const kinds of ['cwl', 'ccl', 'wwl', 'lll', 'cwl']) {
  test(`native: workers (${kinds}) terminated while waiting on a foreign lock leave nothing behind`, async () => {
    const { loadNative } = require('../lib/binding.js')
    const s = loadNative()
    const agentDir = fs.mkdtempSync(path.join(os.tmpdir(), 'pi-native-teardown-'))
    const entry = makeEntry('worker', `t-${kinds}`)
    await s.writeEntry(agentDir, entry)
    const file = s.entryPath(agentDir, entry.entryId)
    const original = fs.readFileSync(file, 'utf8')
    const holder = foreignHolder(file)
    await holder.seen('HELD')

    const workers = [...kinds].map(
      (kind) => new Worker(WORKER, { eval: true, workerData: { lib: path.join(root, 'lib', 'native.js'), agentDir, entry, kind } }),
    )
    await Promise.all(workers.map((w) => new Promise((r) => w.once('message', r))))
    await sleep(300) // inside their waits (in-process queue and on-disk retries)
    await Promise.all(workers.map((w) => w.terminate()))

    // The foreign holder lets go; nothing of the terminated workers may land afterwards.
    holder.child.stdin.write('go\n')
    await holder.seen('RELEASED')
    await sleep(1500)
    assert.equal(fs.readFileSync(file, 'utf8'), original, 'no write of a terminated worker')
    const dir = path.dirname(file)
    assert.deepEqual(fs.readdirSync(dir), [path.basename(file)], 'no lock directory or temp file left')

    // The lock is free at once for this process (well within stale threshold + retry budget).
    const started = Date.now()
    await s.writeEntry(agentDir, { ...entry, status: 'winding_down' })
    assert.ok(Date.now() - started < 2000 + 3300, 'lock obtainable')
    assert.equal((await s.readEntry(agentDir, entry.entryId)).status, 'winding_down')
    assert.deepEqual(fs.readdirSync(dir), [path.basename(file)])
    holder.child.stdin.end()
  })
}

test('native: a worker terminated with recoveries in flight takes them with it', async () => {
  // Four hundred scans of a 24 MiB file whose answer is at the front queue on the recovery pool
  // (seconds of work) with a one-minute deadline; the worker is terminated as soon as they are
  // issued. When terminate() resolves its calls are gone (the deadline thread forgets them, the
  // queued scans are cancelled), and the process does not crash when the running ones end.
  const binding = require(path.join(root, 'index.js'))
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pi-native-teardown-sr-'))
  const fd = fs.openSync(path.join(dir, '2026_s.jsonl'), 'w')
  const rec = (message) => JSON.stringify({ type: 'message', id: 'i', parentId: null, timestamp: 't', message })
  fs.writeSync(fd, JSON.stringify({ type: 'session', version: 3, id: 's', timestamp: 't', cwd: '/' }) + '\n')
  fs.writeSync(fd, rec({ role: 'assistant', content: [{ type: 'text', text: 'front' }], stopReason: 'stop' }) + '\n')
  const filler = rec({ role: 'toolResult', content: [{ type: 'text', text: 'x'.repeat(64 * 1024) }] }) + '\n'
  for (let n = 0; n < 24 * 16; n++) fs.writeSync(fd, filler)
  fs.closeSync(fd)
  const before = binding.recoveryCallsPending()
  const worker = new Worker(
    `const { workerData, parentPort } = require('node:worker_threads')
     const s = require(workerData.lib)
     for (let i = 0; i < 400; i++) s.recoverLastAssistantFromSession(workerData.dir, 's', { deadlineMs: 60000 })
     parentPort.postMessage('issued')`,
    { eval: true, workerData: { lib: path.join(root, 'lib', 'index.js'), dir } },
  )
  await new Promise((resolve) => worker.once('message', resolve))
  assert.ok(binding.recoveryCallsPending() > before, 'the worker has calls in flight')
  await worker.terminate()
  assert.equal(binding.recoveryCallsPending(), before, 'the terminated worker left calls pending')
  // The pool is free for this environment: a call made now is answered.
  const r = await require(path.join(root, 'lib', 'index.js')).recoverLastAssistantFromSession(dir, 's', { deadlineMs: 60000 })
  assert.equal(r?.text, 'front')
  fs.rmSync(dir, { recursive: true, force: true })
})
