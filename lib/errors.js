'use strict'
// The one place where a native failure becomes a JavaScript error (issue 9). Rust hands over a
// plain description; this builds the same Error Node's own fs would throw, with Node's
// maintained errno table (util.getSystemErrorMap), or proper-lockfile's lock errors.
const util = require('node:util')

let errnoMap
/** [code, description] for a negative errno, as Node's fs errors name it. */
function errnoInfo(errno) {
  errnoMap ??= util.getSystemErrorMap()
  return errnoMap.get(errno) ?? ['UNKNOWN', 'unknown error'] // what Node reports for unmapped errnos
}

/**
 * An Error from a native failure description: file-system failures look exactly like Node's
 * (message `CODE: description, syscall 'path' -> 'dest'`, own properties errno, code, syscall,
 * path, dest in that order); lock failures are proper-lockfile's (`code`, `file`).
 */
function nativeError(f) {
  if (f.errno !== undefined && f.errno !== null) {
    const [code, description] = errnoInfo(f.errno)
    let message = `${code}: ${description}, ${f.syscall}`
    if (f.path !== undefined && f.path !== null) message += ` '${f.path}'`
    if (f.dest !== undefined && f.dest !== null) message += ` -> '${f.dest}'`
    const err = new Error(message)
    err.errno = f.errno
    err.code = code
    err.syscall = f.syscall
    if (f.path !== undefined && f.path !== null) err.path = f.path
    if (f.dest !== undefined && f.dest !== null) err.dest = f.dest
    return err
  }
  const err = new Error(f.message)
  err.code = f.code
  if (f.file !== undefined && f.file !== null) err.file = f.file
  return err
}

module.exports = { nativeError }
