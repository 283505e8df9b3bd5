'use strict'
// Option defaults and checks of the new APIs, shared by both backends (pure functions, no I/O).

const RECOVERY_DEFAULTS = Object.freeze({ maxFileBytes: 67108864, deadlineMs: 5000, maxFiles: 3 })

/**
 * Validate the optional third argument of recoverLastAssistantFromSession.
 * Throws a TypeError naming the offending option.
 */
function recoveryLimits(options) {
  if (options === undefined || options === null) return { ...RECOVERY_DEFAULTS }
  if (typeof options !== 'object') throw new TypeError('The "options" argument must be an object')
  const out = { ...RECOVERY_DEFAULTS }
  for (const key of Object.keys(RECOVERY_DEFAULTS)) {
    const v = options[key]
    if (v === undefined) continue
    if (typeof v !== 'number' || Number.isNaN(v) || v < 0 || (key === 'maxFiles' && !Number.isInteger(v))) {
      throw new TypeError(`The "options.${key}" property must be a non-negative number${key === 'maxFiles' ? ' (integer)' : ''}`)
    }
    out[key] = v
  }
  out.maxFiles = Math.min(out.maxFiles, 0xffffffff)
  return out
}

module.exports = { RECOVERY_DEFAULTS, recoveryLimits }
