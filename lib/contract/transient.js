'use strict'
// Transient errors of network file systems on the JavaScript side (issue 34; the native side's
// rules are src/store/transient.rs): the folder `mkdir -p` that withFileLock(Sync) and the store
// make before locking (B13, B17a). An SMB client answers EIO for a folder another client has
// just made, an NFS or GlusterFS client ESTALE for one another client replaced: when the folder
// is there by then, the mkdir -p succeeded (as Node's own walk finds on a local disk); ESTALE,
// EIO and EBUSY are tried again, with jitter, for at most RETRY_WITHIN_MS (smbnetfs, after a
// request it could not complete, sleeps 2 s and then answers EIO for everything on that server
// for 3 s). Any other error is Node's, thrown at once.
const fs = require('node:fs')
const fsp = require('node:fs/promises')
const os = require('node:os')

const RETRY_WITHIN_MS = 6000
const TRANSIENT = new Set(['ESTALE', 'EIO', 'EBUSY'])

// libuv has no name for ESTALE: Node's error for it reads `Unknown system error -116` (Linux),
// so its code never equals 'ESTALE'. Its errno does.
const ESTALE_ERRNO = os.constants.errno.ESTALE === undefined ? undefined : -os.constants.errno.ESTALE

/** The code of a Node fs error, with 'ESTALE' for the errno libuv leaves unnamed. */
function codeOf(err) {
  if (err === null || typeof err !== 'object') return undefined
  return ESTALE_ERRNO !== undefined && err.errno === ESTALE_ERRNO ? 'ESTALE' : err.code
}

/** A retry schedule: `next()` resolves the wait before the next try, or -1 once time is spent. */
function backoff() {
  const started = Date.now()
  let k = 0
  return () => {
    const left = started + RETRY_WITHIN_MS - Date.now()
    return left <= 0 ? -1 : Math.min(waitMs(k++), left)
  }
}

/** Wait before retry k (0-based): min(10·2^k, 200) ms, shortened at random by up to half. */
const waitMs = (k) => {
  const full = Math.min(10 * 2 ** k, 200)
  return full / 2 + Math.random() * (full / 2)
}
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
const sleepSync = (ms) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms)

const isDirSync = (dir) => {
  try {
    return fs.statSync(dir).isDirectory()
  } catch {
    return false
  }
}

// Not statSync: an SMB client in its EIO window answers a stat only after seconds.
const isDir = (dir) => fsp.stat(dir).then((s) => s.isDirectory(), () => false)

/** `fs.promises.mkdir(dir, { recursive: true })`, through a network file system's refusals. */
async function mkdirParent(dir) {
  const next = backoff()
  for (;;) {
    try {
      await fsp.mkdir(dir, { recursive: true })
      return
    } catch (err) {
      if (await isDir(dir)) return
      const wait = TRANSIENT.has(codeOf(err)) ? next() : -1
      if (wait < 0) throw err
      await sleep(wait)
    }
  }
}

/** `fs.mkdirSync(dir, { recursive: true })`, through a network file system's refusals. */
function mkdirParentSync(dir) {
  const next = backoff()
  for (;;) {
    try {
      fs.mkdirSync(dir, { recursive: true })
      return
    } catch (err) {
      if (isDirSync(dir)) return
      const wait = TRANSIENT.has(codeOf(err)) ? next() : -1
      if (wait < 0) throw err
      sleepSync(wait)
    }
  }
}

module.exports = { mkdirParent, mkdirParentSync, backoff, sleep, sleepSync, codeOf }
