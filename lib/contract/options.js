'use strict'
// Option defaults and checks, shared by both backends: the new APIs' options, and the original
// options of the atomic-file helpers read in the original's order.
const fs = require('node:fs')
const path = require('node:path')

const RECOVERY_DEFAULTS = Object.freeze({ maxFileBytes: 67108864, deadlineMs: 5000, maxFiles: 3 })

/**
 * The most an entry read takes (W-B9): a process-matrix file larger than this (by its size, or
 * by what it yields when its size says nothing, as procfs files) reads as absent, as an
 * unparsable one does. The native core's `store::ENTRY_MAX_BYTES` is the same number.
 */
const ENTRY_MAX_BYTES = 64 * 1024 * 1024

/**
 * Validate the optional third argument of recoverLastAssistantFromSession.
 * Throws a TypeError naming the offending option.
 */
function recoveryLimits(options) {
  if (options === undefined || options === null) return { ...RECOVERY_DEFAULTS }
  if (typeof options !== 'object') throw new TypeError('The "options" argument must be an object')
  const out = { ...RECOVERY_DEFAULTS }
  for (const key of Object.keys(RECOVERY_DEFAULTS)) {
    const v = options[key]
    if (v === undefined) continue
    if (typeof v !== 'number' || Number.isNaN(v) || v < 0 || (key === 'maxFiles' && !Number.isInteger(v))) {
      throw new TypeError(`The "options.${key}" property must be a non-negative number${key === 'maxFiles' ? ' (integer)' : ''}`)
    }
    out[key] = v
  }
  out.maxFiles = Math.min(out.maxFiles, 0xffffffff)
  return out
}

/**
 * How many retries `for (let i = 0; i < retries; i++)` (the retry package's schedule loop) gives:
 * the comparison converts like the loop does (a symbol throws its TypeError there).
 */
function loopCount(retries) {
  if (!(0 < retries)) return 0
  return Math.ceil(Number(retries))
}

/**
 * The lock options of withFileLock(Sync), read in the original's order after its `mkdir`:
 * async passes `{ realpath, stale, retries }` to proper-lockfile; sync first computes its
 * attempt count `max(1, retries ?? 10) + 1` (B18). proper-lockfile floors `stale` with
 * `Math.max(stale || 0, 2000)` and tests `realpath` for truthiness. `options` itself defaults
 * to `{}` only when undefined (a null throws the engine's TypeError, as the original's does).
 * @returns {{ retries: number, stale: number, realpath: boolean, attributeCacheMs: number | undefined }}
 */
function lockOptions(options = {}, sync) {
  let o
  if (sync) {
    const retries = Math.max(1, options.retries ?? 10)
    const realpath = Boolean(options.realpath ?? false)
    const stale = Math.max(options.stale || 0, 2000)
    o = { retries, stale, realpath }
  } else {
    const realpath = Boolean(options.realpath ?? false)
    const stale = Math.max(options.stale || 0, 2000)
    const retries = loopCount(options.retries ?? 10)
    o = { retries, stale, realpath }
  }
  // New, read after the original's: the network rule's attribute-cache bound for this lock
  // (undefined: PI_NATIVE_ATTRIBUTE_CACHE_MS or its default; not a non-negative number: ignored).
  const cacheMs = options.attributeCacheMs
  o.attributeCacheMs = typeof cacheMs === 'number' && cacheMs >= 0 ? cacheMs : undefined
  return o
}

/**
 * The lock settings a host gives through its environment (read at each locking call, SPEC G10):
 * `PI_NATIVE_LOCK_FS` (`network` or `local` forces that staleness rule; anything else: by the
 * file system) and `PI_NATIVE_ATTRIBUTE_CACHE_MS` (the network rule's bound for client
 * attribute caches; default 60000; a value that is not a non-negative number is ignored).
 * @returns {[number, number]} the rule (0 auto, 1 local, 2 network) and the bound in ms
 */
function lockEnvironment(fsRule, cacheMs) {
  const rule = fsRule === 'local' ? 1 : fsRule === 'network' ? 2 : 0
  return [rule, attributeCacheMs(cacheMs === undefined || cacheMs.trim() === '' ? undefined : Number(cacheMs))]
}

/** The network rule's attribute-cache bound: a non-negative number, else the default. */
function attributeCacheMs(ms) {
  return typeof ms === 'number' && ms >= 0 ? ms : ATTRIBUTE_CACHE_DEFAULT_MS
}
const ATTRIBUTE_CACHE_DEFAULT_MS = 60000

/** `options.mode` read as the original's open argument reads it (once; `options` defaults to {}). */
function modeOption(options = {}) {
  return options.mode
}

/**
 * writeFileAtomic(Sync)'s file mode: `options.mode ?? 0o666`, read where the original reads it —
 * after it created the parent directory — and accepted or refused as Node's `open` does (a
 * uint32, or a string of octal digits), so a throwing `options` or a bad mode leaves that
 * directory too and fails with Node's own error.
 */
function atomicMode(filePath, options) {
  try {
    return nodeFileMode(modeOption(options) ?? 0o666)
  } catch (err) {
    fs.mkdirSync(path.dirname(filePath), { recursive: true })
    throw err
  }
}

// A path that can never be opened (a name under a regular file): `open` validates its mode
// argument first and then fails with ENOTDIR/ENOENT, creating nothing.
const MODE_PROBE = path.join(__filename, 'mode-probe')

/** A file mode as Node's fs parses it; its own ERR_* error when Node refuses it. */
function nodeFileMode(mode) {
  if (typeof mode === 'number' && mode >>> 0 === mode) return mode
  try {
    fs.closeSync(fs.openSync(MODE_PROBE, 'r', mode))
  } catch (err) {
    if (typeof err?.code === 'string' && err.code.startsWith('ERR_')) throw err
  }
  return typeof mode === 'string' ? parseInt(mode, 8) : mode
}

/** sweepOrphanTempFiles' `minAgeMs`: undefined → 5 minutes, else a non-negative number. */
function sweepMinAge(minAgeMs) {
  if (minAgeMs === undefined) return 300000
  if (typeof minAgeMs !== 'number' || !(minAgeMs >= 0)) {
    throw new TypeError('The "minAgeMs" argument must be a non-negative number')
  }
  return minAgeMs
}

module.exports = { RECOVERY_DEFAULTS, ENTRY_MAX_BYTES, recoveryLimits, lockOptions, lockEnvironment, atomicMode, modeOption, sweepMinAge }
