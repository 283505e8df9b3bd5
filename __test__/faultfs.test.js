'use strict'
// The fault layer itself (tools/faultfs, __test__/faultfs.js), seen from real processes through
// Node's fs: each fault kind, the caches, whole seconds, renumbered inodes, two mounts as two
// machines, the pid filter, and that the addon takes a faultfs mount for a network/FUSE folder.
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const fsp = require('node:fs/promises')
const os = require('node:os')
const path = require('node:path')
const { spawn, spawnSync } = require('node:child_process')
const faultfs = require('./faultfs.js')
const { root } = require('./helpers.js')

const skip = faultfs.available() || false
const made = []
const tmp = (name) => {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), `pi-native-faultfs-${name}-`))
  made.push(d)
  return d
}
const mounts = []
async function mount(opts) {
  const m = await faultfs.mount(opts)
  mounts.push(m)
  return m
}
test.after(async () => {
  for (const m of mounts) await m.unmount()
  for (const d of made) fs.rmSync(d, { recursive: true, force: true })
})

const code = (p) => p.then(() => 'ok', (e) => e.code)

/** Run `script` in a child node process; resolves with its stdout (JSON) once it exits. */
function child(script, env = {}) {
  return new Promise((resolve, reject) => {
    const c = spawn(process.execPath, ['-e', script], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] })
    let out = ''
    let err = ''
    c.stdout.on('data', (d) => (out += d))
    c.stderr.on('data', (d) => (err += d))
    c.once('close', (status) => {
      try {
        resolve(JSON.parse(out))
      } catch {
        reject(new Error(`child (${status}): ${out} ${err}`))
      }
    })
  })
}

test('lost_reply on mkdir: the caller gets EIO, the directory exists', { skip, timeout: 60_000 }, async () => {
  const m = await mount({ name: 'lost' })
  const id = await m.addRule({ op: 'mkdir', path: '^d$', kind: 'lost_reply', count: 1 })
  await assert.rejects(fsp.mkdir(path.join(m.dir, 'd')), { code: 'EIO', syscall: 'mkdir' })
  assert.ok(fs.statSync(path.join(m.backing, 'd')).isDirectory(), 'made on the server')
  assert.ok(fs.statSync(path.join(m.dir, 'd')).isDirectory(), 'and seen through the mount')
  // Done once; the retry meets the directory (the kernel's lookup finds it: no mkdir is sent).
  await assert.rejects(fsp.mkdir(path.join(m.dir, 'd')), { code: 'EEXIST' })
  assert.deepEqual(await m.hits(id), { matched: 1, fired: 1, hanging: 0, active: false })
  const [entry] = await m.log()
  assert.equal(entry.op, 'mkdir')
  assert.equal(entry.path, 'd')
  assert.equal(entry.action, 'lost_reply')
  assert.equal(entry.result, 'ok')
  assert.equal(entry.answered, 'EIO')
  assert.equal(entry.tgid, process.pid, 'the caller as FUSE reported it')

  // rmdir and rename likewise: performed, answered otherwise.
  await m.addRule({ op: 'rmdir', kind: 'lost_reply', errno: 'ETIMEDOUT', count: 1 })
  await assert.rejects(fsp.rmdir(path.join(m.dir, 'd')), { code: 'ETIMEDOUT' })
  assert.equal(fs.existsSync(path.join(m.backing, 'd')), false)
  fs.writeFileSync(path.join(m.dir, 'a'), 'x')
  await m.addRule({ op: 'rename', path: '^a$', dest: '^b$', kind: 'lost_reply', count: 1 })
  await assert.rejects(fsp.rename(path.join(m.dir, 'a'), path.join(m.dir, 'b')), { code: 'EIO' })
  assert.deepEqual(fs.readdirSync(m.backing), ['b'])
})

