'use strict'
// The native backend: the generated binding plus the few hand-written wrappers that compose
// its building blocks into the exact public contract (kept beside the generated loader).
const fs = require('node:fs')
const path = require('node:path')
const binding = require('../index.js')
const { recoveryLimits, lockOptions, lockEnvironment, atomicMode, sweepMinAge } = require('./contract/options.js')
const session = require('./contract/session.js')
const paths = require('./contract/paths.js')
const { createLiveness } = require('./contract/liveness.js')
const events = require('./contract/events.js')
const { fromNative, compromisedError } = require('./contract/errors.js')
const { isDeepStrictEqual, promisify } = require('node:util')
const { mkdirParent, mkdirParentSync } = require('./contract/transient.js')
const { expectedRoute, validTimestamps } = require('./expected.js')
const { Slices } = require('./contract/slices.js')
const { hardenStore, safeEntryId } = require('./contract/hardened.js')
const { processMatrixDir, entryPath, buildEntryId } = paths

// Every native failure of this environment becomes an error in one place: the contract layer.
binding.setErrorFactory(fromNative)

// Liveness: the contract layer's functions over the addon's syscall-sized primitives.
const liveness = createLiveness({
  kill0: binding.kill0,
  startTime: binding.legacyStartTime,
  state: binding.probeState,
  identity: binding.processIdentity,
  sameProcess: binding.sameProcess,
})

// Recovery promises are settled through Node's own libuv only where the host is Node: other
// runtimes (Bun) may export libuv-named functions that are stubs (src/binding/settle.rs).
binding.settleThroughLibuv(
  process.release?.name === 'node' && process.versions.bun === undefined && process.versions.deno === undefined,
)

// L8: lock directories still held when this environment exits (e.g. a withFileLock callback
// cut short by process.exit) are removed, as proper-lockfile's exit handler does.
process.on('exit', () => binding.releaseLocksAtExit())

/**
 * Last complete assistant message of a worker's session (SPEC A13–A26). Resolves null when
 * nothing qualifies or at the deadline; rejects only for an invalid `options` argument.
 */
function recoverLastAssistantFromSession(sessionDir, sessionId, options) {
  return rejecting(() => {
    const limits = recoveryLimits(options) // the only way to reject: an invalid `options`
    if (typeof sessionDir !== 'string') return Promise.resolve(null)
    let pending
    try {
      pending = binding.recoverSessionTail(
        sessionDir,
        typeof sessionId === 'string' ? sessionId : undefined,
        limits.maxFileBytes,
        limits.deadlineMs,
        limits.maxFiles,
      )
    } catch {
      return Promise.resolve(null)
    }
    return pending.then(
      (raw) =>
        raw === null
          ? null
          : {
              sessionId: sessionId ?? raw.sessionId,
              sessionFile: raw.sessionFile,
              text: raw.text,
              timestamp: raw.timestamp,
              stopReason: raw.stopReason,
            },
      () => null,
    )
  })
}

// ---- process-matrix store and atomic-file --------------------------------------------------------

const durable = () => process.env.PI_NATIVE_FSYNC === '1'

// The lock settings of process.env as last handed to the addon (it starts with both unset).
let lockFsSeen
let attributeCacheSeen
/** Hand PI_NATIVE_LOCK_FS / PI_NATIVE_ATTRIBUTE_CACHE_MS to the addon when they changed. */
function syncLockEnvironment() {
  const fsRule = process.env.PI_NATIVE_LOCK_FS
  const cacheMs = process.env.PI_NATIVE_ATTRIBUTE_CACHE_MS
  if (fsRule === lockFsSeen && cacheMs === attributeCacheSeen) return
  binding.setLockEnvironment(...lockEnvironment(fsRule, cacheMs))
  lockFsSeen = fsRule
  attributeCacheSeen = cacheMs
}

const finiteDate = (s) => Number.isFinite(Date.parse(s))

/** Run `fn` so that a synchronous throw becomes a rejection (SPEC G1). */
function rejecting(fn) {
  try {
    return fn()
  } catch (err) {
    return Promise.reject(err)
  }
}

/**
 * A locking store call, fast path first: `call(false)` tries the lock once without waiting and
 * resolves null when it was not free; only then `call(true)` runs under the original's retry
 * policy (ARCHITECTURE.md, "Fast path"). A CAS's `call(false)` may instead return `false` at
 * once: a certain mismatch, told on the JS thread (ARCHITECTURE.md, "CAS mismatches on the JS
 * thread").
 */
