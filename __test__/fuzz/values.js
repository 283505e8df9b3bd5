'use strict'
// Arbitrary entry values for the store: process-matrix entries (valid, or with one violation
// of V1–V20), and JavaScript values of every kind injected into them — each JSON type, deep
// nesting, `toJSON` own or inherited, enumerable or not, getters, symbols, undefined and
// functions in objects and arrays, sparse arrays, huge numbers, BigInt, lone surrogates,
// prototype-less objects, class instances, Dates, Maps, boxed primitives, Proxies, frozen
// objects, shared and cyclic references. Getters and traps are pure (a throwing one always
// throws), so every party that reads a value sees the same thing.
const fc = require('fast-check')

const define = (o, k, value, enumerable = true) => Object.defineProperty(o, k, { value, enumerable, writable: true, configurable: true })

// ---- entries ---------------------------------------------------------------------------------
const str = (max) =>
  fc.oneof(
    { weight: 3, arbitrary: fc.constantFrom('a', 'host-a', 'ünïcødé', '🙂', '\u2028', 'q"\\', '', ' ', '\u00a0', '\ud800', 'x\udfffy') },
    { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: max }) },
  )
// Timestamps V8 accepts (strict ISO, which the native validator decides itself, and forms
// it must ask V8 about); the invalid ones come as violations.
const stamp = fc.constantFrom(
  '2026-07-19T00:00:00.000Z',
  '2026-07-19T00:00:30.000Z',
  '2026-07-19T23:59:59+05:30',
  '2026-07-19',
  '2026/07/19',
  'Sat, 19 Jul 2026 00:00:00 GMT',
  '2026-07-19T24:00:00Z',
  '+275760-09-13T00:00:00.000Z',
)
const safeInt = fc.oneof(fc.integer({ min: -5, max: 70000 }), fc.constantFrom(0, Number.MAX_SAFE_INTEGER, -Number.MAX_SAFE_INTEGER))
const status = fc.constantFrom('running', 'winding_down', 'adopted', 'running')
const filled = fc.constantFrom('a', 'agent-1', 'ünïcødé', '🙂', ' x ', 'q"\\', '\ud800')

const pointer = fc.record(
  {
    id: filled,
    kind: fc.constantFrom('repository', 'worktree', 'artifact', 'evidence', 'memory-query', 'skill', 'prompt', 'service'),
    uri: fc.constantFrom('file:///w', 'x'),
    readOnly: fc.boolean(),
    digest: str(4),
    metadata: fc.dictionary(fc.string({ maxLength: 3 }), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 3 }),
  },
  { requiredKeys: ['id', 'kind', 'uri', 'readOnly'] },
)

const agent = (sessionId) =>
  fc
    .record({
      agentId: filled,
      provider: fc.constantFrom('pi', 'pi', 'external'),
      cwd: fc.constantFrom('/work/repo', '/'),
      optional: fc.dictionary(fc.constantFrom('sessionDir', 'sessionFile', 'worktreeLaneKey', 'orchestrationProfileId', 'modelRef', 'latestCheckpointId'), str(3), { maxKeys: 2 }),
      names: fc.array(filled, { maxLength: 2 }),
      pointers: fc.array(pointer, { maxLength: 2 }),
    })
    .map(({ agentId, provider, cwd, optional, names, pointers }) => ({
      agentId,
      resumeContext: { provider, sessionId, cwd, ...optional, resourceProfileNames: names, contextPointers: pointers },
    }))

/** One violation of V1–V20 (or of nothing: most entries stay valid). */
const VIOLATIONS = {
  'V2 blank agentId': (e) => (e.agent.agentId = ' \u00a0'),
  'V2 provider': (e) => (e.agent.resumeContext.provider = 'PI'),
  'V2 sessionDir null': (e) => (e.agent.resumeContext.sessionDir = null),
  'V2 pointer kind': (e) => e.agent.resumeContext.contextPointers.push({ id: 'p', kind: 'file', uri: 'x', readOnly: true }),
  'V3 role': (e) => (e.role = 'boss'),
  'V4 other agent': (e) => (e.resumable = { agent: { ...structuredClone(e.agent), agentId: 'other' }, lastCode: 'running' }),
  'V4 not an object': (e) => (e.resumable = 'yes'),
  'V5 code 1.5': (e) => ((e.status = 'closed'), (e.terminal = { code: 1.5, signal: null, observedAt: '2026-07-19T00:00:00Z' })),
  'V5 signal 101': (e) => ((e.status = 'closed'), (e.terminal = { code: 0, signal: 's'.repeat(101), observedAt: '2026-07-19T00:00:00Z' })),
  'V6 terminal while running': (e) => ((e.status = 'running'), (e.terminal = { code: 0, signal: null, observedAt: '2026-07-19T00:00:00Z' })),
  'V7 resumable status alone': (e) => ((e.status = 'resumable'), delete e.resumable),
  'V8 entryId': (e) => (e.agent.resumeContext.sessionId += 'x'),
  'V9 pid 1.5': (e) => (e.pid = 1.5),
  'V9 pid 2^53': (e) => (e.pid = 2 ** 53),
  'V10 hostname 256': (e) => (e.hostname = 'h'.repeat(256)),
  'V11 garbage': (e) => (e.startedAt = 'garbage'),
  'V11 past the range': (e) => (e.heartbeatAt = '+275760-09-13T00:00:00.001Z'),
  'V11 month 13': (e) => (e.heartbeatAt = '2026-13-01T00:00:00Z'),
  'V12 status': (e) => (e.status = 'stopped'),
  'V13 parentPid 0': (e) => (e.parentPid = 0),
  'V16 tmuxPanePid 1.5': (e) => (e.tmuxPanePid = 1.5),
  'V17 taskRef 513': (e) => (e.taskRef = 'r'.repeat(513)),
  'V17 taskSummary 2001 units': (e) => (e.taskSummary = '🙂'.repeat(1000) + 'x'),
}

