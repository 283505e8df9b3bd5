'use strict'
// Which backend a host gets when no binary for its machine can be loaded (lib/binding.js): the JS
// backend with exactly one PI_NATIVE_JS_FALLBACK warning that names the cause, unless
// PI_NATIVE_BACKEND=native asks for the addon, which then throws. Each case runs in a temp copy of
// the package whose binary has been made unloadable in one way; Node's own process.dlopen of the
// same file is the oracle for the loader's error.
const test = require('node:test')
const assert = require('node:assert')
const { spawnSync } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')
const { worldReadableCopy } = require('./helpers.js')

const root = path.resolve(__dirname, '..')

// Loads the package as a host does; prints the backend, one call's result, the warnings it got
// (as 'warning' events) and, if the load threw, the error's message chain.
const USE = `
const warnings = []
process.on('warning', (w) => warnings.push({ code: w.code, message: w.message }))
let out
try {
  const pi = require('./lib/index.js')
  require('./lib/liveness.js')
  out = { backend: pi.backend, alive: pi.isReloadSessionProcessAlive(process.pid) }
} catch (err) {
  const chain = []
  for (let e = err; e; e = e.cause) chain.push(String(e.message))
  out = { threw: chain }
}
setImmediate(() => console.log(JSON.stringify({ ...out, warnings })))
`

/** Runs USE in `dir`; `env` adds to (or, with undefined values, removes from) the environment. */
function use(dir, env = {}, preload) {
  const merged = { ...process.env, PI_NATIVE_BACKEND: '', ...env }
  for (const [k, v] of Object.entries(merged)) if (v === undefined) delete merged[k]
  const args = preload ? ['--require', preload, '-e', USE] : ['-e', USE]
  const r = spawnSync(process.execPath, args, { cwd: dir, encoding: 'utf8', env: merged })
  assert.equal(r.status, 0, r.stderr)
  const report = JSON.parse(r.stdout.trim().split('\n').pop())
  report.stderrWarnings = (r.stderr.match(/\[PI_NATIVE_JS_FALLBACK\]/g) || []).length
  return report
}

/** The file name of the binary the loader loads on this machine (from the package root). */
function loadedBinary() {
  const r = spawnSync(
    process.execPath,
    ['-e', "require('./lib/binding.js').loadNative(); console.log(Object.keys(require.cache).find((f) => f.endsWith('.node')))"],
    { cwd: root, encoding: 'utf8', env: { ...process.env, PI_NATIVE_BACKEND: 'native' } },
  )
  assert.equal(r.status, 0, r.stderr)
  const file = r.stdout.trim()
  assert.equal(path.dirname(file), root, 'the binary is loaded from the package root')
  return path.basename(file)
}

/** Node's own answer for loading `file` as an addon: the error, or null if it loads. */
function dlopenError(file) {
  const r = spawnSync(
    process.execPath,
    ['-e', 'try { process.dlopen({ exports: {} }, process.argv[1]); console.log("null") } catch (e) { console.log(JSON.stringify({ code: e.code, message: e.message })) }', file],
    { encoding: 'utf8' },
  )
  assert.equal(r.status, 0, r.stderr)
  return JSON.parse(r.stdout.trim())
}

// One line, and on Windows without the `\\?\` long-path prefix that the loader's require() puts
// before the path and a plain process.dlopen of the same file does not.
const oneLine = (s) => s.replace(/\s+/g, ' ').replaceAll('\\\\?\\', '').trim()

/** Asserts the JS backend with exactly one fallback warning, and returns that warning's text. */
function assertFallback(report) {
  assert.equal(report.threw, undefined, `the load threw: ${JSON.stringify(report.threw)}`)
  assert.equal(report.backend, 'js')
  assert.equal(report.alive, true)
  assert.deepEqual(report.warnings.map((w) => w.code), ['PI_NATIVE_JS_FALLBACK'])
  assert.equal(report.stderrWarnings, 1, 'PI_NATIVE_JS_FALLBACK lines on stderr')
  return report.warnings[0].message
}