test('error: answered without performing; after/count, and a window counted from the first hit or from now', { skip, timeout: 60_000 }, async () => {
  const m = await mount({ name: 'errors' })
  const id = await m.addRule({ op: 'mkdir', path: '^d\\d$', kind: 'error', errno: 'EACCES', after: 1, count: 2 })
  const results = []
  for (let i = 0; i < 4; i++) results.push(await code(fsp.mkdir(path.join(m.dir, `d${i}`))))
  assert.deepEqual(results, ['ok', 'EACCES', 'EACCES', 'ok'])
  assert.deepEqual(fs.readdirSync(m.backing).sort(), ['d0', 'd3'], 'refused ones were not made')
  assert.deepEqual(await m.hits(id), { matched: 4, fired: 2, hanging: 0, active: false })

  // A 1.5 s ESTALE window on opens of f, from the first one it refused.
  fs.writeFileSync(path.join(m.backing, 'f'), 'content')
  const w = await m.addRule({ op: 'open', path: '^f$', kind: 'error', errno: 'ESTALE', for_ms: 1500 })
  // libuv has no name for ESTALE: Node reports its number.
  const stale = { errno: -os.constants.errno.ESTALE }
  await assert.rejects(fsp.readFile(path.join(m.dir, 'f')), stale)
  const first = Date.now()
  const text = await faultfs.waitFor('the ESTALE window to close', () => fsp.readFile(path.join(m.dir, 'f'), 'utf8').catch((e) => assert.equal(e.errno, stale.errno)))
  assert.equal(text, 'content')
  assert.ok(Date.now() - first >= 1400, `refused for ${Date.now() - first} ms`)
  assert.equal((await m.hits(w)).active, false)

  // A window from now: refuses everything for 1 s, whether anything came or not.
  const now = await m.addRule({ op: 'open', kind: 'error', errno: 'ENOTCONN', for_ms: 1000, from: 'now' })
  const added = Date.now()
  await faultfs.waitFor('the window from now to close', async () => (await m.hits(now)).active === false)
  assert.ok(Date.now() - added >= 900)
  assert.equal(await fsp.readFile(path.join(m.dir, 'f'), 'utf8'), 'content', 'after the window')
  assert.equal((await m.hits(now)).fired, 0)
})

test('delay and hang hold one request on a thread of its own; others go on; release and removal let it finish', { skip, timeout: 60_000 }, async () => {
  const m = await mount({ name: 'held' })
  fs.mkdirSync(path.join(m.backing, 'slow'))
  fs.writeFileSync(path.join(m.backing, 'x'), 'x')
  fs.writeFileSync(path.join(m.backing, 'y'), 'y')
  const d = await m.addRule({ op: 'opendir', path: '^slow$', kind: 'delay', ms: 3000, count: 1 })
  const started = Date.now()
  let listed = null
  const listing = fsp.readdir(path.join(m.dir, 'slow')).then(() => (listed = Date.now()))
  await m.until(d, (h) => h.fired === 1, 'the listing to be held')
  assert.equal(await fsp.readFile(path.join(m.dir, 'x'), 'utf8'), 'x', 'another request is answered meanwhile')
  const read = Date.now()
  await listing
  assert.ok(read < listed, '...before the delayed one')
  assert.ok(listed - started >= 2900, `delayed ${listed - started} ms`)

  // hang: until released. A directory-changing request holds its folder's lock in the kernel
  // (as it would over NFS), so the requests shown to go on meanwhile are in another folder.
  fs.mkdirSync(path.join(m.backing, 'd'))
  fs.mkdirSync(path.join(m.backing, 'o'))
  fs.writeFileSync(path.join(m.backing, 'd', 'x'), 'x')
  fs.writeFileSync(path.join(m.backing, 'd', 'y'), 'y')
  fs.writeFileSync(path.join(m.backing, 'o', 'y'), 'o')
  const h = await m.addRule({ op: 'unlink', path: '^d/x$', kind: 'hang' })
  let unlinked = false
  const unlink = fsp.unlink(path.join(m.dir, 'd', 'x')).then(() => (unlinked = true))
  await m.until(h, (s) => s.hanging === 1, 'the unlink to hang')
  assert.equal(await fsp.readFile(path.join(m.dir, 'o', 'y'), 'utf8'), 'o', 'the mount answers others meanwhile')
  assert.ok(fs.existsSync(path.join(m.backing, 'd', 'x')), 'not performed while hanging')
  assert.equal(unlinked, false)
  assert.equal(await m.release(h), 1)
  await unlink
  assert.equal(fs.existsSync(path.join(m.backing, 'd', 'x')), false, 'performed once released')
  // The rule stays: the next one hangs too, until the rule goes; others pass.
  await fsp.unlink(path.join(m.dir, 'd', 'y'))
  fs.writeFileSync(path.join(m.backing, 'd', 'x'), 'again')
  const again = fsp.unlink(path.join(m.dir, 'd', 'x'))
  await m.until(h, (s) => s.hanging === 1, 'the second unlink to hang')
  await m.removeRule(h)
  await again
  assert.deepEqual(fs.readdirSync(path.join(m.backing, 'd')), [])
  const log = await m.log()
  assert.deepEqual(
    log.filter((e) => e.rule === h).map((e) => [e.action, e.result, e.answered]),
    [
      ['hang', 'ok', 'ok'],
      ['hang', 'ok', 'ok'],
    ],
  )
})

