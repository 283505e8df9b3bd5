'use strict'
// A cheap look at a native binary before it is loaded: is it whole, and is it a shared library
// for this machine? An interrupted copy or download leaves a file shorter than its own headers
// say; the dynamic loader maps the missing pages anyway and the first touch of one kills the
// process with SIGBUS (exit 135) inside `require`, where no fallback can run. So the headers are
// read (one bounded read at the start, a second only for a header table further in) and every
// part they place in the file — ELF program and section headers, Mach-O segments and the code
// signature, PE sections and the COFF symbol table — must end within the file's size. The last
// of those parts ends at the file's end in the binaries this project builds, so a file cut at any
// length fails the check. No checksum: hashing the binary on every load would cost more than the
// load itself and catch nothing this does not (a copy is cut, not rewritten).
//
// Written here rather than taken from an npm parser: the loader runs in every host process, and
// what it needs is a few header fields, not a parser's dependency tree.
const fs = require('node:fs')

/** The ELF `e_machine` of each Node `process.arch` this project may meet. */
const ELF_MACHINE = { x64: 62, arm64: 183, ia32: 3, arm: 40, ppc64: 21, s390x: 22, riscv64: 243, loong64: 258 }
/** The Mach-O `cputype` of each arch macOS runs. */
const MACHO_CPU = { x64: 0x01000007, arm64: 0x0100000c }
/** The PE/COFF `Machine` of each arch Windows runs. */
const PE_MACHINE = { x64: 0x8664, arm64: 0xaa64, ia32: 0x14c }
const ELF_ARCH = Object.fromEntries(Object.entries(ELF_MACHINE).map(([a, m]) => [m, a]))
const MACHO_ARCH = Object.fromEntries(Object.entries(MACHO_CPU).map(([a, m]) => [m, a]))
const PE_ARCH = Object.fromEntries(Object.entries(PE_MACHINE).map(([a, m]) => [m, a]))

/** The format a platform's dynamic loader takes. */
const FORMAT = { linux: 'ELF', android: 'ELF', freebsd: 'ELF', openbsd: 'ELF', netbsd: 'ELF', sunos: 'ELF', aix: 'XCOFF', darwin: 'Mach-O', win32: 'PE' }

const HEAD = 64 * 1024 // the first read: every header table of a normal binary is in it
const TABLE_MAX = 4 * 1024 * 1024 // a header table larger than this is not a real binary's

const n = (x) => x.toLocaleString('en-US')

/** Reads `len` bytes at `pos` of `fd` (fewer at the end of the file). */
function readAt(fd, pos, len) {
  const buf = Buffer.alloc(len)
  let got = 0
  while (got < len) {
    const k = fs.readSync(fd, buf, got, len - got, pos + got)
    if (k === 0) break
    got += k
  }
  return buf.subarray(0, got)
}

/** A reader of little- or big-endian fields that knows where the bytes came from. */
class Fields {
  constructor(fd, head, little) {
    this.fd = fd
    this.head = head
    this.little = little
  }

  /** `len` bytes at `pos`: from the first read when they are in it, else read now (bounded). */
  bytes(pos, len) {
    if (pos + len <= this.head.length) return this.head.subarray(pos, pos + len)
    if (len > TABLE_MAX) return null
    const b = readAt(this.fd, pos, len)
    return b.length === len ? b : null
  }

  u16(b, at) {
    return this.little ? b.readUInt16LE(at) : b.readUInt16BE(at)
  }

  u32(b, at) {
    return this.little ? b.readUInt32LE(at) : b.readUInt32BE(at)
  }

  u64(b, at) {
    return Number(this.little ? b.readBigUInt64LE(at) : b.readBigUInt64BE(at))
  }
}

