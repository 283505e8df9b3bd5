'use strict'
// Hardened mode (W-B7, issue 42), shared by both backends: PI_NATIVE_HARDENED=1, read from
// process.env at every call (G10). Off (the default), the store answers as the original: ids
// are not checked and a symlinked folder is followed. On, it adds
// - id hygiene: an entry id names one file of the matrix folder (SAFE_ID); a read of another id
//   is absent, a write of one is refused (ERR_PI_NATIVE_UNSAFE_ID), and an entry counts only
//   at the file of its own id (readEntry, listEntries and watches skip a valid entry found
//   under another name: B4 and B5 read any name);
// - folder checks: `<agentDir>/state` and `<agentDir>/state/process-matrix` must be this
//   process's user's (POSIX) and, when symbolic links, lead inside `agentDir`; otherwise reads
//   are absent, writes are refused (ERR_PI_NATIVE_UNSAFE_FOLDER) before anything is created
//   through the link, a sweep removes nothing and a watch ends with the error.
// SECURITY.md says what it protects against and what it does not.
const fs = require('node:fs')
const fsp = require('node:fs/promises')
const path = require('node:path')
const { entryPath } = require('./paths.js')

const ENV = 'PI_NATIVE_HARDENED'

/** Whether hardened mode is on for this call. */
const hardened = () => process.env[ENV] === '1'

// Letters, digits, `.`, `_`, `-`; not starting with `.` (no `.`, `..` or hidden names). At most
// 190 characters: the longest name the store makes from an id, its temp file
// `<id>.json.<pid>.<uuid>.tmp`, then fits the 255 bytes of a file name.
const SAFE_ID = /^[A-Za-z0-9_-][A-Za-z0-9._-]{0,189}$/

/** Whether `id` (a string) is an entry id hardened mode accepts. */
const safeEntryId = (id) => SAFE_ID.test(id)

function unsafeIdError(id) {
  const err = new TypeError(
    `Process-matrix entry id ${JSON.stringify(id)} is not a safe file name: ${ENV}=1 allows 1-190 letters, digits, '.', '_' and '-', not starting with '.'.`,
  )
  err.code = 'ERR_PI_NATIVE_UNSAFE_ID'
  return err
}

function unsafeFolderError(dir, why) {
  const err = new Error(`Refusing the process-matrix folder ${JSON.stringify(dir)}: ${why} (${ENV}=1).`)
  err.code = 'ERR_PI_NATIVE_UNSAFE_FOLDER'
  err.path = dir
  return err
}

/** `target` is `root` or inside it. */
function inside(root, target) {
  if (target === root) return true
  return target.startsWith(root.endsWith(path.sep) ? root : root + path.sep)
}

/** This process's effective user id, or undefined where there is none (Windows). */
const ownUid = () => (typeof process.geteuid === 'function' ? process.geteuid() : undefined)

/**
 * Why the folders of `agentDir`'s store may not be used, as an error, or null when they may
 * (also when they do not exist yet: this process makes them). `fsx` is { lstat, stat, realpath }
 * (promise or sync forms), `run` sequences its calls.
 */
function* refusal(agentDir) {
  const state = path.join(agentDir, 'state')
  const uid = ownUid()
  let root
  for (const dir of [state, path.join(state, 'process-matrix')]) {
    let st
    try {
      st = yield ['lstat', dir]
    } catch {
      return null // not there (made by this process) or not ours to look at: the call says
    }
    if (st.isSymbolicLink()) {
      let target
      try {
        root ??= yield ['realpath', agentDir]
        target = yield ['realpath', dir]
        st = yield ['stat', dir]
      } catch {
        return unsafeFolderError(dir, 'a symbolic link that does not lead to a folder')
      }
      if (!inside(root, target)) return unsafeFolderError(dir, `a symbolic link to ${JSON.stringify(target)}, outside ${JSON.stringify(root)}`)
    }
    if (!st.isDirectory()) return null // the store's own calls fail on it as they would
    if (uid !== undefined && st.uid !== uid) return unsafeFolderError(dir, `owned by uid ${st.uid}, not by this process's uid ${uid}`)
  }
  return null
}

/** `refusal` with fs.promises. */
async function folderRefusal(agentDir) {
  const steps = refusal(agentDir)
  let next = steps.next()
  while (!next.done) {
    const [op, p] = next.value
    try {
      next = steps.next(await fsp[op](p))
    } catch (err) {
      next = steps.throw(err)
    }
  }
  return next.value
}

/** `refusal` on the calling thread. */
function folderRefusalSync(agentDir) {
  const sync = { lstat: fs.lstatSync, stat: fs.statSync, realpath: fs.realpathSync }
  const steps = refusal(agentDir)
  let next = steps.next()
  while (!next.done) {
    const [op, p] = next.value
    let value
    try {
      value = sync[op](p)
    } catch (err) {
      next = steps.throw(err)
      continue
    }
    next = steps.next(value)
  }
  return next.value
}