const glibc = process.platform === 'linux' && Boolean(process.report?.getReport().header.glibcVersionRuntime)

test('a binary that needs a newer glibc than this one: JS backend, one warning naming the missing version; PI_NATIVE_BACKEND=native throws it', { skip: !glibc && 'needs Linux with glibc' }, () => {
  const name = loadedBinary()
  const dir = worldReadableCopy()
  try {
    // Every GLIBC_2.x version the binary requires becomes GLIBC_9.x (same length, so the ELF
    // layout is untouched): the dynamic loader then refuses the file exactly as an older glibc
    // refuses a binary linked against a newer one ("version `GLIBC_x.y' not found").
    const file = path.join(dir, name)
    const bytes = fs.readFileSync(file)
    const text = bytes.toString('latin1')
    let patched = 0
    for (const m of text.matchAll(/GLIBC_2\.[0-9.]+\0/g)) {
      bytes.write('9', m.index + 'GLIBC_'.length, 'latin1')
      patched++
    }
    assert.ok(patched > 0, 'the binary names GLIBC versions')
    fs.writeFileSync(file, bytes)
    const oracle = dlopenError(file)
    assert.equal(oracle.code, 'ERR_DLOPEN_FAILED')
    assert.match(oracle.message, /version `GLIBC_9\.[0-9.]+' not found/)

    const message = assertFallback(use(dir))
    assert.ok(message.includes(oneLine(oracle.message)), `the warning names the loader's error:\n${message}\n${oracle.message}`)
    assert.match(message, /JavaScript backend/)

    const forced = use(dir, { PI_NATIVE_BACKEND: 'native' })
    assert.ok(forced.threw, 'PI_NATIVE_BACKEND=native throws')
    assert.match(forced.threw[0], /^Cannot find native binding/)
    assert.ok(forced.threw.some((m) => m === oracle.message), `the cause chain holds the loader's error: ${JSON.stringify(forced.threw)}`)
    assert.deepEqual(forced.warnings, [])
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
})

test('a corrupt binary (not an object file): JS backend, one warning naming the file and the error', () => {
  const name = loadedBinary()
  const dir = worldReadableCopy()
  try {
    const file = path.join(dir, name)
    fs.writeFileSync(file, 'not an object file\n'.repeat(256))
    const oracle = dlopenError(file)
    assert.equal(oracle.code, 'ERR_DLOPEN_FAILED')
    const message = assertFallback(use(dir))
    assert.ok(oneLine(message).includes(oneLine(oracle.message)), `the warning names the loader's error:\n${message}\n${oracle.message}`)
    assert.ok(message.includes(name), message)

    const forced = use(dir, { PI_NATIVE_BACKEND: 'native' })
    assert.ok(forced.threw, 'PI_NATIVE_BACKEND=native throws')
    assert.ok(forced.threw.some((m) => oneLine(m) === oneLine(oracle.message)), JSON.stringify(forced.threw))
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
})

test('a platform the loader has no entry for (process.platform sunos): JS backend, one warning', () => {
  const dir = worldReadableCopy()
  try {
    const preload = path.join(dir, 'as-sunos.js')
    fs.writeFileSync(preload, "Object.defineProperty(process, 'platform', { value: 'sunos' })\n")
    const message = assertFallback(use(dir, {}, preload))
    assert.match(message, /no native binary for sunos-/)

    const forced = use(dir, { PI_NATIVE_BACKEND: 'native' }, preload)
    assert.ok(forced.threw, 'PI_NATIVE_BACKEND=native throws')
    assert.ok(forced.threw.some((m) => m.startsWith('Unsupported OS: sunos')), JSON.stringify(forced.threw))
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
})

test('an error that is not a failed load (the loader module itself throws) is thrown, with no fallback', () => {
  const dir = worldReadableCopy()
  try {
    fs.writeFileSync(path.join(dir, 'index.js'), "throw new TypeError('the loader is broken')\n")
    const report = use(dir)
    assert.deepEqual(report.threw, ['the loader is broken'])
    assert.deepEqual(report.warnings, [])
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
})
