'use strict'
// How a CAS `expected` reaches the comparison (SPEC B20). One walk over the value,
// which runs no user code (Proxies are recognized without touching their traps, properties are
// read through their descriptors so no getter is called), sorts it into one of three routes:
// - TEXT: plain JSON data, i.e. exactly the values whose JSON text carries every distinction
//   util.isDeepStrictEqual makes against a parsed JSON value: plain objects and arrays
//   (Object/Array prototypes, no holes, no extra array properties, no own symbols, each object
//   reached once, no `toJSON` but an own enumerable one that is not a function), strings,
//   booleans, null and finite numbers other than -0. The native CAS receives its
//   JSON.stringify text in the writers' tab layout (one string crossing, compared with the
//   file's text or parsed off the JS thread).
// - READ: anything else made of data properties on plain objects and arrays (undefined, NaN,
//   -0, Infinity, functions, holes, own symbols, a hidden or inherited `toJSON`, shared or
//   cyclic references, …): the native side reads the value itself, own enumerable properties
//   only, with the exact rules. Reading it runs no JS code.
// - JUDGE: a value whose reading would run JS code (a Proxy, an accessor property anywhere),
//   or whose deep-strict identity is more than its own enumerable properties: another
//   prototype (Node 22+ compares `constructor`s where Node 20 compares prototypes), a hidden
//   own `constructor`, an own Symbol.toStringTag, internal slots behind Object.prototype (a
//   Date, RegExp, Error, boxed primitive or arguments object, which Object.prototype.toString
//   tells apart). The comparison is util.isDeepStrictEqual itself, called under the lock on
//   the JS thread, so its getters and traps run when, and only if, the original's comparison
//   calls them. So is a value nesting deeper than MAX_READ_DEPTH (or too deep for
//   JSON.stringify): the original's answer (past a few thousand levels, its RangeError), never
//   a read into the addon that takes time quadratic in the depth.
const { types } = require('node:util')

const TEXT = 0
const READ = 1
const JUDGE = 2

const { getOwnPropertyDescriptor, getOwnPropertySymbols, getPrototypeOf, keys: ownKeys } = Object
const OBJECT = Object.prototype
const ARRAY = Array.prototype
const hasOwn = Function.prototype.call.bind(OBJECT.hasOwnProperty)
const isEnumerable = Function.prototype.call.bind(OBJECT.propertyIsEnumerable)
const tagOf = Function.prototype.call.bind(OBJECT.toString)
const TO_STRING_TAG = Symbol.toStringTag

/** Objects reached so far: a short array (the common entry has ~5), a Set past that. */
class Seen {
  constructor() {
    this.list = []
    this.set = null
  }

  /** Whether `v` was reached before; records it. */
  visit(v) {
    if (this.set !== null) {
      if (this.set.has(v)) return true
      this.set.add(v)
      return false
    }
    if (this.list.includes(v)) return true
    this.list.push(v)
    if (this.list.length > 32) this.set = new Set(this.list)
    return false
  }
}

const isAccessor = (d) => d.get !== undefined || d.set !== undefined

/**
 * What the two standard prototypes allow, checked per call (a program may change them):
 * JUDGE if a tag or another prototype chain would make Object.prototype.toString run code or
 * tell plain values apart, READ if JSON.stringify would find an inherited `toJSON`, else TEXT.
 */
function prototypesRoute() {
  if (getPrototypeOf(ARRAY) !== OBJECT || hasOwn(OBJECT, TO_STRING_TAG) || hasOwn(ARRAY, TO_STRING_TAG)) return JUDGE
  return hasOwn(OBJECT, 'toJSON') || hasOwn(ARRAY, 'toJSON') ? READ : TEXT
}

/**
 * Nesting past which `expected` is compared by util.isDeepStrictEqual itself (JUDGE): the
 * original's answer at any depth (past a few thousand levels, its RangeError), at the
 * original's cost, where reading the value into the addon would take time quadratic in the
 * depth on the JS thread (each object is checked against its ancestors for cycles).
 */
const MAX_READ_DEPTH = 1000