/** A process-matrix entry as a JSON value: valid, or (one time in four) with one violation. */
const entry = fc
  .record({
    role: fc.constantFrom('master', 'worker'),
    sessionId: fc.constantFrom('s1', 's2', 'fuzz'),
  })
  .chain(({ role, sessionId }) =>
    fc.record({
      entryId: fc.constant(`${role}-${sessionId}`),
      role: fc.constant(role),
      agent: agent(sessionId),
      pid: safeInt,
      hostname: fc.oneof(str(4), fc.constant('h'.repeat(255))),
      startedAt: stamp,
      heartbeatAt: stamp,
      status,
      optional: fc.record(
        {
          parentPid: fc.integer({ min: 1, max: 70000 }),
          parentSessionId: str(4),
          tmuxSession: str(4),
          tmuxPanePid: safeInt,
          taskRef: fc.oneof(str(4), fc.constant('r'.repeat(512))),
          taskSummary: fc.oneof(str(4), fc.constant('🙂'.repeat(1000))),
          windDownReason: fc.oneof(fc.constantFrom('parent_lost', 'user_cleanup', 'odd'), fc.constant(null)),
          resumable: fc.constantFrom('running', 'closed'),
          terminal: fc.record({ code: fc.oneof(safeInt, fc.constant(null)), signal: fc.constantFrom(null, 'SIGKILL'), observedAt: stamp }, { requiredKeys: ['code', 'signal', 'observedAt'] }),
          extra: fc.jsonValue({ maxDepth: 2 }),
        },
        { requiredKeys: [] },
      ),
      violation: fc.oneof({ weight: 3, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: fc.constantFrom(...Object.keys(VIOLATIONS)) }),
    }),
  )
  .map(({ optional, violation, ...e }) => {
    Object.assign(e, optional)
    if (e.resumable !== undefined) e.resumable = { agent: structuredClone(e.agent), lastCode: e.resumable }
    if (e.terminal !== undefined) e.status = 'closed'
    if (violation) VIOLATIONS[violation](e)
    return e
  })

// ---- odd JavaScript values ---------------------------------------------------------------------
class Snapshot {
  toJSON() {
    return { snapshot: true }
  }
}
class Plain {}

/** Leaves: every JSON primitive and the values JSON cannot carry. */
const leaf = fc.oneof(
  { weight: 6, arbitrary: fc.oneof(fc.constant(null), fc.boolean(), fc.double(), fc.integer(), str(6)) },
  { weight: 2, arbitrary: fc.constantFrom(-0, NaN, Infinity, -Infinity, 1e21, 1e-7, 5e-324, 2 ** 53 + 2, 1.7976931348623157e308) },
  { weight: 2, arbitrary: fc.constantFrom('undefined', 'function', 'symbol', 'bigint').map((k) => ({ undefined, function: () => 1, symbol: Symbol('v'), bigint: 12n })[k]) },
)

