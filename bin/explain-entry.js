'use strict'
// Diagnostics for the CLI: which process-matrix validation rule (V1–V20, docs/ARCHITECTURE.md) a parsed
// value breaks, on which field, in plain words. The store's own validator
// (js/process-matrix-store.js isProcessMatrixEntry) only answers yes/no; this one must agree with
// it on every input (__test__/explain-entry.test.js checks that on generated values), and it never
// decides what the store reads.
const { isDeepStrictEqual } = require('node:util')

const STATUS = ['running', 'winding_down', 'resumable', 'adopted', 'closed']
const KINDS = ['repository', 'worktree', 'artifact', 'evidence', 'memory-query', 'skill', 'prompt', 'service']
const OPTIONAL_RC_STRINGS = ['sessionDir', 'sessionFile', 'worktreeLaneKey', 'orchestrationProfileId', 'modelRef', 'latestCheckpointId']

const has = (o, k) => Object.prototype.hasOwnProperty.call(o, k)

function isPlainRecord(v) {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) return false
  const proto = Object.getPrototypeOf(v)
  return proto === Object.prototype || proto === null
}

/** A short, plain description of what a field holds ("missing", "the number 1.5", "a blank string" …). */
function describe(v, present = true) {
  if (!present) return 'missing'
  if (v === null) return 'null'
  if (Array.isArray(v)) return 'an array'
  if (typeof v === 'string') {
    if (v.trim() === '') return v === '' ? 'an empty string' : 'a blank string'
    const shown = v.length > 40 ? `${JSON.stringify(v.slice(0, 40))}… (${v.length} characters)` : JSON.stringify(v)
    return `the string ${shown}`
  }
  if (typeof v === 'number') return `the number ${Object.is(v, -0) ? '-0' : String(v)}`
  if (typeof v === 'boolean') return `${v}`
  if (typeof v === 'object') return 'an object'
  return `a ${typeof v}`
}

const fail = (rule, field, message) => ({ rule, field, message })
const nonBlank = (v) => typeof v === 'string' && v.trim() !== ''
const isSafeInt = (v) => Number.isSafeInteger(v)
const validTimestamp = (v) => typeof v === 'string' && Number.isFinite(Date.parse(v))
const oneOf = (list) => list.map((s) => `"${s}"`).join(', ')

/** V2 for one agent identity at `at` (e.g. "agent" or "resumable.agent"); null when it holds. */
function explainAgent(agent, at, present) {
  if (!isPlainRecord(agent)) return fail('V2', at, `${at} must be an object; it is ${describe(agent, present)}`)
  const rc = agent.resumeContext
  const rcAt = `${at}.resumeContext`
  if (!isPlainRecord(rc)) return fail('V2', rcAt, `${rcAt} must be an object; it is ${describe(rc, has(agent, 'resumeContext'))}`)
  if (!nonBlank(agent.agentId)) {
    return fail('V2', `${at}.agentId`, `${at}.agentId must be a non-blank string; it is ${describe(agent.agentId, has(agent, 'agentId'))}`)
  }
  for (const k of ['sessionId', 'cwd']) {
    if (!nonBlank(rc[k])) return fail('V2', `${rcAt}.${k}`, `${rcAt}.${k} must be a non-blank string; it is ${describe(rc[k], has(rc, k))}`)
  }
  if (rc.provider !== 'pi' && rc.provider !== 'external') {
    return fail('V2', `${rcAt}.provider`, `${rcAt}.provider must be "pi" or "external"; it is ${describe(rc.provider, has(rc, 'provider'))}`)
  }
  for (const k of OPTIONAL_RC_STRINGS) {
    if (has(rc, k) && typeof rc[k] !== 'string') {
      return fail('V2', `${rcAt}.${k}`, `${rcAt}.${k} must be a string when present; it is ${describe(rc[k])}`)
    }
  }
  const names = rc.resourceProfileNames
  if (!Array.isArray(names)) {
    return fail('V2', `${rcAt}.resourceProfileNames`, `${rcAt}.resourceProfileNames must be an array of non-blank strings; it is ${describe(names, has(rc, 'resourceProfileNames'))}`)
  }
  // `every` skips holes, as the store's validator does; JSON never has holes anyway.
  let badName = -1
  names.every((n, i) => (nonBlank(n) ? true : ((badName = i), false)))
  if (badName >= 0) {
    const f = `${rcAt}.resourceProfileNames[${badName}]`
    return fail('V2', f, `${f} must be a non-blank string; it is ${describe(names[badName])}`)
  }
  const ptrs = rc.contextPointers
  if (!Array.isArray(ptrs)) {
    return fail('V2', `${rcAt}.contextPointers`, `${rcAt}.contextPointers must be an array; it is ${describe(ptrs, has(rc, 'contextPointers'))}`)
  }
  let bad = null
  ptrs.every((p, i) => {
    bad = explainPointer(p, `${rcAt}.contextPointers[${i}]`)
    return bad === null
  })
  return bad
}

