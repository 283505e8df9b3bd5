'use strict'
// Fuzz properties of the process-matrix store: each backend against a model built on Node's
// JSON, util.isDeepStrictEqual and Date (./oracles.js), for answers, thrown errors and the
// files left on disk.
const fc = require('fast-check')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const lockfile = require('proper-lockfile')
const { StoreModel, settle, folderTexts, errorShape, depthOf, textOf } = require('./oracles.js')
const { entry, editedEntry, build, dressedCopy, applyDressings } = require('./values.js')
const { hostileKind, placeEntryFile } = require('./hostile.js')

const matrix = (agentDir) => path.join(agentDir, 'state', 'process-matrix')

// Nesting past which a value is compared by its text alone: assert.deepStrictEqual and
// JSON.stringify overflow their stack a few thousand levels down (values.js, `deep`).
const COMPARE_DEPTH = 500

/** A read value with its key order (deepStrictEqual alone ignores order). */
const ordered = (v) => {
  if (v === undefined) return { undefined: true }
  return depthOf(v) > COMPARE_DEPTH ? { deep: true, text: textOf(v) } : { value: v, text: JSON.stringify(v) }
}

/** Point an entry at another id: role, sessionId and entryId agree (V8), resumable's agent too. */
function retarget(e, id) {
  const [role, sessionId] = [id.slice(0, id.indexOf('-')), id.slice(id.indexOf('-') + 1)]
  e.entryId = id
  e.role = role
  e.agent.resumeContext.sessionId = sessionId
  if (e.resumable && typeof e.resumable === 'object' && e.resumable.agent) e.resumable.agent = structuredClone(e.agent)
  return e
}

/** What the sync and async CAS of the original do with their arguments before the disk. */
function casArgs(op, id, expected, next) {
  if (op === 'async') {
    if (next.entryId !== id) throw new TypeError(`Process-matrix replacement entry '${next.entryId}' does not match '${id}'.`)
    return id
  }
  if (op === 'sync' && next.entryId !== expected.entryId) {
    throw new TypeError(`Process-matrix replacement entry '${next.entryId}' does not match '${expected.entryId}'.`)
  }
  return String(expected.entryId)
}

/** One CAS-type operation on the model, as the original orders its steps. */
function modelCas(model, op, id, expected, next) {
  let key
  try {
    key = casArgs(op, id, expected, next)
  } catch (err) {
    return { error: errorShape(err) }
  }
  try {
    return op === 'remove' ? model.removeIfUnchanged(expected) : model.cas(key, expected, next)
  } catch (err) {
    return { error: errorShape(err) } // a getter or trap of expected threw during the comparison
  }
}

/** The same operation on a backend. */
function storeCas(s, agentDir, op, id, expected, next) {
  if (op === 'async') return settle(() => s.writeEntryIfUnchanged(agentDir, id, expected, next))
  if (op === 'sync') return settle(() => s.writeEntryIfUnchangedSync(agentDir, expected, next))
  return settle(() => s.removeEntryIfUnchanged(agentDir, expected))
}

// ---- entry values ------------------------------------------------------------------------------

const valueCase = fc.record({
  value: editedEntry,
  write: fc.constantFrom(true, true, true, false),
  expected: fc.constantFrom('written', 'written', 'written', 'value', 'other', 'undefined', 'null'),
  dressings: dressedCopy,
  other: entry,
  next: editedEntry,
  nextId: fc.constantFrom('same', 'same', 'same', 'other'),
  op: fc.constantFrom('async', 'sync', 'remove'),
  // Hostile files beside the entry (./hostile.js): listEntries must pass them by.
  hostile: fc.oneof({ weight: 3, arbitrary: fc.constant([]) }, { weight: 1, arbitrary: fc.array(fc.record({ kind: hostileKind, value: entry, seed: fc.nat() }), { minLength: 1, maxLength: 2 }) }),
})

/**
 * writeEntry, readEntry, one CAS (async, sync or remove), listEntries — the answers, errors and
 * files of each backend equal the model's.
 */
function valueProperty(backends, tmp) {
  return fc.asyncProperty(valueCase, async (c) => {
    const value = build(c.value)
    const id = String(c.value.base.entryId)
    const next = build(c.next)
    if (c.nextId === 'same') next.entryId = id
    else next.entryId = `${id}-x`
    const model = new StoreModel()
    // Each backend's folder gets the same hostile files beside the entry, before its calls.
    const dirs = backends.map(() => tmp())
    const neighbours = c.hostile.map((h, i) => ({ ...h, id: `worker-h${i}` })).filter((h) => h.id !== id)
    for (const h of neighbours) {
      for (const [k, d] of dirs.entries()) {
        fs.mkdirSync(matrix(d), { recursive: true })
        const m = placeEntryFile(path.join(matrix(d), `${h.id}.json`), h.kind, retarget(structuredClone(h.value), h.id), h.seed)
        if (k === 0) model.files.set(h.id, m)
      }
    }
    const want = []
    if (c.write) want.push(['write', model.write(value)])
    const current = model.files.get(id)
    const parsed = (() => {
      try {
        return typeof current !== 'string' ? undefined : JSON.parse(current)
      } catch {
        return undefined
      }
    })()
    const expected = expectedOf(c, value, parsed)
    want.push(['read', ordered(model.read(id))])
    want.push(['cas', modelCas(model, c.op, id, expected, next)])
    want.push(['list', model.list().map(ordered)])
    want.push(['files', folderFromModel(model)])
    for (const [k, [name, s]] of backends.entries()) {
      const agentDir = dirs[k]
      const got = []
      if (c.write) got.push(['write', await settle(() => s.writeEntry(agentDir, value))])
      got.push(['read', ordered(await s.readEntry(agentDir, id))])
      got.push(['cas', await storeCas(s, agentDir, c.op, id, expected, next)])
      got.push(['list', (await s.listEntries(agentDir)).map(ordered)])
      got.push(['files', folderTexts(matrix(agentDir))])
      assert.deepStrictEqual(got, want, `${name} differs from the model`)
    }
  })
}