/** Where the ELF file's own headers say its parts end (the largest end), or a problem string. */
function elfEnd(f, arch) {
  const h = f.head
  if (h.length < 52) return { problem: 'is cut inside its ELF header' }
  const is64 = h[4] === 2
  if (h[4] !== 1 && !is64) return { problem: 'is not a valid ELF file (unknown class)' }
  if (h[5] !== 1 && h[5] !== 2) return { problem: 'is not a valid ELF file (unknown byte order)' }
  f.little = h[5] === 1
  if (is64 && h.length < 64) return { problem: 'is cut inside its ELF header' }
  const type = f.u16(h, 16)
  const machine = f.u16(h, 18)
  const want = ELF_MACHINE[arch]
  if (want !== undefined && machine !== want) {
    return { foreign: `is an ELF binary for ${ELF_ARCH[machine] ?? `machine ${machine}`}, not for ${arch}` }
  }
  if (type !== 3) return { foreign: `is an ELF ${type === 2 ? 'executable' : type === 1 ? 'object file' : `file of type ${type}`}, not a shared library` }
  const [phoff, shoff] = is64 ? [f.u64(h, 32), f.u64(h, 40)] : [f.u32(h, 28), f.u32(h, 32)]
  const at = is64 ? 54 : 42
  const [phentsize, phnum, shentsize, shnum] = [f.u16(h, at), f.u16(h, at + 2), f.u16(h, at + 4), f.u16(h, at + 6)]
  let end = is64 ? 64 : 52
  if (shoff !== 0) end = Math.max(end, shoff + shentsize * shnum)
  if (phnum === 0) return { problem: 'has no program headers: it is not a loadable library' }
  end = Math.max(end, phoff + phentsize * phnum)
  const table = f.bytes(phoff, phentsize * phnum)
  if (table === null) return { end }
  for (let i = 0; i < phnum; i++) {
    const p = i * phentsize
    if (f.u32(table, p) !== 1) continue // PT_LOAD: what the loader maps from the file
    const [offset, filesz] = is64 ? [f.u64(table, p + 8), f.u64(table, p + 32)] : [f.u32(table, p + 4), f.u32(table, p + 16)]
    end = Math.max(end, offset + filesz)
  }
  return { end }
}

/** Mach-O (thin, 64-bit): segments and the code signature. */
function machoEnd(f, arch, base = 0) {
  const h = base === 0 ? f.head : f.bytes(base, 32)
  if (h === null || h.length < 32) return { problem: 'is cut inside its Mach-O header' }
  f.little = true
  const cpu = f.u32(h, 4)
  const want = MACHO_CPU[arch]
  if (want !== undefined && cpu !== want) return { foreign: `is a Mach-O binary for ${MACHO_ARCH[cpu] ?? `CPU type ${cpu}`}, not for ${arch}` }
  const fileType = f.u32(h, 12)
  if (fileType !== 6 && fileType !== 8) return { foreign: `is a Mach-O file of type ${fileType}, not a dynamic library or bundle` }
  const ncmds = f.u32(h, 16)
  const sizeofcmds = f.u32(h, 20)
  let end = base + 32 + sizeofcmds
  const cmds = f.bytes(base + 32, sizeofcmds)
  if (cmds === null) return { end }
  for (let i = 0, p = 0; i < ncmds && p + 8 <= cmds.length; i++) {
    const cmd = f.u32(cmds, p)
    const size = f.u32(cmds, p + 4)
    if (size < 8) return { problem: 'has a malformed Mach-O load command' }
    if (cmd === 0x19 && p + 56 <= cmds.length) end = Math.max(end, base + f.u64(cmds, p + 40) + f.u64(cmds, p + 48)) // LC_SEGMENT_64
    if (cmd === 0x1d && p + 16 <= cmds.length) end = Math.max(end, base + f.u32(cmds, p + 8) + f.u32(cmds, p + 12)) // LC_CODE_SIGNATURE
    p += size
  }
  return { end }
}

/** A universal (fat) Mach-O: the slice for `arch`, checked as a thin one. */
function fatEnd(f, arch) {
  f.little = false
  const h = f.head
  const count = f.u32(h, 4)
  const table = f.bytes(8, 20 * count)
  if (table === null) return { problem: 'is cut inside its universal-binary header' }
  let end = 8 + 20 * count
  let slice = null
  for (let i = 0; i < count; i++) {
    const [cpu, offset, size] = [f.u32(table, i * 20), f.u32(table, i * 20 + 8), f.u32(table, i * 20 + 12)]
    end = Math.max(end, offset + size)
    if (cpu === MACHO_CPU[arch]) slice = offset
  }
  if (slice === null) return { foreign: `is a universal Mach-O binary without a slice for ${arch}` }
  const inner = machoEnd(f, arch, slice)
  return inner.end === undefined ? inner : { end: Math.max(end, inner.end) }
}

/** PE/COFF: sections and the COFF symbol table. */
function peEnd(f, arch) {
  f.little = true
  const h = f.head
  if (h.length < 64) return { problem: 'is cut inside its DOS header' }
  const pe = f.u32(h, 0x3c)
  const coff = f.bytes(pe, 24)
  if (coff === null) return { problem: 'is cut before its PE header' }
  if (coff.readUInt32BE(0) !== 0x50450000) return { problem: 'is not a valid PE file (no PE signature)' }
  const machine = f.u16(coff, 4)
  const want = PE_MACHINE[arch]
  if (want !== undefined && machine !== want) return { foreign: `is a Windows binary for ${PE_ARCH[machine] ?? `machine ${machine}`}, not for ${arch}` }
  if ((f.u16(coff, 22) & 0x2000) === 0) return { foreign: 'is a Windows executable, not a DLL' }
  const sections = f.u16(coff, 6)
  const symbols = f.u32(coff, 12)
  const optional = f.u16(coff, 20)
  const tableAt = pe + 24 + optional
  let end = tableAt + 40 * sections
  if (symbols !== 0) end = Math.max(end, symbols + 18 * f.u32(coff, 16))
  const table = f.bytes(tableAt, 40 * sections)
  if (table === null) return { end }
  for (let i = 0; i < sections; i++) {
    const size = f.u32(table, i * 40 + 16)
    const ptr = f.u32(table, i * 40 + 20)
    if (size !== 0) end = Math.max(end, ptr + size)
  }
  return { end }
}

