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

  /** A file is its text, or (a hostile file, ./hostile.js) `{ marker }`: read as absent. */
  read(id) {
    const f = this.files.get(id)
    return typeof f === 'string' ? readText(f) : undefined
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

/**
 * Every name in a folder with its text (Node's readdir + readFile), for comparing with a model.
 * What a read must not be tried on is named instead (hostile files: ./hostile.js): a symbolic
 * link by its target, a FIFO, a file of more than a MiB by its size.
 */
function folderTexts(dir) {
  let names
  try {
    names = fs.readdirSync(dir)
  } catch {
    return {}
  }
  const out = {}
  for (const n of names.sort()) {
    const p = path.join(dir, n)
    try {
      const st = fs.lstatSync(p)
      if (st.isSymbolicLink()) out[n] = `<link ${fs.readlinkSync(p)}>`
      else if (st.isFIFO()) out[n] = '<fifo>'
      else if (st.isFile() && st.size > 1024 * 1024) out[n] = `<${st.size} bytes>`
      else out[n] = fs.readFileSync(p, 'utf8')
    } catch (err) {
      out[n] = `<${err.code}>`
    }
  }
  return out
}

/** How deep a value nests (objects and arrays), without recursion. */
function depthOf(v) {
  let max = 0
  const stack = [[v, 0]]
  while (stack.length > 0) {
    const [x, d] = stack.pop()
    if (typeof x !== 'object' || x === null) continue
    max = Math.max(max, d + 1)
    for (const k of Object.keys(x)) stack.push([x[k], d + 1])
  }
  return max
}

/** A piece of JSON text already written (textOf's own marker: never a parsed value). */
class Raw {
  constructor(text) {
    this.text = text
  }
}

/**
 * JSON.stringify(v) of a value JSON.parse made, without recursion (JSON.stringify overflows its
 * stack a few thousand levels down). Keys in their order; numbers and strings as JSON writes them.
 */
function textOf(v) {
  const out = []
  const stack = [v]
  while (stack.length > 0) {
    const x = stack.pop()
    if (x instanceof Raw) {
      out.push(x.text)
      continue
    }
    if (typeof x !== 'object' || x === null) {
      out.push(JSON.stringify(x))
      continue
    }
    const array = Array.isArray(x)
    const parts = [new Raw(array ? '[' : '{')]
    Object.keys(x).forEach((k, i) => {
      if (i > 0) parts.push(new Raw(','))
      if (!array) parts.push(new Raw(`${JSON.stringify(k)}:`))
      parts.push(x[k])
    })
    parts.push(new Raw(array ? ']' : '}'))
    for (let i = parts.length - 1; i >= 0; i--) stack.push(parts[i])
  }
  return out.join('')
}

module.exports = { validEntry, readText, serialize, errorShape, settle, StoreModel, folderTexts, depthOf, textOf }
