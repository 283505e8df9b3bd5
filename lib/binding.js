'use strict'
// Chooses the implementation behind every public module: the native addon (generated loader
// ../index.js) or, when no binary for this machine can be loaded, the pure-JS backend in ../js.
//
// Every binary the generated loader is about to load is looked at first (./binary-check.js): a
// truncated copy would otherwise kill the process with SIGBUS inside `require`. A damaged or
// foreign file is refused before the dynamic loader sees it, and the loader goes on to its next
// candidate as it does after any failed load. "Cannot be loaded" is the generated loader's own
// verdict ("Cannot find native binding"): no binary for this platform, one refused here, or one
// the OS refuses (a glibc older than the binary needs). Then the JS backend runs and one
// PI_NATIVE_JS_FALLBACK warning names the file, the cause and the fix. Any other error (the
// loader or lib/native.js itself throwing) is rethrown.
//
// PI_NATIVE_BACKEND: `js` forces the JS backend; `native` forces the addon, and a binary that
// cannot be loaded then throws ERR_PI_NATIVE_LOAD in this project's words; unset or empty
// chooses as above; anything else throws ERR_PI_NATIVE_BACKEND (a typo must not pick a backend).
// The generated loader's own texts (npm's optional-dependency bug, WASI packages this project
// never ships) are left out of both messages.

const path = require('node:path')
const { binaryProblem } = require('./binary-check.js')

const LOADER_VERDICT = 'Cannot find native binding'
const ACCEPTED = ['native', 'js']

let warned = false

/**
 * The messages of the loader's error chain below its verdict, in the order it tried them, or
 * null when `err` is not that verdict. (The generated loader keeps each attempt's message only,
 * not its code, and chains them last first.) The WASI
 * candidates it tries after the native ones are left out: this package ships none.
 */
function loadAttempts(err) {
  if (!err || typeof err.message !== 'string' || !err.message.startsWith(LOADER_VERDICT)) return null
  const messages = []
  for (let cause = err.cause; cause; cause = cause.cause) messages.push(String(cause.message))
  return messages.reverse().filter((m) => !/wasi|wasm32/i.test(m.split('\n')[0]))
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

/** True when the loader found no binary it could load: none there, or one refused. */
function isLoadFailure(err) {
  const attempts = loadAttempts(err)
  return attempts !== null && attempts.length > 0
}

/**
 * The addon through the generated loader, every file it loads checked first. A refused file
 * makes its load attempt throw, as a failed dlopen would, so the loader tries its next place.
 */
function loadNative() {
  const dlopen = process.dlopen
  process.dlopen = function checkedDlopen(module, filename, ...rest) {
    const problem = binaryProblem(filename)
    if (problem !== null) {
      throw new Error(`${filename} ${problem.text}`)
    }
    return Reflect.apply(dlopen, this, [module, filename, ...rest])
  }
  try {
    return require('./native.js')
  } finally {
    process.dlopen = dlopen
  }
}

function loadJs() {
  return require('../js/index.js')
}

const oneLine = (m) => m.replace(/\s+/g, ' ').trim()

/** The places the loader looked for a binary: './pi-native.<target>.node', 'pi-native-<target>'. */
function placesTried(attempts) {
  const places = []
  for (const m of attempts) {
    const hit = /^Cannot find module '([^']+)'/.exec(m)
    if (hit) places.push(hit[1].startsWith('./') ? path.join(path.dirname(__dirname), hit[1]) : `the package ${hit[1]}`)
  }
  return places
}

/** What went wrong with loading, in one sentence's worth: the file and why, or where none was. */
function failureCause(attempts) {
  const machine = `${process.platform}-${process.arch}`
  const unsupported = attempts.find((m) => m.startsWith('Unsupported '))
  if (unsupported) return { missing: true, unsupported: true, text: `there is no native binary for ${machine} (${oneLine(unsupported)})` }
  const failed = attempts.filter((m) => !isAbsent(m)).map(oneLine)
  if (failed.length === 0) {
    const places = placesTried(attempts)
    return { missing: true, text: `there is no native binary for ${machine}${places.length ? ` (looked for ${places.join(' and ')})` : ''}` }
  }
  // A refused file's attempt reads "<file> <problem>"; the OS loader's own words (e.g. "version
  // `GLIBC_2.34' not found") name their file too.
  return { missing: false, text: `the native binary cannot be loaded: ${failed.join('; ')}` }
}

const FIX_DAMAGED = 'reinstall pi-native (in a clone of its repository: npm run build)'

/** The PI_NATIVE_JS_FALLBACK warning's text for a load failure `err`. */
function fallbackMessage(err) {
  const cause = failureCause(loadAttempts(err))
  if (cause.missing) return `pi-native: ${cause.text}; using the slower JavaScript backend.`
  return `pi-native: ${cause.text}; using the slower JavaScript backend. To fix it, ${FIX_DAMAGED}. PI_NATIVE_BACKEND=native makes this an error.`
}

/** The error PI_NATIVE_BACKEND=native gives when the loader found nothing it could load. */
function forcedNativeError(err) {
  const cause = failureCause(loadAttempts(err))
  const fix = cause.unsupported ? 'unset PI_NATIVE_BACKEND to use the JavaScript backend' : `${FIX_DAMAGED}, or unset PI_NATIVE_BACKEND to use the JavaScript backend`
  const e = new Error(`pi-native: PI_NATIVE_BACKEND=native, but ${cause.text}. To fix it, ${fix}.`)
  e.code = 'ERR_PI_NATIVE_LOAD'
  return e
}

/** PI_NATIVE_BACKEND as 'native', 'js' or null (unset or empty); anything else throws. */
function forcedBackend() {
  const value = process.env.PI_NATIVE_BACKEND
  if (value === undefined || value === '') return null
  if (ACCEPTED.includes(value)) return value
  const e = new Error(`pi-native: PI_NATIVE_BACKEND is ${JSON.stringify(value)}, which names no backend; the accepted values are native, js, or unset.`)
  e.code = 'ERR_PI_NATIVE_BACKEND'
  throw e
}

function choose() {
  const forced = forcedBackend()
  if (forced === 'js') return { backend: 'js', impl: loadJs() }
  try {
    return { backend: 'native', impl: loadNative() }
  } catch (err) {
    if (!isLoadFailure(err)) throw err
    if (forced === 'native') throw forcedNativeError(err)
    if (!warned) {
      warned = true
      process.emitWarning(fallbackMessage(err), {
        code: 'PI_NATIVE_JS_FALLBACK',
        // Every place the loader tried, in its order, one line each.
        detail: loadAttempts(err).map((m) => m.split('\n')[0]).join('\n'),
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
