'use strict'
// Hardened mode (PI_NATIVE_HARDENED=1, issue 42), both backends, both ways: off, every answer is
// the original's (W-B7: ids unchecked, a file's entry read whatever its name, a symlinked folder
// followed); on, id hygiene and the folder checks of lib/contract/hardened.js. The variable is
// read at each call (G10): the tests switch it between calls.
const { test } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { backends } = require('./helpers.js')
const { makeEntry, tempAgentDir, matrixDir } = require('./store-fixtures.js')
const { within } = require('./events-helpers.js')

const ENV = 'PI_NATIVE_HARDENED'
const posix = process.platform !== 'win32'
const root = typeof process.geteuid === 'function' && process.geteuid() === 0

/** Run `fn` with hardened mode on or off, restoring the variable after. */
async function withMode(on, fn) {
  const before = process.env[ENV]
  if (on) process.env[ENV] = '1'
  else delete process.env[ENV]
  try {
    return await fn()
  } finally {
    if (before === undefined) delete process.env[ENV]
    else process.env[ENV] = before
  }
}

/** Everything under `dir` (relative paths), or [] when it is missing. */
function tree(dir) {
  try {
    return fs.readdirSync(dir, { recursive: true }).map(String).sort()
  } catch {
    return []
  }
}

async function rejection(promise) {
  try {
    await promise
  } catch (err) {
    return err
  }
  assert.fail('expected a rejection')
}

function throws(fn) {
  try {
    fn()
  } catch (err) {
    return err
  }
  assert.fail('expected a throw')
}

const UNSAFE = ['', '.', '..', '.hidden', 'a/b', 'a\\b', '../escape', 'a\0b', 'a b', 'tab\there', 'esc\x1b]0;x\x07', 'caf\u00e9', 'x'.repeat(191), 'c:d']
const SAFE = ['master-session-1', 'worker-abc_DEF.1', '-x', 'x'.repeat(190)]