/** Objects with internal slots or other prototypes, made fresh per value. */
const special = fc
  .constantFrom('date', 'map', 'set', 'number', 'string', 'boolean', 'regexp', 'error', 'class', 'snapshot', 'null-proto', 'derived', 'uint8', 'date-as-object', 'number-as-object', 'arguments')
  .map((k) => {
    switch (k) {
      case 'date': return new Date(0)
      case 'map': return new Map([[1, 2]])
      case 'set': return new Set()
      case 'number': return new Number(1) // eslint-disable-line no-new-wrappers
      case 'string': return new String('s') // eslint-disable-line no-new-wrappers
      case 'boolean': return new Boolean(false) // eslint-disable-line no-new-wrappers
      case 'regexp': return /x/g
      case 'error': return new Error('e')
      case 'class': return Object.assign(new Plain(), { a: 1 })
      case 'snapshot': return Object.assign(new Snapshot(), { a: 1 })
      case 'null-proto': return Object.assign(Object.create(null), { a: 1 })
      case 'derived': return Object.assign(Object.create({ inherited: 1 }), { a: 1 })
      case 'uint8': return new Uint8Array([1, 2])
      case 'date-as-object': return Object.setPrototypeOf(new Date(0), Object.prototype)
      case 'number-as-object': return Object.setPrototypeOf(new Number(2), Object.prototype) // eslint-disable-line no-new-wrappers
      default: return (function () { return arguments })(1, 'a') // eslint-disable-line prefer-rest-params
    }
  })

/** How an object or array is dressed beyond its data: mostly one feature alone, so that an
 * exact route taken for one feature does not hide another's. */
const features = {
  toJSON: fc.record({
    where: fc.constantFrom('own', 'hidden', 'hidden', 'proto', 'getter', 'not-callable'),
    gives: fc.constantFrom('undefined', 'string', 'object', 'throw', 'bigint'),
  }),
  hiddenConstructor: fc.constantFrom(5, 'Object', 'Array'),
  hiddenTag: fc.constant(true),
  symbol: fc.constantFrom('enumerable', 'hidden', 'toPrimitive'),
  getter: fc.constantFrom('pure', 'throws'),
  frozen: fc.constant(true),
  proxy: fc.constant(true),
  hiddenExtra: fc.constant(true),
}
const dressing = fc.oneof(
  { weight: 4, arbitrary: fc.oneof(...Object.entries(features).map(([k, arb]) => arb.map((v) => ({ [k]: v })))) },
  { weight: 1, arbitrary: fc.record(features, { requiredKeys: [] }) },
)
const maybeDressing = fc.option(dressing, { freq: 3, nil: undefined })

const gives = (g) => () => {
  switch (g) {
    case 'undefined': return undefined
    case 'string': return 'replaced'
    case 'object': return { replaced: true }
    case 'bigint': return 1n
    default: throw new RangeError('toJSON refused')
  }
}

/** Apply a dressing to `o` (an object or array); returns the value to use (a Proxy of it, maybe). */
function dress(o, d) {
  if (!d || !Object.isExtensible(o)) return o
  if (d.toJSON) {
    const fn = gives(d.toJSON.gives)
    if (d.toJSON.where === 'own') define(o, 'toJSON', fn)
    else if (d.toJSON.where === 'hidden') define(o, 'toJSON', fn, false)
    else if (d.toJSON.where === 'not-callable') define(o, 'toJSON', 'not callable', false)
    else if (d.toJSON.where === 'getter') Object.defineProperty(o, 'toJSON', { get: () => fn, enumerable: false, configurable: true })
    else if (!Array.isArray(o) && Object.getPrototypeOf(o) === Object.prototype) Object.setPrototypeOf(o, { toJSON: fn })
  }
  if (d.hiddenConstructor !== undefined) define(o, 'constructor', { Object, Array }[d.hiddenConstructor] ?? d.hiddenConstructor, false)
  if (d.hiddenTag) define(o, Symbol.toStringTag, 'Tagged', false)
  if (d.symbol === 'enumerable') define(o, Symbol('k'), 1)
  else if (d.symbol === 'hidden') define(o, Symbol('k'), 1, false)
  else if (d.symbol === 'toPrimitive') define(o, Symbol.toPrimitive, () => 1, false)
  if (d.hiddenExtra) define(o, 'hidden', 1, false)
  if (d.getter) {
    // The first own enumerable data property becomes an accessor (never one already).
    const k = Object.keys(o).find((x) => 'value' in Object.getOwnPropertyDescriptor(o, x))
    if (k !== undefined) {
      const v = Object.getOwnPropertyDescriptor(o, k).value
      const get = d.getter === 'pure' ? () => v : () => { throw new Error('getter refused') }
      Object.defineProperty(o, k, { get, enumerable: true, configurable: true })
    }
  }
  if (d.frozen) Object.freeze(o)
  return d.proxy ? new Proxy(o, {}) : o
}

const key = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom('a', 'b', 'status', 'pid', '__proto__', 'constructor', 'toJSON', '10', '2', '-1', '', 'é', '\ud800') },
  { weight: 1, arbitrary: fc.string({ maxLength: 3 }) },
)

/**
 * A deep chain of arrays or objects, well below the depth where isDeepStrictEqual (and the
 * test's own assert.deepStrictEqual) overflow the stack: measured from a fresh stack, about 1,250
 * levels on Node 20 and 985 (arrays) on Node 24. Nearer that limit the answer would depend on how
 * deep the caller's stack already is (the original throws RangeError there, at a depth no host
 * can predict), so a differential comparison could not be exact.
 */