/** An iteration that rejects its first `next()` with `error` (a watch refused at its call). */
function failedIteration(error) {
  let given = false
  return {
    next: () => (given ? Promise.resolve({ value: undefined, done: true }) : ((given = true), Promise.reject(error))),
    return: () => ((given = true), Promise.resolve({ value: undefined, done: true })),
    [Symbol.asyncIterator]() {
      return this
    },
  }
}

/** Run `fn` so that a synchronous throw becomes a rejection (SPEC G1). */
async function rejecting(fn) {
  return fn()
}

/**
 * A backend's store functions with hardened mode: each asks `hardened()` first and, when it is
 * off, is the backend's own function called as is. Argument errors keep the original's order:
 * the backend's own checks (the id mismatch TypeError, the path TypeErrors) come before the
 * hardened ones. `store.listEntries(agentDir, true)` is the backend's listing with id hygiene.
 */
function hardenStore(store) {
  const idOf = (id) => `${id}`
  /** Throws the id's error, or the folder's; nothing when the write may go on. */
  async function checkWrite(agentDir, id) {
    entryPath(agentDir, id) // the path TypeErrors first, as the original raises them
    if (!safeEntryId(idOf(id))) throw unsafeIdError(idOf(id))
    const refused = await folderRefusal(agentDir)
    if (refused) throw refused
  }
  const readEntry = (agentDir, entryId) => {
    if (!hardened()) return store.readEntry(agentDir, entryId)
    return rejecting(async () => {
      entryPath(agentDir, entryId) // B3: the path TypeError rejects
      const id = idOf(entryId)
      if (!safeEntryId(id) || (await folderRefusal(agentDir))) return undefined
      const entry = await store.readEntry(agentDir, entryId)
      return entry !== undefined && entry.entryId === id ? entry : undefined
    })
  }
  return {
    readEntry,
    listEntries(agentDir) {
      if (!hardened()) return store.listEntries(agentDir)
      return rejecting(async () => {
        if (typeof agentDir !== 'string' || (await folderRefusal(agentDir))) return [] // K3
        return store.listEntries(agentDir, true)
      })
    },
    writeEntry(agentDir, entry) {
      if (!hardened()) return store.writeEntry(agentDir, entry)
      return rejecting(async () => {
        await checkWrite(agentDir, entry.entryId)
        return store.writeEntry(agentDir, entry)
      })
    },
    writeEntryIfUnchanged(agentDir, entryId, expected, next) {
      if (!hardened() || next?.entryId !== entryId) return store.writeEntryIfUnchanged(agentDir, entryId, expected, next)
      return rejecting(async () => {
        await checkWrite(agentDir, entryId)
        return store.writeEntryIfUnchanged(agentDir, entryId, expected, next)
      })
    },
    writeEntryIfUnchangedSync(agentDir, expected, next) {
      if (!hardened()) return store.writeEntryIfUnchangedSync(agentDir, expected, next)
      const id = expected.entryId // the engine's TypeError on a nullish `expected`, as the original
      if (next.entryId !== id) return store.writeEntryIfUnchangedSync(agentDir, expected, next)
      entryPath(agentDir, id)
      if (!safeEntryId(idOf(id))) throw unsafeIdError(idOf(id))
      const refused = folderRefusalSync(agentDir)
      if (refused) throw refused
      return store.writeEntryIfUnchangedSync(agentDir, expected, next)
    },
    removeEntry(agentDir, entryId) {
      if (!hardened()) return store.removeEntry(agentDir, entryId)
      return rejecting(async () => {
        await checkWrite(agentDir, entryId)
        return store.removeEntry(agentDir, entryId)
      })
    },
    removeEntryIfUnchanged(agentDir, expected) {
      if (!hardened()) return store.removeEntryIfUnchanged(agentDir, expected)
      return rejecting(async () => {
        await checkWrite(agentDir, expected.entryId)
        return store.removeEntryIfUnchanged(agentDir, expected)
      })
    },
    sweepOrphanTempFiles(agentDir, minAgeMs) {
      if (!hardened()) return store.sweepOrphanTempFiles(agentDir, minAgeMs)
      return rejecting(async () => {
        if (typeof agentDir === 'string' && (await folderRefusal(agentDir))) return []
        return store.sweepOrphanTempFiles(agentDir, minAgeMs)
      })
    },
    watchEntries(agentDir, options) {
      if (!hardened() || typeof agentDir !== 'string') return store.watchEntries(agentDir, options)
      const refused = folderRefusalSync(path.resolve(agentDir))
      return refused ? failedIteration(refused) : store.watchEntries(agentDir, options)
    },
  }
}

module.exports = { ENV, hardened, safeEntryId, unsafeIdError, folderRefusal, folderRefusalSync, hardenStore }