/** The `expected` a case means: the file as parsed (maybe dressed), the written value, another
 * entry, or nullish. */
function expectedOf(c, value, parsed) {
  switch (c.expected) {
    case 'written':
      return parsed === undefined ? undefined : applyDressings(parsed, c.dressings)
    case 'value':
      return value
    case 'other':
      return applyDressings(structuredClone(c.other), c.dressings)
    case 'undefined':
      return undefined
    default:
      return null
  }
}

/** The matrix folder a model stands for: `<entryId>.json` → text (or a hostile file's marker). */
function folderFromModel(model) {
  return Object.fromEntries([...model.files].map(([id, f]) => [`${id}.json`, typeof f === 'string' ? f : f.marker]))
}

// ---- CAS sequences -----------------------------------------------------------------------------

const IDS = ['master-s1', 'worker-s1', 'worker-s2']
const id = fc.constantFrom(...IDS)
/** What a CAS compares with, relative to the entry's history. */
const expectedKind = fc.constantFrom('current', 'current', 'current', 'dressed', 'stale', 'changed', 'undefined')
const mutation = fc.record({ op: fc.constantFrom('async', 'sync', 'remove'), id, expected: expectedKind, dressings: dressedCopy, next: entry })
const asyncMutation = fc.record({ op: fc.constantFrom('async', 'async', 'remove', 'write', 'delete'), id, expected: expectedKind, dressings: dressedCopy, next: entry })
const step = fc.oneof(
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('write'), id, value: entry }) },
  { weight: 6, arbitrary: fc.record({ kind: fc.constant('mutate'), m: mutation }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('batch'), ms: fc.array(asyncMutation, { minLength: 2, maxLength: 3 }) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('delete'), id }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('external'), id, body: fc.constantFrom('{not json', '', '\ufeff{}', 'null', '{"entryId":"x"}') }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('read'), id }) },
  // A hostile file at the entry's name (./hostile.js), as a co-tenant or a broken writer leaves it.
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('hostile'), id, what: hostileKind, value: entry, seed: fc.nat() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('held'), m: mutation, releaseMs: fc.integer({ min: 5, max: 80 }) }) },
)

/** Per backend: its model, and the texts each entry held (for stale expectations). */
class Track {
  constructor() {
    this.model = new StoreModel()
    this.history = new Map(IDS.map((i) => [i, []]))
  }

  note() {
    for (const [i, text] of this.model.files) {
      const h = this.history.get(i)
      if (h && h[h.length - 1] !== text) h.push(text)
    }
  }

  /** The `expected` a step means, made from this backend's own history. */
  expected(m) {
    const parse = (t) => {
      try {
        return typeof t !== 'string' ? undefined : JSON.parse(t)
      } catch {
        return undefined
      }
    }
    const current = parse(this.model.files.get(m.id))
    const h = this.history.get(m.id)
    switch (m.expected) {
      case 'current':
        return current ?? retarget(structuredClone(m.next), m.id)
      case 'dressed':
        // A deep file's value is compared as it is (dressing walks the value recursively).
        if (current !== undefined && depthOf(current) > COMPARE_DEPTH) return current
        return current === undefined ? undefined : applyDressings(current, m.dressings)
      case 'stale':
        return parse(h.length > 1 ? h[h.length - 2] : h[0]) ?? retarget(structuredClone(m.next), m.id)
      case 'changed':
        return current === null || typeof current !== 'object' ? null : { ...current, pid: typeof current.pid === 'number' ? current.pid + 1 : 1 }
      default:
        return undefined
    }
  }
}

/** Apply a mutation to a model, as a call issued alone. */
function modelMutation(model, m, expected, next) {
  if (m.op === 'write') return model.write(next)
  if (m.op === 'delete') return model.remove(m.id)
  return modelCas(model, m.op, m.id, expected, next)
}

function storeMutation(s, agentDir, m, expected, next) {
  if (m.op === 'write') return settle(() => s.writeEntry(agentDir, next))
  if (m.op === 'delete') return settle(() => s.removeEntry(agentDir, m.id))
  return storeCas(s, agentDir, m.op, m.id, expected, next)
}

