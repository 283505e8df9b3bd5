'use strict'
// Arbitrary session folders for recoverLastAssistantFromSession: JSONL files of realistic and
// hostile records (headers of every version, spoken and silent assistants, primitives, nulls),
// written compactly or with white space, `\u` escapes and duplicate keys, with torn lines, a
// BOM, CRLF, invalid UTF-8, blank and NBSP lines, lines long enough to cross the scanner's
// blocks; names that match the id or not, that sort differently by bytes and by UTF-16, that
// are not UTF-8 (alone or colliding with another name once decoded), folders and dangling
// links named *.jsonl; mtimes with ties and sub-millisecond parts; hostile candidates and lines
// (./hostile.js).
const fc = require('fast-check')
const fs = require('node:fs')
const path = require('node:path')
const { SESSION_KINDS, placeSessionFile, nesting, DEEP, CONTROLS } = require('./hostile.js')

const text = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom('done', 'fixed it', 'ünïcødé ✓', 'line1\nline2', 'tab\t"q"\\', '\u2028\u2029', '🙂', 'a\ud800b', '\udc00', '', ' ', '\u00a0') },
  { weight: 1, arbitrary: fc.string({ maxLength: 12 }) },
  { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 6 }) },
)
const stop = fc.constantFrom('stop', 'stop', 'toolUse', 'length', 'error', 'aborted', 'deferred', 'pending', 'Pending', '', null, 3, undefined)
const part = fc.oneof(
  { weight: 5, arbitrary: text.map((t) => ({ type: 'text', text: t })) },
  { weight: 1, arbitrary: fc.constant({ type: 'thinking', thinking: 'hmm' }) },
  { weight: 1, arbitrary: fc.constant({ type: 'toolCall', id: 'c1', name: 'bash', arguments: { command: 'ls' } }) },
  { weight: 1, arbitrary: fc.constantFrom(null, 'text', 7, [], { type: 'text' }, { type: 'text', text: 5 }, { type: 'Text', text: 'x' }) },
)
const content = fc.oneof({ weight: 5, arbitrary: fc.array(part, { maxLength: 4 }) }, { weight: 1, arbitrary: text }, { weight: 1, arbitrary: fc.constantFrom(null, 5, {}) })
const stamp = fc.oneof(fc.constant('2026-10-03T10:00:01.000Z'), fc.constantFrom(12345, null, '', 'x'))
let ids = 0
const base = (type, timestamp) => ({ type, id: (ids++ % 0xffffffff).toString(16).padStart(8, '0'), parentId: null, timestamp })

const assistant = fc.record({ content, stop, timestamp: stamp, role: fc.constantFrom('assistant', 'assistant', 'assistant', 'Assistant', 'user') }).map(({ content, stop, timestamp, role }) => {
  const message = { role, content, api: 'a', provider: 'p', model: 'm' }
  if (stop !== undefined) message.stopReason = stop
  return { ...base('message', timestamp), message }
})
const header = fc.constantFrom(3, 3, 3, 2, 1, undefined, null, '3', '2.5', [3], 'x', 4).map((version) => {
  const h = { type: 'session', id: 's', timestamp: '2026-10-03T10:00:00.000Z', cwd: '/w' }
  if (version !== undefined) h.version = version
  return h
})
const other = fc.oneof(
  fc.constant({ type: 'message', message: { role: 'user', content: 'q', timestamp: 1 } }),
  fc.constant({ type: 'message', message: { role: 'toolResult', toolCallId: 'c', content: [{ type: 'text', text: 'ok' }] } }),
  fc.constant({ type: 'model_change', provider: 'p', modelId: 'm' }),
  fc.constant({ type: 'message', message: null }),
  fc.constant({ type: 'message' }),
  fc.constantFrom(null, 0, 'str', true, [], [1], {}),
)
const record = fc.oneof({ weight: 6, arbitrary: assistant }, { weight: 1, arbitrary: header }, { weight: 3, arbitrary: other })

/** Escape some characters of a compact JSON text as `\uXXXX` (still the same value). */
function escapeSome(json, every) {
  let out = ''
  let inString = false
  for (let i = 0; i < json.length; i++) {
    const c = json[i]
    if (c === '"' && json[i - 1] !== '\\') inString = !inString
    if (inString && c !== '"' && c !== '\\' && json[i - 1] !== '\\' && i % every === 0) out += '\\u' + c.charCodeAt(0).toString(16).padStart(4, '0')
    else out += c
  }
  return out
}