// renameat2(2) as a process makes it (Node has none): python3's ctypes calls glibc's.
const RENAME_NOREPLACE = 1
const RENAME_EXCHANGE = 2
const RENAMEAT2 = `
import ctypes, errno, sys
libc = ctypes.CDLL(None, use_errno=True)
r = libc.renameat2(-100, sys.argv[1].encode(), -100, sys.argv[2].encode(), int(sys.argv[3]))
print('ok' if r == 0 else errno.errorcode.get(ctypes.get_errno(), ctypes.get_errno()))
`
/** renameat2(from, to, flags) in a python3 process: 'ok' or the errno's name. */
function renameat2(from, to, flags) {
  const r = spawnSync('python3', ['-c', RENAMEAT2, from, to, String(flags)], { encoding: 'utf8', timeout: 30_000 })
  if (r.status !== 0) throw new Error(`python3 renameat2: ${r.stderr || r.error?.message}`)
  return r.stdout.trim()
}
const noRenameat2 = skip || (spawnSync('python3', ['-c', 'import ctypes; ctypes.CDLL(None).renameat2']).status === 0 ? false : 'python3 with a glibc that has renameat2 is needed to call it')

test('rename flags: passed through by default; refused with EINVAL (as sshfs, SMB and GlusterFS clients) with renameFlags: false', { skip: noRenameat2, timeout: 60_000 }, async () => {
  // Default: RENAME_NOREPLACE and RENAME_EXCHANGE reach the backing folder (JuiceFS, local).
  const a = await mount({ name: 'flags' })
  for (const [n, v] of [['p', 'P'], ['q', 'Q'], ['r', 'R']]) fs.writeFileSync(path.join(a.backing, n), v)
  assert.equal(renameat2(path.join(a.dir, 'p'), path.join(a.dir, 'q'), RENAME_NOREPLACE), 'EEXIST', 'refuses to replace')
  assert.equal(renameat2(path.join(a.dir, 'p'), path.join(a.dir, 'n'), RENAME_NOREPLACE), 'ok')
  assert.equal(renameat2(path.join(a.dir, 'q'), path.join(a.dir, 'r'), RENAME_EXCHANGE), 'ok')
  assert.deepEqual(
    fs.readdirSync(a.backing).sort().map((n) => [n, fs.readFileSync(path.join(a.backing, n), 'utf8')]),
    [['n', 'P'], ['q', 'R'], ['r', 'Q']],
  )

  // renameFlags: false: every flagged rename reaches faultfs and is answered EINVAL, nothing
  // moved; a plain rename works.
  const b = await mount({ name: 'noflags', renameFlags: false })
  for (const [n, v] of [['p', 'P'], ['q', 'Q']]) fs.writeFileSync(path.join(b.backing, n), v)
  const seen = await b.addRule({ op: 'rename', kind: 'delay', ms: 0 })
  for (let i = 0; i < 2; i++) assert.equal(renameat2(path.join(b.dir, 'p'), path.join(b.dir, 'n'), RENAME_NOREPLACE), 'EINVAL', `NOREPLACE, try ${i + 1}`)
  // Over a name the kernel knows: its VFS answers EEXIST before asking (as over sshfs).
  assert.equal(renameat2(path.join(b.dir, 'p'), path.join(b.dir, 'q'), RENAME_NOREPLACE), 'EEXIST', 'NOREPLACE over a name')
  assert.equal(renameat2(path.join(b.dir, 'p'), path.join(b.dir, 'q'), RENAME_EXCHANGE), 'EINVAL', 'EXCHANGE')
  assert.deepEqual(fs.readdirSync(b.backing).sort(), ['p', 'q'], 'nothing moved')
  assert.equal(renameat2(path.join(b.dir, 'p'), path.join(b.dir, 'n'), 0), 'ok', 'no flags')
  assert.deepEqual(fs.readdirSync(b.backing).sort(), ['n', 'q'])
  // Each was asked of faultfs (the kernel remembers only ENOSYS, not EINVAL): three refused, one done.
  const log = (await b.log()).filter((e) => e.rule === seen)
  assert.deepEqual(log.map((e) => [e.path, e.dest, e.result, e.answered]), [
    ['p', 'n', 'EINVAL', 'EINVAL'],
    ['p', 'n', 'EINVAL', 'EINVAL'],
    ['p', 'q', 'EINVAL', 'EINVAL'],
    ['p', 'n', 'ok', 'ok'],
  ])
})

