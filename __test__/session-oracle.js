'use strict'
// The session-recovery reference: SPEC A13–A24 around the SDK's own parseSessionEntries and
// migrateSessionEntries (the real @earendil-works/pi-coding-agent in __test__/oracle, installed
// by scripts/oracle.js), on Node's fs and path.
const fs = require('node:fs')
const path = require('node:path')
const { pathToFileURL } = require('node:url')

/** The SDK's session-manager module (installs the oracle package on first use). */
async function loadSdk() {
  const { ensureOracle } = require('../scripts/oracle.js')
  return import(pathToFileURL(path.join(ensureOracle(), 'dist/core/session-manager.js')).href)
}

/**
 * What recoverLastAssistantFromSession(sessionDir, sessionId, options) answers, per the spec,
 * with `options` { maxFileBytes, maxFiles } defaulting to the original's constants.
 */
function recoverOracle(sdk, sessionDir, sessionId, { maxFileBytes = 67108864, maxFiles = 3 } = {}) {
  let names
  try {
    names = fs.readdirSync(sessionDir)
  } catch {
    return null
  }
  const stats = []
  for (const name of names.filter((n) => n.endsWith('.jsonl'))) {
    try {
      stats.push({ name, mtimeMs: fs.statSync(path.join(sessionDir, name)).mtimeMs })
    } catch {}
  }
  const matches = (n) => typeof sessionId === 'string' && sessionId !== '' && n.endsWith(`_${sessionId}.jsonl`)
  const order = (a, b) => b.mtimeMs - a.mtimeMs
  const list = [...stats.filter((s) => matches(s.name)).sort(order), ...stats.filter((s) => !matches(s.name)).sort(order)].slice(0, maxFiles)
  for (const { name } of list) {
    const file = path.join(sessionDir, name)
    let text
    try {
      const st = fs.statSync(file)
      if (st.size <= 0 || st.size > maxFileBytes) continue
      text = fs.readFileSync(file, 'utf8')
    } catch {
      continue
    }
    if (text.length && !text.endsWith('\n')) text = text.slice(0, text.lastIndexOf('\n') + 1)
    const entries = sdk.parseSessionEntries(text)
    try {
      sdk.migrateSessionEntries(entries)
    } catch {
      continue
    }
    for (let i = entries.length - 1; i >= 0; i--) {
      const e = entries[i]
      if (typeof e !== 'object' || e === null || e.type !== 'message') continue
      const m = e.message
      if (typeof m !== 'object' || m === null || m.role !== 'assistant') continue
      if (typeof m.stopReason !== 'string' || m.stopReason === 'pending') continue
      const content = m.content
      const t = Array.isArray(content)
        ? content.filter((p) => typeof p === 'object' && p !== null && p.type === 'text' && typeof p.text === 'string' && p.text.length > 0).map((p) => p.text).join('\n')
        : typeof content === 'string'
          ? content
          : ''
      if (!t) continue
      return {
        sessionId: sessionId ?? name.slice(0, -'.jsonl'.length),
        sessionFile: file,
        text: t,
        timestamp: typeof e.timestamp === 'string' ? e.timestamp : '',
        stopReason: m.stopReason,
      }
    }
  }
  return null
}

module.exports = { loadSdk, recoverOracle }
