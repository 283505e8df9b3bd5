'use strict'
// The fuzz properties' references, written from the spec on Node's own JSON, Date, util, fs and
// path, never from either backend: the store's read (B3, V1–V20), its files (B9), the CAS (B8,
// B20) as a model over file texts, and listEntries (B5).
const fs = require('node:fs')
const path = require('node:path')
const { isDeepStrictEqual } = require('node:util')

const STATUS = ['running', 'winding_down', 'resumable', 'adopted', 'closed']
const KINDS = ['repository', 'worktree', 'artifact', 'evidence', 'memory-query', 'skill', 'prompt', 'service']
const RC_OPTIONAL = ['sessionDir', 'sessionFile', 'worktreeLaneKey', 'orchestrationProfileId', 'modelRef', 'latestCheckpointId']

const own = (o, k) => Object.prototype.hasOwnProperty.call(o, k)
/** V1: non-null, non-array, prototype Object.prototype or null. */
const record = (v) => typeof v === 'object' && v !== null && !Array.isArray(v) && [Object.prototype, null].includes(Object.getPrototypeOf(v))
/** G5: JS trim() leaves something. */
const filled = (v) => typeof v === 'string' && v.trim().length > 0
const optString = (o, k, max = Infinity) => !own(o, k) || (typeof o[k] === 'string' && o[k].length <= max)
/** G7: V8's Date.parse is finite. */
const stamp = (v) => typeof v === 'string' && Number.isFinite(Date.parse(v))

/** V2 isAgentIdentity. */
function agentOk(a) {
  if (!record(a) || !record(a.resumeContext)) return false
  const rc = a.resumeContext
  if (![a.agentId, rc.sessionId, rc.cwd].every(filled)) return false
  if (rc.provider !== 'pi' && rc.provider !== 'external') return false
  if (!RC_OPTIONAL.every((k) => optString(rc, k))) return false
  if (!Array.isArray(rc.resourceProfileNames) || rc.resourceProfileNames.some((n) => !filled(n))) return false
  if (!Array.isArray(rc.contextPointers)) return false
  for (const p of rc.contextPointers) {
    if (!record(p) || !filled(p.id) || !KINDS.includes(p.kind) || !filled(p.uri)) return false
    if (typeof p.readOnly !== 'boolean' || !optString(p, 'digest')) return false
    if (own(p, 'metadata') && !record(p.metadata)) return false
  }
  return true
}

/** V1–V20 on a value parsed from a file. */
function validEntry(v) {
  if (!record(v) || !agentOk(v.agent)) return false
  if (!['master', 'worker'].includes(v.role)) return false
  if (own(v, 'resumable')) {
    const r = v.resumable
    if (!record(r) || !agentOk(r.agent) || !isDeepStrictEqual(r.agent, v.agent)) return false
    if (!STATUS.includes(r.lastCode) || !optString(r, 'taskRef', 512) || !optString(r, 'taskSummary', 2000)) return false
  }
  if (own(v, 'terminal')) {
    const t = v.terminal
    if (!record(t)) return false
    if (t.code !== null && !Number.isSafeInteger(t.code)) return false
    if (t.signal !== null && !(typeof t.signal === 'string' && t.signal.length <= 100)) return false
    if (!stamp(t.observedAt) || (own(t, 'notificationDeliveredAt') && !stamp(t.notificationDeliveredAt))) return false
    if (v.status !== 'closed') return false
  }
  if (v.status === 'resumable' && !own(v, 'resumable')) return false
  if (v.entryId !== v.role + '-' + v.agent.resumeContext.sessionId) return false
  if (!Number.isSafeInteger(v.pid) || typeof v.hostname !== 'string' || v.hostname.length > 255) return false
  if (!stamp(v.startedAt) || !stamp(v.heartbeatAt) || !STATUS.includes(v.status)) return false
  if (own(v, 'parentPid') && !(Number.isSafeInteger(v.parentPid) && v.parentPid > 0)) return false
  if (own(v, 'tmuxPanePid') && !Number.isSafeInteger(v.tmuxPanePid)) return false
  return ['parentSessionId', 'tmuxSession', 'taskRef'].every((k) => optString(v, k, 512)) && optString(v, 'taskSummary', 2000)
}

/** B3: what a file's text reads as (undefined = absent). */
function readText(text) {
  if (text === undefined || text === null) return undefined
  let v
  try {
    v = JSON.parse(text)
  } catch {
    return undefined
  }
  return validEntry(v) ? v : undefined
}

/** B9: the bytes a write leaves, or the serializer's error. */
function serialize(value) {
  try {
    const text = JSON.stringify(value, null, '\t')
    return { text: text + '\n' } // `undefined` + '\n' for an entry of undefined: as the original writes
  } catch (error) {
    return { error }
  }
}

/** A thrown value as the properties compare it: class, code, message. */
function errorShape(err) {
  if (!(err instanceof Error)) return { thrown: err }
  return { class: err.constructor.name, code: err.code, message: err.message }
}

/** Run `f`, returning `{ value }` or `{ error }` (sync throws and rejections alike). */
async function settle(f) {
  try {
    return { value: await f() }
  } catch (error) {
    return { error: errorShape(error) }
  }
}

/**
 * The store as a model over file texts (entryId → text; absent = no file): what each operation
 * answers and what it leaves (B7, B8, B10–B12).
 */
class StoreModel {
  constructor() {
    this.files = new Map()
  }

  read(id) {
    return readText(this.files.get(id))
  }

  write(value) {
    const s = serialize(value)
    if (s.error) return { error: errorShape(s.error) }
    this.files.set(String(value.entryId), s.text)
    return { value: undefined }
  }

  /** B8/B10: compare, then (on a match) serialize `next`, which may throw. */
  cas(id, expected, next) {
    if (!isDeepStrictEqual(this.read(id), expected)) return { value: false }
    const s = serialize(next)
    if (s.error) return { error: errorShape(s.error) }
    this.files.set(id, s.text)
    return { value: true }
  }

  remove(id) {
    this.files.delete(id)
    return { value: undefined }
  }

  removeIfUnchanged(expected) {
    const id = String(expected.entryId)
    if (!isDeepStrictEqual(this.read(id), expected)) return { value: false }
    this.files.delete(id)
    return { value: true }
  }

  /** B5: names in UTF-16 order, valid entries only. */
  list() {
    return [...this.files.keys()]
      .map((id) => `${id}.json`)
      .sort()
      .map((n) => this.read(n.slice(0, -5)))
      .filter((v) => v !== undefined)
  }
}

/** Every name in a folder with its text (Node's readdir + readFile), for comparing with a model. */
function folderTexts(dir) {
  let names
  try {
    names = fs.readdirSync(dir)
  } catch {
    return {}
  }
  const out = {}
  for (const n of names.sort()) {
    try {
      out[n] = fs.readFileSync(path.join(dir, n), 'utf8')
    } catch (err) {
      out[n] = `<${err.code}>`
    }
  }
  return out
}

module.exports = { validEntry, readText, serialize, errorShape, settle, StoreModel, folderTexts }
