'use strict'
// Reads of files a co-tenant may have put in a folder (W-B9), for the JS backend: opened
// non-blocking (a FIFO or a device never holds a libuv thread in `open`), judged by the open
// descriptor (a name that turned into something else between two calls is not followed into
// it), regular files only, and never more than a bound. The native core's counterparts are
// `store::read_bounded` and the session reader's open.
const fs = require('node:fs')
const fsp = require('node:fs/promises')

/** Open flags: read-only, non-blocking where the platform has the flag (not Windows). */
const READ_FLAGS = fs.constants.O_RDONLY | (fs.constants.O_NONBLOCK ?? 0)
const CHUNK = 64 * 1024

/**
 * Read an open file as Node's `readFile` reads it: `size` bytes (its `fstat` size), or on to the
 * end when the size was 0 (procfs) or `toEnd` asks for more; undefined once it passes `max`.
 * `read(buf, offset, length)` reads at the current position and resolves the byte count.
 */
async function readOpen(read, size, max, toEnd) {
  if (size > max) return undefined
  let buf = Buffer.allocUnsafe(size > 0 ? size : Math.min(max + 1, CHUNK))
  let got = 0
  for (;;) {
    if (got === buf.length) {
      if (size > 0 && !toEnd) break
      if (got > max) return undefined
      const more = Buffer.allocUnsafe(Math.min(max + 1, Math.max(2 * buf.length, CHUNK)))
      buf.copy(more, 0, 0, got)
      buf = more
    }
    const n = await read(buf, got, buf.length - got)
    if (n === 0) break
    got += n
  }
  return got > max ? undefined : buf.subarray(0, got)
}

/** `readOpen` on the calling thread (same steps, `read` returns the count). */
function readOpenSync(read, size, max, toEnd) {
  if (size > max) return undefined
  let buf = Buffer.allocUnsafe(size > 0 ? size : Math.min(max + 1, CHUNK))
  let got = 0
  for (;;) {
    if (got === buf.length) {
      if (size > 0 && !toEnd) break
      if (got > max) return undefined
      const more = Buffer.allocUnsafe(Math.min(max + 1, Math.max(2 * buf.length, CHUNK)))
      buf.copy(more, 0, 0, got)
      buf = more
    }
    const n = read(buf, got, buf.length - got)
    if (n === 0) break
    got += n
  }
  return got > max ? undefined : buf.subarray(0, got)
}

/** A file handle's bytes (`readOpen`); its I/O errors are thrown. */
const readHandle = (fh, size, max, toEnd = false) =>
  readOpen((buf, offset, length) => fh.read(buf, offset, length, null).then((r) => r.bytesRead), size, max, toEnd)

/** A descriptor's bytes (`readOpenSync`); its I/O errors are thrown. */
const readFdSync = (fd, size, max, toEnd = false) => readOpenSync((buf, offset, length) => fs.readSync(fd, buf, offset, length, null), size, max, toEnd)

/**
 * The UTF-8 text of `file` when it is a regular file of at most `max` bytes; undefined for
 * anything else (missing, not regular, over the bound, any error), as B3 reads.
 */
async function readRegularText(file, max) {
  let fh
  try {
    fh = await fsp.open(file, READ_FLAGS)
  } catch {
    return undefined
  }
  try {
    const st = await fh.stat()
    if (!st.isFile()) return undefined
    return (await readHandle(fh, st.size, max))?.toString('utf8')
  } catch {
    return undefined
  } finally {
    await fh.close().catch(() => {})
  }
}

/** `readRegularText` on the calling thread. */
function readRegularTextSync(file, max) {
  let fd
  try {
    fd = fs.openSync(file, READ_FLAGS)
  } catch {
    return undefined
  }
  try {
    const st = fs.fstatSync(fd)
    if (!st.isFile()) return undefined
    return readFdSync(fd, st.size, max)?.toString('utf8')
  } catch {
    return undefined
  } finally {
    try {
      fs.closeSync(fd)
    } catch {}
  }
}

module.exports = { READ_FLAGS, readHandle, readFdSync, readRegularText, readRegularTextSync }