const deep = fc.tuple(fc.integer({ min: 20, max: 600 }), fc.boolean()).map(([depth, arrays]) => {
  let v = 'bottom'
  for (let i = 0; i < depth; i++) v = arrays ? [v] : { d: v }
  return v
})

const { value: oddValue } = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    { weight: 5, arbitrary: leaf },
    { weight: 3, arbitrary: tie('object') },
    { weight: 2, arbitrary: tie('array') },
    { weight: 1, arbitrary: special },
    { weight: 1, arbitrary: deep },
  ),
  object: fc.tuple(fc.array(fc.tuple(key, tie('value')), { maxLength: 4 }), maybeDressing).map(([members, d]) => {
    const o = {}
    for (const [k, v] of members) define(o, k, v)
    return dress(o, d)
  }),
  array: fc.tuple(fc.array(tie('value'), { maxLength: 4 }), fc.constantFrom('dense', 'dense', 'dense', 'holes', 'extra'), maybeDressing).map(([items, shape, d]) => {
    let a = items.slice() // fast-check keeps `items` for shrinking: never change it
    if (shape === 'holes') {
      a = new Array(items.length + 2)
      items.forEach((v, i) => {
        if (i % 2 === 0) a[i] = v
      })
    } else if (shape === 'extra') define(a, 'extra', 1)
    return dress(a, d)
  }),
}))

/** Every object and array in `v` reachable by own enumerable data properties (no getters run). */
function containers(v, out = [], seen = new Set()) {
  if (typeof v !== 'object' || v === null || seen.has(v)) return out
  seen.add(v)
  out.push(v)
  for (const k of Object.keys(v)) {
    const d = Object.getOwnPropertyDescriptor(v, k)
    if (d && 'value' in d) containers(d.value, out, seen)
  }
  return out
}

/**
 * Edits to apply to a fresh entry: at the `at`-th container, set key `k` (an existing key
 * `pick`-th, or a new one) to an odd value, or make a shared/cyclic reference, or dress the
 * container. `entryId` is never touched (path errors are the hostile suite's).
 */
const edit = fc.record({
  at: fc.nat(),
  kind: fc.constantFrom('value', 'value', 'value', 'cycle', 'shared', 'dress'),
  key: fc.option(key, { nil: undefined }),
  pick: fc.nat(),
  value: oddValue,
  dressing,
})

function applyEdits(root, edits) {
  // Only the fresh copy's own containers are changed: the injected values are fast-check's
  // (reused while it shrinks), so they are never written to.
  const own = containers(root)
  for (const e of edits) {
    const all = own
    const c = all[e.at % all.length]
    if (Object.isFrozen(c)) continue
    const keys = Object.keys(c).filter((k) => !(c === root && k === 'entryId'))
    const k = e.key !== undefined && !(c === root && e.key === 'entryId') ? e.key : keys.length ? keys[e.pick % keys.length] : 'added'
    if (e.kind === 'value') define(c, k, e.value)
    else if (e.kind === 'cycle') define(c, k, root)
    else if (e.kind === 'shared') define(c, k, all[e.pick % all.length])
    else if (c !== root) {
      // Dressing a nested container: replace it in its parents with the dressed form, dressed
      // once, before any parent is looked at: a parent may be the container itself (a cycle
      // made by an earlier edit), frozen by the dressing.
      const dressed = dress(c, e.dressing)
      for (const p of own) {
        for (const pk of Object.keys(p)) {
          const d = Object.getOwnPropertyDescriptor(p, pk)
          if (d && d.value === c && !Object.isFrozen(p)) define(p, pk, dressed, d.enumerable)
        }
      }
    }
  }
  return root
}

/** An entry, possibly edited: `{ base, edits }` made into a fresh value by `build`. */
const editedEntry = fc.record({ base: entry, edits: fc.array(edit, { maxLength: 3 }) })
const build = ({ base, edits }) => applyEdits(structuredClone(base), edits)

/** Dress an existing value's containers without changing its data (the §2 shapes). */
const dressedCopy = fc.array(fc.record({ at: fc.nat(), dressing }), { maxLength: 2 })
function applyDressings(root, dressings) {
  let top = root
  for (const { at, dressing: d } of dressings) {
    const all = containers(top)
    const c = all[at % all.length]
    if (c === top) {
      top = dress(c, d)
      continue
    }
    for (const p of all) {
      for (const pk of Object.keys(p)) {
        const desc = Object.getOwnPropertyDescriptor(p, pk)
        if (desc && desc.value === c && !Object.isFrozen(p)) define(p, pk, dress(c, d), desc.enumerable)
      }
    }
  }
  return top
}

module.exports = { entry, editedEntry, build, dressedCopy, applyDressings, containers }