/** One line's text (without its line end). */
const line = fc.oneof(
  { weight: 12, arbitrary: record.map((r) => JSON.stringify(r)) },
  { weight: 2, arbitrary: fc.tuple(record, fc.constantFrom(' ', '\t', ' \r', '  ')).map(([r, ws]) => ws + JSON.stringify(r, null, 1).replace(/\n/g, ' ') + ws) },
  { weight: 2, arbitrary: fc.tuple(record, fc.integer({ min: 2, max: 9 })).map(([r, k]) => escapeSome(JSON.stringify(r), k)) },
  { weight: 1, arbitrary: assistant.map((r) => JSON.stringify(r).replace('{"type":"message"', '{"type":"bogus","type":"message"')) },
  { weight: 1, arbitrary: assistant.map((r) => JSON.stringify(r).replace('{"type":"message"', '{"type":"message","type":"bogus"')) },
  { weight: 1, arbitrary: fc.constantFrom('', ' ', '\t', '\u00a0', '\ufeff', '\u2028', '{', '{"type":"message",', 'null', 'nul', '[1,]', '// c', '\u00a0{"type":"session","version":3}') },
  // Hostile lines (issue 42): a spoken answer carrying a nesting far beyond any stack, a bare
  // nesting, terminal controls in the answer.
  { weight: 1, arbitrary: fc.constantFrom(...DEEP).map((d) => `${JSON.stringify({ ...base('message', 't'), message: { role: 'assistant', content: [{ type: 'text', text: 'deep' }], stopReason: 'stop' } }).slice(0, -1)},"deep":${nesting(d)}}`) },
  { weight: 1, arbitrary: fc.constantFrom(...DEEP).map(nesting) },
  { weight: 1, arbitrary: fc.constant(JSON.stringify({ ...base('message', 't'), message: { role: 'assistant', content: [{ type: 'text', text: CONTROLS }], stopReason: 'stop' } })) },
  // Long lines: across the scanner's 64 KiB and 128 KiB blocks.
  { weight: 1, arbitrary: fc.tuple(fc.integer({ min: 1, max: 200 }), fc.boolean(), fc.constantFrom('x', 'é', 'assistant ')).map(([kib, spoken, fill]) => JSON.stringify({ ...base('message', 't'), message: { role: spoken ? 'assistant' : 'toolResult', content: [{ type: 'text', text: fill.repeat(Math.ceil((kib * 1024) / fill.length)) }], stopReason: 'stop' } })) },
)

/** A line's bytes: UTF-8, sometimes with invalid sequences inside. */
const lineBytes = fc.tuple(line, fc.option(fc.constantFrom([0xff], [0xc3], [0xed, 0xa0, 0x80], [0xe2, 0x82], [0xf0, 0x9f, 0x98]), { freq: 12 }), fc.nat()).map(([t, bad, at]) => {
  const b = Buffer.from(t)
  if (!bad) return b
  const i = at % (b.length + 1)
  return Buffer.concat([b.subarray(0, i), Buffer.from(bad), b.subarray(i)])
})

/** A whole file's bytes. */
const fileBytes = fc
  .record({
    lines: fc.array(lineBytes, { maxLength: 14 }),
    crlf: fc.constantFrom(false, false, true, 'mixed'),
    bom: fc.boolean(),
    torn: fc.option(lineBytes, { freq: 3 }),
    trail: fc.constantFrom('', '', '\n', ' \n', '\u00a0\n', '\n\n'),
  })
  .map(({ lines, crlf, bom, torn, trail }) => {
    const parts = []
    if (bom) parts.push(Buffer.from('\ufeff'))
    lines.forEach((l, i) => {
      parts.push(l, Buffer.from(crlf === true || (crlf === 'mixed' && i % 2) ? '\r\n' : '\n'))
    })
    parts.push(Buffer.from(trail))
    if (torn) parts.push(torn.subarray(0, Math.max(1, torn.length >> 1)))
    return Buffer.concat(parts)
  })

