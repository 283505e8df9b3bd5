'use strict'
// Which backend a host gets when no binary for its machine can be loaded (lib/binding.js): the JS
// backend with exactly one PI_NATIVE_JS_FALLBACK warning that names the file and the cause,
// unless PI_NATIVE_BACKEND=native asks for the addon, which then throws ERR_PI_NATIVE_LOAD in
// the project's own words. Each case runs in a temp copy of the package whose binary has been
// made unloadable in one way; Node's own process.dlopen of the same file is the oracle for what
// the file does without the check (a truncated copy: SIGBUS inside require).
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
  out = { threw: chain, code: err.code }
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

    const forced = assertForcedError(use(dir, { PI_NATIVE_BACKEND: 'native' }))
    assert.ok(oneLine(forced).includes(oneLine(oracle.message)), `the error names the loader's error:\n${forced}\n${oracle.message}`)
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
})

/** A copy of the package whose binary is replaced by `bytes`: `{ dir, file }`. */
function copyWithBinary(bytes) {
  const name = loadedBinary()
  const dir = worldReadableCopy()
  const file = path.join(dir, name)
  fs.writeFileSync(file, bytes)
  return { dir, file }
}

/** Runs `process.dlopen` of `file` alone in a child: its exit `{ status, signal }` (the oracle). */
function plainDlopen(file) {
  const r = spawnSync(process.execPath, ['-e', 'try { process.dlopen({ exports: {} }, process.argv[1]) } catch {}', file], { encoding: 'utf8' })
  return { status: r.status, signal: r.signal }
}

// The texts of the generated loader that do not apply to this package (it is not installed from
// a registry with optional dependencies in every case, and it ships no WASI build).
const STOCK = /optional dependencies|npm has a bug|package-lock|wasi|wasm32/i

/** Asserts PI_NATIVE_BACKEND=native threw ERR_PI_NATIVE_LOAD, one error without the stock texts; returns its message. */
function assertForcedError(report) {
  assert.ok(report.threw, `PI_NATIVE_BACKEND=native throws: ${JSON.stringify(report)}`)
  assert.equal(report.threw.length, 1, `one error, no cause chain: ${JSON.stringify(report.threw)}`)
  assert.equal(report.code, 'ERR_PI_NATIVE_LOAD')
  const [message] = report.threw
  assert.match(message, /^pi-native: PI_NATIVE_BACKEND=native, but /)
  assert.match(message, /To fix it, /)
  assert.doesNotMatch(message, STOCK)
  assert.deepEqual(report.warnings, [])
  return message
}

