'use strict'
// What the CLI writes. Every string that came from a file (entry ids, host names, file names,
// recovered text, parser messages quoting a file) is escaped before it reaches a terminal: a
// name holding ESC, CSI (C1 U+009B included: 0x9B is CSI to an 8-bit terminal) or OSC would
// otherwise set the title, clear the screen or write the clipboard. JSON is escaped as JSON, so
// it stays the same JSON value. Output is written in chunks, awaiting the stream when it is
// full: 200,000 rows make no string near V8's limit and no call with 200,000 arguments.
const { once } = require('node:events')

const hex4 = (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`

/** One line of text: every C0 control (line feeds and tabs too), DEL and C1 as a visible `\uXXXX`. */
const inline = (s) => String(s).replace(/[\u0000-\u001f\u007f-\u009f]/g, hex4)

/** Text of several lines (a recovered answer): line feeds and tabs kept, every other control escaped. */
const multiline = (s) => String(s).replace(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g, hex4)

/** JSON text with DEL and C1 escaped as well (JSON.stringify escapes C0 only): the same JSON value. */
const jsonSafe = (text) => text.replace(/[\u007f-\u009f]/g, hex4)

const omitted = (v) => v === undefined || typeof v === 'function' || typeof v === 'symbol'

/**
 * The text of `JSON.stringify(value, null, space)` in parts: the top-level object's or array's
 * members, and the members of those, one by one (a report's 200,000 entries are 200,000 parts).
 */
function* jsonParts(value, space = '', pad = '', depth = 0) {
  const nl = space ? '\n' : ''
  const inner = pad + space
  const container = depth < 2 && value !== null && typeof value === 'object' && typeof value.toJSON !== 'function'
  if (container && Array.isArray(value)) {
    if (value.length === 0) return yield '[]'
    yield `[${nl}`
    for (let i = 0; i < value.length; i++) {
      yield inner
      yield* jsonParts(omitted(value[i]) ? null : value[i], space, inner, depth + 1)
      yield `${i < value.length - 1 ? ',' : ''}${nl}`
    }
    return yield `${pad}]`
  }
  if (container) {
    const keys = Object.keys(value).filter((k) => !omitted(value[k]))
    if (keys.length === 0) return yield '{}'
    yield `{${nl}`
    for (let i = 0; i < keys.length; i++) {
      yield `${inner}${JSON.stringify(keys[i])}:${space ? ' ' : ''}`
      yield* jsonParts(value[keys[i]], space, inner, depth + 1)
      yield `${i < keys.length - 1 ? ',' : ''}${nl}`
    }
    return yield `${pad}}`
  }
  const text = JSON.stringify(value, null, space)
  yield space ? text.replaceAll('\n', `\n${pad}`) : text
}

const CHUNK = 64 * 1024

/**
 * A stream written in chunks of about 64 KiB; `write` waits while the stream is full. A reader
 * that went away (`pi-native matrix | head`) ends the process quietly with the exit code so far.
 */
class Output {
  constructor(stream) {
    this.stream = stream
    this.parts = []
    this.size = 0
    this.closed = false
    stream.on('error', (err) => {
      if (err.code !== 'EPIPE') throw err
      this.closed = true
      process.exit(process.exitCode ?? 0)
    })
  }

  async write(text) {
    this.parts.push(text)
    this.size += text.length
    if (this.size >= CHUNK) await this.flush()
  }

  async flush() {
    if (this.parts.length === 0 || this.closed) return
    const text = this.parts.join('')
    this.parts = []
    this.size = 0
    if (!this.stream.write(text)) await once(this.stream, 'drain')
  }

  /** `value` as JSON (`space` as JSON.stringify takes it), escaped, then a line feed. */
  async json(value, space = '') {
    for (const part of jsonParts(value, space)) await this.write(jsonSafe(part))
    await this.write('\n')
  }
}

// A column wider than this does not widen the others' rows: one 10,000-character id must not
// pad every one of 200,000 lines to its width.
const MAX_COLUMN = 64

/**
 * A table, written row by row. `rows` are arrays of cells, already escaped; `decorate(line, i)`
 * may wrap row i's line (a color).
 */
async function writeTable(out, headers, rows, decorate = (line) => line) {
  const widths = headers.map((h) => h.length)
  for (const r of rows) {
    for (let i = 0; i < r.length; i++) if (r[i].length > widths[i]) widths[i] = Math.min(MAX_COLUMN, r[i].length)
  }
  const line = (cells) => cells.map((c, i) => c.padEnd(widths[i])).join('  ').trimEnd()
  await out.write(`${line(headers)}\n`)
  for (let i = 0; i < rows.length; i++) await out.write(`${decorate(line(rows[i]), i)}\n`)
}

module.exports = { inline, multiline, jsonSafe, jsonParts, Output, writeTable }
