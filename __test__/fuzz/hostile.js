'use strict'
// Hostile files for the fuzz properties (issue 42): what a co-tenant or a broken writer can put
// at an entry's or a session's name. Each is placed by rename, as a writer would, and described
// to the store model as what a read of it gives: its text (read as usual), or `{ marker }` (read
// as absent: not a regular file, or over the bound of an entry read) with the marker
// folderTexts (./oracles.js) shows for it.
const fc = require('fast-check')
const fs = require('node:fs')
const { spawnSync } = require('node:child_process')

const ENTRY_MAX_BYTES = 64 * 1024 * 1024
const linux = process.platform === 'linux'
const posix = process.platform !== 'win32'

/** Kinds this platform can make. */
const KINDS = [
  ...(posix ? ['fifo', 'zero'] : []),
  ...(linux ? ['pagemap'] : []),
  'sparse-big',
  'sparse-small',
  'oversize',
  'deep',
  'control',
]

/** A hostile kind, with the more expensive ones rarer. */
const hostileKind = fc.oneof(
  { weight: 6, arbitrary: fc.constantFrom(...KINDS.filter((k) => k !== 'oversize')) },
  { weight: 1, arbitrary: fc.constant('oversize') },
)

// Far beyond any stack, so the original's comparisons fail the same way wherever they are called
// from (nearer the limit, the answer would depend on the caller's stack).
const DEEP = [20_000, 100_000]

/** A nesting of `depth` arrays (its text). */
const nesting = (depth) => '['.repeat(depth) + ']'.repeat(depth)

// Terminal controls a file could carry into a supervisor's output: ESC sequences (title, clear
// screen, OSC 52), BEL, DEL, C1 (U+009B is a CSI of its own).
const CONTROLS = '\x1b]0;pwned\x07\x1b[2J\x1b]52;c;ZXZpbA==\x07\x7f\u009b31m\u0085\r'

/**
 * Put a hostile file of `kind` at `file` (replacing what is there) for an entry `entry` (a valid
 * entry of the file's id, for the kinds that hold one). Returns what the model holds for it.
 */
function placeEntryFile(file, kind, entry, seed = 0) {
  const tmp = `${file}.hostile`
  fs.rmSync(tmp, { force: true })
  let model
  switch (kind) {
    case 'fifo':
      if (spawnSync('mkfifo', [tmp]).status !== 0) throw new Error('mkfifo failed')
      model = { marker: '<fifo>' }
      break
    case 'zero':
      fs.symlinkSync('/dev/zero', tmp)
      model = { marker: '<link /dev/zero>' }
      break
    case 'pagemap':
      fs.symlinkSync('/proc/self/pagemap', tmp)
      model = { marker: '<link /proc/self/pagemap>' }
      break
    case 'sparse-big': {
      const size = seed % 2 ? 10 * 1024 ** 3 : ENTRY_MAX_BYTES + 1
      fs.writeFileSync(tmp, '')
      fs.truncateSync(tmp, size)
      model = { marker: `<${size} bytes>` }
      break
    }
    case 'sparse-small':
      fs.writeFileSync(tmp, '')
      fs.truncateSync(tmp, 4096)
      model = '\0'.repeat(4096)
      break
    case 'oversize': {
      // A valid entry, one byte over the bound.
      const head = `${JSON.stringify(entry).slice(0, -1)},"pad":"`
      const fd = fs.openSync(tmp, 'w')
      fs.writeSync(fd, head)
      fs.writeSync(fd, Buffer.alloc(ENTRY_MAX_BYTES - Buffer.byteLength(head) - 1, 'x'))
      fs.writeSync(fd, '"}')
      fs.closeSync(fd)
      model = { marker: `<${ENTRY_MAX_BYTES + 1} bytes>` }
      break
    }
    case 'deep':
      model = `${JSON.stringify(entry).slice(0, -1)},"deep":${nesting(DEEP[seed % DEEP.length])}}`
      fs.writeFileSync(tmp, model)
      break
    case 'control':
      model = JSON.stringify({ ...entry, hostname: CONTROLS.slice(0, 40), taskSummary: CONTROLS })
      fs.writeFileSync(tmp, model)
      break
    default:
      throw new Error(`unknown hostile kind ${kind}`)
  }
  fs.renameSync(tmp, file)
  return model
}

/** Session candidates: what a file named *.jsonl can be besides a session. */
const SESSION_KINDS = [...(posix ? ['fifo', 'zero'] : []), ...(linux ? ['pagemap'] : []), 'sparse-big', 'sparse-small']

/** Make `p` (a path, Buffer or string) a hostile session candidate; false when not made. */
function placeSessionFile(p, kind, maxFileBytes = 64 * 1024 * 1024) {
  switch (kind) {
    case 'fifo': {
      // mkfifo takes its path as an argument: a name that is not UTF-8 is not made.
      const name = Buffer.isBuffer(p) ? p.toString('utf8') : p
      if (Buffer.isBuffer(p) && !Buffer.from(name).equals(p)) return false
      return spawnSync('mkfifo', [name]).status === 0
    }
    case 'zero':
      fs.symlinkSync('/dev/zero', p)
      return true
    case 'pagemap':
      fs.symlinkSync('/proc/self/pagemap', p)
      return true
    case 'sparse-big':
      fs.writeFileSync(p, '')
      fs.truncateSync(p, Math.min(maxFileBytes + 1, 10 * 1024 ** 3))
      return true
    case 'sparse-small':
      fs.writeFileSync(p, '')
      fs.truncateSync(p, Math.min(maxFileBytes, 4096))
      return true
    default:
      return false
  }
}

module.exports = { KINDS, hostileKind, placeEntryFile, SESSION_KINDS, placeSessionFile, nesting, CONTROLS, DEEP }
