'use strict'
// pi-native/process-matrix-store and pi-native/atomic-file: the behaviors pinned by the
// original tests (SPEC §4.1–§4.2), for both backends, plus bad-input handling.
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const util = require('node:util')
const { Worker } = require('node:worker_threads')
const { spawnSync } = require('node:child_process')
const lockfile = require('proper-lockfile')
const { backends, root } = require('./helpers.js')
const { makeEntry, tempAgentDir, matrixDir, leftovers } = require('./store-fixtures.js')

for (const [name, s] of backends()) {
  test(`${name}: T1–T2 ids and paths`, () => {
    assert.equal(s.buildEntryId('master', 'session-1'), 'master-session-1')
    assert.equal(s.buildEntryId('worker', 'session-1'), 'worker-session-1')
    const a = '/tmp/agent'
    assert.equal(s.processMatrixDir(a), path.join(a, 'state', 'process-matrix'))
    assert.equal(s.entryPath(a, 'master-session-1'), path.join(a, 'state', 'process-matrix', 'master-session-1.json'))
    assert.equal(s.entryPath(a, '../escape'), path.join(a, 'state', 'process-matrix', '../escape.json'))
    assert.equal(s.entryPath('rel', undefined), path.join('rel', 'state', 'process-matrix', 'undefined.json'))
    assert.equal(s.buildEntryId(undefined, 7), 'undefined-7')
  })

  test(`${name}: T3–T4 missing → undefined / []; write then read; tab layout`, async () => {
    const a = tempAgentDir()
    assert.equal(await s.readEntry(a, 'master-session-1'), undefined)
    assert.deepEqual(await s.listEntries(a), [])
    const e = makeEntry()
    await s.writeEntry(a, e)
    assert.deepStrictEqual(await s.readEntry(a, 'master-session-1'), e)
    const raw = fs.readFileSync(s.entryPath(a, 'master-session-1'), 'utf8')
    assert.ok(raw.endsWith('\n'))
    assert.ok(raw.includes('\n\t"role"'))
    assert.equal(raw, JSON.stringify(e, null, '\t') + '\n')
    assert.deepEqual(leftovers(a), ['master-session-1.json'])
  })

  test(`${name}: T5–T7 CAS: sync match writes, stale expected loses (async and sync)`, async () => {
    const a = tempAgentDir()
    const running = makeEntry()
    await s.writeEntry(a, running)
    const closed = { ...running, status: 'closed' }
    assert.equal(s.writeEntryIfUnchangedSync(a, running, closed), true)
    assert.deepStrictEqual(await s.readEntry(a, running.entryId), closed)

    const newer = makeEntry('worker', 's2', { pid: 2000 })
    await s.writeEntry(a, newer)
    const stale = { ...newer, pid: 1000 }
    assert.equal(await s.writeEntryIfUnchanged(a, newer.entryId, stale, { ...stale, status: 'closed' }), false)
    assert.deepStrictEqual(await s.readEntry(a, newer.entryId), newer)
    assert.equal(s.writeEntryIfUnchangedSync(a, stale, { ...stale, status: 'closed' }), false)
    assert.deepStrictEqual(await s.readEntry(a, newer.entryId), newer)
    assert.deepEqual(leftovers(a).sort(), ['master-session-1.json', 'worker-s2.json'])
  })

  test(`${name}: a store call that finds its entry locked waits for the holder, then lands in full`, async () => {
    // Native first tries the lock once without waiting (the fast path); a busy lock must send
    // it to the full retry policy, never to an error or a skipped write.
    const a = tempAgentDir()
    const e = makeEntry()
    await s.writeEntry(a, e)
    const file = s.entryPath(a, e.entryId)
    const settledWithin = async (p, ms) => {
      let settled = false
      p.then(() => (settled = true), () => (settled = true))
      await new Promise((r) => setTimeout(r, ms))
      return settled
    }
    const held = async (holder, start) => {
      const release = await holder()
      const before = fs.readFileSync(file, 'utf8')
      const op = start()
      assert.equal(await settledWithin(op, 80), false, 'the call waits while the lock is held')
      assert.equal(fs.readFileSync(file, 'utf8'), before, 'nothing changes under a held lock')
      await release()
      return op
    }
    const byLockfile = () => lockfile.lock(file, { realpath: false })
    const byThisProcess = () =>
      new Promise((taken) => {
        let done
        const over = new Promise((r) => (done = r))
        s.withFileLock(file, () => {
          taken(async () => done())
          return over
        })
      })
    for (const holder of [byLockfile, byThisProcess]) {
      const next = { ...e, status: 'closed' }
      assert.equal(await held(holder, () => s.writeEntryIfUnchanged(a, e.entryId, e, next)), true)
      assert.deepStrictEqual(await s.readEntry(a, e.entryId), next)
      assert.equal(await held(holder, () => s.writeEntryIfUnchanged(a, e.entryId, e, next)), false)
      await held(holder, () => s.writeEntry(a, e))
      assert.deepStrictEqual(await s.readEntry(a, e.entryId), e)
      await held(holder, () => s.removeEntry(a, e.entryId))
      assert.equal(await s.readEntry(a, e.entryId), undefined)
      await s.writeEntry(a, e)
    }
    assert.deepEqual(leftovers(a), ['master-session-1.json'])
  })

  test(`${name}: a CAS expected that runs JS code (getters, Proxy) is compared by util.isDeepStrictEqual under the lock`, async () => {
    const a = tempAgentDir()
    const e = makeEntry()
    const lockDir = () => s.entryPath(a, e.entryId) + '.lock'
    const calls = []
    // A copy of `e` whose `status` is a getter: it records whether the lock was held when read.
    const withGetter = (get) => {
      const x = { ...e }
      delete x.status
      Object.defineProperty(x, 'status', {
        enumerable: true,
        get: () => {
          calls.push(fs.existsSync(lockDir()))
          return get()
        },
      })
      return x
    }
    const boom = () => {
      throw new Error('getter threw')
    }
    /** What the original answers: util.isDeepStrictEqual on the file as it reads now. */
    const oracle = async (expected) => {
      const current = await s.readEntry(a, e.entryId)
      const before = calls.length
      try {
        return util.isDeepStrictEqual(current, expected)
      } catch (err) {
        return err
      } finally {
        calls.length = before // the oracle's own getter calls do not count
      }
    }
    const outcome = (f) => {
      try {
        const r = f()
        return r instanceof Promise ? r.catch((err) => err) : r
      } catch (err) {
        return err
      }
    }
    const closed = { ...e, status: 'closed' }
    const cases = [
      ['absent file, throwing getter', false, () => withGetter(boom)],
      ['equal file, getter returning the value', true, () => withGetter(() => e.status)],
      ['equal file, throwing getter', true, () => withGetter(boom)],
      ['file with one key less, throwing getter', 'fewer', () => withGetter(boom)],
      ['equal file, Proxy', true, () => new Proxy({ ...e }, { ownKeys: (t) => (calls.push(fs.existsSync(lockDir())), Reflect.ownKeys(t)) })],
      ['different file, Proxy', 'other', () => new Proxy({ ...e }, {})],
    ]
    for (const [label, file, make] of cases) {
      for (const variant of ['async', 'sync', 'remove']) {
        fs.rmSync(matrixDir(a), { recursive: true, force: true })
        if (file === true) await s.writeEntry(a, e)
        if (file === 'fewer') await s.writeEntry(a, { ...e, hostname: undefined })
        if (file === 'other') await s.writeEntry(a, { ...e, pid: 4242 })
        const expected = make()
        const want = await oracle(expected)
        const before = fs.existsSync(s.entryPath(a, e.entryId)) ? fs.readFileSync(s.entryPath(a, e.entryId), 'utf8') : null
        calls.length = 0
        const got = await outcome(() =>
          variant === 'async'
            ? s.writeEntryIfUnchanged(a, e.entryId, expected, closed)
            : variant === 'sync'
              ? s.writeEntryIfUnchangedSync(a, expected, closed)
              : s.removeEntryIfUnchanged(a, expected),
        )
        const where = `${label} (${variant})`
        if (want instanceof Error) {
          assert.ok(got instanceof Error && got.message === want.message, `${where}: ${got}`)
        } else {
          assert.equal(got, want, where)
        }
        assert.ok(calls.every(Boolean), `${where}: expected read without the lock held`)
        const after = fs.existsSync(s.entryPath(a, e.entryId)) ? fs.readFileSync(s.entryPath(a, e.entryId), 'utf8') : null
        if (got === true) assert.notEqual(after, before, where)
        else assert.equal(after, before, where)
        assert.ok(!fs.existsSync(lockDir()), `${where}: lock left behind`)
      }
    }
  })

  test(`${name}: a sync CAS that meets this process's async CAS waiting for its JS comparison gives up within its budget, and lands from an exit hook (W-B6)`, async () => {
    const a = tempAgentDir()
    // Timestamps that only V8 judges: with `expected` undefined the async CAS waits for JS too.
    const e = makeEntry('worker', 'wb6', { taskRef: '0', startedAt: 'Sat, 18 Jul 2026 00:00:00 GMT' })
    const judged = {
      'a Proxy expected': (cur) => new Proxy({ ...cur }, {}),
      'undefined over V8-judged timestamps': () => undefined,
    }
    for (const [what, expectedOf] of Object.entries(judged)) {
      fs.rmSync(matrixDir(a), { recursive: true, force: true })
      await s.writeEntry(a, e)
      const cur = await s.readEntry(a, e.entryId)
      const pending = s.writeEntryIfUnchanged(a, e.entryId, expectedOf(cur), { ...e, taskRef: 'async' }).then(
        (r) => r,
        (err) => err,
      )
      const started = Date.now()
      let sync
      try {
        sync = s.writeEntryIfUnchangedSync(a, cur, { ...e, taskRef: 'sync' })
      } catch (err) {
        sync = err
      }
      // B10: at most the sync retry budget (one 25 ms wait), never the 2 s wait for a native
      // holder, which cannot finish while this thread is blocked.
      assert.ok(Date.now() - started < 1000, `${what}: the sync CAS blocked ${Date.now() - started} ms`)
      assert.ok(typeof sync === 'boolean' || sync.code === 'ELOCKED', `${what}: ${sync}`)
      const async = await pending
      assert.equal(typeof async, 'boolean', `${what}: ${async}`)
      const onDisk = (await s.readEntry(a, e.entryId)).taskRef
      assert.ok(onDisk === (sync === true ? 'sync' : async === true ? 'async' : e.taskRef) || (sync === true && async === true && onDisk === 'async'), `${what}: ${onDisk}`)
      assert.deepEqual(leftovers(a), ['worker-wb6.json'], `${what}: nothing left behind`)
    }
    // From process.on('exit') the async CAS's comparison never comes: the exit hook's sync
    // CAS still writes the terminal state, however far the async one got.
    const code = `
      const s = require(${JSON.stringify(path.join(__dirname, '..', 'lib', 'index.js'))})
      const a = ${JSON.stringify(a)}
      ;(async () => {
        const cur = await s.readEntry(a, 'worker-wb6')
        process.once('exit', () => console.log(s.writeEntryIfUnchangedSync(a, cur, { ...cur, status: 'closed' })))
        s.writeEntryIfUnchanged(a, cur.entryId, new Proxy(cur, {}), { ...cur, taskRef: 'async' }).catch(() => {})
        process.exit(0)
      })()`
    for (let i = 0; i < 3; i++) {
      fs.rmSync(matrixDir(a), { recursive: true, force: true })
      await s.writeEntry(a, e)
      const out = spawnSync(process.execPath, ['-e', code], { env: { ...process.env, PI_NATIVE_BACKEND: name }, encoding: 'utf8' })
      assert.equal(out.stdout.trim(), 'true', `exit hook, run ${i}: ${out.stderr}`)
      assert.equal((await s.readEntry(a, e.entryId)).status, 'closed')
      assert.deepEqual(leftovers(a), ['worker-wb6.json'], `exit hook, run ${i}: nothing left behind`)
    }
    fs.rmSync(a, { recursive: true, force: true })
  })

  test(`${name}: sweepOrphanTempFiles removes old temp files of dead writers and old private lock directories, by their exact name patterns`, async () => {
    const a = tempAgentDir()
    const dir = matrixDir(a)
    fs.mkdirSync(dir, { recursive: true })
    const dead = spawnSync(process.execPath, ['-e', 'console.log(process.pid)'], { encoding: 'utf8' })
    const pid = Number(dead.stdout)
    const uuid = '0f8fad5b-d9cb-469f-a165-70867728950e'
    const names = {
      [`w.json.${pid}.${uuid}.tmp`]: true,
      [`.json.${pid}.${uuid}.tmp`]: true, // the temp of entryPath(a, ''), an entry file too (W-B7)
      [`w.json.+${pid}.${uuid}.tmp`]: false,
      [`u.json.${pid}.${uuid.toUpperCase()}.tmp`]: false, // a name of its own: Windows folders ignore case
      [`w.${pid}.${uuid}.tmp`]: false,
      [`w.json.${process.pid}.${uuid}.tmp`]: false, // its writer is alive
      [`fresh.json.${pid}.${uuid}.tmp`]: false, // too young
    }
    const old = new Date(Date.now() - 3_600_000)
    for (const n of Object.keys(names)) {
      fs.writeFileSync(path.join(dir, n), 'x')
      if (!n.startsWith('fresh')) fs.utimesSync(path.join(dir, n), old, old)
    }
    // A native lock's private directories (network folders) left by a crash: empty ones an
    // hour old go; a younger one stays even with minAgeMs 0 (its maker may be mid-attempt).
    const dirs = {
      [`w.json.lock.${uuid}`]: true,
      [`.json.lock.${uuid}`]: true,
      [`full.json.lock.${uuid}`]: false, // not empty: not a lock's
      [`u.json.lock.${uuid.toUpperCase()}`]: false,
      [`w.lock.${uuid}`]: false,
      [`young.json.lock.${uuid}`]: false, // 2 minutes old
    }
    for (const n of Object.keys(dirs)) {
      fs.mkdirSync(path.join(dir, n))
      if (n.startsWith('full')) fs.writeFileSync(path.join(dir, n, 'x'), '')
      const t = n.startsWith('young') ? new Date(Date.now() - 120_000) : old
      fs.utimesSync(path.join(dir, n), t, t)
    }
    const all = { ...names, ...dirs }
    const removed = await s.sweepOrphanTempFiles(a, 600_000)
    const want = Object.keys(all).filter((n) => all[n])
    assert.deepEqual(removed.map((f) => path.basename(f)).sort(), want.sort())
    assert.deepEqual(fs.readdirSync(dir).sort(), Object.keys(all).filter((n) => !all[n]).sort())
    assert.deepEqual(await s.sweepOrphanTempFiles(a, 0), [path.join(dir, `fresh.json.${pid}.${uuid}.tmp`)])
    assert.ok(fs.existsSync(path.join(dir, `young.json.lock.${uuid}`)))
    fs.rmSync(a, { recursive: true, force: true })
  })

  test(`${name}: writeFileAtomic(Sync) with a NUL in the name reads options.mode once, as the original's open argument, before the path fails`, async () => {
    const a = tempAgentDir()
    const file = path.join(a, 'x\0y')
    const boom = () => ({
      get mode() {
        throw new Error('mode getter')
      },
    })
    assert.throws(() => s.writeFileAtomicSync(file, 'x', boom()), { message: 'mode getter' })
    await assert.rejects(s.writeFileAtomic(file, 'x', boom()), { message: 'mode getter' })
    let reads = 0
    const counted = {
      get mode() {
        reads++
        return 0o600
      },
    }
    assert.throws(() => s.writeFileAtomicSync(file, 'x', counted), { code: 'ERR_INVALID_ARG_VALUE' })
    await assert.rejects(s.writeFileAtomic(file, ['x'], counted), { code: 'ERR_INVALID_ARG_VALUE' })
    assert.equal(reads, 2)
    assert.throws(() => s.writeFileAtomicSync(file, 'x', null), TypeError) // null.mode, as the original reads it
    assert.deepEqual(fs.readdirSync(a), [])
    fs.rmSync(a, { recursive: true, force: true })
  })

  test(`${name}: T8–T11 corrupt, foreign, retired and inconsistent files read as absent`, async () => {
    const a = tempAgentDir()
    const good = makeEntry('worker', 'good')
    await s.writeEntry(a, good)
    const dir = matrixDir(a)
    fs.writeFileSync(path.join(dir, 'master-broken.json'), '{not json')
    fs.writeFileSync(path.join(dir, 'readme.txt'), 'hello')
    fs.writeFileSync(path.join(dir, 'worker-x.json'), '{"role":"worker"}')
    const retired = { entryId: 'master-old', role: 'master', sessionId: 'old', agentId: 'a', resumeContext: {}, pid: 1, hostname: 'h', startedAt: '2026-07-19T00:00:00Z', heartbeatAt: '2026-07-19T00:00:00Z', status: 'running' }
    fs.writeFileSync(path.join(dir, 'master-old.json'), JSON.stringify(retired))
    assert.equal(await s.readEntry(a, 'master-broken'), undefined)
    assert.equal(await s.readEntry(a, 'master-old'), undefined)
    // T11: written without validation, read back as absent.
    const odd = makeEntry('master', 'odd', { status: 'resumable' })
    odd.resumable = { agent: { ...odd.agent, agentId: 'someone-else' }, lastCode: 'running' }
    await s.writeEntry(a, odd)
    assert.ok(fs.existsSync(s.entryPath(a, odd.entryId)))
    assert.equal(await s.readEntry(a, odd.entryId), undefined)
    assert.deepStrictEqual(await s.listEntries(a), [good])
  })

  test(`${name}: T12–T13 remove, remove again, stale removeIfUnchanged keeps the newer entry`, async () => {
    const a = tempAgentDir()
    const e = makeEntry()
    await s.writeEntry(a, e)
    assert.equal(await s.removeEntry(a, e.entryId), undefined)
    assert.equal(fs.existsSync(s.entryPath(a, e.entryId)), false)
    assert.equal(await s.removeEntry(a, e.entryId), undefined)
    const newer = { ...e, pid: 2000 }
    await s.writeEntry(a, newer)
    assert.equal(await s.removeEntryIfUnchanged(a, { ...e, pid: 1000 }), false)
    assert.deepStrictEqual(await s.readEntry(a, e.entryId), newer)
    assert.equal(await s.removeEntryIfUnchanged(a, newer), true)
    assert.equal(await s.readEntry(a, e.entryId), undefined)
    assert.deepEqual(leftovers(a), [])
  })

  test(`${name}: listEntries is in UTF-16 name order, keeps duplicates, ignores locks and temps`, async () => {
    const a = tempAgentDir()
    const ids = ['b', 'a', 'Z', 'é', 'a-b', 'a_b', '\u{1F600}', '\uFF5E']
    for (const id of ids) await s.writeEntry(a, makeEntry('worker', id))
    const dir = matrixDir(a)
    fs.copyFileSync(path.join(dir, 'worker-a.json'), path.join(dir, 'zz-copy.json'))
    fs.mkdirSync(path.join(dir, 'worker-b.json.lock'))
    fs.writeFileSync(path.join(dir, 'worker-b.json.123.abc.tmp'), '{}')
    const names = fs.readdirSync(dir).filter((n) => n.endsWith('.json')).sort()
    const got = (await s.listEntries(a)).map((e) => e.entryId)
    const want = names.map((n) => (n === 'zz-copy.json' ? 'worker-a' : n.slice(0, -5)))
    assert.deepEqual(got, want)
    fs.rmdirSync(path.join(dir, 'worker-b.json.lock'))
  })

  test(`${name}: atomic writes: parents created, full replacement, no temp left, 100 concurrent`, async () => {
    const d = tempAgentDir('pi-native-atomic-')
    const file = path.join(d, 'a', 'b', 'c.txt')
    await s.writeFileAtomic(file, 'x'.repeat(1000))
    s.writeFileAtomicSync(file, 'short')
    assert.equal(fs.readFileSync(file, 'utf8'), 'short')
    const payloads = Array.from({ length: 100 }, (_, i) => `payload-${i}-${'y'.repeat(i * 10)}`)
    const settled = await Promise.allSettled(payloads.map((p) => s.writeFileAtomic(file, p)))
    const failed = settled.filter((r) => r.status === 'rejected').map((r) => r.reason)
    if (name === 'js' && process.platform === 'win32') {
      // B19: the original retries a win32 rename 9 times, ~1.3 s in all; 100 writers renaming
      // over one file at once can outlast that (seen under Wine), and then the write fails with
      // the rename's own error, its temp file removed.
      for (const err of failed) assert.ok(['EPERM', 'EACCES', 'EBUSY'].includes(err.code) && err.syscall === 'rename', String(err))
      assert.ok(failed.length < payloads.length, 'some writes land')
    } else {
      assert.deepEqual(failed, [])
    }
    assert.ok(payloads.includes(fs.readFileSync(file, 'utf8')))
    assert.deepEqual(fs.readdirSync(path.dirname(file)), ['c.txt'])
    // A failing write (target is a directory) leaves no temp file. Renaming a file over a
    // directory is EISDIR on POSIX, EPERM on Windows (as Node's own fs.renameSync reports).
    fs.mkdirSync(path.join(d, 'dir.json', 'inner'), { recursive: true })
    const overDir = process.platform === 'win32' ? 'EPERM' : 'EISDIR'
    assert.throws(() => s.writeFileAtomicSync(path.join(d, 'dir.json'), 'x'), { code: overDir, syscall: 'rename' })
    await assert.rejects(s.writeFileAtomic(path.join(d, 'dir.json'), 'x'), { code: overDir })
    assert.deepEqual(fs.readdirSync(d).sort(), ['a', 'dir.json'])
    if (process.getuid?.() !== 0) return
    // mode honored (umask applies)
    s.writeFileAtomicSync(path.join(d, 'm.txt'), 'm', { mode: 0o600 })
    assert.equal(fs.statSync(path.join(d, 'm.txt')).mode & 0o777, 0o600)
  })

  test(`${name}: atomic writes take every mode and iterable of chunks Node's fs takes, and refuse the rest with Node's error`, async () => {
    const d = tempAgentDir('pi-native-atomic-args-')
    const fsp = require('node:fs/promises')
    /** Node's answer for a mode: the created file's permission bits, or its error. */
    const nodeMode = (mode, i) => {
      const ref = path.join(d, `ref-${i}`)
      try {
        fs.closeSync(fs.openSync(ref, 'wx', mode ?? 0o666))
        return fs.statSync(ref).mode & 0o777
      } catch (err) {
        return `${err.code}: ${err.message}`
      }
    }
    const outcome = async (f, file) => {
      try {
        await f()
        return fs.statSync(file).mode & 0o777
      } catch (err) {
        return `${err.code}: ${err.message}`
      }
    }
    const modes = [undefined, null, 0o600, 0o640, '600', '0644', '0o644', '8', '', -1, 1.5, 2 ** 32, NaN, 10n, true, {}, [0o600]]
    for (const [i, mode] of modes.entries()) {
      const want = nodeMode(mode, i)
      for (const variant of ['async', 'sync']) {
        const parent = path.join(d, `${variant}-${i}`)
        const file = path.join(parent, 'f.txt')
        const got = await outcome(
          () => (variant === 'async' ? s.writeFileAtomic(file, 'x', { mode }) : s.writeFileAtomicSync(file, 'x', { mode })),
          file,
        )
        assert.equal(got, want, `mode ${util.inspect(mode)} (${variant})`)
        assert.ok(fs.existsSync(parent), `mode ${util.inspect(mode)} (${variant}): the parent is created first`)
        assert.deepEqual(fs.readdirSync(parent), typeof want === 'number' ? ['f.txt'] : [], 'no temp file left')
      }
    }
    // A bad mode wins over bad content, as the original's open comes before its write.
    assert.throws(() => s.writeFileAtomicSync(path.join(d, 'both.txt'), 42, { mode: 'x' }), { code: 'ERR_INVALID_ARG_VALUE' })

    // Chunks: what Node's FileHandle#writeFile writes for the same iterable (async variant only).
    async function* asyncChunks() {
      yield 'a'
      yield Buffer.from('b')
      yield new Uint16Array([0x6463]) // the bytes "cd"
    }
    function* promiseChunks() {
      yield Promise.resolve('p')
      yield 'q'
    }
    async function* failing() {
      yield 'partial'
      throw new Error('source failed')
    }
    const iterables = [
      ['async generator', asyncChunks],
      ['sync generator of promises', promiseChunks],
      ['array of strings', () => ['x', 'y']],
      ['boxed string', () => new String('boxed')],
      ['array with a number chunk', () => ['x', 5]],
      ['failing async generator', failing],
    ]
    for (const [label, make] of iterables) {
      const ref = path.join(d, `ref-${label}`)
      let want
      try {
        const fh = await fsp.open(ref, 'wx')
        try {
          await fh.writeFile(make())
        } finally {
          await fh.close()
        }
        want = fs.readFileSync(ref, 'latin1')
      } catch (err) {
        want = `${err.constructor.name} ${err.code}: ${err.message}`
      }
      const parent = path.join(d, `chunks-${label}`)
      const file = path.join(parent, 'f.txt')
      let got
      try {
        await s.writeFileAtomic(file, make())
        got = fs.readFileSync(file, 'latin1')
      } catch (err) {
        got = `${err.constructor.name} ${err.code}: ${err.message}`
      }
      assert.equal(got, want, label)
      assert.deepEqual(fs.readdirSync(parent), got === want && !got.includes(':') ? ['f.txt'] : [], `${label}: no temp left`)
    }
  })

  test(`${name}: withFileLock(Sync) excludes proper-lockfile and releases on throw`, async () => {
    const d = tempAgentDir('pi-native-lock-')
    const file = path.join(d, 'target.json')
    const tryJs = () => lockfile.lockSync(file, { realpath: false })
    s.withFileLockSync(file, () => {
      assert.throws(tryJs, { code: 'ELOCKED' })
    })
    tryJs()() // acquire and release at once
    await s.withFileLock(file, async () => {
      assert.throws(tryJs, { code: 'ELOCKED' })
    })
    tryJs()()
    assert.throws(() => s.withFileLockSync(file, () => { throw new Error('boom') }), /boom/)
    await assert.rejects(s.withFileLock(file, async () => { throw new Error('async boom') }), /async boom/)
    tryJs()()
    // A JS holder blocks us: ELOCKED with `file`, after the sync retries.
    const release = tryJs()
    assert.throws(() => s.withFileLockSync(file, () => 1, { retries: 0 }), (err) => err.code === 'ELOCKED' && err.file === path.resolve(file) && err.message === 'Lock file is already being held')
    release()
    // Concurrent read-modify-writes under the lock never lose an update. (The original retries
    // blindly and can starve beyond two contenders; native queues in-process waiters FIFO.)
    const counter = path.join(d, 'counter')
    fs.writeFileSync(counter, '0')
    const contenders = name === 'native' ? 20 : 2
    await Promise.all(
      Array.from({ length: contenders }, () =>
        s.withFileLock(counter, async () => {
          const n = Number(fs.readFileSync(counter, 'utf8'))
          await new Promise((r) => setTimeout(r, 1))
          await s.writeFileAtomic(counter, String(n + 1))
        }),
      ),
    )
    assert.equal(fs.readFileSync(counter, 'utf8'), String(contenders))
    assert.deepEqual(fs.readdirSync(d).sort(), ['counter', 'target.json'].filter((n) => fs.existsSync(path.join(d, n))).sort())
  })
}

