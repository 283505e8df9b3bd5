'use strict'
// Errors built in one place (lib/contract/errors.js) against Node's own: a real fs call failing
// the same way, sync and async, must give the same message, code, errno, syscall, path, dest —
// and the same own keys in the same order. Then end to end through both backends.
const { test } = require('node:test')
const assert = require('node:assert/strict')
const { spawnSync } = require('node:child_process')
const fs = require('node:fs')
const fsp = require('node:fs/promises')
const os = require('node:os')
const path = require('node:path')
const util = require('node:util')
const lockfile = require('proper-lockfile')
const { fsError, lockedError, fromNative } = require('../lib/contract/errors.js')
const { backends, worldReadableCopy, worldExecutableNode } = require('./helpers.js')

/** What a caller can observe of an error (the stack aside). */
function shape(err) {
  const own = {}
  for (const k of Object.keys(err)) own[k] = err[k]
  return { class: err.constructor.name, message: err.message, keys: Object.keys(err), own }
}

/** The failure description native code hands over, taken from a real Node error. */
const describeFailure = (err) => ({ errno: err.errno, syscall: err.syscall, path: err.path, dest: err.dest })

function caught(fn) {
  try {
    fn()
  } catch (err) {
    return err
  }
  assert.fail('expected a throw')
}

const sandbox = () => fs.mkdtempSync(path.join(os.tmpdir(), 'pi-native-errshape-'))