for (const [name, s] of backends()) {
  test(`${name}: hardened mode's ids — unsafe ones are absent to reads and refused to writes, before any file is touched; off, the original's answers`, async () => {
    const { safeEntryId } = require('../lib/contract/hardened.js')
    for (const id of UNSAFE) assert.equal(safeEntryId(id), false, JSON.stringify(id))
    for (const id of SAFE) assert.equal(safeEntryId(id), true, JSON.stringify(id))
    const a = tempAgentDir()
    // An entry whose id climbs out of the matrix folder (sessionId with separators, W-B7).
    const escaping = makeEntry('master', 'x/../../../outside')
    await withMode(true, async () => {
      const err = await rejection(s.writeEntry(a, escaping))
      assert.equal(err.code, 'ERR_PI_NATIVE_UNSAFE_ID')
      assert.ok(err instanceof TypeError)
      assert.deepStrictEqual(tree(a), [], 'nothing created')
      for (const id of UNSAFE) {
        assert.equal(await s.readEntry(a, id), undefined, JSON.stringify(id))
        const e = makeEntry('master', 'y', { entryId: id })
        assert.equal((await rejection(s.writeEntry(a, e))).code, 'ERR_PI_NATIVE_UNSAFE_ID', JSON.stringify(id))
        assert.equal((await rejection(s.writeEntryIfUnchanged(a, id, undefined, e))).code, 'ERR_PI_NATIVE_UNSAFE_ID')
        assert.equal(throws(() => s.writeEntryIfUnchangedSync(a, e, e)).code, 'ERR_PI_NATIVE_UNSAFE_ID')
        assert.equal((await rejection(s.removeEntry(a, id))).code, 'ERR_PI_NATIVE_UNSAFE_ID')
        assert.equal((await rejection(s.removeEntryIfUnchanged(a, e))).code, 'ERR_PI_NATIVE_UNSAFE_ID')
      }
      assert.deepStrictEqual(tree(a), [], 'nothing created by any refused call')
      // The original's argument errors keep their place before hardened mode's.
      const mismatch = await rejection(s.writeEntryIfUnchanged(a, 'a/b', undefined, makeEntry('master', 'z')))
      assert.equal(mismatch.code, undefined)
      assert.match(mismatch.message, /does not match/)
      assert.ok((await rejection(s.readEntry(42, 'x'))) instanceof TypeError)
      assert.deepStrictEqual(await s.listEntries(42), [])
      // Safe ids work as always.
      const good = makeEntry('master', 'good')
      await s.writeEntry(a, good)
      assert.deepStrictEqual(await s.readEntry(a, 'master-good'), good)
      assert.equal(await s.writeEntryIfUnchanged(a, 'master-good', good, { ...good, pid: 2 }), true)
      assert.equal(s.writeEntryIfUnchangedSync(a, { ...good, pid: 2 }, good), true)
      assert.equal(await s.removeEntryIfUnchanged(a, good), true)
    })
    // Off: the original's path (W-B7), read at this call.
    await withMode(false, async () => {
      await s.writeEntry(a, escaping)
      assert.ok(fs.existsSync(path.join(a, 'outside.json')), 'the original writes where path.join leads')
      assert.deepStrictEqual(await s.readEntry(a, escaping.entryId), escaping)
    })
    fs.rmSync(a, { recursive: true, force: true })
  })

  test(`${name}: hardened mode counts an entry only at the file of its own id (B4/B5 off)`, async () => {
    const a = tempAgentDir()
    const good = makeEntry('master', 'a')
    await s.writeEntry(a, good)
    fs.copyFileSync(path.join(matrixDir(a), 'master-a.json'), path.join(matrixDir(a), 'master-b.json'))
    fs.copyFileSync(path.join(matrixDir(a), 'master-a.json'), path.join(matrixDir(a), 'has space.json'))
    await withMode(false, async () => {
      assert.deepStrictEqual(await s.readEntry(a, 'master-b'), good, 'B4: any name')
      assert.equal((await s.listEntries(a)).length, 3, 'B5: every name')
    })
    await withMode(true, async () => {
      assert.equal(await s.readEntry(a, 'master-b'), undefined)
      assert.deepStrictEqual(await s.readEntry(a, 'master-a'), good)
      assert.deepStrictEqual(await s.listEntries(a), [good])
    })
    fs.rmSync(a, { recursive: true, force: true })
  })

  test(`${name}: hardened mode refuses a process-matrix folder that is a symlink out of agentDir; one inside is followed; off, both are`, { skip: !posix && 'symlinks to folders need privileges on Windows' }, async (t) => {
    const a = tempAgentDir()
    const outside = fs.mkdtempSync(path.join(os.tmpdir(), 'pi-native-outside-'))
    t.after(() => {
      fs.rmSync(a, { recursive: true, force: true })
      fs.rmSync(outside, { recursive: true, force: true })
    })
    fs.mkdirSync(path.join(a, 'state'))
    fs.symlinkSync(outside, matrixDir(a))
    const planted = makeEntry('master', 'planted')
    fs.writeFileSync(path.join(outside, 'master-planted.json'), JSON.stringify(planted))
    const mine = makeEntry('master', 'mine')
    await withMode(true, async () => {
      assert.equal(await s.readEntry(a, 'master-planted'), undefined)
      assert.deepStrictEqual(await s.listEntries(a), [])
      for (const [label, call] of [
        ['writeEntry', () => s.writeEntry(a, mine)],
        ['writeEntryIfUnchanged', () => s.writeEntryIfUnchanged(a, 'master-planted', planted, { ...planted, pid: 9 })],
        ['removeEntry', () => s.removeEntry(a, 'master-planted')],
        ['removeEntryIfUnchanged', () => s.removeEntryIfUnchanged(a, planted)],
      ]) {
        const err = await rejection(call())
        assert.equal(err.code, 'ERR_PI_NATIVE_UNSAFE_FOLDER', label)
        assert.equal(err.path, matrixDir(a))
      }
      const err = throws(() => s.writeEntryIfUnchangedSync(a, planted, { ...planted, pid: 9 }))
      assert.equal(err.code, 'ERR_PI_NATIVE_UNSAFE_FOLDER')
      assert.deepStrictEqual(await s.sweepOrphanTempFiles(a, 0), [])
      assert.deepStrictEqual(tree(outside), ['master-planted.json'], 'nothing written, locked or removed through the link')
      const watch = s.watchEntries(a)[Symbol.asyncIterator]()
      const r = await within(watch.next(), 10_000)
      assert.equal(r?.error?.code, 'ERR_PI_NATIVE_UNSAFE_FOLDER', 'the watch ends with the refusal')
    })
    await withMode(false, async () => {
      assert.deepStrictEqual(await s.readEntry(a, 'master-planted'), planted, 'the original follows the link')
      await s.writeEntry(a, mine)
      assert.ok(fs.existsSync(path.join(outside, 'master-mine.json')))
    })
    // A link that stays inside agentDir is fine.
    fs.rmSync(matrixDir(a))
    fs.mkdirSync(path.join(a, 'real-matrix'))
    fs.symlinkSync(path.join('..', 'real-matrix'), matrixDir(a))
    await withMode(true, async () => {
      await s.writeEntry(a, mine)
      assert.deepStrictEqual(await s.readEntry(a, 'master-mine'), mine)
      assert.ok(fs.existsSync(path.join(a, 'real-matrix', 'master-mine.json')))
    })
    // So is a `state` folder linked outside: refused as well.
    fs.rmSync(path.join(a, 'state'), { recursive: true })
    fs.mkdirSync(path.join(outside, 'state', 'process-matrix'), { recursive: true })
    fs.symlinkSync(path.join(outside, 'state'), path.join(a, 'state'))
    await withMode(true, async () => {
      const e = await rejection(s.writeEntry(a, mine))
      assert.equal(e.code, 'ERR_PI_NATIVE_UNSAFE_FOLDER')
      assert.equal(e.path, path.join(a, 'state'))
    })
  })

  test(`${name}: hardened mode refuses matrix folders owned by another user; off, they are used`, { skip: !root && 'needs root to give a folder to another user' }, async (t) => {
    const a = tempAgentDir()
    t.after(() => fs.rmSync(a, { recursive: true, force: true }))
    const e = makeEntry('master', 'x')
    await s.writeEntry(a, e)
    fs.chownSync(matrixDir(a), 65534, 65534)
    await withMode(true, async () => {
      assert.equal(await s.readEntry(a, 'master-x'), undefined)
      assert.deepStrictEqual(await s.listEntries(a), [])
      const err = await rejection(s.writeEntry(a, e))
      assert.equal(err.code, 'ERR_PI_NATIVE_UNSAFE_FOLDER')
      assert.match(err.message, /owned by uid 65534/)
    })
    await withMode(false, async () => {
      assert.deepStrictEqual(await s.readEntry(a, 'master-x'), e)
      await s.writeEntry(a, { ...e, pid: 3 })
    })
    // The `state` folder too.
    fs.chownSync(matrixDir(a), 0, 0)
    fs.chownSync(path.join(a, 'state'), 65534, 65534)
    await withMode(true, async () => {
      assert.equal((await rejection(s.removeEntry(a, 'master-x'))).path, path.join(a, 'state'))
    })
  })
}
