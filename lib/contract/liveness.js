'use strict'
// The JavaScript half of every liveness function, shared by both backends: argument checks, the
// `process.kill(pid, 0)` argument rule (SPEC C0), result objects and messages. A backend only
// supplies primitives that take an already-checked pid:
//   kill0(pid)        → 0, or the negative (libuv) errno `process.kill(pid, 0)` would report
//   startTime(pid)    → C4's value for an int32 pid (probe gate included) or undefined
//   state(pid)        → 'alive' | 'dead' | 'zombie' | 'eperm' for a positive int32 pid
//   identity(pid)     → { pid, startTimeMs, state } | undefined for a positive int32 pid
//   sameProcess(pid, startTimeMs) → boolean for a positive int32 pid
// Values `process.kill` would reject or coerce are handed to `process.kill` itself, so their
// errors and conversions are Node's own.
const fs = require('node:fs')
const os = require('node:os')
const util = require('node:util')

/** libuv's errno for a name (EPERM and ESRCH differ between POSIX and Windows). */
function errnoOf(name) {
  for (const [errno, [n]] of util.getSystemErrorMap()) if (n === name) return errno
  throw new Error(`libuv has no ${name}`)
}
const EPERM = errnoOf('EPERM')
const ESRCH = errnoOf('ESRCH')

/** True for the numbers `process.kill` passes to the OS unchanged: `pid == (pid | 0)`. */
const isInt32 = (pid) => typeof pid === 'number' && (pid | 0) === pid
const isPositivePid = (x) => Number.isInteger(x) && x >= 1 && x <= 0x7fffffff

/** `process.kill(pid, 0)` for any value: the error it throws, or null on success. */
function nodeProbe(pid) {
  try {
    process.kill(pid, 0)
    return null
  } catch (err) {
    return err
  }
}

/** The original's procfs parse (C4): field 22 after the last `)`, times 100, or undefined. */
function legacyTicksFromProc(pidText) {
  try {
    const stat = fs.readFileSync(`/proc/${pidText}/stat`, 'utf8')
    const close = stat.lastIndexOf(')')
    if (close < 0) return undefined
    const ticks = Number(stat.slice(close + 1).trim().split(/\s+/)[19])
    return Number.isFinite(ticks) ? Math.floor(ticks * 100) : undefined
  } catch {
    return undefined
  }
}

function requireNumber(value, name) {
  if (typeof value !== 'number') throw new TypeError(`The "${name}" argument must be of type number`)
  return value
}

/** The public liveness functions over a backend's primitives. */
function createLiveness(probe) {
  const { kill0 } = probe

  /** C1: a finite positive pid whose probe succeeds or is refused (EPERM). */
  function isReloadSessionProcessAlive(pid) {
    if (pid === undefined || !Number.isFinite(pid) || pid <= 0) return false
    if (!isInt32(pid)) return false // process.kill rejects it (ERR_INVALID_ARG_TYPE)
    const errno = kill0(pid)
    return errno === 0 || errno === EPERM
  }

  /** C2: foreign host → alive; else the probe of `owner.pid`, unchecked (EPERM = alive). */
  function defaultIsPidAlive(owner) {
    if (owner.hostname !== os.hostname()) return true
    const pid = owner.pid
    if (isInt32(pid)) {
      const errno = kill0(pid)
      return errno === 0 || errno === EPERM
    }
    const err = nodeProbe(pid)
    return err === null || (Boolean(err) && err.code === 'EPERM')
  }

  /** C3: `{ pid, alive, detail }` with pi-crew's detail strings. */
  function checkProcessLiveness(pid) {
    if (pid === undefined || !Number.isInteger(pid) || pid <= 0) {
      return { pid, alive: false, detail: 'no pid recorded' }
    }
    if (!isInt32(pid)) {
      const err = nodeProbe(pid) // ERR_INVALID_ARG_TYPE: its message is the detail
      return { pid, alive: false, detail: err instanceof Error ? err.message : String(err) }
    }
    const errno = kill0(pid)
    if (errno === 0) return { pid, alive: true, detail: 'process is alive' }
    if (errno === EPERM) return { pid, alive: true, detail: 'process exists but permission is denied' }
    if (errno === ESRCH) return { pid, alive: false, detail: 'process does not exist' }
    return { pid, alive: false, detail: `kill ${util.getSystemErrorName(errno)}` }
  }

  /** C4: the legacy start-time value, or undefined when the probe or the read fails. */
  function getProcessStartTime(pid) {
    if (isInt32(pid)) return probe.startTime(pid)
    if (nodeProbe(pid) !== null) return undefined
    // Only values that coerce to an int32 get here (strings, booleans, objects): Linux reads
    // the procfs path their string form names; elsewhere the original wants a number.
    return process.platform === 'linux' ? legacyTicksFromProc(pid) : undefined
  }

  /** Probe one pid: alive, dead, zombie, eperm, or invalid (not a positive int32). */
  function probePid(pid) {
    const x = requireNumber(pid, 'pid')
    return isPositivePid(x) ? probe.state(x) : 'invalid'
  }

  /** `probePid` for each element, in order. */
  function probePids(pids) {
    if (!Array.isArray(pids)) throw new TypeError('The "pids" argument must be an array of numbers')
    const out = []
    for (let i = 0; i < pids.length; i++) {
      const x = requireNumber(pids[i], `pids[${i}]`)
      out.push(isPositivePid(x) ? probe.state(x) : 'invalid')
    }
    return out
  }

  /** `{ pid, startTimeMs, state }` of a running (or zombie) process, else undefined. */
  function getProcessIdentity(pid) {
    const x = requireNumber(pid, 'pid')
    return isPositivePid(x) ? probe.identity(x) : undefined
  }

  /** True while the process an identity was taken from still runs under that pid. */
  function isSameProcess(identity) {
    const message = 'The "identity" argument must be an object with numeric "pid" and "startTimeMs"'
    if (identity === null || typeof identity !== 'object') throw new TypeError(message)
    const pid = identity.pid
    const startTimeMs = identity.startTimeMs
    if (typeof pid !== 'number' || typeof startTimeMs !== 'number') throw new TypeError(message)
    return isPositivePid(pid) && probe.sameProcess(pid, startTimeMs)
  }

  return {
    isReloadSessionProcessAlive,
    defaultIsPidAlive,
    checkProcessLiveness,
    getProcessStartTime,
    probePid,
    probePids,
    getProcessIdentity,
    isSameProcess,
  }
}

module.exports = { createLiveness, legacyTicksFromProc, nodeProbe, EPERM, ESRCH }