function explainPointer(p, at) {
  if (!isPlainRecord(p)) return fail('V2', at, `${at} must be an object; it is ${describe(p)}`)
  for (const k of ['id', 'uri']) {
    if (!nonBlank(p[k])) return fail('V2', `${at}.${k}`, `${at}.${k} must be a non-blank string; it is ${describe(p[k], has(p, k))}`)
  }
  if (!KINDS.includes(p.kind)) return fail('V2', `${at}.kind`, `${at}.kind must be one of ${oneOf(KINDS)}; it is ${describe(p.kind, has(p, 'kind'))}`)
  if (typeof p.readOnly !== 'boolean') return fail('V2', `${at}.readOnly`, `${at}.readOnly must be true or false; it is ${describe(p.readOnly, has(p, 'readOnly'))}`)
  if (has(p, 'digest') && typeof p.digest !== 'string') return fail('V2', `${at}.digest`, `${at}.digest must be a string when present; it is ${describe(p.digest)}`)
  if (has(p, 'metadata') && !isPlainRecord(p.metadata)) return fail('V2', `${at}.metadata`, `${at}.metadata must be an object when present; it is ${describe(p.metadata)}`)
  return null
}

/** "absent or a string of at most max UTF-16 units" (V14, V15, V17 and inside V4). */
function explainOptionalString(o, k, max, rule, at) {
  if (!has(o, k)) return null
  if (typeof o[k] !== 'string') return fail(rule, at, `${at} must be a string when present; it is ${describe(o[k])}`)
  if (o[k].length > max) return fail(rule, at, `${at} is ${o[k].length} characters long; at most ${max} are allowed`)
  return null
}

function explainTimestamp(v, present, rule, at) {
  if (validTimestamp(v)) return null
  const what = typeof v === 'string' ? `${describe(v)}, which Date.parse cannot read` : describe(v, present)
  return fail(rule, at, `${at} must be a date string that Date.parse accepts; it is ${what}`)
}

/**
 * Why `v` (a value parsed from an entry file) is not a valid process-matrix entry: the first
 * failing rule in V1…V17 order as `{ rule, field, message }`, or null when the entry is valid.
 * `field` is a path like "agent.resumeContext.contextPointers[0].kind" ("" for the whole value).
 */
