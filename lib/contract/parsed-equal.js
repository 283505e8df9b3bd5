'use strict'
// Deep-strict equality (G8) of two values JSON.parse made, for both backends: what
// util.isDeepStrictEqual answers for them, also where its recursion would overflow the stack
// (a file nesting a few thousand arrays makes it throw RangeError: issue 42).
const { isDeepStrictEqual } = require('node:util')

const hasOwn = Function.prototype.call.bind(Object.prototype.hasOwnProperty)
const { getPrototypeOf, keys: ownKeys, is } = Object

/**
 * util.isDeepStrictEqual(a, b) for JSON.parse's values (plain objects and arrays of strings,
 * numbers, booleans and null), iteratively: primitives by Object.is (-0 is not 0), containers
 * by kind, prototype and the set of their own enumerable keys, whatever their order.
 */
function iterativeEqual(a, b) {
  const stack = [a, b]
  while (stack.length > 0) {
    const y = stack.pop()
    const x = stack.pop()
    if (typeof x !== 'object' || x === null || typeof y !== 'object' || y === null) {
      if (!is(x, y)) return false
      continue
    }
    if (Array.isArray(x) !== Array.isArray(y) || getPrototypeOf(x) !== getPrototypeOf(y)) return false
    const kx = ownKeys(x)
    if (kx.length !== ownKeys(y).length) return false
    for (const k of kx) {
      if (!hasOwn(y, k)) return false
      stack.push(x[k], y[k])
    }
  }
  return true
}

/** util.isDeepStrictEqual of two parsed values; iterative where it runs out of stack. */
function parsedEqual(a, b) {
  try {
    return isDeepStrictEqual(a, b)
  } catch (err) {
    if (err instanceof RangeError) return iterativeEqual(a, b)
    throw err
  }
}

module.exports = { parsedEqual, iterativeEqual }