const ID = 'sess-1'
/** File names as bytes: matching the id or not, odd orders, not UTF-8. */
const nameBytes = fc.oneof(
  fc.constantFrom('2026-10-03T10-00-00-000Z_sess-1.jsonl', 'a_sess-1.jsonl', 'b_sess-1.jsonl', '_sess-1.jsonl', 'sess-1.jsonl', 'x_sess-10.jsonl', 'other.jsonl', 'Z.jsonl', 'a.jsonl', 'é.jsonl', '\uff21.jsonl', '🙂.jsonl', 'a.JSONL', 'a.jsonl.bak', '.jsonl', 'a b_sess-1.jsonl').map((n) => Buffer.from(n)),
  fc.constantFrom([0x61, 0xff], [0xfe], [0xc3], [0xed, 0xa0, 0x80], [0x61, 0xef, 0xbf, 0xbd]).map((b) => Buffer.concat([Buffer.from(b), Buffer.from('.jsonl')])),
  fc.constantFrom([0x61, 0xff], [0xfe]).map((b) => Buffer.concat([Buffer.from(b), Buffer.from('_sess-1.jsonl')])),
)
// Ties are likely (5 values), and sub-millisecond parts matter (A14: full precision).
const mtime = fc.constantFrom(1_790_000_000, 1_790_000_000, 1_790_000_001.5, 1_790_000_001.0004, 1_790_000_002.25)

const entry = fc.record({
  name: nameBytes,
  // Besides files, folders and dangling links: hostile candidates (./hostile.js: FIFOs, links
  // to devices and procfs, sparse files over and under the size rule).
  kind: fc.oneof({ weight: 8, arbitrary: fc.constantFrom('file', 'file', 'file', 'file', 'file', 'file', 'dir', 'dangling') }, { weight: 1, arbitrary: fc.constantFrom(...SESSION_KINDS) }),
  bytes: fileBytes,
  mtime,
})

/** A folder: entries (the first of equal names wins), the id asked for, options. */
const sessionFolder = fc.record({
  // Mostly a few files; sometimes many (the listing, the stat of each, the mtime order).
  entries: fc.oneof({ weight: 6, arbitrary: fc.array(entry, { maxLength: 7 }) }, { weight: 1, arbitrary: fc.array(entry, { minLength: 20, maxLength: 60 }) }),
  sessionId: fc.constantFrom(ID, ID, ID, undefined, '', 'other', 'a', '\ud800'),
  options: fc.option(fc.record({ maxFiles: fc.integer({ min: 1, max: 5 }), maxFileBytes: fc.integer({ min: 1, max: 4096 }) }, { requiredKeys: [] }), { freq: 4 }),
})

const CASE_INSENSITIVE = process.platform === 'win32' || process.platform === 'darwin'

/** Write a folder under `dir` (created); returns its entries as written. */
function materialize(dir, folder) {
  fs.mkdirSync(dir, { recursive: true })
  const dirBytes = Buffer.from(dir + path.sep)
  const made = new Set()
  for (const e of folder.entries) {
    // Names that are not UTF-8 exist as such on Linux only (macOS refuses them, Windows names
    // are UTF-16), and only POSIX makes symbolic links without privileges.
    const name = process.platform === 'linux' ? e.name : Buffer.from(e.name.toString('utf8'))
    const p = Buffer.concat([dirBytes, name])
    // Windows and macOS folders are case-insensitive: 'a.JSONL' and 'a.jsonl' are one name
    // there (the second would open the first; under Wine: EISDIR from the harness itself).
    const key = CASE_INSENSITIVE ? name.toString('utf8').toUpperCase() : name.toString('hex')
    if (made.has(key)) continue
    made.add(key)
    if (e.kind === 'dir') fs.mkdirSync(p)
    else if (e.kind === 'dangling' && process.platform !== 'win32') fs.symlinkSync('/nonexistent/pi-native-fuzz', p)
    else if (e.kind === 'dangling') continue
    else if (e.kind !== 'file') {
      if (!placeSessionFile(p, e.kind, folder.options?.maxFileBytes)) continue
      // A link's own times: following it would set a device's.
      if (e.kind === 'zero' || e.kind === 'pagemap') {
        fs.lutimesSync(p, e.mtime, e.mtime)
        continue
      }
    } else fs.writeFileSync(p, e.bytes)
    if (e.kind !== 'dangling') fs.utimesSync(p, e.mtime, e.mtime)
  }
}

/** A compact description of a folder for a failure report. */
function describe(folder) {
  return {
    sessionId: folder.sessionId,
    options: folder.options,
    entries: folder.entries.map((e) => ({ name: e.name.toString('latin1'), kind: e.kind, mtime: e.mtime, bytes: e.bytes.length, head: e.bytes.subarray(0, 400).toString('utf8') })),
  }
}

module.exports = { sessionFolder, materialize, describe }