const MAGICS = [
  ['ELF', Buffer.from([0x7f, 0x45, 0x4c, 0x46])],
  ['Mach-O', Buffer.from([0xcf, 0xfa, 0xed, 0xfe])],
  ['PE', Buffer.from('MZ')],
]

/** The format a file's first bytes announce, or null. */
function formatOf(h) {
  if (h.length >= 4 && h[0] === 0x7f && h[1] === 0x45 && h[2] === 0x4c && h[3] === 0x46) return 'ELF'
  if (h.length >= 4 && h.readUInt32LE(0) === 0xfeedfacf) return 'Mach-O'
  if (h.length >= 4 && (h.readUInt32LE(0) === 0xfeedface || h.readUInt32BE(0) === 0xfeedfacf)) return 'Mach-O (32-bit or big-endian)'
  if (h.length >= 8 && h.readUInt32BE(0) === 0xcafebabe && h.readUInt32BE(4) < 64) return 'Mach-O universal'
  if (h.length >= 2 && h[0] === 0x4d && h[1] === 0x5a) return 'PE'
  return null
}

/** The first bytes of a file that is no binary, for the message (printable ASCII, else hex). */
function shown(h) {
  const b = h.subarray(0, 16)
  if (b.every((c) => c >= 0x20 && c < 0x7f)) return `"${b.toString('latin1')}"`
  return b.toString('hex').replace(/(..)/g, '$1 ').trim()
}

/**
 * Why `file` cannot be a whole Node-API binary for this machine, in plain words that follow its
 * path ("is empty", "is truncated: …"), with `kind` 'damaged' (empty, cut short, not a binary)
 * or 'foreign' (a whole binary for another machine); null when it looks whole and ours, or when
 * this platform's format is not one checked here (the dynamic loader then decides).
 */
function binaryProblem(file, { platform = process.platform, arch = process.arch } = {}) {
  let fd
  try {
    fd = fs.openSync(file, 'r')
  } catch {
    return null // not there or not readable: the loader's own error says so
  }
  try {
    const st = fs.fstatSync(fd)
    if (!st.isFile()) return { kind: 'damaged', text: 'is not a regular file' }
    if (st.size === 0) return { kind: 'damaged', text: 'is empty (0 bytes): an interrupted copy or download' }
    const head = readAt(fd, 0, Math.min(st.size, HEAD))
    const format = formatOf(head)
    const expected = FORMAT[platform]
    if (expected === undefined || expected === 'XCOFF') return null
    if (format === null) {
      // A file cut inside its magic number: the start of one.
      const cut = MAGICS.find(([, m]) => head.length < m.length && m.subarray(0, head.length).equals(head))
      if (cut) return { kind: 'damaged', text: `is cut inside its ${cut[0]} header (${n(st.size)} ${st.size === 1 ? 'byte' : 'bytes'}): an interrupted copy or download?` }
      return { kind: 'damaged', text: `is not a binary at all (it starts with ${shown(head)})` }
    }
    const base = format.startsWith('Mach-O') ? 'Mach-O' : format
    if (base !== expected) return { kind: 'foreign', text: `is ${/^[AEIOU]/.test(format) ? 'an' : 'a'} ${format} file, not the ${expected} library ${platform} loads` }
    if (format === 'Mach-O (32-bit or big-endian)') return { kind: 'foreign', text: 'is a 32-bit or big-endian Mach-O file' }
    const f = new Fields(fd, head, true)
    const r = format === 'ELF' ? elfEnd(f, arch) : format === 'PE' ? peEnd(f, arch) : format === 'Mach-O' ? machoEnd(f, arch) : fatEnd(f, arch)
    if (r.foreign) return { kind: 'foreign', text: r.foreign }
    if (r.problem) return { kind: 'damaged', text: `${r.problem}: an interrupted copy or download?` }
    if (r.end > st.size) {
      return { kind: 'damaged', text: `is truncated: it has ${n(st.size)} bytes where its own headers need ${n(r.end)} (an interrupted copy or download)` }
    }
    return null
  } finally {
    fs.closeSync(fd)
  }
}

module.exports = { binaryProblem }