test('a truncated binary, cut at any length (an interrupted copy): JS backend with one warning naming the file; PI_NATIVE_BACKEND=native throws naming it and the fix; never a crash', { skip: process.platform === 'win32' && 'the binary loaded on Windows is checked in the same way; truncating it here needs a Linux ELF' }, () => {
  const whole = fs.readFileSync(path.join(root, loadedBinary()))
  const lengths = [0, 1, 16, 63, 64, 200, 4096, 65536, Math.floor(whole.length / 2), whole.length - 4096, whole.length - 64, whole.length - 1]
  // The oracle: Node's own dlopen of such a copy dies of SIGBUS for some lengths (the dynamic
  // loader maps pages the file does not have), and loads others that are cut only in their
  // section headers; either way the file is not the one shipped.
  const crashes = []
  for (const len of [4096, Math.floor(whole.length / 2)]) {
    const { dir, file } = copyWithBinary(whole.subarray(0, len))
    try {
      const r = plainDlopen(file)
      if (r.signal === 'SIGBUS') crashes.push(len)
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  }
  assert.ok(crashes.length > 0, 'a plain dlopen of a truncated copy crashes (else this test shows nothing)')
  for (const len of lengths) {
    const { dir, file } = copyWithBinary(whole.subarray(0, len))
    try {
      const message = assertFallback(use(dir))
      assert.ok(message.includes(file), `${len} bytes: the warning names the file:\n${message}`)
      assert.match(message, len === 0 ? /is empty/ : /is truncated|is cut inside/, `${len} bytes`)
      assert.match(message, /reinstall pi-native/)
      assert.doesNotMatch(message, STOCK)
      const forced = assertForcedError(use(dir, { PI_NATIVE_BACKEND: 'native' }))
      assert.ok(forced.includes(file), `${len} bytes: the error names the file:\n${forced}`)
      assert.match(forced, /reinstall pi-native/)
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  }
})

test('a corrupt or foreign binary (not an object file; one for another machine): JS backend, one warning naming the file and what it is', { skip: process.platform !== 'linux' && 'the foreign copies are made from a Linux ELF' }, () => {
  const whole = fs.readFileSync(path.join(root, loadedBinary()))
  const otherArch = Buffer.from(whole)
  otherArch.writeUInt16LE(process.arch === 'arm64' ? 62 : 183, 18) // e_machine
  const macho = Buffer.alloc(4096)
  macho.writeUInt32LE(0xfeedfacf, 0)
  const cases = [
    ['not an object file', Buffer.from('not an object file\n'.repeat(256)), /is not a binary at all \(it starts with "not an object fi"\)/],
    ['an ELF binary for another arch', otherArch, new RegExp(`is an ELF binary for ${process.arch === 'arm64' ? 'x64' : 'arm64'}, not for ${process.arch}`)],
    ['a Mach-O file', macho, /is a Mach-O file, not the ELF library linux loads/],
  ]
  for (const [what, bytes, says] of cases) {
    const { dir, file } = copyWithBinary(bytes)
    try {
      // The oracle: the OS refuses it too (no crash, an ERR_DLOPEN_FAILED).
      assert.equal(dlopenError(file).code, 'ERR_DLOPEN_FAILED', what)
      const message = assertFallback(use(dir))
      assert.ok(message.includes(file), `${what}: ${message}`)
      assert.match(message, says, what)
      const forced = assertForcedError(use(dir, { PI_NATIVE_BACKEND: 'native' }))
      assert.match(forced, says, what)
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  }
})

test('no binary at all: JS backend with one warning saying where it looked; PI_NATIVE_BACKEND=native throws naming those places, without the generator\'s npm or WASI texts, also when uncaught', () => {
  const { dir, file } = copyWithBinary('')
  try {
    fs.rmSync(file)
    const message = assertFallback(use(dir))
    assert.ok(message.includes(file), message)
    assert.doesNotMatch(message, STOCK)
    const forced = assertForcedError(use(dir, { PI_NATIVE_BACKEND: 'native' }))
    assert.ok(forced.includes(file), forced)
    assert.match(forced, /there is no native binary for /)
    // Uncaught, as a host meets it: stderr carries the one error, nothing of the generator's.
    const r = spawnSync(process.execPath, ['-e', "require('./lib/index.js')"], { cwd: dir, encoding: 'utf8', env: { ...process.env, PI_NATIVE_BACKEND: 'native' } })
    assert.equal(r.status, 1)
    assert.match(r.stderr, /Error: pi-native: PI_NATIVE_BACKEND=native, but there is no native binary/)
    assert.doesNotMatch(r.stderr, STOCK)
    assert.doesNotMatch(r.stderr, /\[cause\]/)
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
})

test('PI_NATIVE_BACKEND: native, js, or unset (empty counts as unset); any other value throws ERR_PI_NATIVE_BACKEND naming the accepted values', () => {
  assert.equal(use(root, { PI_NATIVE_BACKEND: 'native' }).backend, 'native')
  assert.equal(use(root, { PI_NATIVE_BACKEND: 'js' }).backend, 'js')
  assert.equal(use(root, { PI_NATIVE_BACKEND: undefined }).backend, 'native')
  assert.equal(use(root, { PI_NATIVE_BACKEND: '' }).backend, 'native')
  for (const value of ['JS', 'Js', 'nativ', 'NATIVE', ' js', 'js ', 'wasm', '0', 'false']) {
    const r = use(root, { PI_NATIVE_BACKEND: value })
    assert.ok(r.threw, `${JSON.stringify(value)} throws`)
    assert.equal(r.code, 'ERR_PI_NATIVE_BACKEND', value)
    assert.equal(r.threw.length, 1)
    assert.equal(r.threw[0], `pi-native: PI_NATIVE_BACKEND is ${JSON.stringify(value)}, which names no backend; the accepted values are native, js, or unset.`)
    assert.deepEqual(r.warnings, [])
  }
})

test('a platform the loader has no entry for (process.platform sunos): JS backend, one warning', () => {
  const dir = worldReadableCopy()
  try {
    const preload = path.join(dir, 'as-sunos.js')
    fs.writeFileSync(preload, "Object.defineProperty(process, 'platform', { value: 'sunos' })\n")
    const message = assertFallback(use(dir, {}, preload))
    assert.match(message, /^pi-native: there is no native binary for sunos-\w+ \(Unsupported OS: sunos, architecture: \w+\); using the slower JavaScript backend\.$/)

    const forced = assertForcedError(use(dir, { PI_NATIVE_BACKEND: 'native' }, preload))
    assert.match(forced, /there is no native binary for sunos-\w+ \(Unsupported OS: sunos, architecture: \w+\)/)
    assert.match(forced, /To fix it, unset PI_NATIVE_BACKEND to use the JavaScript backend\.$/)
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

// The check itself on the other platforms' formats, with files made here field by field from
// the formats' published layouts (Mach-O <mach-o/loader.h>, PE/COFF): a whole file passes, the
// same file cut short or built for another CPU does not.
const { binaryProblem } = require('../lib/binary-check.js')

/** A 64-bit Mach-O dylib: one segment over [0, 0x3000), its code signature at [0x3000, 0x3400). */
function machO(cpu) {
  const b = Buffer.alloc(0x3400)
  b.writeUInt32LE(0xfeedfacf, 0)
  b.writeUInt32LE(cpu, 4)
  b.writeUInt32LE(6, 12) // MH_DYLIB
  b.writeUInt32LE(2, 16) // ncmds
  b.writeUInt32LE(72 + 16, 20) // sizeofcmds
  b.writeUInt32LE(0x19, 32) // LC_SEGMENT_64
  b.writeUInt32LE(72, 36)
  b.writeBigUInt64LE(0n, 32 + 40) // fileoff
  b.writeBigUInt64LE(0x3000n, 32 + 48) // filesize
  b.writeUInt32LE(0x1d, 104) // LC_CODE_SIGNATURE
  b.writeUInt32LE(16, 108)
  b.writeUInt32LE(0x3000, 112) // dataoff
  b.writeUInt32LE(0x400, 116) // datasize
  return b
}

/** A PE DLL: PE header at 64, one section of raw data at [512, 1536). */
function peDll(machine) {
  const b = Buffer.alloc(1536)
  b.write('MZ', 0, 'latin1')
  b.writeUInt32LE(64, 0x3c)
  b.writeUInt32BE(0x50450000, 64)
  b.writeUInt16LE(machine, 68)
  b.writeUInt16LE(1, 70) // sections
  b.writeUInt16LE(0, 84) // size of the optional header
  b.writeUInt16LE(0x2002, 86) // DLL | executable image
  b.writeUInt32LE(1024, 88 + 16) // SizeOfRawData
  b.writeUInt32LE(512, 88 + 20) // PointerToRawData
  return b
}

test('the binary check on Mach-O and PE files: whole ones pass; cut ones are truncated; another CPU\'s are foreign', () => {
  const dir = fs.mkdtempSync(path.join(require('node:os').tmpdir(), 'pi-native-formats-'))
  try {
    const check = (bytes, platform, arch) => {
      const file = path.join(dir, 'x.node')
      fs.writeFileSync(file, bytes)
      return binaryProblem(file, { platform, arch })
    }
    for (const [platform, arch, make, other, cpu] of [
      ['darwin', 'arm64', machO, 'x64', 0x0100000c],
      ['darwin', 'x64', machO, 'arm64', 0x01000007],
      ['win32', 'x64', peDll, 'arm64', 0x8664],
    ]) {
      const whole = make(cpu)
      assert.equal(check(whole, platform, arch), null, `${platform}-${arch}: a whole file`)
      for (const len of [1, 40, 200, whole.length - 600, whole.length - 1]) {
        const p = check(whole.subarray(0, len), platform, arch)
        assert.equal(p?.kind, 'damaged', `${platform}-${arch} cut at ${len}: ${JSON.stringify(p)}`)
        assert.match(p.text, /is truncated|is cut inside/)
      }
      const foreign = check(whole, platform, other)
      assert.equal(foreign?.kind, 'foreign', `${platform}: built for ${arch}, loaded on ${other}`)
      assert.match(foreign.text, new RegExp(`for ${arch}, not for ${other}`))
      assert.match(check(whole, 'linux', 'x64').text, /not the ELF library linux loads/)
    }
    assert.equal(check(Buffer.alloc(0), 'darwin', 'arm64').kind, 'damaged')
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
})
