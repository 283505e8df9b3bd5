'use strict'
// Pure-JavaScript process-matrix store backend, written from SPEC.md §2.B (B1–B20, V1–V20).
const fsp = require('node:fs/promises')
const path = require('node:path')
const { isDeepStrictEqual } = require('node:util')
const { parsedEqual } = require('../lib/contract/parsed-equal.js')
const { processMatrixDir, entryPath, buildEntryId } = require('../lib/contract/paths.js')
const { sweepMinAge, ENTRY_MAX_BYTES } = require('../lib/contract/options.js')
const { withFileLock, withFileLockSync, writeFileAtomic, writeFileAtomicSync } = require('./atomic-file.js')
const { mkdirParent, mkdirParentSync, backoff, sleep } = require('../lib/contract/transient.js')
const { isRemoteDir, readCurrent, readCurrentSync, renameTransient } = require('./remote.js')
const { readRegularText, readRegularTextSync } = require('./read-file.js')
const { Slices, sortInSlices } = require('../lib/contract/slices.js')
const { safeEntryId } = require('../lib/contract/hardened.js')

// ---- validation (V1–V20) ---------------------------------------------------------------------
const STATUS = ['running', 'winding_down', 'resumable', 'adopted', 'closed']
const KINDS = ['repository', 'worktree', 'artifact', 'evidence', 'memory-query', 'skill', 'prompt', 'service']

function isPlainRecord(v) {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) return false
  const proto = Object.getPrototypeOf(v)
  return proto === Object.prototype || proto === null
}
const has = (o, k) => Object.prototype.hasOwnProperty.call(o, k)
const nonBlank = (v) => typeof v === 'string' && v.trim() !== ''
const absentOrString = (o, k, max = Infinity) => !has(o, k) || (typeof o[k] === 'string' && o[k].length <= max)
const validTimestamp = (v) => typeof v === 'string' && Number.isFinite(Date.parse(v))

function isAgentIdentity(agent) {
  if (!isPlainRecord(agent) || !isPlainRecord(agent.resumeContext)) return false
  const rc = agent.resumeContext
  if (!nonBlank(agent.agentId) || !nonBlank(rc.sessionId) || !nonBlank(rc.cwd)) return false
  if (rc.provider !== 'pi' && rc.provider !== 'external') return false
  for (const k of ['sessionDir', 'sessionFile', 'worktreeLaneKey', 'orchestrationProfileId', 'modelRef', 'latestCheckpointId']) {
    if (!absentOrString(rc, k)) return false
  }
  if (!Array.isArray(rc.resourceProfileNames) || !rc.resourceProfileNames.every(nonBlank)) return false
  if (!Array.isArray(rc.contextPointers)) return false
  return rc.contextPointers.every(
    (p) =>
      isPlainRecord(p) &&
      nonBlank(p.id) &&
      KINDS.includes(p.kind) &&
      nonBlank(p.uri) &&
      typeof p.readOnly === 'boolean' &&
      absentOrString(p, 'digest') &&
      (!has(p, 'metadata') || isPlainRecord(p.metadata)),
  )
}

function isProcessMatrixEntry(v) {
  if (!isPlainRecord(v) || !isAgentIdentity(v.agent)) return false
  if (v.role !== 'master' && v.role !== 'worker') return false
  if (has(v, 'resumable')) {
    const r = v.resumable
    // Both parsed: compared as util.isDeepStrictEqual compares them, also past its stack (a
    // read never fails for what a file holds, B3).
    if (!isPlainRecord(r) || !isAgentIdentity(r.agent) || !parsedEqual(r.agent, v.agent)) return false
    if (!STATUS.includes(r.lastCode) || !absentOrString(r, 'taskRef', 512) || !absentOrString(r, 'taskSummary', 2000)) return false
  }
  if (has(v, 'terminal')) {
    const t = v.terminal
    if (!isPlainRecord(t)) return false
    if (!(t.code === null || Number.isSafeInteger(t.code))) return false
    if (!(t.signal === null || (typeof t.signal === 'string' && t.signal.length <= 100))) return false
    if (!validTimestamp(t.observedAt)) return false
    if (has(t, 'notificationDeliveredAt') && !validTimestamp(t.notificationDeliveredAt)) return false
    if (v.status !== 'closed') return false
  }
  if (v.status === 'resumable' && !has(v, 'resumable')) return false
  if (v.entryId !== `${v.role}-${v.agent.resumeContext.sessionId}`) return false
  return (
    Number.isSafeInteger(v.pid) &&
    typeof v.hostname === 'string' &&
    v.hostname.length <= 255 &&
    validTimestamp(v.startedAt) &&
    validTimestamp(v.heartbeatAt) &&
    STATUS.includes(v.status) &&
    (!has(v, 'parentPid') || (Number.isSafeInteger(v.parentPid) && v.parentPid > 0)) &&
    absentOrString(v, 'parentSessionId', 512) &&
    absentOrString(v, 'tmuxSession', 512) &&
    (!has(v, 'tmuxPanePid') || Number.isSafeInteger(v.tmuxPanePid)) &&
    absentOrString(v, 'taskRef', 512) &&
    absentOrString(v, 'taskSummary', 2000)
  )
}

