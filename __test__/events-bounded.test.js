'use strict'
// watchEntries keeps its memory bounded (issue 35, bounded memory): a consumer that stops
// reading while tens of thousands of distinct entries come and go, and a JS thread that is
// busy meanwhile, make no queue grow without limit; once reading again the consumer's view
// converges to the folder (one listing replaces what was dropped). Oracles: V8's heap after a
// full GC, the addon's count of queued names, and listEntries.
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { spawnSync } = require('node:child_process')
const { root } = require('./helpers.js')
const { tempAgentDir } = require('./store-fixtures.js')

/**
 * Runs in a child with --expose-gc: watch with a consumer that reads the first events, then
 * stops; a worker thread creates and removes `n` distinct entries (leaving `keep`); the heap is
 * measured after a GC before and after; then the consumer reads again until its view equals
 * listEntries. With `block`, the JS thread waits (Atomics.wait) while the worker writes, and the
 * addon's queued names are read the moment it wakes.
 */
const CHILD = `
const { Worker } = require('node:worker_threads')
const path = require('node:path')
const { isDeepStrictEqual } = require('node:util')
const [lib, bindingFile, agentDir, n, keep, block] = process.argv.slice(1)
const s = require(lib)
const dir = path.join(agentDir, 'state', 'process-matrix')
// ENTRY: a worker entry's file text whose session id is SID.
const entry = (sessionId) => process.env.ENTRY.replaceAll('SID', sessionId)
const WRITER = \`
const fs = require('node:fs')
const path = require('node:path')
const { workerData: { dir, n, keep, text, flag } } = require('node:worker_threads')
;(async () => {
  for (let i = 0; i < n; i++) {
    const id = 'worker-churn-' + i
    fs.writeFileSync(path.join(dir, id + '.json'), text.replaceAll('SID', 'churn-' + i))
    if (i < n - keep) fs.unlinkSync(path.join(dir, id + '.json'))
    // Paced (a pause every 200), so the kernel's own queue never overflows on a free thread.
    if (!flag && i % 200 === 199) await new Promise((r) => setTimeout(r, 1))
  }
  if (flag) { Atomics.store(flag, 0, 1); Atomics.notify(flag, 0) }
  process.exit(0)
})()\`
;(async () => {
  require('node:fs').mkdirSync(dir, { recursive: true })
  const it = s.watchEntries(agentDir, { initial: true })
  const view = new Map()
  const apply = (ev) => (ev.type === 'remove' ? view.delete(ev.entryId) : view.set(ev.entryId, ev.entry))
  // One event read, then the consumer stops reading.
  require('node:fs').writeFileSync(path.join(dir, 'worker-first.json'), entry('first'))
  apply((await it.next()).value)
  await new Promise((r) => setTimeout(r, 200))
  global.gc()
  const heapBefore = process.memoryUsage().heapUsed
  const flag = block === '1' ? new Int32Array(new SharedArrayBuffer(4)) : null
  const text = process.env.ENTRY
  const w = new Worker(WRITER, { eval: true, workerData: { dir, n: Number(n), keep: Number(keep), text, flag } })
  let queued
  if (flag) {
    Atomics.wait(flag, 0, 0, 60000) // the JS thread is busy while the worker writes
    queued = require(bindingFile).supervisionState().queuedNames
  }
  await new Promise((r) => w.once('exit', r))
  await new Promise((r) => setTimeout(r, 500)) // every notice is in
  global.gc()
  const heapAfter = process.memoryUsage().heapUsed
  // Reading again: the view converges to the folder (compared whenever no event came for 100 ms).
  const deadline = Date.now() + 30000
  let want
  let pending = null
  for (;;) {
    pending ??= it.next()
    const next = await Promise.race([pending, new Promise((r) => setTimeout(() => r(null), 100))])
    if (next) {
      pending = null
      apply(next.value)
      continue
    }
    want = new Map((await s.listEntries(agentDir)).map((e) => [e.entryId, e]))
    if (isDeepStrictEqual(view, want) || Date.now() > deadline) break
  }
  const overflows = lib.endsWith('native.js') ? require(bindingFile).supervisionState().overflows : undefined
  console.log(JSON.stringify({ heapGrowth: heapAfter - heapBefore, queued, overflows, converged: isDeepStrictEqual(view, want), size: view.size }))
  process.exit(0)
})()
`

function run(backend, { n, keep, block, env = {} }) {
  const a = tempAgentDir()
  try {
    const file = path.join(root, backend === 'native' ? 'lib/native.js' : 'js/index.js')
    const { makeEntry } = require('./store-fixtures.js')
    const r = spawnSync(process.execPath, ['--expose-gc', '-e', CHILD, file, path.join(root, 'index.js'), a, String(n), String(keep), block ? '1' : '0'], {
      encoding: 'utf8',
      env: { ...process.env, ...env, ENTRY: `${JSON.stringify(makeEntry('worker', 'SID'), null, '\t')}\n` },
      timeout: 120000,
    })
    assert.equal(r.status, 0, r.stderr)
    return JSON.parse(r.stdout.trim().split('\n').at(-1))
  } finally {
    fs.rmSync(a, { recursive: true, force: true })
  }
}

for (const backend of ['native', 'js']) {
  test(`${backend}: a consumer that stops reading while 40,000 distinct entries come and go keeps the heap bounded, then converges`, () => {
    const out = run(backend, { n: 40000, keep: 30, block: false })
    // Unbounded, the ids noticed and not read (40,000 of them) take several MiB.
    assert.ok(out.heapGrowth < 1.5 * 2 ** 20, `heap grew by ${(out.heapGrowth / 2 ** 20).toFixed(2)} MiB`)
    assert.deepEqual({ converged: out.converged, size: out.size }, { converged: true, size: 31 })
  })
}

test('native: a JS thread busy while 20,000 names change finds at most 1,024 queued for its watch, then converges', () => {
  const out = run('native', { n: 20000, keep: 20, block: true })
  assert.ok(out.queued <= 1024, `${out.queued} names queued`)
  assert.deepEqual({ converged: out.converged, size: out.size }, { converged: true, size: 21 })
})

// ReadDirectoryChangesW says it lost changes by completing with zero bytes when its buffer
// overflowed; a 128-byte buffer (the addon's test hook) makes that happen under a burst.
test('native (Windows): an overflowed notification buffer makes the watch list the folder again, and the view converges', { skip: process.platform !== 'win32' && 'ReadDirectoryChangesW only; inotify overflows take the path the mailbox bound above takes' }, () => {
  const out = run('native', { n: 2000, keep: 50, block: false, env: { PI_NATIVE_TEST_DIR_BUFFER_BYTES: '128' } })
  assert.ok(out.overflows > 0, 'the buffer overflowed')
  assert.deepEqual({ converged: out.converged, size: out.size }, { converged: true, size: 51 })
})
