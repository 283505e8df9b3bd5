'use strict'
// Defects found by running the hosts' own test suites against the swap: the lock
// helpers create the target's parent folder first (SPEC B17a), and the JS backend decides
// "win32" at each call, as the original reads process.platform at each call (B18/B19).
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const lockfile = require('proper-lockfile')
const { backends } = require('./helpers.js')

const tmp = () => fs.mkdtempSync(path.join(os.tmpdir(), 'pi-native-hostfix-'))

/** Node's own error for the same recursive mkdir: the oracle for the lock helpers' first step. */
function nodeMkdirError(dir) {
  try {
    fs.mkdirSync(dir, { recursive: true })
  } catch (err) {
    return err
  }
  throw new Error(`mkdir of ${dir} unexpectedly succeeded`)
}

function sameNodeError(actual, expected) {
  assert.equal(actual.constructor, expected.constructor)
  assert.equal(actual.message, expected.message)
  assert.deepEqual(Object.keys(actual), Object.keys(expected))
  for (const k of Object.keys(expected)) assert.equal(actual[k], expected[k], k)
}

for (const [name, s] of backends()) {
  test(`${name}: withFileLockSync creates missing parent folders, runs fn, leaves no lock`, () => {
    const base = tmp()
    const file = path.join(base, 'a', 'b', 'c', 'integration.lock.json')
    let ran = false
    const out = s.withFileLockSync(file, () => {
      ran = true
      // Held while fn runs: a direct proper-lockfile attempt on the same path is refused.
      assert.throws(() => lockfile.lockSync(file, { realpath: false }), (e) => e.code === 'ELOCKED')
      return 42
    })
    assert.equal(out, 42)
    assert.ok(ran)
    assert.ok(fs.statSync(path.dirname(file)).isDirectory())
    assert.deepEqual(fs.readdirSync(path.dirname(file)), [])
  })

  test(`${name}: withFileLock creates missing parent folders, runs fn, leaves no lock`, async () => {
    const base = tmp()
    const file = path.join(base, 'x', 'y', 'appender.jsonl')
    const out = await s.withFileLock(file, async () => {
      fs.appendFileSync(file, 'line\n')
      return 'done'
    })
    assert.equal(out, 'done')
    assert.deepEqual(fs.readdirSync(path.dirname(file)), ['appender.jsonl'])
  })

  test(`${name}: a parent that cannot be created gives Node's mkdir error and fn never runs`, { skip: process.platform === 'win32' && "a recursive mkdir through a file: Windows reports it differently, and Node's own error under Wine is not even stable between identical calls, so it cannot serve as the oracle there" }, async () => {
    const base = tmp()
    const blocker = path.join(base, 'not-a-dir')
    fs.writeFileSync(blocker, 'x')
    const file = path.join(blocker, 'sub', 'f.json')
    const expected = nodeMkdirError(path.dirname(file))
    let ran = false
    let thrown
    try {
      s.withFileLockSync(file, () => (ran = true))
    } catch (err) {
      thrown = err
    }
    assert.ok(thrown, 'withFileLockSync must throw')
    sameNodeError(thrown, expected)
    let rejected
    await s.withFileLock(file, async () => (ran = true)).catch((err) => (rejected = err))
    assert.ok(rejected, 'withFileLock must reject')
    sameNodeError(rejected, expected)
    assert.equal(ran, false)
    assert.deepEqual(fs.readdirSync(base), ['not-a-dir'])
  })
}

test('js backend: reads process.platform at each call (win32 lock EPERM is contention only while it says win32)', { skip: process.platform === 'win32' && 'its POSIX half needs a POSIX host' }, async () => {
  const js = require('../lib/binding.js').loadJs()
  const base = tmp()
  const file = path.join(base, 'f.json')
  const realPlatform = Object.getOwnPropertyDescriptor(process, 'platform')
  // proper-lockfile makes its lock directory through graceful-fs, looked up at each call.
  const gfs = require('graceful-fs')
  const realMkdirSync = gfs.mkdirSync
  let lockAttempts = 0
  // The lock attempt (mkdirSync of `<file>.lock`) fails with EPERM.
  gfs.mkdirSync = function (p, ...rest) {
    if (String(p).endsWith('.lock')) {
      lockAttempts++
      throw Object.assign(new Error(`EPERM: operation not permitted, mkdir '${p}'`), { code: 'EPERM', errno: -1, syscall: 'mkdir', path: p })
    }
    return realMkdirSync.call(this, p, ...rest)
  }
  try {
    Object.defineProperty(process, 'platform', { ...realPlatform, value: 'win32' })
    assert.throws(() => js.withFileLockSync(file, () => 1, { retries: 1 }), (e) => e.code === 'EPERM')
    assert.equal(lockAttempts, 2, 'win32: EPERM is retried as contention (retries 1 → 2 attempts)')

    lockAttempts = 0
    Object.defineProperty(process, 'platform', realPlatform)
    assert.throws(() => js.withFileLockSync(file, () => 1, { retries: 1 }), (e) => e.code === 'EPERM')
    assert.equal(lockAttempts, 1, 'POSIX: EPERM is thrown at once')
  } finally {
    gfs.mkdirSync = realMkdirSync
    Object.defineProperty(process, 'platform', realPlatform)
  }
})

test('js backend: rename EPERM is retried only while process.platform says win32', { skip: process.platform === 'win32' && 'its POSIX half needs a POSIX host' }, async () => {
  const js = require('../lib/binding.js').loadJs()
  const base = tmp()
  const file = path.join(base, 'f.txt')
  const realPlatform = Object.getOwnPropertyDescriptor(process, 'platform')
  const realRenameSync = fs.renameSync
  const realRename = fs.promises.rename
  let failures = 0
  const eperm = (p) => Object.assign(new Error(`EPERM: operation not permitted, rename '${p}'`), { code: 'EPERM', syscall: 'rename' })
  fs.renameSync = function (a, b) {
    if (failures-- > 0) throw eperm(a)
    return realRenameSync.call(this, a, b)
  }
  fs.promises.rename = async function (a, b) {
    if (failures-- > 0) throw eperm(a)
    return realRename.call(this, a, b)
  }
  try {
    Object.defineProperty(process, 'platform', { ...realPlatform, value: 'win32' })
    failures = 2
    js.writeFileAtomicSync(file, 'sync-win')
    assert.equal(fs.readFileSync(file, 'utf8'), 'sync-win')
    failures = 2
    await js.writeFileAtomic(file, 'async-win')
    assert.equal(fs.readFileSync(file, 'utf8'), 'async-win')

    Object.defineProperty(process, 'platform', realPlatform)
    failures = 1
    assert.throws(() => js.writeFileAtomicSync(file, 'sync-posix'), (e) => e.code === 'EPERM')
    failures = 1
    await assert.rejects(js.writeFileAtomic(file, 'async-posix'), (e) => e.code === 'EPERM')
    assert.equal(fs.readFileSync(file, 'utf8'), 'async-win')
    assert.deepEqual(fs.readdirSync(base), ['f.txt'], 'no temp file left behind')
  } finally {
    fs.renameSync = realRenameSync
    fs.promises.rename = realRename
    Object.defineProperty(process, 'platform', realPlatform)
  }
})