test('a directory removed on the server answers ESTALE by its node: the kernel looks its name up again (as over NFS)', { skip, timeout: 60_000 }, async () => {
  // Names cached for a minute, attributes not at all: every stat asks for the node's.
  const m = await mount({ name: 'gone', entryTtlMs: 60_000, attrTtlMs: 0 })
  const d = path.join(m.dir, 'd')
  fs.mkdirSync(d)
  const old = fs.statSync(d).ino
  // On the server: d removed, and another directory put in its place (made while d still
  // existed, so its inode number differs).
  fs.mkdirSync(path.join(m.backing, 'other'))
  fs.rmdirSync(path.join(m.backing, 'd'))
  fs.renameSync(path.join(m.backing, 'other'), path.join(m.backing, 'd'))
  const now = fs.statSync(path.join(m.backing, 'd')).ino
  assert.notEqual(now, old)
  const seen = await m.addRule({ op: ['getattr', 'lookup', 'setattr', 'opendir'], path: '^d$', kind: 'delay', ms: 0 })
  assert.equal(fs.statSync(d).ino, now, 'a stat through the cached name shows the directory there now')
  // (Logged as answered: a delayed request's thread may be logged after the next one.)
  const asked = (await m.log()).filter((e) => e.rule === seen).map((e) => `${e.op} ${e.answered}`)
  assert.ok(asked.includes('getattr ESTALE') && asked.includes('lookup ok'), JSON.stringify(asked))
  // Removed and not replaced: gone, for stat, utimes and readdir alike (not the removed one's).
  fs.statSync(d)
  fs.rmdirSync(path.join(m.backing, 'd'))
  assert.throws(() => fs.statSync(d), { code: 'ENOENT' })
  fs.mkdirSync(path.join(m.backing, 'd'))
  fs.statSync(d)
  fs.rmdirSync(path.join(m.backing, 'd'))
  assert.throws(() => fs.utimesSync(d, 1, 1), { code: 'ENOENT' })
  fs.mkdirSync(path.join(m.backing, 'd'))
  fs.statSync(d)
  fs.rmdirSync(path.join(m.backing, 'd'))
  assert.throws(() => fs.readdirSync(d), { code: 'ENOENT' })
})

