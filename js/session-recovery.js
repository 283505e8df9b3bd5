'use strict'
// Pure-JavaScript session recovery backend, written from SPEC.md §2.A (A13–A26; the identity
// helpers A1–A12 are the shared contract layer's).
// It parses every candidate file completely (the original's cost profile), which makes it the
// benchmark baseline; unlike the original it never blocks the event loop on file I/O.
const fsp = require('node:fs/promises')
const path = require('node:path')
const { recoveryLimits } = require('../lib/contract/options.js')
const session = require('../lib/contract/session.js')
const { completeLines, parseEntries, migrationThrows, lastAnswer } = require('./session-parse.js')
const { READ_FLAGS, readHandle } = require('./read-file.js')

// ---- recovery --------------------------------------------------------------------------------

async function candidates(dir, sessionId, maxFiles) {
  const names = (await fsp.readdir(dir)).filter((n) => n.endsWith('.jsonl'))
  const stats = await Promise.all(
    names.map((name) =>
      fsp.stat(path.join(dir, name)).then(
        (st) => ({ name, mtime: st.mtimeMs }),
        () => null,
      ),
    ),
  )
  const kept = stats.filter(Boolean)
  const suffix = typeof sessionId === 'string' && sessionId ? `_${sessionId}.jsonl` : null
  const byNewest = (a, b) => b.mtime - a.mtime
  const matched = kept.filter((c) => suffix && c.name.endsWith(suffix)).sort(byNewest)
  const rest = kept.filter((c) => !(suffix && c.name.endsWith(suffix))).sort(byNewest)
  return [...matched, ...rest].slice(0, maxFiles).map((c) => c.name)
}

// A17–A18 judged on the open descriptor, opened non-blocking: a name that turned into a FIFO or
// a device since the candidates' stat neither holds a libuv thread in `open` nor is read.
async function recoverFile(file, maxFileBytes) {
  const fh = await fsp.open(file, READ_FLAGS)
  let bytes
  try {
    const st = await fh.stat()
    if (!st.isFile() || st.size <= 0 || st.size > maxFileBytes) return null
    bytes = await readHandle(fh, st.size, maxFileBytes)
  } finally {
    await fh.close().catch(() => {})
  }
  const entries = parseEntries(completeLines(bytes.toString('utf8')))
  return migrationThrows(entries) ? null : lastAnswer(entries)
}

async function scan(sessionDir, sessionId, limits, state) {
  const names = await candidates(sessionDir, sessionId, limits.maxFiles)
  for (const name of names) {
    if (state.abandoned) return null
    const sessionFile = path.join(sessionDir, name)
    const found = await recoverFile(sessionFile, limits.maxFileBytes).catch(() => null)
    if (found) {
      return {
        sessionId: sessionId ?? name.replace(/\.jsonl$/, ''),
        sessionFile,
        text: found.text,
        timestamp: found.timestamp,
        stopReason: found.stopReason,
      }
    }
  }
  return null
}

function recoverLastAssistantFromSession(sessionDir, sessionId, options) {
  let limits
  try {
    limits = recoveryLimits(options)
  } catch (err) {
    return Promise.reject(err)
  }
  const started = performance.now()
  return new Promise((resolve) => {
    const state = { abandoned: false }
    // setTimeout turns delays above 2^31 - 1 ms into 1 ms: cap them (≈ 24.8 days).
    const timer = setTimeout(
      () => {
        state.abandoned = true
        resolve(null)
      },
      Math.min(limits.deadlineMs, 2 ** 31 - 1),
    )
    timer.unref()
    scan(sessionDir, sessionId, limits, state).then(
      (r) => {
        clearTimeout(timer)
        // An answer that arrives after the deadline is not an answer (the timer may not have
        // had its turn yet).
        resolve(performance.now() - started >= limits.deadlineMs ? null : r)
      },
      () => {
        clearTimeout(timer)
        resolve(null)
      },
    )
  })
}

module.exports = {
  deriveSessionPaths: session.deriveSessionPaths,
  appendWorkerSessionArgs: session.appendWorkerSessionArgs,
  resolveSessionRecoveryEnabled: session.resolveSessionRecoveryEnabled,
  shouldAttemptSessionRecovery: session.shouldAttemptSessionRecovery,
  recoverLastAssistantFromSession,
}
