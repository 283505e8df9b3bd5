'use strict'
// Seeded generator of pi session directories: realistic sessions and adversarial ones.
const fs = require('node:fs')
const path = require('node:path')

/** mulberry32: small, seedable, good enough for test inputs. */
function rng(seed) {
  let a = seed >>> 0
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
  const int = (n) => Math.floor(next() * n)
  return { next, int, pick: (xs) => xs[int(xs.length)], chance: (p) => next() < p }
}

const WORDS = ['done', 'fixed the bug', 'ünïcødé ✓', 'line1\nline2', 'tab\there', 'quote " and \\', '\u2028sep\u2029', '🙂 emoji', 'lone \ud800 surrogate', '']
const STOPS = ['stop', 'stop', 'toolUse', 'length', 'error', 'aborted', 'deferred', 'pending', 'weird']

let idCounter = 0
const nextId = () => (idCounter++).toString(16).padStart(8, '0')

function deepArgs(r, depth) {
  let v = { leaf: r.pick(WORDS) }
  for (let i = 0; i < depth; i++) v = r.chance(0.5) ? { k: v } : [v]
  return v
}

function assistantMessage(r, ts) {
  const parts = []
  const n = r.int(4)
  for (let i = 0; i < n; i++) {
    const kind = r.pick(['text', 'text', 'thinking', 'toolCall', 'bogus', 'nulltext'])
    if (kind === 'text') parts.push({ type: 'text', text: r.pick(WORDS) })
    else if (kind === 'thinking') parts.push({ type: 'thinking', thinking: 'hmm', thinkingSignature: 'sig' })
    else if (kind === 'toolCall')
      parts.push({ type: 'toolCall', id: 'call_1', name: 'bash', arguments: r.chance(0.1) ? deepArgs(r, 200) : { command: 'ls' } })
    else if (kind === 'nulltext') parts.push({ type: 'text', text: r.pick([null, 5, '']) })
    else parts.push(r.pick([null, 'text', 7, { type: 'image', data: 'AA==', mimeType: 'image/png' }]))
  }
  const message = {
    role: 'assistant',
    content: r.chance(0.1) ? r.pick(WORDS) : r.chance(0.03) ? null : parts,
    api: 'anthropic-messages',
    provider: 'anthropic',
    model: 'claude',
    usage: { input: 10, output: 20, cacheRead: 0, cacheWrite: 0, totalTokens: 30 },
    stopReason: r.chance(0.05) ? r.pick([null, 3, undefined]) : r.pick(STOPS),
    timestamp: ts,
  }
  return message
}

function entry(r, type, extra) {
  const e = { type, id: nextId(), parentId: r.chance(0.2) ? null : nextId(), timestamp: new Date(1_790_000_000_000 + r.int(1e9)).toISOString(), ...extra }
  if (r.chance(0.03)) e.timestamp = r.pick([12345, null])
  return e
}

/** One session file's records (as JS values, not yet serialized). */
function sessionRecords(r, sessionId) {
  const records = []
  const headerKind = r.pick(['v3', 'v3', 'v3', 'v3', 'v2', 'v1', 'none', 'string3', 'array3', 'nullversion', 'late'])
  const header = { type: 'session', version: 3, id: sessionId, timestamp: new Date(1_790_000_000_000).toISOString(), cwd: '/work' }
  if (headerKind === 'v2') header.version = 2
  if (headerKind === 'v1') delete header.version
  if (headerKind === 'string3') header.version = '3'
  if (headerKind === 'array3') header.version = [3]
  if (headerKind === 'nullversion') header.version = null
  if (headerKind !== 'none' && headerKind !== 'late') records.push(header)
  if (r.chance(0.7)) records.push(entry(r, 'model_change', { provider: 'anthropic', modelId: 'claude' }))
  const turns = r.int(6)
  for (let t = 0; t < turns; t++) {
    records.push(entry(r, 'message', { message: { role: 'user', content: r.chance(0.5) ? r.pick(WORDS) : [{ type: 'text', text: r.pick(WORDS) }], timestamp: 1 } }))
    const steps = 1 + r.int(3)
    for (let s = 0; s < steps; s++) {
      records.push(entry(r, 'message', { message: assistantMessage(r, 2) }))
      if (r.chance(0.4)) {
        records.push(
          entry(r, 'message', {
            message: { role: 'toolResult', toolCallId: 'call_1', toolName: 'bash', content: [{ type: 'text', text: 'out' }], isError: false, timestamp: 3 },
          }),
        )
      }
    }
  }
  if (headerKind === 'late') records.splice(r.int(records.length + 1), 0, header)
  // Adversarial values of other JSON types anywhere.
  const extras = r.chance(0.25) ? 1 + r.int(3) : 0
  for (let i = 0; i < extras; i++) records.splice(r.int(records.length + 1), 0, r.pick([null, 5, 'str', true, [], [1, 2], {}]))
  return records
}

