'use strict'
// The pure session-identity helpers of pi-crew's session-recovery module (SPEC A1–A12), written
// once for both backends. They do what the original does step by step — the same property
// reads, the same string and array methods, Node's `path.join` — so hostile input fails (or
// succeeds) at the same point with the same error, and mutations happen in the same order.
const path = require('node:path')

/** pi-crew `isSafePathId`: the regular expression test (so its argument is converted to a string). */
function isSafePathId(value) {
  return /^[A-Za-z0-9_-]+$/.test(value)
}

/** A1: the part after the last `:` (or the whole id) when it is a safe path id, else null. */
function safeIdentity(raw) {
  const tail = raw.includes(':') ? raw.slice(raw.lastIndexOf(':') + 1) : raw
  return isSafePathId(tail) ? tail : null
}

/**
 * A worker's session id and directory (A2–A5), or null when no safe identity or no directory
 * can be derived. An explicit `sessionDir` is returned verbatim; otherwise
 * `path.join(artifactsRoot, "sessions", <agent id, else session id>)`.
 */
function deriveSessionPaths(input) {
  const safeAgent = input.agentId ? safeIdentity(input.agentId) : null
  const safeSession = input.sessionId ? safeIdentity(input.sessionId) : null
  const sessionId = safeSession ?? safeAgent
  const dirLeaf = safeAgent ?? safeSession
  if (!sessionId || !dirLeaf) return null
  if (input.sessionDir) return { sessionId, sessionDir: input.sessionDir }
  if (!input.artifactsRoot) return null
  return { sessionId, sessionDir: path.join(input.artifactsRoot, 'sessions', dirLeaf) }
}

/** A8–A9 for one argument array; true when it was changed. */
function armSessionArgs(args, ctx) {
  const missing = []
  if (!args.includes('--session-id')) missing.push('--session-id', ctx.sessionId)
  if (!args.includes('--session-dir')) missing.push('--session-dir', ctx.sessionDir)
  if (missing.length === 0) return false
  const at = args.indexOf('--mode')
  if (at !== -1 && args[at + 1] === 'json' && args[at + 2] === '-p') args.splice(at + 3, 0, ...missing)
  else args.push(...missing)
  return true
}

/**
 * Arm both argument arrays with the session flags each lacks (A7–A10), `builtArgs` first, in
 * place; true when either changed.
 */
function appendWorkerSessionArgs(spawnArgs, builtArgs, ctx) {
  const built = armSessionArgs(builtArgs, ctx)
  const spawned = armSessionArgs(spawnArgs, ctx)
  return built || spawned
}

/** pi-crew `getCrewEnvBool` for a registered boolean variable, read from `process.env` now (G10). */
function crewEnvBool(name) {
  const raw = process.env[name]
  if (raw === undefined) return undefined
  const normalized = raw.trim().toLowerCase()
  if (normalized === '1' || normalized === 'true' || normalized === 'yes') return true
  if (normalized === '0' || normalized === 'false' || normalized === 'no') return false
  return undefined
}

/** A11: `PI_CREW_SESSION_RECOVERY` wins both ways; else `explicit` unless nullish; else true. */
function resolveSessionRecoveryEnabled(explicit) {
  const env = crewEnvBool('PI_CREW_SESSION_RECOVERY')
  if (env !== undefined) return env
  return explicit ?? true
}

/** A12: a present `exitStatus` field overrides its counterpart; crash = null code or killed. */
function shouldAttemptSessionRecovery(result, killed) {
  const status = result.exitStatus
  const exitCode = status && status.exitCode !== undefined ? status.exitCode : result.exitCode
  const wasKilled = status && status.killed !== undefined ? status.killed : killed
  return exitCode === null || wasKilled === true
}

module.exports = {
  isSafePathId,
  deriveSessionPaths,
  appendWorkerSessionArgs,
  resolveSessionRecoveryEnabled,
  shouldAttemptSessionRecovery,
}