function explainEntry(v) {
  if (!isPlainRecord(v)) return fail('V1', '', `the file must hold one JSON object; it holds ${describe(v)}`)
  const agentErr = explainAgent(v.agent, 'agent', has(v, 'agent'))
  if (agentErr) return agentErr
  if (v.role !== 'master' && v.role !== 'worker') return fail('V3', 'role', `role must be "master" or "worker"; it is ${describe(v.role, has(v, 'role'))}`)
  if (has(v, 'resumable')) {
    const r = v.resumable
    if (!isPlainRecord(r)) return fail('V4', 'resumable', `resumable must be an object when present; it is ${describe(r)}`)
    const e = explainAgent(r.agent, 'resumable.agent', has(r, 'agent'))
    if (e) return { ...e, rule: 'V4' }
    if (!isDeepStrictEqual(r.agent, v.agent)) {
      return fail('V4', 'resumable.agent', 'resumable.agent must be identical to agent (compared like util.isDeepStrictEqual, so 0 and -0 differ)')
    }
    if (!STATUS.includes(r.lastCode)) {
      return fail('V4', 'resumable.lastCode', `resumable.lastCode must be one of ${oneOf(STATUS)}; it is ${describe(r.lastCode, has(r, 'lastCode'))}`)
    }
    const s = explainOptionalString(r, 'taskRef', 512, 'V4', 'resumable.taskRef') || explainOptionalString(r, 'taskSummary', 2000, 'V4', 'resumable.taskSummary')
    if (s) return s
  }
  if (has(v, 'terminal')) {
    const t = v.terminal
    if (!isPlainRecord(t)) return fail('V5', 'terminal', `terminal must be an object when present; it is ${describe(t)}`)
    if (!(t.code === null || isSafeInt(t.code))) {
      return fail('V5', 'terminal.code', `terminal.code must be null or a whole number; it is ${describe(t.code, has(t, 'code'))}`)
    }
    if (!(t.signal === null || (typeof t.signal === 'string' && t.signal.length <= 100))) {
      const why = typeof t.signal === 'string' ? `${t.signal.length} characters long (at most 100)` : describe(t.signal, has(t, 'signal'))
      return fail('V5', 'terminal.signal', `terminal.signal must be null or a string of at most 100 characters; it is ${why}`)
    }
    const ts = explainTimestamp(t.observedAt, has(t, 'observedAt'), 'V5', 'terminal.observedAt')
    if (ts) return ts
    if (has(t, 'notificationDeliveredAt')) {
      const n = explainTimestamp(t.notificationDeliveredAt, true, 'V5', 'terminal.notificationDeliveredAt')
      if (n) return n
    }
    if (v.status !== 'closed') return fail('V6', 'status', `an entry with a terminal record must have status "closed"; status is ${describe(v.status, has(v, 'status'))}`)
  }
  if (v.status === 'resumable' && !has(v, 'resumable')) return fail('V7', 'resumable', 'status is "resumable" but the resumable payload is missing')
  const want = `${v.role}-${v.agent.resumeContext.sessionId}`
  if (v.entryId !== want) {
    return fail('V8', 'entryId', `entryId must be role + "-" + agent.resumeContext.sessionId = ${JSON.stringify(want)}; it is ${describe(v.entryId, has(v, 'entryId'))}`)
  }
  if (!isSafeInt(v.pid)) return fail('V9', 'pid', `pid must be a whole number within ±(2^53−1); it is ${describe(v.pid, has(v, 'pid'))}`)
  if (typeof v.hostname !== 'string') return fail('V10', 'hostname', `hostname must be a string; it is ${describe(v.hostname, has(v, 'hostname'))}`)
  if (v.hostname.length > 255) return fail('V10', 'hostname', `hostname is ${v.hostname.length} characters long; at most 255 are allowed`)
  for (const k of ['startedAt', 'heartbeatAt']) {
    const ts = explainTimestamp(v[k], has(v, k), 'V11', k)
    if (ts) return ts
  }
  if (!STATUS.includes(v.status)) return fail('V12', 'status', `status must be one of ${oneOf(STATUS)}; it is ${describe(v.status, has(v, 'status'))}`)
  if (has(v, 'parentPid') && !(isSafeInt(v.parentPid) && v.parentPid > 0)) {
    return fail('V13', 'parentPid', `parentPid must be a whole number above 0 when present; it is ${describe(v.parentPid)}`)
  }
  const rest =
    explainOptionalString(v, 'parentSessionId', 512, 'V14', 'parentSessionId') ||
    explainOptionalString(v, 'tmuxSession', 512, 'V15', 'tmuxSession') ||
    (has(v, 'tmuxPanePid') && !isSafeInt(v.tmuxPanePid)
      ? fail('V16', 'tmuxPanePid', `tmuxPanePid must be a whole number when present; it is ${describe(v.tmuxPanePid)}`)
      : null) ||
    explainOptionalString(v, 'taskRef', 512, 'V17', 'taskRef') ||
    explainOptionalString(v, 'taskSummary', 2000, 'V17', 'taskSummary')
  return rest
}

module.exports = { explainEntry }