test('whole seconds: times are reported and stored truncated to the second', { skip, timeout: 60_000 }, async () => {
  const m = await mount({ name: 'seconds', wholeSeconds: true, attrTtlMs: 0 })
  const f = path.join(m.dir, 'f')
  fs.writeFileSync(f, 'x')
  assert.equal(fs.statSync(f, { bigint: true }).mtimeNs % 1_000_000_000n, 0n, 'reported in whole seconds')
  fs.utimesSync(f, 1_700_000_000.75, 1_700_000_001.5)
  const through = fs.statSync(f)
  assert.equal(through.mtimeMs, 1_700_000_001_000)
  assert.equal(through.atimeMs, 1_700_000_000_000)
  assert.equal(fs.statSync(path.join(m.backing, 'f')).mtimeMs, 1_700_000_001_000, 'stored so')
  // UTIME_NOW (futimens with both times omitted-as-now, what `touch` does) lands on a second too.
  const before = Math.floor(Date.now() / 1000)
  fs.mkdirSync(path.join(m.dir, 'd'))
  fs.utimesSync(path.join(m.dir, 'd'), new Date(), new Date())
  const st = fs.statSync(path.join(m.backing, 'd'), { bigint: true })
  assert.equal(st.mtimeNs % 1_000_000_000n, 0n)
  assert.ok(Number(st.mtimeNs / 1_000_000_000n) >= before)
})

test('renumbered inodes: a file has other numbers on another mount, after a replacement and after a remount', { skip, timeout: 60_000 }, async () => {
  const backing = tmp('renumber')
  fs.writeFileSync(path.join(backing, 'f'), 'x')
  const real = fs.statSync(path.join(backing, 'f')).ino
  const a = await mount({ backing, renumberInodes: true, name: 'ra' })
  const b = await mount({ backing, renumberInodes: true, name: 'rb' })
  const ia = fs.statSync(path.join(a.dir, 'f')).ino
  const ib = fs.statSync(path.join(b.dir, 'f')).ino
  assert.notEqual(ia, real)
  assert.notEqual(ib, real)
  assert.notEqual(ia, ib, 'two machines, two numbers')
  assert.equal(fs.statSync(path.join(a.dir, 'f')).ino, ia, 'stable while the kernel remembers it')
  // A name replaced on the server: a new node, a new number.
  fs.rmSync(path.join(backing, 'f'))
  fs.writeFileSync(path.join(backing, 'f'), 'y')
  await faultfs.waitFor('mount a to see the new file', () => fs.readFileSync(path.join(a.dir, 'f'), 'utf8') === 'y')
  assert.notEqual(fs.statSync(path.join(a.dir, 'f')).ino, ia)
  await a.unmount()
  const again = await mount({ backing, renumberInodes: true, name: 'ra2' })
  assert.notEqual(fs.statSync(path.join(again.dir, 'f')).ino, fs.statSync(path.join(b.dir, 'f')).ino)
  // Without renumbering, the server's numbers.
  const plain = await mount({ backing, name: 'plain' })
  assert.equal(fs.statSync(path.join(plain.dir, 'f')).ino, fs.statSync(path.join(backing, 'f')).ino)
})

test('two mounts of one folder are two machines: each sees the other\'s changes only after its caches expire', { skip, timeout: 60_000 }, async () => {
  const backing = tmp('two')
  fs.writeFileSync(path.join(backing, 'f'), '1')
  const a = await mount({ backing, name: 'ma' })
  // b caches attributes and names for 4 s and "no such name" for 4 s.
  const b = await mount({ backing, name: 'mb', attrTtlMs: 4000, entryTtlMs: 4000, negativeTtlMs: 4000 })
  assert.equal(fs.statSync(path.join(b.dir, 'f')).size, 1)
  assert.equal(fs.existsSync(path.join(b.dir, 'g')), false)
  const cachedAt = Date.now()
  // a rewrites f in place (same inode) and creates g.
  fs.writeFileSync(path.join(a.dir, 'f'), '12345')
  fs.writeFileSync(path.join(a.dir, 'g'), 'g')
  assert.equal(fs.statSync(path.join(a.dir, 'f')).size, 5, 'a sees its own change')
  // Within b's TTL (asserted: a slow machine makes the check vacuous, not wrong).
  const sizeNow = fs.statSync(path.join(b.dir, 'f')).size
  const gNow = fs.existsSync(path.join(b.dir, 'g'))
  if (Date.now() - cachedAt < 3500) {
    assert.equal(sizeNow, 1, 'b answers from its attribute cache')
    assert.equal(gNow, false, 'b answers from its negative entry cache')
  }
  await faultfs.waitFor('b to see the new size', () => fs.statSync(path.join(b.dir, 'f')).size === 5)
  await faultfs.waitFor('b to see g', () => fs.existsSync(path.join(b.dir, 'g')))
  assert.ok(Date.now() - cachedAt >= 3500, `b saw the changes ${Date.now() - cachedAt} ms after caching`)
})