test('fsError equals Node’s own fs errors (sync and async) for ENOENT, ENOTDIR, EEXIST, EISDIR, ENOTEMPTY, rename with dest', async () => {
  const dir = sandbox()
  try {
    const file = path.join(dir, 'file')
    fs.writeFileSync(file, 'x')
    fs.mkdirSync(path.join(dir, 'full'))
    fs.writeFileSync(path.join(dir, 'full', 'x'), 'x')
    const cases = [
      ['ENOENT open', () => fs.openSync(path.join(dir, 'missing')), () => fsp.open(path.join(dir, 'missing'))],
      ['ENOTDIR open', () => fs.openSync(path.join(file, 'x')), () => fsp.open(path.join(file, 'x'))],
      ['EEXIST mkdir', () => fs.mkdirSync(file), () => fsp.mkdir(file)],
      ['EISDIR open for writing', () => fs.openSync(dir, 'w'), () => fsp.open(dir, 'w')],
      ['EISDIR read (no path)', () => fs.readFileSync(dir), () => fsp.readFile(dir)],
      ['ENOTEMPTY rmdir', () => fs.rmdirSync(path.join(dir, 'full')), () => fsp.rmdir(path.join(dir, 'full'))],
      ['ENOENT rename with dest', () => fs.renameSync(path.join(dir, 'missing'), path.join(dir, 'to')), () => fsp.rename(path.join(dir, 'missing'), path.join(dir, 'to'))],
      ['EISDIR rename with dest', () => fs.renameSync(file, dir), () => fsp.rename(file, dir)],
    ]
    for (const [name, sync, async] of cases) {
      const real = caught(sync)
      assert.deepEqual(shape(fsError(describeFailure(real))), shape(real), `${name} (sync)`)
      const realAsync = await async().then(
        () => assert.fail(`${name}: expected a rejection`),
        (err) => err,
      )
      assert.deepEqual(shape(fsError(describeFailure(realAsync))), shape(realAsync), `${name} (async)`)
      // An Error thrown by the binding with the same properties in another order is rebuilt.
      const scrambled = Object.assign(new Error('x'), { code: real.code, path: real.path, syscall: real.syscall, errno: real.errno })
      if (real.dest !== undefined) scrambled.dest = real.dest
      assert.deepEqual(shape(fromNative(scrambled)), shape(real), `${name} (rebuilt)`)
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
})

test('fsError keeps an errno libuv has no name for, as Node names it', () => {
  for (const errno of [-9999, -122, -116]) {
    const name = util.getSystemErrorName(errno)
    const known = util.getSystemErrorMap().get(errno)
    const err = fsError({ errno, syscall: 'open', path: '/p' })
    assert.equal(err.errno, errno)
    assert.equal(err.code, known ? known[0] : name)
    assert.equal(err.message, `${err.code}: ${known ? known[1] : name}, open '/p'`)
    assert.deepEqual(Object.keys(err), ['errno', 'code', 'syscall', 'path'])
  }
  assert.equal(fsError({ errno: -9999, syscall: 'open', path: '/p' }).code, 'Unknown system error -9999')
})

test('EACCES (uid 65534): fsError equals Node’s error; both backends fail writeFileAtomic(Sync) like Node’s fs', { skip: process.getuid?.() !== 0 && 'needs root to switch uid' }, () => {
  const copy = worldReadableCopy()
  const locked = fs.mkdtempSync(path.join(os.tmpdir(), 'pi-native-eacces-'))
  fs.chmodSync(locked, 0o755) // owned by root: uid 65534 may not create files in it
  try {
    const script = `
      const fs = require('node:fs'), fsp = require('node:fs/promises'), path = require('node:path')
      const { fsError } = require(${JSON.stringify(path.join(copy, 'lib', 'contract', 'errors.js'))})
      const shape = (e) => ({ class: e.constructor.name, message: e.message.replace(/\\.\\d+\\.[0-9a-f-]{36}\\.tmp/, '.<tmp>'), keys: Object.keys(e), code: e.code, errno: e.errno, syscall: e.syscall })
      const describe = (e) => ({ errno: e.errno, syscall: e.syscall, path: e.path, dest: e.dest })
      const target = path.join(${JSON.stringify(locked)}, 'f')
      const out = {}
      try { fs.openSync(target, 'wx') } catch (e) { out.real = shape(e); out.built = shape(fsError(describe(e))) }
      ;(async () => {
        try { await fsp.open(target, 'wx') } catch (e) { out.realAsync = shape(e); out.builtAsync = shape(fsError(describe(e))) }
        for (const backend of ['native', 'js']) {
          process.env.PI_NATIVE_BACKEND = backend
          for (const k of Object.keys(require.cache)) if (k.startsWith(${JSON.stringify(copy)})) delete require.cache[k]
          const m = require(${JSON.stringify(path.join(copy, 'lib', 'index.js'))})
          try { m.writeFileAtomicSync(target, 'x') } catch (e) { out[backend + 'Sync'] = shape(e) }
          try { await m.writeFileAtomic(target, 'x') } catch (e) { out[backend + 'Async'] = shape(e) }
        }
        console.log(JSON.stringify(out))
      })()`
    const r = spawnSync(worldExecutableNode(copy), ['-e', script], { uid: 65534, gid: 65534, cwd: copy, encoding: 'utf8' })
    assert.equal(r.error, undefined, String(r.error))
    assert.equal(r.status, 0, r.stderr)
    const out = JSON.parse(r.stdout)
    assert.equal(out.real.code, 'EACCES')
    assert.deepEqual(out.built, out.real)
    assert.deepEqual(out.builtAsync, out.realAsync)
    // The originals open `<file>.<pid>.<uuid>.tmp` exclusively: that is the failing call.
    const expected = { ...out.real, message: out.real.message.replace(/\/f'$/, "/f.<tmp>'") }
    for (const k of ['nativeSync', 'nativeAsync', 'jsSync', 'jsAsync']) assert.deepEqual(out[k], expected, k)
  } finally {
    fs.rmSync(locked, { recursive: true, force: true })
    fs.rmSync(copy, { recursive: true, force: true })
  }
})

test('both backends: atomic writes and locks fail with Node’s errors (sync and async), NUL bytes at once', async () => {
  const dir = sandbox()
  try {
    fs.writeFileSync(path.join(dir, 'file'), 'x')
    fs.mkdirSync(path.join(dir, 'isdir'))
    const mask = (s) => s.replace(/\.\d+\.[0-9a-f-]{36}\.tmp/, '.<tmp>')
    const view = (e) => ({ ...shape(e), message: mask(e.message), own: undefined })
    // What Node's fs does for the first failing step of each original (B17a, B19).
    const nodeFirstFailure = {
      'EISDIR (target is a directory)': [path.join(dir, 'isdir'), () => {
        const tmp = path.join(dir, 'isdir.1.00000000-0000-0000-0000-000000000000.tmp')
        fs.writeFileSync(tmp, 'x')
        try {
          return caught(() => fs.renameSync(tmp, path.join(dir, 'isdir')))
        } finally {
          fs.rmSync(tmp)
        }
      }],
      'EEXIST (parent is a file)': [path.join(dir, 'file', 'x'), () => caught(() => fs.mkdirSync(path.join(dir, 'file'), { recursive: true }))],
      'ENOTDIR (path through a file)': [path.join(dir, 'file', 'x', 'y'), () => caught(() => fs.mkdirSync(path.join(dir, 'file', 'x'), { recursive: true }))],
    }
    if (process.platform === 'win32') {
      // A recursive mkdir through a file: Windows reports it differently and Node's own error
      // under Wine is not stable between identical calls (see error-shape-mkdir.test.js).
      delete nodeFirstFailure['EEXIST (parent is a file)']
      delete nodeFirstFailure['ENOTDIR (path through a file)']
    }
    for (const [name, impl] of backends()) {
      for (const [what, [target, node]] of Object.entries(nodeFirstFailure)) {
        const want = view(node())
        assert.deepEqual(view(caught(() => impl.writeFileAtomicSync(target, 'x'))), want, `${name} writeFileAtomicSync ${what}`)
        const got = await impl.writeFileAtomic(target, 'x').then(() => assert.fail('resolved'), (e) => e)
        assert.deepEqual(view(got), want, `${name} writeFileAtomic ${what}`)
        if (what.startsWith('EISDIR')) continue // a lock on a directory's path is fine
        assert.deepEqual(view(caught(() => impl.withFileLockSync(target, () => 1))), want, `${name} withFileLockSync ${what}`)
        const lockErr = await impl.withFileLock(target, () => 1).then(() => assert.fail('resolved'), (e) => e)
        assert.deepEqual(view(lockErr), want, `${name} withFileLock ${what}`)
      }
      // A NUL byte: Node's ERR_INVALID_ARG_VALUE at once (no 3 s of lock retries, no EIO).
      const nul = path.join(dir, 'a\0b')
      const real = caught(() => fs.openSync(path.resolve(nul) + '.lock'))
      const started = Date.now()
      const got = caught(() => impl.withFileLockSync(nul, () => 1))
      assert.deepEqual(shape(got), shape(real), `${name} withFileLockSync NUL`)
      const gotAsync = await impl.withFileLock(nul, () => 1).then(() => assert.fail('resolved'), (e) => e)
      assert.deepEqual(shape(gotAsync), shape(real), `${name} withFileLock NUL`)
      assert.equal(gotAsync.code, 'ERR_INVALID_ARG_VALUE')
      assert.ok(Date.now() - started < 1000, `${name}: NUL paths must fail at once`)
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
})

test('lock errors: ELOCKED and ECOMPROMISED shaped as proper-lockfile’s', async () => {
  const dir = sandbox()
  try {
    const file = path.join(dir, 'f')
    const release = await lockfile.lock(file, { realpath: false })
    const real = await lockfile.lock(file, { realpath: false }).then(() => assert.fail('locked twice'), (e) => e)
    await release()
    assert.deepEqual(shape(lockedError(path.resolve(file))), shape(real))
    assert.deepEqual(shape(fromNative({ code: 'ELOCKED', file: path.resolve(file) })), shape(real))
    const compromised = fromNative({ code: 'ECOMPROMISED' })
    assert.equal(compromised.message, 'Unable to update lock within the stale threshold')
    assert.equal(compromised.code, 'ECOMPROMISED')
    for (const [name, impl] of backends()) {
      const held = await lockfile.lock(file, { realpath: false })
      try {
        const got = caught(() => impl.withFileLockSync(file, () => 1, { retries: 0 }))
        assert.deepEqual(shape(got), shape(real), `${name} withFileLockSync ELOCKED`)
      } finally {
        await held()
      }
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
})

test('realpath: true resolves the target as proper-lockfile does (Node’s JS fs.realpath): its errors, and "" as the working folder', async () => {
  const dir = fs.realpathSync(sandbox())
  const cwd = process.cwd()
  try {
    const here = path.join(dir, 'here')
    fs.mkdirSync(here)
    process.chdir(here)
    fs.writeFileSync(path.join(dir, 'real'), 'x')
    const cases = { 'missing, relative': 'missing.txt', 'missing, absolute': path.join(dir, 'missing.txt') }
    if (process.platform !== 'win32') {
      fs.symlinkSync('loop', path.join(dir, 'loop'))
      fs.symlinkSync('nowhere', path.join(dir, 'dangling'))
      Object.assign(cases, { 'symlink loop': path.join(dir, 'loop'), 'dangling symlink': path.join(dir, 'dangling') })
    }
    const view = (e) => ({ ...shape(e), stack: undefined })
    for (const [what, target] of Object.entries(cases)) {
      const want = await lockfile.lock(target, { realpath: true }).then(() => assert.fail(`${what}: proper-lockfile locked`), (e) => e)
      const wantSync = caught(() => lockfile.lockSync(target, { realpath: true }))
      assert.notEqual(want.syscall, 'realpath', `${what}: the oracle's error comes from Node's JS realpath`)
      for (const [name, impl] of backends()) {
        let ran = false
        const got = await impl.withFileLock(target, () => (ran = true), { realpath: true }).then(() => assert.fail('resolved'), (e) => e)
        assert.deepEqual(view(got), view(want), `${name} withFileLock ${what}`)
        assert.deepEqual(view(caught(() => impl.withFileLockSync(target, () => (ran = true), { realpath: true }))), view(wantSync), `${name} withFileLockSync ${what}`)
        assert.equal(ran, false)
      }
    }
    // '' is the working folder for Node's realpath: the lock is `<cwd>.lock`, then removed.
    for (const [name, impl] of backends()) {
      const seen = () => fs.readdirSync(dir).filter((n) => n.endsWith('.lock'))
      assert.deepEqual(await impl.withFileLock('', seen, { realpath: true }), ['here.lock'], `${name} withFileLock ''`)
      assert.deepEqual(impl.withFileLockSync('', seen, { realpath: true }), ['here.lock'], `${name} withFileLockSync ''`)
      assert.deepEqual(seen(), [], `${name}: released`)
      // A symlink is locked as its target (the lock sits next to the real file).
      if (process.platform !== 'win32') {
        fs.symlinkSync('real', path.join(dir, `link-${name}`))
        const locks = await impl.withFileLock(path.join(dir, `link-${name}`), seen, { realpath: true })
        assert.deepEqual(locks, ['real.lock'], `${name} withFileLock through a symlink`)
      }
    }
  } finally {
    process.chdir(cwd)
    fs.rmSync(dir, { recursive: true, force: true })
  }
})