/** All orders of a short list. */
function permutations(xs) {
  if (xs.length <= 1) return [xs]
  return xs.flatMap((x, i) => permutations([...xs.slice(0, i), ...xs.slice(i + 1)]).map((p) => [x, ...p]))
}

/** Write a file's text the way a foreign writer would (rename into place). */
function writeExternal(agentDir, entryId, body) {
  fs.mkdirSync(matrix(agentDir), { recursive: true })
  const file = path.join(matrix(agentDir), `${entryId}.json`)
  fs.writeFileSync(`${file}.ext`, body)
  fs.renameSync(`${file}.ext`, file)
}

/**
 * Sequences of writes, CAS (sync and async, matching, stale, dressed, undefined), removes,
 * foreign writes and concurrent batches: every answer and the folder after every step equal a
 * model; a batch must equal the model run in some order (the lock serializes it).
 */
function sequenceProperty(backends, tmp) {
  return fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 12 }), async (steps) => {
    for (const [name, s] of backends) {
      const agentDir = tmp()
      const t = new Track()
      for (const [n, st] of steps.entries()) {
        const where = `${name}, step ${n} (${st.kind})`
        if (st.kind === 'write') {
          const v = retarget(structuredClone(st.value), st.id)
          assert.deepStrictEqual(await settle(() => s.writeEntry(agentDir, v)), t.model.write(v), where)
        } else if (st.kind === 'delete') {
          assert.deepStrictEqual(await settle(() => s.removeEntry(agentDir, st.id)), t.model.remove(st.id), where)
        } else if (st.kind === 'external') {
          writeExternal(agentDir, st.id, st.body)
          t.model.files.set(st.id, st.body)
        } else if (st.kind === 'held') {
          // Another holder (real proper-lockfile 4.1.2, as a JS host takes it): a sync call
          // fails with its ELOCKED after two attempts and changes nothing; an async one waits
          // for the release and then runs as alone.
          const file = path.join(matrix(agentDir), `${st.m.id}.json`)
          fs.mkdirSync(matrix(agentDir), { recursive: true })
          const release = lockfile.lockSync(file, { realpath: false })
          const expected = t.expected(st.m)
          const next = retarget(structuredClone(st.m.next), st.m.id)
          if (st.m.op === 'sync') {
            const got = await storeMutation(s, agentDir, st.m, expected, next)
            release()
            let want = modelMutation(new StoreModel(), st.m, expected, next) // its argument errors come first
            if (!want.error || want.error.code === 'ELOCKED') want = { error: { class: 'Error', code: 'ELOCKED', message: 'Lock file is already being held' } }
            assert.deepStrictEqual(got, want, `${where}: sync under a held lock`)
          } else {
            const timer = new Promise((resolve) => setTimeout(resolve, st.releaseMs)).then(() => release())
            const got = await storeMutation(s, agentDir, st.m, expected, next)
            await timer
            assert.deepStrictEqual(got, modelMutation(t.model, st.m, expected, next), `${where}: ${st.m.op} after a held lock`)
          }
        } else if (st.kind === 'hostile') {
          fs.mkdirSync(matrix(agentDir), { recursive: true })
          const file = path.join(matrix(agentDir), `${st.id}.json`)
          t.model.files.set(st.id, placeEntryFile(file, st.what, retarget(structuredClone(st.value), st.id), st.seed))
        } else if (st.kind === 'read') {
          assert.deepStrictEqual(ordered(await s.readEntry(agentDir, st.id)), ordered(t.model.read(st.id)), where)
        } else if (st.kind === 'mutate') {
          const expected = t.expected(st.m)
          const next = retarget(structuredClone(st.m.next), st.m.id)
          const want = modelMutation(t.model, st.m, expected, next)
          assert.deepStrictEqual(await storeMutation(s, agentDir, st.m, expected, next), want, `${where}: ${st.m.op} ${st.m.expected}`)
        } else {
          const args = st.ms.map((m) => ({ m, expected: t.expected(m), next: retarget(structuredClone(m.next), m.id) }))
          const got = await Promise.all(args.map(({ m, expected, next }) => storeMutation(s, agentDir, m, expected, next)))
          const files = folderTexts(matrix(agentDir))
          let linear = null
          for (const order of permutations([...args.keys()])) {
            const model = new StoreModel()
            model.files = new Map(t.model.files)
            const answers = []
            for (const i of order) answers[i] = modelMutation(model, args[i].m, args[i].expected, args[i].next)
            try {
              assert.deepStrictEqual(answers, got)
              assert.deepStrictEqual(files, folderFromModel(model))
              linear = model
              break
            } catch {}
          }
          assert.ok(linear, `${where}: no order of the batch explains ${JSON.stringify(got)}`)
          t.model = linear
        }
        t.note()
        assert.deepStrictEqual(folderTexts(matrix(agentDir)), folderFromModel(t.model), `${where}: files`)
      }
      assert.deepStrictEqual((await s.listEntries(agentDir)).map(ordered), t.model.list().map(ordered), `${name}: listEntries`)
    }
  })
}

module.exports = { valueProperty, sequenceProperty }
