'use strict'
// Pure-JavaScript atomic-file backend, written from SPEC.md B17–B19 and §3.3–3.4: temp file +
// rename, and proper-lockfile 4.1.2 locks exactly as the original helper configures them.
const fs = require('node:fs')
const fsp = require('node:fs/promises')
const path = require('node:path')
const { randomUUID } = require('node:crypto')
const lockfile = require('proper-lockfile')
const { mkdirParent, mkdirParentSync, backoff } = require('../lib/contract/transient.js')
const { renameTransient, lockFsFor } = require('./remote.js')

// Read at each call, as the original does (hosts' tests switch process.platform between calls).
const isWin = () => process.platform === 'win32'
const durable = () => process.env.PI_NATIVE_FSYNC === '1'
const tempPathFor = (filePath) => `${filePath}.${process.pid}.${randomUUID()}.tmp`
const renameRetryable = (err) => isWin() && err && (err.code === 'EPERM' || err.code === 'EACCES' || err.code === 'EBUSY')
const sleepSync = (ms) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms)
// B19's rename, and on a network file system its transient refusals tried again (js/remote.js).
function renameSync(temp, filePath) {
  let next
  for (let k = 0; ; k++) {
    try {
      return fs.renameSync(temp, filePath)
    } catch (err) {
      let wait = -1
      if (renameRetryable(err) && k < 9) wait = Math.min(10 * 2 ** k, 200)
      else if (renameTransient(err, filePath)) wait = (next ??= backoff())()
      if (wait < 0) throw err
      sleepSync(wait)
    }
  }
}
async function rename(temp, filePath) {
  let next
  for (let k = 0; ; k++) {
    try {
      return await fsp.rename(temp, filePath)
    } catch (err) {
      let wait = -1
      if (renameRetryable(err) && k < 9) wait = Math.min(10 * 2 ** k, 200)
      else if (renameTransient(err, filePath)) wait = (next ??= backoff())()
      if (wait < 0) throw err
      await new Promise((r) => setTimeout(r, wait))
    }
  }
}

function writeFileAtomicSync(filePath, content, options = {}) {
  mkdirParentSync(path.dirname(filePath))
  const temp = tempPathFor(filePath)
  try {
    const fd = fs.openSync(temp, 'wx', options.mode ?? 0o666)
    try {
      fs.writeFileSync(fd, content)
      if (durable()) fs.fsyncSync(fd)
    } finally {
      fs.closeSync(fd)
    }
    renameSync(temp, filePath)
    if (durable()) {
      const dfd = fs.openSync(path.dirname(filePath), 'r')
      try {
        fs.fsyncSync(dfd)
      } finally {
        fs.closeSync(dfd)
      }
    }
  } catch (err) {
    try {
      fs.unlinkSync(temp)
    } catch {}
    throw err
  }
}

async function writeFileAtomic(filePath, content, options = {}) {
  await mkdirParent(path.dirname(filePath))
  const temp = tempPathFor(filePath)
  try {
    const fh = await fsp.open(temp, 'wx', options.mode ?? 0o666)
    try {
      await fh.writeFile(content)
      if (durable()) await fh.sync()
    } finally {
      await fh.close()
    }
    await rename(temp, filePath)
    if (durable()) {
      const dh = await fsp.open(path.dirname(filePath), 'r')
      try {
        await dh.sync()
      } finally {
        await dh.close()
      }
    }
  } catch (err) {
    await fsp.unlink(temp).catch(() => {})
    throw err
  }
}

function withFileLockSync(filePath, fn, options = {}) {
  mkdirParentSync(path.dirname(filePath)) // B17a: parent first, Node's error
  const attempts = Math.max(1, options.retries ?? 10) + 1
  let release
  for (let k = 1; ; k++) {
    try {
      // `stale` is passed even when undefined: proper-lockfile then floors it at 2000 ms.
      release = lockfile.lockSync(filePath, { realpath: options.realpath ?? false, stale: options.stale, ...remoteFs(filePath) })
      break
    } catch (err) {
      const retryable = err && (err.code === 'ELOCKED' || (isWin() && err.code === 'EPERM'))
      if (!retryable || k >= attempts) throw err
      sleepSync(Math.min(25 * 2 ** (k - 1), 500))
    }
  }
  try {
    return fn()
  } finally {
    try {
      release()
    } catch {}
  }
}

// On a network file system, proper-lockfile works through an fs that tries transient refusals
// again (js/remote.js); elsewhere its own (graceful-fs).
function remoteFs(filePath) {
  const remote = lockFsFor(filePath)
  return remote ? { fs: remote } : {}
}

async function withFileLock(filePath, fn, options = {}) {
  await mkdirParent(path.dirname(filePath)) // B17a: parent first, Node's error
  const release = await lockfile.lock(filePath, {
    realpath: options.realpath ?? false,
    stale: options.stale,
    ...remoteFs(filePath),
    retries: { retries: options.retries ?? 10, factor: 2, minTimeout: 25, maxTimeout: 500, randomize: false },
  })
  try {
    return await fn()
  } finally {
    try {
      await release()
    } catch {}
  }
}

module.exports = { withFileLock, withFileLockSync, writeFileAtomic, writeFileAtomicSync }
