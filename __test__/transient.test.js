'use strict'
// The JS side's transient errors of network file systems (lib/contract/transient.js,
// js/remote.js). Node has no name for ESTALE (libuv lacks it): its error reads
// `Unknown system error -116` on Linux, so a check of `err.code === 'ESTALE'` never matched and
// the JS backend's readEntry answered undefined for an existing entry on GlusterFS (found by
// network-fs.test.js in CI). Here the failures are injected into `fs` itself.
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const fsp = require('node:fs/promises')
const os = require('node:os')
const path = require('node:path')
const util = require('node:util')
const { codeOf, mkdirParent, mkdirParentSync } = require('../lib/contract/transient.js')
const { readCurrent, readCurrentSync } = require('../js/remote.js')

const HAS_ESTALE = os.constants.errno.ESTALE !== undefined
const ESTALE = HAS_ESTALE ? -os.constants.errno.ESTALE : undefined

/** The error Node's fs gives for ESTALE (same own properties, same unnamed code). */
function estale(syscall, p) {
  const code = util.getSystemErrorName(ESTALE)
  return Object.assign(new Error(`${code}: ${code}, ${syscall} '${p}'`), { errno: ESTALE, code, syscall, path: p })
}

/** Replace `obj[name]` by a function failing `times` times with ESTALE, then the original. */
function failing(t, obj, name, times, syscall) {
  const original = obj[name]
  let calls = 0
  t.after(() => {
    obj[name] = original
  })
  obj[name] = function (p, ...rest) {
    if (calls++ < times) {
      const err = estale(syscall, p)
      if (name.endsWith('Sync')) throw err
      return Promise.reject(err)
    }
    return original.call(this, p, ...rest)
  }
  return () => calls
}

const skip = !HAS_ESTALE && 'this OS has no ESTALE errno'

test('Node names ESTALE "Unknown system error", and codeOf gives it its name', { skip }, () => {
  if (process.platform === 'linux') assert.equal(util.getSystemErrorName(ESTALE), 'Unknown system error -116')
  assert.equal(codeOf(estale('open', '/x')), 'ESTALE')
  assert.equal(codeOf(Object.assign(new Error('x'), { errno: -2, code: 'ENOENT' })), 'ENOENT')
  assert.equal(codeOf(undefined), undefined)
  assert.equal(codeOf('ESTALE'), undefined)
})

test('readCurrent reads the entry through ESTALE from open (not undefined)', { skip }, async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pi-native-transient-'))
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }))
  const file = path.join(dir, 'e.json')
  fs.writeFileSync(file, '{"a":1}\n')
  const calls = failing(t, fsp, 'open', 2, 'open')
  assert.equal(await readCurrent(file), '{"a":1}\n')
  assert.equal(calls(), 3)
})

test('readCurrentSync reads the entry through ESTALE from open (not undefined)', { skip }, (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pi-native-transient-'))
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }))
  const file = path.join(dir, 'e.json')
  fs.writeFileSync(file, '{"a":2}\n')
  const calls = failing(t, fs, 'openSync', 2, 'open')
  assert.equal(readCurrentSync(file), '{"a":2}\n')
  assert.equal(calls(), 3)
})

test('mkdirParent and mkdirParentSync try again after ESTALE', { skip }, async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pi-native-transient-'))
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }))
  const asyncCalls = failing(t, fsp, 'mkdir', 2, 'mkdir')
  await mkdirParent(path.join(dir, 'a', 'b'))
  assert.ok(fs.statSync(path.join(dir, 'a', 'b')).isDirectory())
  assert.equal(asyncCalls(), 3)
  const syncCalls = failing(t, fs, 'mkdirSync', 2, 'mkdir')
  mkdirParentSync(path.join(dir, 'c', 'd'))
  assert.ok(fs.statSync(path.join(dir, 'c', 'd')).isDirectory())
  assert.equal(syncCalls(), 3)
})

test('a lasting error that is not transient is thrown at once, as Node threw it', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pi-native-transient-'))
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }))
  const file = path.join(dir, 'f')
  fs.writeFileSync(file, '')
  const started = Date.now()
  await assert.rejects(mkdirParent(path.join(file, 'x')), { code: 'ENOTDIR', syscall: 'mkdir' })
  assert.throws(() => mkdirParentSync(path.join(file, 'x')), { code: 'ENOTDIR', syscall: 'mkdir' })
  assert.ok(Date.now() - started < 1000)
})
