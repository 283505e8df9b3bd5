'use strict'
// What one session file holds, the way recovery reads it (SPEC A19–A24), on parsed text: shared
// by the JS backend and the CLI's explanations of skipped candidates.

/** A19: drop a torn last line (text after the last newline). */
function completeLines(text) {
  return text.length > 0 && !text.endsWith('\n') ? text.slice(0, text.lastIndexOf('\n') + 1) : text
}

function parseEntries(content) {
  const out = []
  for (const line of content.trim().split('\n')) {
    if (!line.trim()) continue
    try {
      out.push(JSON.parse(line))
    } catch {
      // malformed lines are skipped
    }
  }
  return out
}

/** A21: true when the SDK's migration would throw on these entries. */
function migrationThrows(entries) {
  let header
  for (const e of entries) {
    if (e === null) return true // reading `.type` of null while looking for the header
    if (e.type === 'session') {
      header = e
      break
    }
  }
  const v = header === undefined || header.version == null ? 1 : header.version
  if (v >= 3) return false
  if (v < 2) return entries.some((e) => e === null || typeof e !== 'object')
  if (v < 3) return entries.some((e) => e === null)
  return false
}

function extractText(content) {
  if (typeof content === 'string') return content
  if (!Array.isArray(content)) return ''
  return content
    .filter((p) => p !== null && typeof p === 'object' && p.type === 'text' && typeof p.text === 'string' && p.text)
    .map((p) => p.text)
    .join('\n')
}

/** A22–A24: the last complete assistant answer, or null. */
function lastAnswer(entries) {
  for (let i = entries.length - 1; i >= 0; i--) {
    const e = entries[i]
    if (e === null || typeof e !== 'object' || e.type !== 'message') continue
    const m = e.message
    if (m === null || typeof m !== 'object' || m.role !== 'assistant') continue
    if (typeof m.stopReason !== 'string' || m.stopReason === 'pending') continue
    const t = extractText(m.content)
    if (!t) continue
    return { text: t, timestamp: typeof e.timestamp === 'string' ? e.timestamp : '', stopReason: m.stopReason }
  }
  return null
}

module.exports = { completeLines, parseEntries, migrationThrows, lastAnswer }