test('worker threads hammering one file through withFileLockSync never tear or lose a write', async () => {
  for (const backend of ['native', 'js']) {
    const d = tempAgentDir('pi-native-wt-')
    const file = path.join(d, 'count.json')
    fs.writeFileSync(file, JSON.stringify({ n: 0, pad: '' }))
    const code = `
      const { workerData } = require('node:worker_threads')
      const { loadNative, loadJs } = require(${JSON.stringify(path.join(root, 'lib', 'binding.js'))})
      const s = workerData.backend === 'native' ? loadNative() : loadJs()
      const fs = require('node:fs')
      for (let i = 0; i < 100; i++) {
        s.withFileLockSync(workerData.file, () => {
          const v = JSON.parse(fs.readFileSync(workerData.file, 'utf8'))
          s.writeFileAtomicSync(workerData.file, JSON.stringify({ n: v.n + 1, pad: 'x'.repeat(i * 37) }))
        })
      }`
    const workers = [0, 1].map(() => new Worker(code, { eval: true, workerData: { file, backend } }))
    await Promise.all(workers.map((w) => new Promise((resolve, reject) => { w.once('exit', resolve); w.once('error', reject) })))
    assert.equal(JSON.parse(fs.readFileSync(file, 'utf8')).n, 200, backend)
    assert.deepEqual(fs.readdirSync(d), ['count.json'], backend)
  }
})

