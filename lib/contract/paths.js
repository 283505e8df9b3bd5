'use strict'
// Path building and path-argument checks of the process-matrix store and atomic-file helpers
// (SPEC B1–B2, G6), done with Node's own `path` and `fs` so errors match the original's.
const fs = require('node:fs')
const path = require('node:path')
const { randomUUID } = require('node:crypto')
const { modeOption } = require('./options.js')

/** `<agentDir>/state/process-matrix` by `path.join` (its TypeError for a non-string agentDir). */
function processMatrixDir(agentDir) {
  return path.join(agentDir, 'state', 'process-matrix')
}

/** The entry's file: `String(entryId) + ".json"` joined (and so normalized) under the dir. */
function entryPath(agentDir, entryId) {
  return path.join(processMatrixDir(agentDir), String(entryId) + '.json')
}

/** `String(role) + "-" + String(sessionId)`; no validation. */
function buildEntryId(role, sessionId) {
  return String(role) + '-' + String(sessionId)
}

/**
 * Throw what Node's fs throws for a path string containing a NUL byte (`TypeError`
 * `ERR_INVALID_ARG_VALUE`, naming `shown`), before anything touches the disk. Other paths pass
 * untouched at the cost of one `includes`. Delegates to Node: its fs validates the argument
 * before any syscall, so the error is Node's own, message included.
 * @param {string} shown the path as the original's failing fs call would have received it
 */
function assertNoNul(shown) {
  if (typeof shown === 'string' && shown.includes('\0')) {
    fs.accessSync(shown) // throws ERR_INVALID_ARG_VALUE during argument validation
  }
}

/**
 * The NUL check of a lock target, after the parent directory was created: the original's first
 * fs call to see the path is proper-lockfile's `mkdir` of `<resolved target>.lock` (or its
 * `realpath` of the target when `realpath` is on).
 */
function assertLockTarget(filePath, realpath) {
  if (typeof filePath === 'string' && filePath.includes('\0')) {
    assertNoNul(realpath ? filePath : path.resolve(filePath) + '.lock')
  }
}

/**
 * Argument checks of writeFileAtomic(Sync), in the original's order: `path.dirname(filePath)`
 * (Node's TypeError for a non-string), then — only for a path with a NUL byte — `mkdir -p` of
 * the parent and the error of the first fs call that sees the NUL (the parent's mkdir, else the
 * exclusive open of the temp file `<filePath>.<pid>.<uuid>.tmp`, whose `options.mode` argument
 * is read before Node looks at the path: a throwing getter's error comes first).
 */
function assertAtomicTarget(filePath, options) {
  const dir = path.dirname(filePath)
  if (!filePath.includes('\0')) return
  assertNoNul(dir)
  fs.mkdirSync(dir, { recursive: true })
  modeOption(options)
  assertNoNul(`${filePath}.${process.pid}.${randomUUID()}.tmp`)
}

/**
 * The NUL check of a mutating store operation on `file` (an entry path): the original's first fs
 * call to see a NUL byte is `mkdir -p` of the entry's directory (NUL in agentDir), else — after
 * that directory was created — proper-lockfile's `mkdir` of `<resolved file>.lock`.
 */
function assertStoreTarget(file) {
  if (!file.includes('\0')) return
  const dir = path.dirname(file)
  assertNoNul(dir)
  fs.mkdirSync(dir, { recursive: true })
  assertLockTarget(file, false)
}

/**
 * writeFileAtomic(Sync)'s `content` as the bytes to write: a string or an ArrayBufferView passes
 * as is. Anything else fails where the original's write does — after the parent directory and
 * the temp file were created (the temp file is then removed) — with Node's own `data` argument
 * error. (The async variant first routes iterables of chunks, see `isChunkIterable`.)
 */
function atomicContent(filePath, content) {
  if (typeof content === 'string') return content
  if (ArrayBuffer.isView(content)) return chunkBytes(content)
  fs.mkdirSync(path.dirname(filePath), { recursive: true })
  // fs validates `data` before it opens the path; the NUL path guarantees nothing is opened.
  fs.writeFileSync('\0', content)
  throw new Error('unreachable') // writeFileSync threw above
}

/**
 * Whether the async original's `FileHandle#writeFile` writes `content` chunk by chunk: any
 * non-string, non-ArrayBufferView value with a sync or async iterator (Node's own test).
 */
function isChunkIterable(content) {
  if (content === null || content === undefined || typeof content === 'string' || ArrayBuffer.isView(content)) {
    return false
  }
  return typeof content[Symbol.iterator] === 'function' || typeof content[Symbol.asyncIterator] === 'function'
}

/** One chunk's bytes as Node's `FileHandle#writeFile` converts it (a view as is, else UTF-8). */
function chunkBytes(chunk) {
  if (ArrayBuffer.isView(chunk)) return new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength)
  return Buffer.from(chunk, 'utf8')
}

module.exports = {
  processMatrixDir,
  entryPath,
  buildEntryId,
  assertNoNul,
  assertLockTarget,
  assertStoreTarget,
  assertAtomicTarget,
  atomicContent,
  isChunkIterable,
  chunkBytes,
}
