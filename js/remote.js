'use strict'
// The JS backend on network and FUSE file systems (issue 34): which folders are remote, reads
// of an entry as the server has it now, and the transient refusals of such file systems.
// The native backend's rules are src/store/coherent_read.rs and src/store/transient.rs; this
// is their counterpart with what Node offers (no inode in a listing, no AT_STATX_FORCE_SYNC).
// Local folders never take these paths: a local disk pays one statfs per folder, remembered.
const fs = require('node:fs')
const fsp = require('node:fs/promises')
const path = require('node:path')
const { backoff, sleep, sleepSync, codeOf } = require('../lib/contract/transient.js')
const { ENTRY_MAX_BYTES } = require('../lib/contract/options.js')
const { READ_FLAGS, readHandle, readFdSync } = require('./read-file.js')

// statfs(2) magic numbers of network, cluster and FUSE file systems: the native table
// (src/platform/fs_kind/linux.rs, REMOTE) in JavaScript, for the JS backend and for when the
// addon is missing; a test holds the two equal.
const REMOTE_MAGIC = new Set([
  0x6969, 0x517b, 0xff534d42, 0xfe534d42, 0x65735546, 0x01021997, 0x00c36400, 0x0bd00bd0, 0x47504653, 0x5346414f, 0x6b414653, 0x73757245,
  0x0000564c, 0x20030528, 0x19830326, 0xaad7aaea, 0x786f4256, 0x7461636f, 0x01161970,
])

// Answers per folder (at most 1024 remembered; past that the memory starts over).
const kinds = new Map()
const MAX_KINDS = 1024

/** Whether `dir` is on a network or FUSE file system (Linux; elsewhere false). */
function isRemoteDir(dir) {
  if (process.platform !== 'linux' || typeof fs.statfsSync !== 'function') return false
  const known = kinds.get(dir)
  if (known !== undefined) return known
  let remote = false
  try {
    remote = REMOTE_MAGIC.has(fs.statfsSync(dir).type >>> 0)
  } catch {
    return false // not remembered: the folder may not exist yet
  }
  if (kinds.size >= MAX_KINDS) kinds.clear()
  kinds.set(dir, remote)
  return remote
}

const READ_TRANSIENT = new Set(['ESTALE', 'EIO'])
// GlusterFS answers the close of a file that another client replaced meanwhile with ENOENT (its
// flush), after a read that succeeded, and such a read may come back empty. A read-only
// descriptor has nothing to flush, so its close's error is dropped; an empty read is made again
// by the name, up to this many times more (entries are written whole and renamed into place: an
// entry that stays empty is one, and is answered as read).
const EMPTY_RETRIES = 3

/**
 * The text of `file` as the server has it now, or undefined where none can be read. A listing
 * of the folder first (it goes to the server; FUSE's READDIRPLUS replaces a cached entry that
 * leads to a replaced file: GlusterFS, JuiceFS), then the file is opened and its name looked up
 * again (`link(file, file)`, which fails with EEXIST having made the client ask for the name's
 * attributes: sshfs and smbnetfs otherwise keep the old size and cut the new content), and read
 * to the size it has now. ESTALE and EIO are tried again.
 */
async function readCurrent(file) {
  const next = backoff()
  for (let empty = 0; ; ) {
    let listed = false
    let text
    try {
      listed = (await fsp.readdir(path.dirname(file))).includes(path.basename(file))
      const fh = await fsp.open(file, READ_FLAGS)
      try {
        await fsp.link(file, file).catch(() => {})
        const st = await fh.stat()
        if (!st.isFile()) return undefined
        // The size now, then on to the end in case it was more; past the bound, absent (W-B9).
        const bytes = await readHandle(fh, st.size, ENTRY_MAX_BYTES, true)
        if (bytes === undefined) return undefined
        text = bytes.toString('utf8')
      } finally {
        await fh.close().catch(() => {})
      }
    } catch (err) {
      // Listed, yet not found: a client that leads the name to a removed file (GlusterFS).
      const again = READ_TRANSIENT.has(codeOf(err)) || (codeOf(err) === 'ENOENT' && listed)
      const wait = again ? next() : -1
      if (wait < 0) return undefined
      await sleep(wait)
      continue
    }
    if (text !== '' || empty++ >= EMPTY_RETRIES) return text
    await sleep(Math.max(0, next()))
  }
}

/** `readCurrent` on the calling thread. */
function readCurrentSync(file) {
  const next = backoff()
  for (let empty = 0; ; ) {
    let listed = false
    let text
    try {
      listed = fs.readdirSync(path.dirname(file)).includes(path.basename(file))
      const fd = fs.openSync(file, READ_FLAGS)
      try {
        try {
          fs.linkSync(file, file)
        } catch {}
        const st = fs.fstatSync(fd)
        if (!st.isFile()) return undefined
        const bytes = readFdSync(fd, st.size, ENTRY_MAX_BYTES, true)
        if (bytes === undefined) return undefined
        text = bytes.toString('utf8')
      } finally {
        try {
          fs.closeSync(fd)
        } catch {}
      }
    } catch (err) {
      const again = READ_TRANSIENT.has(codeOf(err)) || (codeOf(err) === 'ENOENT' && listed)
      const wait = again ? next() : -1
      if (wait < 0) return undefined
      sleepSync(wait)
      continue
    }
    if (text !== '' || empty++ >= EMPTY_RETRIES) return text
    sleepSync(Math.max(0, next()))
  }
}