test('bad input: no crash; the original error class and message where the spec says, else a TypeError naming the argument', async () => {
  const [[, n], [, j]] = backends()
  const a = tempAgentDir()
  const cyclic = makeEntry()
  cyclic.self = cyclic
  const big = makeEntry('master', 'big', { pid: 10n })
  for (const [label, call] of [
    ['readEntry(5)', (s) => s.readEntry(5, 'x')],
    ['readEntry(null)', (s) => s.readEntry(null, 'x')],
    ['writeEntry(undefined entry)', (s) => s.writeEntry(a, undefined)],
    ['writeEntry(cyclic)', (s) => s.writeEntry(a, cyclic)],
    ['writeEntry(bigint)', (s) => s.writeEntry(a, big)],
    ['CAS mismatch', (s) => s.writeEntryIfUnchanged(a, 'x', undefined, makeEntry())],
    ['CAS null next', (s) => s.writeEntryIfUnchanged(a, 'x', undefined, null)],
    ['CAS cyclic next', (s) => s.writeEntryIfUnchanged(a, cyclic.entryId, undefined, cyclic)],
    ['removeEntryIfUnchanged(null)', (s) => s.removeEntryIfUnchanged(a, null)],
    ['removeEntry(obj)', (s) => s.removeEntry({}, 'x')],
    ['writeFileAtomic(5)', (s) => s.writeFileAtomic(5, 'x')],
  ]) {
    let nErr, jErr
    const nP = call(n)
    assert.ok(nP instanceof Promise, `${label} returns a promise (never a synchronous throw)`)
    await nP.then(() => {}, (e) => { nErr = e })
    await call(j).then(() => {}, (e) => { jErr = e })
    assert.ok(nErr, `${label}: native rejects`)
    assert.ok(jErr, `${label}: js rejects`)
    assert.equal(nErr.constructor, jErr.constructor, `${label}: ${nErr.message} vs ${jErr.message}`)
    if (label.startsWith('readEntry') || label.startsWith('CAS mismatch') || label.includes('bigint') || label.includes('cyclic')) {
      assert.equal(nErr.message, jErr.message, label)
    }
  }
  // Path arguments: Node's own ERR_INVALID_ARG_TYPE message (the JS backend calls path.join).
  for (const bad of [5, -0, 1.5, true, null, undefined, {}, [], () => {}, function named() {}, new Date(0), 10n, Object.create(null)]) {
    let want
    try {
      j.processMatrixDir(bad)
    } catch (err) {
      want = err
    }
    assert.throws(() => n.processMatrixDir(bad), (err) => err instanceof TypeError && err.code === 'ERR_INVALID_ARG_TYPE' && err.message === want.message, `${typeof bad}: ${want.message}`)
  }
  // A NUL byte is an fs error, which reads as absent (B3).
  assert.equal(await n.readEntry('a\0b', 'x'), undefined)
  assert.equal(await j.readEntry('a\0b', 'x'), undefined)
  // listEntries swallows a bad agentDir (B3).
  for (const bad of [5, null, undefined, {}, 'a\0b']) {
    assert.deepEqual(await n.listEntries(bad), [])
    assert.deepEqual(await j.listEntries(bad), [])
  }
  // Sync CAS: synchronous throws with the original messages.
  assert.throws(() => n.writeEntryIfUnchangedSync(a, null, makeEntry()), TypeError)
  assert.throws(() => n.writeEntryIfUnchangedSync(a, makeEntry(), makeEntry('worker')), {
    name: 'TypeError',
    message: "Process-matrix replacement entry 'worker-session-1' does not match 'master-session-1'.",
  })
  assert.throws(() => n.writeEntryIfUnchangedSync(a, undefined, undefined), TypeError)
  // Serialization errors after a matching CAS: the JSON.stringify error, file untouched.
  await n.writeEntry(a, makeEntry())
  assert.throws(() => n.writeEntryIfUnchangedSync(a, makeEntry(), { ...makeEntry(), x: 1n }), /BigInt/)
  assert.deepStrictEqual(await n.readEntry(a, 'master-session-1'), makeEntry())
  assert.deepEqual(leftovers(a).filter((x) => x.startsWith('master-session-1')), ['master-session-1.json'])
})

