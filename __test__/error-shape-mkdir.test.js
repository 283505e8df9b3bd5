'use strict'
// File-system errors from the native backend, sync and async, against the same failure from
// Node's own fs (the oracle): class, message, own keys in order (errno, code, syscall, path,
// dest) and values.
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { backends } = require('./helpers.js')

function shape(err) {
  return { class: err.constructor.name, message: err.message, keys: Object.keys(err), values: Object.keys(err).map((k) => err[k]) }
}

function nodeError(fn) {
  try {
    fn()
  } catch (err) {
    return shape(err)
  }
  throw new Error('the oracle did not fail')
}

const base = fs.mkdtempSync(path.join(os.tmpdir(), 'pi-native-errshape-'))
const file = path.join(base, 'plain-file')
fs.writeFileSync(file, 'x')
const dirTarget = path.join(base, 'a-directory')
fs.mkdirSync(path.join(dirTarget, 'inside'), { recursive: true })

const CASES = [
  {
    name: 'a path component is a file (recursive mkdir: ENOTDIR on the deepest dir)',
    target: path.join(file, 'x', 'y', 'entry.json'),
    oracle: () => fs.mkdirSync(path.join(file, 'x', 'y'), { recursive: true }),
  },
  {
    name: 'the parent itself is a file (recursive mkdir: EEXIST)',
    target: path.join(file, 'entry.json'),
    oracle: () => fs.mkdirSync(file, { recursive: true }),
  },
  {
    name: 'the target is a non-empty directory (rename with dest)',
    target: dirTarget,
    oracle: () => {
      const tmp = path.join(base, 'oracle.tmp')
      fs.writeFileSync(tmp, 'x')
      try {
        fs.renameSync(tmp, dirTarget)
      } finally {
        fs.rmSync(tmp, { force: true })
      }
    },
    // The temp name is random: compare its shape, not its text.
    normalize: (s) => ({ ...s, message: s.message.replace(/'[^']*\.tmp'/, "'<tmp>'"), values: s.values.map((v) => (typeof v === 'string' ? v.replace(/^.*\.tmp$/, '<tmp>') : v)) }),
  },
]

for (const [name, s] of backends()) {
  for (const c of CASES) {
    test(`${name}: writeFileAtomic(Sync) error is Node's own — ${c.name}`, async () => {
      const norm = c.normalize ?? ((x) => x)
      const expected = norm(nodeError(c.oracle))
      let syncErr
      try {
        s.writeFileAtomicSync(c.target, 'payload')
      } catch (err) {
        syncErr = err
      }
      assert.ok(syncErr, 'sync must throw')
      assert.deepEqual(norm(shape(syncErr)), expected)
      const asyncErr = await s.writeFileAtomic(c.target, 'payload').then(
        () => assert.fail('async must reject'),
        (err) => err,
      )
      assert.deepEqual(norm(shape(asyncErr)), expected)
      assert.deepEqual(fs.readdirSync(base).filter((n) => n.endsWith('.tmp')), [], 'no temp file left')
    })
  }

  test(`${name}: store writes under an agentDir whose path holds a file reject with Node's mkdir error`, async () => {
    const agentDir = path.join(file, 'agent')
    const expected = nodeError(() => fs.mkdirSync(path.join(agentDir, 'state', 'process-matrix'), { recursive: true }))
    const entry = { entryId: 'master-s' }
    for (const op of [() => s.writeEntry(agentDir, entry), () => s.writeEntryIfUnchanged(agentDir, 'master-s', undefined, entry), () => s.removeEntry(agentDir, 'master-s')]) {
      const err = await op().then(() => assert.fail('must reject'), (e) => e)
      assert.deepEqual(shape(err), expected)
    }
    let syncErr
    try {
      s.writeEntryIfUnchangedSync(agentDir, entry, entry)
    } catch (err) {
      syncErr = err
    }
    assert.deepEqual(shape(syncErr), expected)
  })
}