function lockedCall(call) {
  const first = call(false)
  if (first === false) return Promise.resolve(false)
  return first.then((r) => (r === null ? call(true) : r))
}

/** The text of an entry, or the error of its serialization (thrown later, as the original does). */
function serialize(entry) {
  try {
    return { payload: JSON.stringify(entry, null, '\t') + '\n' }
  } catch (error) {
    return { payload: null, error }
  }
}

/** A read's result: the entry, or undefined (missing, invalid, or a timestamp V8 rejects). */
const readResult = (r) =>
  r === null ? undefined : r.pending.every(finiteDate) ? JSON.parse(r.text) : undefined

// `rejecting` written out, with no closure per call: readEntry is the store's most frequent
// call, and the two allocations measured ~5% of it. The read is made here when the kernel can
// answer without waiting (storeReadNow; ARCHITECTURE.md, "Reads on the JS thread"), else on
// the pool.
function readEntry(agentDir, entryId) {
  try {
    const file = entryPath(agentDir, entryId)
    const now = binding.storeReadNow(file)
    if (now !== undefined) return Promise.resolve(readResult(now))
    return binding.storeRead(file).then(readResult)
  } catch (err) {
    return Promise.reject(err)
  }
}

/**
 * `strict` (hardened mode, lib/contract/hardened.js): only files named after a safe id, holding
 * the entry of that id.
 */
function listEntries(agentDir, strict = false) {
  if (typeof agentDir !== 'string') return Promise.resolve([])
  return rejecting(() => binding.storeList(agentDir, strict).then((chunks) => collectEntries(chunks, strict)))
}

/**
 * Parse a listing chunk by chunk, in order, yielding to the event loop between slices (W-B8: a
 * 20,000-entry listing is ~11 MB of JSON, over 100 ms of JSON.parse in one piece). The slices
 * are short because V8's collections of the parsed entries, which all survive, land inside
 * them (5–15 ms at 200,000 entries).
 */
async function collectEntries(chunks, strict) {
  const out = []
  const slices = new Slices()
  for (let c = chunks.takeChunk(); c !== null; c = chunks.takeChunk()) {
    const part = JSON.parse(c.json)
    for (let i = 0; i < part.length; i++) {
      if (strict && !(safeEntryId(c.ids[i]) && part[i].entryId === c.ids[i])) continue
      if (!c.pending || c.pending[i].every(finiteDate)) out.push(part[i])
    }
    if (slices.due()) await slices.pause()
  }
  return out
}

function writeEntry(agentDir, entry) {
  return rejecting(() => {
    const file = entryPath(agentDir, entry.entryId)
    paths.assertStoreTarget(file)
    const serialized = serialize(entry)
    const after = () => {
      if (serialized.payload === null) throw serialized.error // after mkdir, lock and release (B7)
    }
    const d = durable()
    syncLockEnvironment()
    return lockedCall((wait) => binding.storeWrite(file, serialized.payload, d, wait)).then(after)
  })
}

/** Start an async CAS, handing `expected` over by its route (lib/expected.js). */
function casStart(file, expected, payload, remove) {
  const r = expectedRoute(expected)
  syncLockEnvironment()
  if (r.judge) {
    return binding.storeCasJudged(file, payload, remove, durable()).then((s) => s.finish(judge(s, expected)))
  }
  const timestamps = r.text === null ? [] : validTimestamps(expected)
  const d = durable()
  return lockedCall((wait) => binding.storeCas(file, expected, r.text, timestamps, payload, remove, d, wait))
}

/**
 * B8/B20's comparison on the JS thread, under the suspended CAS's lock: `current` is the file's
 * validated value or undefined, compared by util.isDeepStrictEqual itself. If it throws (a
 * getter or trap of `expected`), the lock is given back and the error propagates.
 */
function judge(s, expected) {
  const text = s.text
  const current = text !== null && s.timestamps.every(finiteDate) ? JSON.parse(text) : undefined
  try {
    return isDeepStrictEqual(current, expected)
  } catch (err) {
    s.release()
    throw err
  }
}

/** A CAS verdict: finish a suspended one with V8's judgement of its timestamps. */
function casVerdict(r, serialized) {
  if (r instanceof binding.SuspendedCas) {
    // `expected` was undefined: it matches iff some timestamp is invalid for V8.
    return r.finish(!r.timestamps.every(finiteDate)).then((m) => casVerdict(m, serialized))
  }
  if (r && serialized.payload === null) throw serialized.error // matched, nothing to write
  return r
}