// ---- paths -----------------------------------------------------------------------------------
const serialize = (entry) => JSON.stringify(entry, null, '\t') + '\n'

function parseValid(text) {
  let v
  try {
    v = JSON.parse(text)
  } catch {
    return undefined
  }
  return isProcessMatrixEntry(v) ? v : undefined
}

// An entry is read only if it is a regular file of at most ENTRY_MAX_BYTES, opened non-blocking
// (W-B9: js/read-file.js). On a network or FUSE file system it is read as the server has it now
// (js/remote.js): a client cache may lead its name to a replaced file, or cut the new one at an
// old size.
async function readValid(file) {
  const text = await readValidText(file)
  return text === undefined ? undefined : parseValid(text)
}

/** The text `readValid` parses, or undefined. */
async function readValidText(file) {
  try {
    return isRemoteDir(path.dirname(file)) ? await readCurrent(file) : await readRegularText(file, ENTRY_MAX_BYTES)
  } catch {
    return undefined
  }
}

function readValidSync(file) {
  let text
  try {
    text = isRemoteDir(path.dirname(file)) ? readCurrentSync(file) : readRegularTextSync(file, ENTRY_MAX_BYTES)
  } catch {
    return undefined
  }
  return text === undefined ? undefined : parseValid(text)
}

// ---- operations ------------------------------------------------------------------------------
async function readEntry(agentDir, entryId) {
  return readValid(entryPath(agentDir, entryId))
}

// A large folder is listed and sorted in slices (lib/contract/slices.js): `readdir` hands all its
// names to the JS thread at once (~100 ms for 200,000), `opendir` a batch at a time. `strict`
// (hardened mode, lib/contract/hardened.js): only files named after a safe id, holding the entry
// of that id.
async function listEntries(agentDir, strict = false) {
  let dir
  const names = []
  try {
    dir = processMatrixDir(agentDir)
    for await (const d of await fsp.opendir(dir, { bufferSize: 256 })) if (d.name.endsWith('.json')) names.push(d.name)
  } catch {
    return []
  }
  // Read first, parse after. While files are read, the heap keeps their texts joined into pieces
  // of ~48 KiB, a few thousand objects V8 marks at once; the entries' objects are then made in
  // runs of slices, during which its incremental marking keeps up, as in the native backend.
  // Parsed one by one as they were read, they grew the heap so slowly that a mark-compact found
  // almost all of its marking left for its final pause: 33–100 ms at 200,000 entries (issue 42;
  // docs/BENCHMARKS.md, "Large folders"). What is kept unparsed is bounded (RETAIN_CHARS), as
  // files that turn out invalid are.
  const slices = new Slices()
  const sorted = await sortInSlices(names, slices)
  const idOf = (n) => sorted[n].slice(0, -'.json'.length)
  const out = []
  const pieces = []
  let piece = newPiece()
  let kept = 0
  const parsePieces = async () => {
    for (const p of pieces) {
      for (let j = 0, at = 0; j < p.lengths.length; at += p.lengths[j++]) {
        const v = parseValid(p.text.slice(at, at + p.lengths[j]))
        if (v !== undefined && (!strict || v.entryId === idOf(p.names[j]))) out.push(v)
        if (slices.due()) await slices.pause()
      }
    }
    pieces.length = 0
    kept = 0
  }
  const readAt = (n) => (strict && !safeEntryId(idOf(n)) ? undefined : readValidText(path.join(dir, sorted[n])))
  for (let n = 0; n < sorted.length; n += READ_AHEAD) {
    const batch = []
    for (let k = n; k < Math.min(n + READ_AHEAD, sorted.length); k++) batch.push(readAt(k))
    const texts = await Promise.all(batch)
    for (let k = 0; k < texts.length; k++) {
      const text = texts[k]
      if (text === undefined) continue
      piece.texts.push(text)
      piece.lengths.push(text.length)
      piece.names.push(n + k)
      piece.size += text.length
      if (piece.size < PIECE_CHARS) continue
      pieces.push(joined(piece))
      kept += piece.size
      piece = newPiece()
      if (kept >= RETAIN_CHARS) await parsePieces()
    }
  }
  pieces.push(joined(piece))
  await parsePieces()
  return out
}