/** The route of `expected` (an object or array root): TEXT, READ or JUDGE. */
function route(root) {
  let result = prototypesRoute()
  if (result === JUDGE) return JUDGE
  const seen = new Seen()
  const stack = [root]
  const depths = [1]
  while (stack.length > 0) {
    const v = stack.pop()
    const depth = depths.pop()
    if (depth > MAX_READ_DEPTH) return JUDGE
    if (seen.visit(v)) {
      result = READ // shared or cyclic: JSON text would duplicate or fail
      continue
    }
    if (types.isProxy(v)) return JUDGE
    const isArray = Array.isArray(v)
    if (getPrototypeOf(v) !== (isArray ? ARRAY : OBJECT)) return JUDGE
    // Own symbols first: the tag check below must not meet an own Symbol.toStringTag getter.
    const symbols = getOwnPropertySymbols(v)
    if (symbols.length > 0) {
      result = READ
      for (const sym of symbols) {
        if (sym === TO_STRING_TAG) return JUDGE
        const d = getOwnPropertyDescriptor(v, sym)
        if (isAccessor(d)) return JUDGE
        if (typeof d.value === 'object' && d.value !== null) {
          stack.push(d.value)
          depths.push(depth + 1)
        }
      }
    }
    // Internal slots behind Object.prototype (Date, RegExp, Error, boxed primitives,
    // arguments) change the tag isDeepStrictEqual compares; no code runs (no tag anywhere).
    if (!isArray && tagOf(v) !== '[object Object]') return JUDGE
    if (hasOwn(v, 'constructor') && !isEnumerable(v, 'constructor')) return JUDGE
    if (hasOwn(v, 'toJSON') && !isEnumerable(v, 'toJSON')) result = READ // JSON.stringify would call it
    const names = ownKeys(v)
    if (isArray && names.length !== v.length) result = READ // holes or extra properties
    for (let i = 0; i < names.length; i++) {
      const d = getOwnPropertyDescriptor(v, names[i]) // defined: v is no Proxy
      if (isAccessor(d)) return JUDGE
      const x = d.value
      if (typeof x === 'object' && x !== null) {
        stack.push(x)
        depths.push(depth + 1)
      } else if (!jsonLeaf(x)) result = READ
    }
  }
  return result
}

/** A primitive whose JSON text carries every distinction isDeepStrictEqual makes. */
function jsonLeaf(x) {
  switch (typeof x) {
    case 'string':
    case 'boolean':
      return true
    case 'number':
      return Number.isFinite(x) && !Object.is(x, -0)
    default:
      return false // undefined, bigint, symbol, function
  }
}

/**
 * How to hand `expected` to the native CAS: `{ text }` (its JSON text), `{ read: true }` (the
 * native side reads the value) or `{ judge: true }` (JS compares under the lock).
 */
function expectedRoute(expected) {
  if (expected === null || typeof expected !== 'object') return READ_ROUTE
  const r = route(expected)
  if (r === JUDGE) return JUDGE_ROUTE
  if (r === READ) return READ_ROUTE
  try {
    // The writers' own layout (B7): a file written from an equal value is this very text, which
    // the native side then takes as equal without parsing either.
    return { text: JSON.stringify(expected, null, '\t') + '\n' }
  } catch {
    return JUDGE_ROUTE // nesting too deep for JSON.stringify (its RangeError): as the original
  }
}
const READ_ROUTE = Object.freeze({ text: null })
const JUDGE_ROUTE = Object.freeze({ text: null, judge: true })

// The entry's timestamp fields (V5, V11): a file can only equal `expected` if its timestamps
// are exactly these strings, so V8's verdict on them is all the native validator may need.
const TIMESTAMPS = [
  (e) => e.startedAt,
  (e) => e.heartbeatAt,
  (e) => e.terminal?.observedAt,
  (e) => e.terminal?.notificationDeliveredAt,
]

/** The expected entry's timestamp strings that V8's Date.parse accepts (plain data only). */
function validTimestamps(expected) {
  const out = []
  for (const get of TIMESTAMPS) {
    const s = get(expected)
    if (typeof s === 'string' && Number.isFinite(Date.parse(s))) out.push(s)
  }
  return out
}

module.exports = { expectedRoute, validTimestamps }
