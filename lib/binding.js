'use strict'
// Chooses the implementation behind every public module: the native addon (generated loader
// ../index.js) or, when no binary for this machine can be loaded, the pure-JS backend in ../js.
//
// "Cannot be loaded" is the generated loader's own verdict ("Cannot find native binding"): no
// binary for this platform, or one the OS refuses (a glibc older than the binary needs, a
// corrupt or foreign file). Then the JS backend runs and one PI_NATIVE_JS_FALLBACK warning names
// the cause. Any other error (the loader or lib/native.js itself throwing) is rethrown.
// PI_NATIVE_BACKEND=js forces the JS backend; PI_NATIVE_BACKEND=native forces the addon (a
// binary that cannot be loaded then throws).

const LOADER_VERDICT = 'Cannot find native binding'

let warned = false

/**
 * The messages of the loader's error chain below its verdict, or null when `err` is not that
 * verdict. (The generated loader keeps each attempt's message only, not its code.)
 */
function loadAttempts(err) {
  if (!err || typeof err.message !== 'string' || !err.message.startsWith(LOADER_VERDICT)) return null
  const messages = []
  for (let cause = err.cause; cause; cause = cause.cause) messages.push(String(cause.message))
  return messages
}

/** An attempt that found nothing to load: a file or package not there, a platform not listed. */
function isAbsent(message) {
  return message.startsWith('Cannot find module') || message.startsWith('Unsupported ')
}

/** True when the loader found no binary at all for this machine (nothing it tried was there). */
function isMissingBinary(err) {
  const attempts = loadAttempts(err)
  return attempts !== null && attempts.length > 0 && attempts.every(isAbsent)
}

/** True when the loader found no binary it could load: none there, or one the OS refused. */
function isLoadFailure(err) {
  const attempts = loadAttempts(err)
  return attempts !== null && attempts.length > 0
}

function loadNative() {
  return require('./native.js')
}

function loadJs() {
  return require('../js/index.js')
}

/** The PI_NATIVE_JS_FALLBACK warning's text for a load failure `err`. */
function fallbackMessage(err) {
  const machine = `${process.platform}-${process.arch}`
  const refused = loadAttempts(err).filter((m) => !isAbsent(m))
  if (refused.length === 0) {
    return (
      `pi-native: no native binary for ${machine} (expected pi-native.${machine}*.node ` +
      'or the pi-native-<platform> package); using the slower JavaScript backend.'
    )
  }
  // The OS loader's own words (e.g. "version `GLIBC_2.34' not found"), on one line each.
  const causes = refused.map((m) => m.replace(/\s+/g, ' ').trim()).join('; ')
  return (
    `pi-native: the native binary for ${machine} cannot be loaded (${causes}); using the ` +
    'slower JavaScript backend. PI_NATIVE_BACKEND=native makes this an error.'
  )
}

function choose() {
  const forced = process.env.PI_NATIVE_BACKEND
  if (forced === 'js') return { backend: 'js', impl: loadJs() }
  if (forced === 'native') return { backend: 'native', impl: loadNative() }
  try {
    return { backend: 'native', impl: loadNative() }
  } catch (err) {
    if (!isLoadFailure(err)) throw err
    if (!warned) {
      warned = true
      process.emitWarning(fallbackMessage(err), {
        code: 'PI_NATIVE_JS_FALLBACK',
        // Every place the loader tried, in its order, one line each.
        detail: loadAttempts(err).reverse().map((m) => m.split('\n')[0]).join('\n'),
      })
    }
    return { backend: 'js', impl: loadJs() }
  }
}

const chosen = choose()
exports.backend = chosen.backend
exports.impl = chosen.impl
exports.isMissingBinary = isMissingBinary
exports.isLoadFailure = isLoadFailure
exports.loadNative = loadNative
exports.loadJs = loadJs