// Files listEntries reads at once: as many as the native backend's reading threads, so a folder
// of files at the size bound costs no more memory here than there.
const READ_AHEAD = 4
// Texts read by listEntries are joined by the ~48 KiB (as the native backend's pieces), and
// parsed once 32 Mi characters of them wait.
const PIECE_CHARS = 48 * 1024
const RETAIN_CHARS = 32 * 1024 * 1024
const newPiece = () => ({ texts: [], lengths: [], names: [], size: 0 })
const joined = (p) => ({ text: p.texts.join(''), lengths: p.lengths, names: p.names })

async function writeEntry(agentDir, entry) {
  const file = entryPath(agentDir, entry.entryId)
  await mkdirParent(path.dirname(file))
  await withFileLock(file, async () => {
    await writeFileAtomic(file, serialize(entry))
  })
}

async function writeEntryIfUnchanged(agentDir, entryId, expected, next) {
  if (next.entryId !== entryId) {
    throw new TypeError(`Process-matrix replacement entry '${next.entryId}' does not match '${entryId}'.`)
  }
  const file = entryPath(agentDir, entryId)
  await mkdirParent(path.dirname(file))
  return withFileLock(file, async () => {
    if (!isDeepStrictEqual(await readValid(file), expected)) return false
    await writeFileAtomic(file, serialize(next))
    return true
  })
}

function writeEntryIfUnchangedSync(agentDir, expected, next) {
  if (next.entryId !== expected.entryId) {
    throw new TypeError(`Process-matrix replacement entry '${next.entryId}' does not match '${expected.entryId}'.`)
  }
  const file = entryPath(agentDir, expected.entryId)
  mkdirParentSync(path.dirname(file))
  return withFileLockSync(
    file,
    () => {
      if (!isDeepStrictEqual(readValidSync(file), expected)) return false
      writeFileAtomicSync(file, serialize(next))
      return true
    },
    { retries: 0 },
  )
}

async function removeEntry(agentDir, entryId) {
  const file = entryPath(agentDir, entryId)
  await mkdirParent(path.dirname(file))
  await withFileLock(file, async () => {
    await rmRetried(file).catch(() => {})
  })
}

async function removeEntryIfUnchanged(agentDir, expected) {
  const file = entryPath(agentDir, expected.entryId)
  await mkdirParent(path.dirname(file))
  return withFileLock(file, async () => {
    if (!isDeepStrictEqual(await readValid(file), expected)) return false
    await rmRetried(file)
    return true
  })
}

/** `fs.promises.rm(file, { force: true })`, a network file system's transient refusals tried again. */
async function rmRetried(file) {
  const next = backoff()
  for (;;) {
    try {
      return await fsp.rm(file, { force: true })
    } catch (err) {
      const wait = renameTransient(err, file) ? next() : -1
      if (wait < 0) throw err
      await sleep(wait)
    }
  }
}

// `.*`: entryPath(agentDir, '') is `<matrix>/.json`, an entry file like any other (W-B7).
const UUID = '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}'
const TEMP_RE = new RegExp(`^.*\\.json\\.(\\d+)\\.${UUID}\\.tmp$`)
// A native lock's private directory on a network folder (COMPATIBILITY.md, "Private names").
const PRIVATE_LOCK_RE = new RegExp(`^.*\\.json\\.lock\\.${UUID}$`)
// Its maker cannot be told from its name: removed only once this old, whatever minAgeMs says.
const PRIVATE_LOCK_MIN_AGE_MS = 300_000

async function sweepOrphanTempFiles(agentDir, minAge) {
  const dir = processMatrixDir(agentDir)
  const minAgeMs = sweepMinAge(minAge)
  let names
  try {
    names = await fsp.readdir(dir)
  } catch {
    return []
  }
  const removed = []
  for (const name of names) {
    if (PRIVATE_LOCK_RE.test(name)) {
      const file = path.join(dir, name)
      try {
        const st = await fsp.lstat(file)
        if (Date.now() - st.mtimeMs < Math.max(minAgeMs, PRIVATE_LOCK_MIN_AGE_MS)) continue
        await fsp.rmdir(file)
        removed.push(file)
      } catch {}
      continue
    }
    const m = TEMP_RE.exec(name)
    if (!m) continue
    const file = path.join(dir, name)
    try {
      const st = await fsp.stat(file)
      if (Date.now() - st.mtimeMs < minAgeMs) continue
      try {
        process.kill(Number(m[1]), 0)
        continue // writer alive (or not ours to judge)
      } catch (err) {
        if (err.code !== 'ESRCH') continue
      }
      await fsp.unlink(file)
      removed.push(file)
    } catch {}
  }
  return removed
}

module.exports = {
  processMatrixDir,
  entryPath,
  buildEntryId,
  readEntry,
  listEntries,
  writeEntry,
  writeEntryIfUnchanged,
  writeEntryIfUnchangedSync,
  removeEntry,
  removeEntryIfUnchanged,
  sweepOrphanTempFiles,
  isProcessMatrixEntry,
}
