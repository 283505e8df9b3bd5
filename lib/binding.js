'use strict'
// Chooses the implementation behind every public module: the native addon (generated loader
// ../index.js) or, only when the binary is missing, the pure-JS backend in ../js.
//
// PI_NATIVE_BACKEND=js forces the JS backend; PI_NATIVE_BACKEND=native forces the addon (a
// missing binary then throws). Any load failure other than "module not found" is rethrown.

let warned = false

/** True when every failure in the napi loader's error chain is a plain "module not found". */
function isMissingBinary(err) {
  if (!err || typeof err.message !== 'string' || !err.message.startsWith('Cannot find native binding')) {
    return false
  }
  let cause = err.cause
  if (!cause) return false
  while (cause) {
    if (typeof cause.message !== 'string' || !cause.message.startsWith('Cannot find module')) return false
    cause = cause.cause
  }
  return true
}

function loadNative() {
  return require('./native.js')
}

function loadJs() {
  return require('../js/index.js')
}

function choose() {
  const forced = process.env.PI_NATIVE_BACKEND
  if (forced === 'js') return { backend: 'js', impl: loadJs() }
  if (forced === 'native') return { backend: 'native', impl: loadNative() }
  try {
    return { backend: 'native', impl: loadNative() }
  } catch (err) {
    if (!isMissingBinary(err)) throw err
    if (!warned) {
      warned = true
      process.emitWarning(
        'pi-native: no native binary for ' +
          `${process.platform}-${process.arch} (expected pi-native.${process.platform}-${process.arch}*.node ` +
          'or the pi-native-<platform> package); using the slower JavaScript backend.',
        { code: 'PI_NATIVE_JS_FALLBACK', detail: String(err.cause && err.cause.message) },
      )
    }
    return { backend: 'js', impl: loadJs() }
  }
}

const chosen = choose()
exports.backend = chosen.backend
exports.impl = chosen.impl
exports.isMissingBinary = isMissingBinary
exports.loadNative = loadNative
exports.loadJs = loadJs
