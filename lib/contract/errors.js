'use strict'
// The one place where failures reported by a backend become JavaScript errors. Native code hands
// over a plain description; this module turns it into the Error Node's own fs (or proper-lockfile)
// would have thrown for the same failure: same class, message, `code`, and own properties in
// Node's order (errno, code, syscall, path, dest).
const util = require('node:util')

let systemErrors
/** libuv's errno → [name, description] table, as Node maintains it (read once). */
function systemErrorMap() {
  if (systemErrors === undefined) systemErrors = util.getSystemErrorMap()
  return systemErrors
}

/**
 * Node's fs error for a failed syscall. `errno` is negative (libuv's convention, what Node puts
 * on `err.errno`). An errno libuv has no name for keeps its number: code and description are
 * then `Unknown system error <errno>`, exactly as Node's own errors read.
 * @param {{ errno: number, syscall: string, path?: string, dest?: string }} failure
 */
function fsError({ errno, syscall, path, dest }) {
  const known = systemErrorMap().get(errno)
  const code = known ? known[0] : util.getSystemErrorName(errno)
  const description = known ? known[1] : code
  let message = `${code}: ${description}, ${syscall}`
  if (typeof path === 'string') message += ` '${path}'`
  if (typeof dest === 'string') message += ` -> '${dest}'`
  const err = new Error(message)
  err.errno = errno
  err.code = code
  err.syscall = syscall
  if (typeof path === 'string') err.path = path
  if (typeof dest === 'string') err.dest = dest
  return err
}

/** proper-lockfile's contention error: `Lock file is already being held`, with `file`. */
function lockedError(file) {
  return Object.assign(new Error('Lock file is already being held'), { code: 'ELOCKED', file })
}

/**
 * proper-lockfile's compromised-lock error. When the cause was a failed syscall the fs error is
 * kept and only its code changes (as proper-lockfile does); otherwise the stale-threshold message.
 */
function compromisedError(cause) {
  const err = cause ? fsError(cause) : new Error('Unable to update lock within the stale threshold')
  err.code = 'ECOMPROMISED'
  return err
}

/**
 * Turn what a native operation failed with into the public error. Accepts a failure
 * description (`{ errno, syscall, path?, dest? }`, `{ code: 'ELOCKED', file }`,
 * `{ code: 'ECOMPROMISED', cause? }`) — also when the binding threw it as an Error carrying
 * those properties. Anything else (an engine TypeError, …) is returned unchanged.
 */
function fromNative(failure) {
  if (failure === null || typeof failure !== 'object') return failure
  if (typeof failure.errno === 'number' && typeof failure.syscall === 'string') return fsError(failure)
  if (failure instanceof Error) return failure.code === 'ELOCKED' ? lockedError(failure.file) : failure
  if (failure.code === 'ELOCKED') return lockedError(failure.file)
  if (failure.code === 'ECOMPROMISED') return compromisedError(failure.cause)
  if (typeof failure.message === 'string') {
    return Object.assign(new Error(failure.message), failure.code === undefined ? {} : { code: failure.code })
  }
  return failure
}

/** The tail Node's argument errors end with: what was received, described as Node does. */
function received(value) {
  if (value === null) return 'null'
  if (value === undefined) return 'undefined'
  if (typeof value === 'function') return `function ${value.name}`
  if (typeof value === 'object') {
    const name = value.constructor?.name
    return name ? `an instance of ${name}` : util.inspect(value, { depth: -1 })
  }
  let shown = util.inspect(value, { colors: false })
  if (shown.length > 28) shown = `${shown.slice(0, 25)}...`
  return `type ${typeof value} (${shown})`
}

/**
 * Node's `ERR_INVALID_ARG_TYPE` TypeError: `name` (an argument, or a property when it holds a
 * dot) must be `expected`.
 */
function invalidArgType(name, expected, value) {
  const kind = name.includes('.') ? 'property' : 'argument'
  const err = new TypeError(`The "${name}" ${kind} must be ${expected}. Received ${received(value)}`)
  err.code = 'ERR_INVALID_ARG_TYPE'
  return err
}

/** Node's `ERR_INVALID_ARG_VALUE` TypeError: the right type, an unusable value. */
function invalidArgValue(name, reason, value) {
  const kind = name.includes('.') ? 'property' : 'argument'
  const err = new TypeError(`The ${kind} '${name}' ${reason}. Received ${util.inspect(value)}`)
  err.code = 'ERR_INVALID_ARG_VALUE'
  return err
}

module.exports = { fsError, lockedError, compromisedError, fromNative, invalidArgType, invalidArgValue }
