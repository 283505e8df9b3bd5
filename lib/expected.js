'use strict'
// The fast form of a CAS `expected` (issue 12): when the value is plain JSON data, the native
// CAS receives its JSON.stringify text (one string crossing, parsed off the JS thread) instead
// of walking it through N-API value by value. "Plain JSON data" means exactly the values whose
// JSON text carries every distinction util.isDeepStrictEqual makes against a parsed JSON value
// (B20): plain objects and arrays (Object/Array prototypes, no holes, no extra array
// properties, no own symbols, no cycles), strings, booleans, null and finite numbers other
// than -0. Anything else (undefined, NaN, -0, Infinity, Date, Map, null prototypes, Proxies,
// …) returns null and the native side reads the value itself with the exact rules. Accessor
// properties are read like data properties (a getter runs here, at call time; one that throws
// sends the value to the exact reader, which reads it again).
const { types } = require('node:util')

const hasOwn = Object.prototype.hasOwnProperty
const MAX_DEPTH = 512

function plain(v, depth, ancestors) {
  switch (typeof v) {
    case 'string':
    case 'boolean':
      return true
    case 'number':
      return Number.isFinite(v) && !Object.is(v, -0)
    case 'object':
      break
    default:
      return false
  }
  if (v === null) return true
  if (depth > MAX_DEPTH || types.isProxy(v) || ancestors.includes(v)) return false
  const isArray = Array.isArray(v)
  if (Object.getPrototypeOf(v) !== (isArray ? Array.prototype : Object.prototype)) return false
  if (Object.getOwnPropertySymbols(v).length > 0) return false
  const keys = Object.keys(v)
  if (isArray && keys.length !== v.length) return false
  ancestors.push(v)
  if (isArray) {
    for (let i = 0; i < v.length; i++) if (!hasOwn.call(v, i) || !plain(v[i], depth + 1, ancestors)) return false
  } else {
    for (let i = 0; i < keys.length; i++) if (!plain(v[keys[i]], depth + 1, ancestors)) return false
  }
  ancestors.pop()
  return true
}

/** JSON text of `expected` when it is plain JSON data (an object or array), else null. */
function expectedText(expected) {
  if (expected === null || typeof expected !== 'object') return null
  try {
    return plain(expected, 0, []) ? JSON.stringify(expected) : null
  } catch {
    return null // e.g. a stack overflow on a pathological value: let the exact reader decide
  }
}

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

module.exports = { expectedText, validTimestamps }