// Refusals that only say "not now" on a network file system (src/store/transient.rs): a rename
// over an entry another client has open (SMB), a mkdir or rmdir racing another client's.
const WRITE_TRANSIENT = new Set(['ESTALE', 'EIO', 'EBUSY', 'EACCES', 'EPERM', 'EEXIST'])

/** Whether the failed rename of a temp file over `target` may succeed when made again. */
function renameTransient(err, target) {
  const code = codeOf(err)
  return code === 'ESTALE' || (WRITE_TRANSIENT.has(code) && isRemoteDir(path.dirname(target)))
}

/**
 * The `fs` proper-lockfile works with (its `fs` option), for locks on a network file system.
 * A call whose reply may have been lost after the work was done is never made again blindly
 * by path (the path may name another holder's lock by then, issue 41):
 * - a lock directory's `mkdir` refused (EIO: SMB, for a name another client is removing or
 *   holds) is looked at: there is contention (EEXIST, judged by the stale rule; never claimed,
 *   it may be another's), not there is tried again;
 * - an `rmdir` answered EIO, ESTALE or ETIMEDOUT is looked at: gone is done; still there, the
 *   error stands (a lock left is judged stale in 2 s, whoever made it); one refused (EBUSY,
 *   EACCES, EPERM: SMB, for a directory another client has open) was not made: tried again;
 * - `utimes` is not tried again here: proper-lockfile's refresh looks at the lock (its `stat`)
 *   before it sets the mtime again;
 * - `stat`, which changes nothing, is tried again through ESTALE and EIO.
 * Both the callback and the sync forms (proper-lockfile's lockSync uses the latter).
 */
function lockFs() {
  const gfs = fs
  const dirTransient = (err) => ['ESTALE', 'EIO', 'EBUSY', 'EACCES', 'EPERM'].includes(codeOf(err))
  const exists = (p) => {
    try {
      fs.lstatSync(p)
      return true
    } catch {
      return false
    }
  }
  const eexist = (p) => Object.assign(new Error(`EEXIST: file already exists, mkdir '${p}'`), { code: 'EEXIST', errno: -17, syscall: 'mkdir', path: p })
  const retrying = (name, judge) => (...args) => {
    const cb = args.pop()
    const next = backoff()
    const attempt = () =>
      gfs[name](...args, (err, ...rest) => {
        if (!err) return cb(null, ...rest)
        // A judge may look at the file system: asynchronously here (a promise), so that a
        // client slow to answer (an SMB client's EIO window) never holds the JS thread.
        Promise.resolve(judge(err, args[0])).then((verdict) => {
          if (verdict === 'done') return cb(null)
          const wait = verdict === 'again' ? next() : -1
          if (wait >= 0) return setTimeout(attempt, wait)
          cb(verdict instanceof Error ? verdict : err)
        })
      })
    attempt()
  }
  const retryingSync = (name, judge) => (...args) => {
    const next = backoff()
    for (;;) {
      try {
        return gfs[`${name}Sync`](...args)
      } catch (err) {
        const verdict = judge(err, args[0])
        if (verdict === 'done') return undefined
        if (verdict instanceof Error) throw verdict
        const wait = verdict === 'again' ? next() : -1
        if (wait < 0) throw err
        sleepSync(wait)
      }
    }
  }
  const mkdirJudge = (err, p) => (!dirTransient(err) ? 'final' : exists(p) ? eexist(p) : 'again')
  const mkdirJudgeAsync = (err, p) => (!dirTransient(err) ? 'final' : fsp.lstat(p).then(() => eexist(p), () => 'again'))
  // Made or not, the reply does not say: gone is done ('done'), there the error stands.
  const unanswered = (err) => ['EIO', 'ESTALE', 'ETIMEDOUT', 'ENOTCONN'].includes(codeOf(err))
  const refused = (err) => ['EBUSY', 'EACCES', 'EPERM'].includes(codeOf(err))
  const rmdirJudge = (err, p) => (refused(err) ? 'again' : unanswered(err) && !exists(p) ? 'done' : 'final')
  const rmdirJudgeAsync = (err, p) =>
    refused(err) ? 'again' : unanswered(err) ? fsp.lstat(p).then(() => 'final', () => 'done') : 'final'
  const otherJudge = (err) => (['ESTALE', 'EIO'].includes(codeOf(err)) ? 'again' : 'final')
  return {
    ...gfs,
    mkdir: retrying('mkdir', mkdirJudgeAsync),
    mkdirSync: retryingSync('mkdir', mkdirJudge),
    rmdir: retrying('rmdir', rmdirJudgeAsync),
    rmdirSync: retryingSync('rmdir', rmdirJudge),
    stat: retrying('stat', otherJudge),
    statSync: retryingSync('stat', otherJudge),
  }
}

let remoteLockFs
/** proper-lockfile's `fs` for a lock on `file`: the retrying one where its folder is remote. */
function lockFsFor(file) {
  if (!isRemoteDir(path.dirname(path.resolve(file)))) return undefined
  remoteLockFs ??= lockFs()
  return remoteLockFs
}

module.exports = { isRemoteDir, readCurrent, readCurrentSync, renameTransient, lockFsFor, REMOTE_MAGIC }