test('pid filter: only the named process meets the fault (its threads included)', { skip, timeout: 60_000 }, async (t) => {
  const m = await mount({ name: 'pid' })
  fs.writeFileSync(path.join(m.backing, 'f'), 'x')
  const script = `
    const fs = require('node:fs')
    const f = ${JSON.stringify(path.join(m.dir, 'f'))}
    process.stdin.once('data', async () => {
      const out = {}
      try { fs.readFileSync(f); out.sync = 'ok' } catch (e) { out.sync = e.code }
      // fs.promises reads run on libuv's pool: other thread ids of the same process.
      out.async = await fs.promises.readFile(f).then(() => 'ok', (e) => e.code)
      console.log(JSON.stringify(out))
      process.exit(0)
    })
    console.log('ready')
  `
  const c = spawn(process.execPath, ['-e', script], { stdio: ['pipe', 'pipe', 'inherit'] })
  t.after(() => c.kill('SIGKILL'))
  let out = ''
  c.stdout.on('data', (d) => (out += d))
  await faultfs.waitFor('the child', () => out.includes('ready'))
  const id = await m.addRule({ op: 'open', pid: c.pid, kind: 'error', errno: 'EIO' })
  assert.equal(fs.readFileSync(path.join(m.dir, 'f'), 'utf8'), 'x', 'this process reads')
  c.stdin.write('go\n')
  await new Promise((r) => c.once('close', r))
  assert.deepEqual(JSON.parse(out.split('\n')[1]), { sync: 'EIO', async: 'EIO' })
  assert.equal((await m.hits(id)).fired, 2)
})

test('the addon takes a faultfs mount for a network/FUSE folder (and so uses the network lock rule)', { skip, timeout: 60_000 }, async () => {
  const m = await mount({ name: 'kind' })
  const binding = require('../index.js')
  assert.equal(await binding.dirIsRemote(m.dir), true, 'native fs_kind')
  assert.equal(await require('../js/events.js').isRemote(m.dir), true, 'JS backend')
  assert.equal(await binding.dirIsRemote(os.tmpdir()), fs.statfsSync(os.tmpdir()).type === faultfs.FUSE_MAGIC)
  // An abandoned lock, an hour old. The local rule takes it over at once; the network rule
  // only after seeing it unchanged for stale (2 s) plus the attribute-cache bound (here 1 s).
  const file = path.join(m.dir, 'f.json')
  fs.mkdirSync(`${file}.lock`)
  const old = new Date(Date.now() - 3600_000)
  fs.utimesSync(`${file}.lock`, old, old)
  const script = `
    const { withFileLock } = require(${JSON.stringify(root)})
    const started = Date.now()
    withFileLock(${JSON.stringify(file)}, () => Date.now() - started, { retries: 40 })
      .then((ms) => console.log(JSON.stringify({ ms })), (e) => console.log(JSON.stringify({ error: e.code })))
  `
  const r = await child(script, { PI_NATIVE_BACKEND: 'native', PI_NATIVE_ATTRIBUTE_CACHE_MS: '1000', PI_NATIVE_LOCK_FS: '' })
  assert.equal(r.error, undefined, JSON.stringify(r))
  assert.ok(r.ms >= 2500, `taken over after ${r.ms} ms: the network rule watched it first`)
})