function writeEntryIfUnchanged(agentDir, entryId, expected, next) {
  return rejecting(() => {
    if (next.entryId !== entryId) {
      throw new TypeError(`Process-matrix replacement entry '${next.entryId}' does not match '${entryId}'.`)
    }
    const file = entryPath(agentDir, entryId)
    paths.assertStoreTarget(file)
    const serialized = serialize(next)
    return casStart(file, expected, serialized.payload, false).then((r) => casVerdict(r, serialized))
  })
}

function writeEntryIfUnchangedSync(agentDir, expected, next) {
  if (next.entryId !== expected.entryId) {
    throw new TypeError(`Process-matrix replacement entry '${next.entryId}' does not match '${expected.entryId}'.`)
  }
  const file = entryPath(agentDir, expected.entryId)
  paths.assertStoreTarget(file)
  const serialized = serialize(next)
  const r = expectedRoute(expected)
  syncLockEnvironment()
  let matched
  if (r.judge) {
    const s = binding.storeCasJudgedSync(file, serialized.payload, durable())
    matched = s.finishSync(judge(s, expected))
  } else {
    matched = binding.storeCasSync(file, expected, r.text, serialized.payload, durable())
  }
  if (matched && serialized.payload === null) throw serialized.error
  return matched
}

function removeEntry(agentDir, entryId) {
  return rejecting(() => {
    const file = entryPath(agentDir, entryId)
    paths.assertStoreTarget(file)
    syncLockEnvironment()
    return lockedCall((wait) => binding.storeRemove(file, wait))
  })
}

function removeEntryIfUnchanged(agentDir, expected) {
  return rejecting(() => {
    const file = entryPath(agentDir, expected.entryId)
    paths.assertStoreTarget(file)
    return casStart(file, expected, null, true).then((r) => casVerdict(r, { payload: '' }))
  })
}

function sweepOrphanTempFiles(agentDir, minAgeMs) {
  return rejecting(() => {
    processMatrixDir(agentDir) // the path TypeError for a non-string agentDir
    return binding.sweepOrphanTempFiles(agentDir, sweepMinAge(minAgeMs))
  })
}

function writeFileAtomic(filePath, content, options) {
  return rejecting(() => {
    paths.assertAtomicTarget(filePath, options)
    if (paths.isChunkIterable(content)) return writeChunksAtomic(filePath, content, options)
    const mode = atomicMode(filePath, options) // the original's open validates it before the data
    const bytes = paths.atomicContent(filePath, content)
    return binding.atomicWrite(filePath, bytes, mode, durable())
  })
}

/**
 * writeFileAtomic of an iterable of chunks (sync or async, awaited one by one as Node's
 * `FileHandle#writeFile` does), in the original's order: parent directory, mode, then the chunks.
 */
async function writeChunksAtomic(filePath, chunks, options) {
  await mkdirParent(path.dirname(filePath))
  const mode = atomicMode(filePath, options)
  const parts = []
  for await (const chunk of chunks) parts.push(paths.chunkBytes(chunk))
  return binding.atomicWrite(filePath, Buffer.concat(parts), mode, durable())
}

function writeFileAtomicSync(filePath, content, options) {
  paths.assertAtomicTarget(filePath, options)
  const mode = atomicMode(filePath, options)
  const bytes = paths.atomicContent(filePath, content)
  binding.atomicWriteSync(filePath, bytes, mode, durable())
}

/**
 * L1 with `realpath` on: the target as proper-lockfile resolves it, with Node's JavaScript
 * `fs.realpath` (not `fs.promises.realpath`, the libc one): its answers ('' is the working
 * folder) and its errors (an `lstat` or `stat` of the offending component) are the original's.
 */
const realpathAsJs = promisify(fs.realpath)

// Locks held for withFileLock callbacks, strongly referenced until released: a callback whose
// promise nothing else references (one that can never settle) must keep its lock until the
// process exits (L8), as proper-lockfile's module-level table keeps it, not lose it when the
// garbage collector takes the suspended call and its HeldLock with it.
const callbackLocks = new Set()

/**
 * Run `fn` under the lock. If `fn` fails, its error wins (B15); if it succeeds but the lock was
 * taken over meanwhile (a paused holder judged stale by another process), the call fails with
 * ECOMPROMISED instead of reporting a success that another writer may have overwritten.
 */
