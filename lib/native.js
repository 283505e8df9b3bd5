'use strict'
// The native backend: the generated binding plus the few hand-written wrappers that compose
// its building blocks into the exact public contract (kept beside the generated loader).
const binding = require('../index.js')
const { recoveryLimits } = require('../js/options.js')

/**
 * Last complete assistant message of a worker's session (SPEC A13–A26). Resolves null when
 * nothing qualifies or at the deadline; rejects only for an invalid `options` argument.
 */
function recoverLastAssistantFromSession(sessionDir, sessionId, options) {
  let limits
  try {
    limits = recoveryLimits(options)
  } catch (err) {
    return Promise.reject(err)
  }
  if (typeof sessionDir !== 'string') return Promise.resolve(null)
  let pending
  try {
    pending = binding.recoverSessionTail(
      sessionDir,
      typeof sessionId === 'string' ? sessionId : undefined,
      limits.maxFileBytes,
      limits.deadlineMs,
      limits.maxFiles,
    )
  } catch {
    return Promise.resolve(null)
  }
  return pending.then(
    (raw) =>
      raw === null
        ? null
        : {
            sessionId: sessionId ?? raw.sessionId,
            sessionFile: raw.sessionFile,
            text: raw.text,
            timestamp: raw.timestamp,
            stopReason: raw.stopReason,
          },
    () => null,
  )
}

module.exports = { ...binding, recoverLastAssistantFromSession }