test("a NUL byte in a path: reads answer what the original's guarded fs.promises.readFile answers, writes reject with Node's own mkdir error; both backends", async () => {
  // The original reads inside try/catch (B3), and Node's readFile reports a NUL byte as a
  // rejection (ERR_INVALID_ARG_VALUE), not a synchronous throw: the original resolves undefined.
  const original = async (file) => {
    try {
      return JSON.parse(await fs.promises.readFile(file, 'utf8'))
    } catch {
      return undefined
    }
  }
  const a = tempAgentDir()
  const nulDir = `${a}\0x`
  const pending = fs.promises.readFile(path.join(nulDir, 'm.json'), 'utf8')
  const nodeError = await pending.then(() => null, (err) => err)
  assert.equal(nodeError?.code, 'ERR_INVALID_ARG_VALUE')
  const mkdirError = await fs.promises.mkdir(path.join(nulDir, 'state', 'process-matrix'), { recursive: true }).then(() => null, (err) => err)
  let mkdirSyncError
  try {
    fs.mkdirSync(path.join(nulDir, 'state', 'process-matrix'), { recursive: true })
  } catch (err) {
    mkdirSyncError = err
  }
  const shape = (err) => err && [err.constructor, err.code, err.message]
  for (const [name, s] of backends()) {
    for (const [dir, id] of [[nulDir, 'master-session-1'], [a, 'master-\0session-1']]) {
      assert.equal(await s.readEntry(dir, id), await original(s.entryPath(dir, id)), `${name} readEntry ${JSON.stringify([dir, id])}`)
    }
    assert.deepEqual(await s.listEntries(nulDir), [], `${name} listEntries`)
    const entry = makeEntry()
    for (const [call, p] of [
      ['writeEntry', s.writeEntry(nulDir, entry)],
      ['writeEntryIfUnchanged', s.writeEntryIfUnchanged(nulDir, entry.entryId, undefined, entry)],
      ['removeEntry', s.removeEntry(nulDir, entry.entryId)],
      ['removeEntryIfUnchanged', s.removeEntryIfUnchanged(nulDir, entry)],
    ]) {
      assert.deepEqual(shape(await p.then(() => null, (err) => err)), shape(mkdirError), `${name} ${call}`)
    }
    assert.throws(() => s.writeEntryIfUnchangedSync(nulDir, entry, entry), (err) => assert.deepEqual(shape(err), shape(mkdirSyncError)) ?? true, `${name} writeEntryIfUnchangedSync`)
  }
})
