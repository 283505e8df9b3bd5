'use strict'
// Native and JavaScript (proper-lockfile 4.1.2) writers sharing one agentDir for real: child
// processes contending on one entry, lock-protocol edge cases, and writers SIGKILLed mid-write.
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { spawn } = require('node:child_process')
const { root, sleep } = require('./helpers.js')
const { makeEntry, tempAgentDir, matrixDir, leftovers } = require('./store-fixtures.js')

const native = require('../lib/binding.js').loadNative()

/** Run a child Node process with `code`; resolves { code, signal, stdout, stderr }. */
function child(code, { backend = 'native', args = [], onSpawn, env = {} } = {}) {
  return new Promise((resolve) => {
    const p = spawn(process.execPath, ['-e', code, ...args], {
      env: { ...process.env, PI_NATIVE_BACKEND: backend, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let stdout = ''
    let stderr = ''
    p.stdout.on('data', (d) => (stdout += d))
    p.stderr.on('data', (d) => (stderr += d))
    if (onSpawn) onSpawn(p)
    p.on('close', (code, signal) => resolve({ code, signal, stdout, stderr }))
  })
}

const PRELUDE = `
  const s = require(${JSON.stringify(path.join(root, 'lib', 'index.js'))})
  const [agentDir, id] = process.argv.slice(1)
`

/** A child that adds `n` to the entry's counter through read → CAS → retry. */
const incrementer = (n, mode) => `${PRELUDE}
  const bump = (e) => ({ ...e, taskRef: String(Number(e.taskRef) + 1), heartbeatAt: new Date().toISOString() })
  ;(async () => {
    let done = 0, conflicts = 0, locked = 0
    while (done < ${n}) {
      const cur = await s.readEntry(agentDir, id)
      try {
        const sync = ${JSON.stringify(mode)} === 'sync' || (${JSON.stringify(mode)} === 'mixed' && done % 2 === 1)
        const ok = sync ? s.writeEntryIfUnchangedSync(agentDir, cur, bump(cur)) : await s.writeEntryIfUnchanged(agentDir, id, cur, bump(cur))
        if (ok) done++
        else conflicts++
      } catch (err) {
        if (err.code !== 'ELOCKED') throw err
        locked++
      }
    }
    const notified = s.backend === 'native' ? require(${JSON.stringify(path.join(root, 'index.js'))}).lockNotifiedAttempts() : 0
    console.log(JSON.stringify({ backend: s.backend, conflicts, locked, notified }))
  })()`

test('6 processes × 150 CAS increments, native and proper-lockfile writers mixed: exact count, nothing left behind', async () => {
  const a = tempAgentDir()
  const e = makeEntry('worker', 'counter', { taskRef: '0' })
  await native.writeEntry(a, e)
  const plan = [
    ['native', 'async'],
    ['js', 'async'],
    ['native', 'sync'],
    ['js', 'sync'],
    ['native', 'mixed'],
    ['js', 'mixed'],
  ]
  const results = await Promise.all(plan.map(([backend, mode]) => child(incrementer(150, mode), { backend, args: [a, e.entryId] })))
  for (const [i, r] of results.entries()) {
    assert.equal(r.code, 0, `${plan[i]}: ${r.stderr}`)
    assert.equal(JSON.parse(r.stdout).backend, plan[i][0])
  }
  const final = await native.readEntry(a, e.entryId)
  const report = results.map((r) => r.stdout.trim()).join(' ')
  assert.equal(final.taskRef, String(6 * 150), report)
  assert.deepEqual(leftovers(a), ['worker-counter.json'])
  // Native waiters were woken by lock removals (of native and proper-lockfile holders alike).
  const notified = results.reduce((sum, r) => sum + JSON.parse(r.stdout).notified, 0)
  assert.ok(notified > 0, `notified handoffs: ${notified}; ${report}`)
})

test('notified handoff: a native waiter retries the moment a proper-lockfile holder removes its lock', async () => {
  const binding = require('../index.js')
  const lockfile = require('proper-lockfile')
  const a = tempAgentDir()
  const e = makeEntry('worker', 'handoff')
  await native.writeEntry(a, e)
  const file = native.entryPath(a, e.entryId)
  for (let round = 0; round < 5; round++) {
    await lockfile.lock(file, { realpath: false })
    const before = binding.lockNotifiedAttempts()
    // The schedule alone would retry at +25, +75, +175, +375, +775, +1275 ms (waits of 25, 50,
    // 100, 200, 400, then 500 ms); the waiter watches for the removal from its 100 ms wait on.
    // The holder lets go in the middle of the 500 ms wait (past +1025 ms and while the waiter
    // watches: conditions, not a sleep), and at once (unlockSync, no pool round trip), so the
    // removal comes about 250 ms before the next scheduled attempt even on a loaded machine:
    // the waiter's attempt then comes from the notified removal.
    const start = Date.now()
    const written = native.writeEntry(a, { ...e, taskRef: `round-${round}` })
    const deadline = start + 10_000
    while (Date.now() - start < 1025 || binding.lockWatchedFolders() === 0) {
      assert.ok(Date.now() < deadline, 'the waiter never watched for the removal')
      await new Promise((r) => setImmediate(r))
    }
    lockfile.unlockSync(file, { realpath: false })
    await written
    assert.ok(binding.lockNotifiedAttempts() > before, 'the acquisition came from a notified removal')
    assert.equal((await native.readEntry(a, e.entryId)).taskRef, `round-${round}`)
  }
  assert.deepEqual(leftovers(a), ['worker-handoff.json'])
})

test('a lock held (and refreshed) by a proper-lockfile process is never stolen; its holder is never compromised', async () => {
  const a = tempAgentDir()
  const e = makeEntry('worker', 'held')
  await native.writeEntry(a, e)
  const file = native.entryPath(a, e.entryId)
  let holder
  const held = child(
    `const lockfile = require(${JSON.stringify(path.join(root, 'node_modules', 'proper-lockfile'))})
     lockfile.lock(${JSON.stringify(file)}, { realpath: false, stale: undefined, onCompromised: (err) => { console.log('COMPROMISED ' + err.message); process.exit(3) } })
       .then((release) => { console.log('LOCKED'); setTimeout(() => release().then(() => console.log('RELEASED')), 4500) })`,
    { backend: 'js', onSpawn: (p) => (holder = p) },
  )
  await new Promise((resolve) => holder.stdout.on('data', (d) => String(d).includes('LOCKED') && resolve()))
  // Native async CAS: 11 attempts over ~3.3 s, all ELOCKED; the JS holder keeps refreshing.
  // Meanwhile the event loop runs freely (the waiting happens on a worker thread).
  let ticks = 0
  const timer = setInterval(() => ticks++, 10)
  await assert.rejects(native.writeEntryIfUnchanged(a, e.entryId, e, { ...e, pid: 5 }), (err) => err.code === 'ELOCKED' && err.file === path.resolve(file))
  clearInterval(timer)
  assert.ok(ticks > 100, `event loop ticked ${ticks} times during the ~3.3 s lock wait`)
  assert.throws(() => native.writeEntryIfUnchangedSync(a, e, { ...e, pid: 5 }), { code: 'ELOCKED' })
  const r = await held
  assert.equal(r.code, 0, r.stdout + r.stderr)
  assert.match(r.stdout, /RELEASED/)
  assert.doesNotMatch(r.stdout, /COMPROMISED/)
  assert.deepStrictEqual(await native.readEntry(a, e.entryId), e)
  assert.equal(await native.writeEntryIfUnchanged(a, e.entryId, e, { ...e, pid: 5 }), true)
})

test('a stale lock (mtime 3 s old) left by a dead writer is taken over at once', async () => {
  const a = tempAgentDir()
  const e = makeEntry('worker', 'stale')
  await native.writeEntry(a, e)
  const lockDir = `${path.resolve(native.entryPath(a, e.entryId))}.lock`
  fs.mkdirSync(lockDir)
  const old = new Date(Date.now() - 3000)
  fs.utimesSync(lockDir, old, old)
  assert.equal(native.writeEntryIfUnchangedSync(a, e, { ...e, pid: 6 }), true)
  fs.mkdirSync(lockDir)
  fs.utimesSync(lockDir, old, old)
  assert.equal(await native.writeEntryIfUnchanged(a, e.entryId, { ...e, pid: 6 }, { ...e, pid: 7 }), true)
  assert.deepEqual(leftovers(a), ['worker-stale.json'])
  // A fresh foreign lock is respected (ELOCKED), then released by its owner.
  fs.mkdirSync(lockDir)
  assert.throws(() => native.writeEntryIfUnchangedSync(a, { ...e, pid: 7 }, e), { code: 'ELOCKED' })
  fs.rmdirSync(lockDir)
})

test('writers SIGKILLed at random moments (40 kills): the entry is always a complete written value; the next writer always gets in', async () => {
  const a = tempAgentDir()
  const e = makeEntry('worker', 'crash', { taskRef: '0', blob: 'x'.repeat(50_000) })
  await native.writeEntry(a, e)
  const file = native.entryPath(a, e.entryId)
  const writer = `${PRELUDE}
    ;(async () => {
      for (let i = 0; ; i++) {
        const cur = await s.readEntry(agentDir, id)
        const next = { ...cur, taskRef: String(Number(cur.taskRef) + 1), blob: String(i % 10).repeat(40_000 + (i % 7) * 1000) }
        const ok = i % 3 === 2 ? s.writeEntryIfUnchangedSync(agentDir, cur, next) : await s.writeEntryIfUnchanged(agentDir, id, cur, next)
        if (ok && i === 0) console.log('FIRST')
      }
    })().catch((err) => { console.error(err.code, err.message); process.exit(2) })`
  let seed = 7
  const rand = () => ((seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff)
  let lastCount = 0
  for (let kill = 0; kill < 40; kill++) {
    let proc
    let firstWrite = false
    const done = child(writer, {
      backend: kill % 4 === 3 ? 'js' : 'native',
      args: [a, e.entryId],
      onSpawn: (p) => {
        proc = p
        p.stdout.on('data', (d) => String(d).includes('FIRST') && (firstWrite = true))
      },
    })
    // Let it reach its first write (waiting out a dead predecessor's lock if needed), then
    // kill it somewhere in its loop.
    while (!firstWrite) {
      const r = await Promise.race([done, sleep(20).then(() => null)])
      if (r) assert.fail(`writer ${kill} exited before its first write: ${r.code} ${r.stderr}`)
    }
    await sleep(rand() * 60)
    proc.kill('SIGKILL')
    const r = await done
    assert.equal(r.signal, 'SIGKILL', r.stderr)
    const text = fs.readFileSync(file, 'utf8')
    const v = JSON.parse(text) // never torn: always a complete JSON document
    assert.equal(text, JSON.stringify(v, null, '\t') + '\n')
    assert.ok(Number(v.taskRef) > lastCount, `progress after kill ${kill}`)
    assert.equal(new Set(v.blob).size, 1)
    lastCount = Number(v.taskRef)
  }
  // Orphaned temp files of the killed writers (if any) are swept on request.
  await native.sweepOrphanTempFiles(a, 0)
  const left = leftovers(a).filter((n) => !n.endsWith('.lock'))
  assert.deepEqual(left, ['worker-crash.json'])
})

test('locks still held when a process exits are removed; durable mode writes the same bytes', async () => {
  const a = tempAgentDir()
  const file = path.join(a, 'held.json')
  const r = await child(
    `const s = require(${JSON.stringify(path.join(root, 'lib', 'index.js'))})
     s.withFileLock(${JSON.stringify(file)}, () => { console.log('HOLDING'); process.exit(0) })`,
  )
  assert.match(r.stdout, /HOLDING/)
  assert.equal(fs.existsSync(`${file}.lock`), false, 'lock directory removed at exit')
  const durable = await child(
    `const s = require(${JSON.stringify(path.join(root, 'lib', 'index.js'))})
     const e = ${JSON.stringify(makeEntry('worker', 'durable'))}
     s.writeEntry(process.argv[1], e).then(() => { s.writeEntryIfUnchangedSync(process.argv[1], e, { ...e, pid: 9 }); console.log('OK') })`,
    { args: [a], env: { PI_NATIVE_FSYNC: '1' } },
  )
  assert.match(durable.stdout, /OK/, durable.stderr)
  assert.equal((await native.readEntry(a, 'worker-durable')).pid, 9)
})