/** Serialize records to lines, with raw-text adversarial edits. */
function serialize(r, records) {
  const lines = records.map((rec) => {
    let line = JSON.stringify(rec)
    if (line === undefined) line = 'null'
    if (r.chance(0.05)) line = line.replace('"role":"assistant"', '"role":"user","role":"assistant"')
    if (r.chance(0.03)) line = line.replace('"role":"assistant"', '"role":"assistant","role":"user"')
    if (r.chance(0.05)) line = line.replace('"role":"assistant"', '"role":"\\u0061ssistant"')
    if (r.chance(0.03)) line = line.replace('"type":"message"', '"__proto__":{"a":1},"type":"message"')
    if (r.chance(0.02)) line = `${line},`
    if (r.chance(0.03)) line = `\u00a0${line}`
    if (r.chance(0.03)) line = `${line} \t`
    return line
  })
  if (r.chance(0.1)) lines.splice(r.int(lines.length + 1), 0, '', '   ', '\u00a0', '\u2028')
  const eol = r.chance(0.1) ? '\r\n' : '\n'
  let text = lines.join(eol) + (lines.length ? eol : '')
  if (r.chance(0.08)) text = `\ufeff${text}`
  if (r.chance(0.05)) text = `\n \u00a0\n${text}`
  if (r.chance(0.05)) text += '\u00a0\n'
  // JS white space glued to the last record: only the whole-text trim lets it parse.
  if (r.chance(0.08)) text = text.replace(/\r?\n$/, r.pick(['\u00a0\n', '\u2028\n', '\ufeff\r\n']))
  let buf = Buffer.from(text, 'utf8')
  if (r.chance(0.1)) {
    // Torn tail: cut mid-record or drop the final newline.
    buf = r.chance(0.5) ? buf.subarray(0, Math.max(0, buf.length - 1)) : buf.subarray(0, r.int(buf.length + 1))
  }
  if (r.chance(0.08)) {
    // Invalid UTF-8 somewhere.
    const bad = r.pick([[0xff], [0xe2, 0x82], [0xc0, 0xaf], [0xed, 0xa0, 0x80], [0xf0, 0x9f]])
    const at = r.int(buf.length + 1)
    buf = Buffer.concat([buf.subarray(0, at), Buffer.from(bad), buf.subarray(at)])
  }
  return buf
}

/**
 * Build one session directory under `parent`. Returns { dir, sessionId } where sessionId is
 * what the caller should pass (possibly undefined or '').
 */
function makeSessionDir(parent, seed) {
  const r = rng(seed)
  const dir = path.join(parent, `case-${seed}`)
  fs.mkdirSync(dir, { recursive: true })
  const sessionId = r.pick(['crew-a1', 'task_7', 'x'])
  const files = 1 + r.int(5)
  const baseTime = 1_790_000_000 + r.int(1000)
  for (let f = 0; f < files; f++) {
    const kind = r.pick(['match', 'match', 'other', 'other', 'empty', 'dir', 'txt'])
    const ts = `2026-10-0${1 + r.int(9)}T10-00-0${r.int(10)}-000Z`
    let name
    if (kind === 'match') name = `${ts}_${sessionId}.jsonl`
    else if (kind === 'other') name = `${ts}_${r.pick(['other', 'crew-a10', `x${sessionId}`])}.jsonl`
    else if (kind === 'empty') name = `${ts}_${r.pick([sessionId, 'e'])}.jsonl`
    else if (kind === 'dir') name = 'x.jsonl'
    else name = 'notes.txt'
    const p = path.join(dir, name)
    if (fs.existsSync(p)) continue
    if (kind === 'dir') {
      fs.mkdirSync(p)
      continue
    }
    fs.writeFileSync(p, kind === 'empty' ? '' : serialize(r, sessionRecords(r, sessionId)))
    // Controlled mtimes: sub-millisecond differences and exact ties.
    const t = r.chance(0.3) ? baseTime : baseTime + r.int(50) + r.int(1000) / 1e6
    fs.utimesSync(p, t, t)
  }
  const arg = r.pick([sessionId, sessionId, sessionId, undefined, '', 'nomatch'])
  return { dir, sessionId: arg }
}

module.exports = { rng, makeSessionDir }