async function withFileLock(filePath, fn, options) {
  await mkdirParent(path.dirname(filePath)) // B17a: parent first, Node's error
  const o = lockOptions(options, false)
  paths.assertLockTarget(filePath, o.realpath)
  const target = o.realpath ? await realpathAsJs(filePath) : filePath
  syncLockEnvironment()
  const held = await binding.lockAcquire(target, o.retries, o.stale, o.attributeCacheMs)
  callbackLocks.add(held)
  let result
  try {
    result = await fn()
  } catch (err) {
    callbackLocks.delete(held)
    await held.releaseAsync().catch(() => {}) // fn's error wins (B15)
    throw err
  }
  callbackLocks.delete(held)
  // Off the JS thread: the lock directory's stat and rmdir may wait on a network file system.
  if (!(await held.releaseAsync())) throw compromisedError()
  return result
}

/** withFileLock on the calling thread (usable inside `process.on("exit")`). */
function withFileLockSync(filePath, fn, options) {
  mkdirParentSync(path.dirname(filePath)) // B17a: parent first, Node's error
  const o = lockOptions(options, true)
  paths.assertLockTarget(filePath, o.realpath)
  const target = o.realpath ? fs.realpathSync(filePath) : filePath
  syncLockEnvironment()
  const held = binding.lockAcquireSync(target, o.retries, o.stale, o.attributeCacheMs)
  let result
  try {
    result = fn()
  } catch (err) {
    held.release()
    throw err
  }
  if (!held.release()) throw compromisedError()
  return result
}

/** A dirScan's chunks as the map the contract layer asks for, a chunk at a time (slices.js). */
async function scanMap(chunks) {
  const out = new Map()
  const slices = new Slices()
  for (let c = chunks.takeChunk(); c !== null; c = chunks.takeChunk()) {
    const parts = c.split('\0') // name, sig, name, sig, …, ''
    for (let i = 0; i + 1 < parts.length; i += 2) out.set(parts[i], parts[i + 1])
    if (slices.due()) await slices.pause()
  }
  return out
}

// Supervision events: the addon's exit and folder watches under the contract layer's promises,
// iterables, probing and coalescing (lib/contract/events.js).
const exitWaits = events.createExitWaits({
  exitWatch: {
    mode: binding.exitWatchMode,
    // One channel per copy of this file: a second copy (a require.cache reload, another
    // installed copy sharing this binary) gets its own notices, never this one's.
    open(onExit) {
      const channel = new binding.ExitChannel(onExit)
      return {
        add: (pid, startTimeMs) => channel.add(pid, startTimeMs),
        cancel: binding.watchCancel,
        ref: (on) => channel.ref(on),
      }
    },
  },
  ended: events.probeEnded(liveness),
})

const entryWatches = events.createEntryWatches({
  dirWatch: {
    mode: binding.dirWatchMode,
    open(onEvent) {
      const channel = new binding.DirChannel(() => {
        for (const m of channel.take()) onEvent(m.id, m.names ?? null, m.failure ? fromNative(m.failure) : undefined)
      })
      return {
        add: (dir, child) => channel.add(dir, child ?? undefined),
        cancel: binding.watchCancel,
        ref: (on) => channel.ref(on),
      }
    },
  },
  scan: (dir) => binding.dirScan(dir).then(scanMap),
  isRemote: (dir) => binding.dirIsRemote(dir).then((remote) => remote === true),
  // A watch reads as readEntry does, hardened mode included.
  readEntry: (agentDir, entryId) => hardenedStore.readEntry(agentDir, entryId),
})

// PI_NATIVE_HARDENED (lib/contract/hardened.js) over the store and its watch.
const hardenedStore = hardenStore({
  readEntry,
  listEntries,
  writeEntry,
  writeEntryIfUnchanged,
  writeEntryIfUnchangedSync,
  removeEntry,
  removeEntryIfUnchanged,
  sweepOrphanTempFiles,
  watchEntries: entryWatches.watchEntries,
})

module.exports = {
  ...liveness,
  ...exitWaits,
  ...entryWatches,
  deriveSessionPaths: session.deriveSessionPaths,
  appendWorkerSessionArgs: session.appendWorkerSessionArgs,
  resolveSessionRecoveryEnabled: session.resolveSessionRecoveryEnabled,
  shouldAttemptSessionRecovery: session.shouldAttemptSessionRecovery,
  recoverLastAssistantFromSession,
  processMatrixDir,
  entryPath,
  buildEntryId,
  ...hardenedStore,
  writeFileAtomic,
  writeFileAtomicSync,
  withFileLock,
  withFileLockSync,
}
