'use strict'
// The iterative comparison a watch and the JS backend's V4 check fall back on where
// util.isDeepStrictEqual overflows its stack (lib/contract/parsed-equal.js): on values JSON.parse
// makes, it answers what util.isDeepStrictEqual answers (the oracle), for pairs that are equal,
// reordered, or differ in one place (-0 for 0, a key, a type, a length), and it goes as deep as
// memory allows.
const { test } = require('node:test')
const assert = require('node:assert/strict')
const fc = require('fast-check')
const { isDeepStrictEqual } = require('node:util')
const { iterativeEqual, parsedEqual } = require('../lib/contract/parsed-equal.js')

/** A JSON text and a variant of it: the same value reordered, or one thing changed. */
const pair = fc
  .tuple(fc.jsonValue({ maxDepth: 4 }), fc.constantFrom('same', 'reorder', 'zero', 'key', 'type', 'drop'), fc.nat())
  .map(([v, how, at]) => {
    const text = JSON.stringify(v)
    let variant = v
    const containers = []
    const walk = (x) => {
      if (typeof x === 'object' && x !== null) {
        containers.push(x)
        for (const k of Object.keys(x)) walk(x[k])
      }
    }
    variant = JSON.parse(text)
    walk(variant)
    const c = containers.length ? containers[at % containers.length] : null
    if (how === 'reorder' && c && !Array.isArray(c)) {
      const entries = Object.entries(c).reverse()
      for (const k of Object.keys(c)) delete c[k]
      for (const [k, x] of entries) c[k] = x
    } else if (how === 'zero') {
      return [text, text.replace(/(^|[,:[])0(?=[,\]}]|$)/, '$1-0')]
    } else if (how === 'key' && c && !Array.isArray(c)) {
      c['\u0000extra'] = 1
    } else if (how === 'type' && c) {
      const k = Object.keys(c)[0]
      if (k !== undefined) c[k] = typeof c[k] === 'string' ? 1 : String(c[k])
    } else if (how === 'drop' && c) {
      if (Array.isArray(c)) c.pop()
      else delete c[Object.keys(c)[0]]
    }
    return [text, JSON.stringify(variant)]
  })

test('parsed values: the iterative comparison answers as util.isDeepStrictEqual', () => {
  fc.assert(
    fc.property(pair, ([a, b]) => {
      const [x, y] = [JSON.parse(a), JSON.parse(b)]
      const want = isDeepStrictEqual(x, y)
      assert.equal(iterativeEqual(x, y), want, `${a} vs ${b}`)
      assert.equal(iterativeEqual(y, x), want, `${b} vs ${a}`)
      assert.equal(parsedEqual(x, y), want)
    }),
    { numRuns: 2000 },
  )
  // The distinctions JSON values can carry.
  const eq = (a, b) => iterativeEqual(JSON.parse(a), JSON.parse(b))
  assert.equal(eq('{"a":1,"b":2}', '{"b":2,"a":1}'), true)
  assert.equal(eq('[0]', '[-0]'), false)
  assert.equal(eq('{"__proto__":1}', '{"__proto__":1}'), true)
  assert.equal(eq('{"__proto__":1}', '{"__proto__":2}'), false)
  assert.equal(eq('{"a":{}}', '{"a":[]}'), false)
  assert.equal(eq('{"a":1,"a":2}', '{"a":2}'), true)
  assert.equal(eq('"1"', '1'), false)
  assert.equal(eq('null', '{}'), false)
})

test('parsed values nesting 1,000,000 levels compare without overflowing the stack', () => {
  const depth = 1_000_000
  const a = JSON.parse('['.repeat(depth) + '1' + ']'.repeat(depth))
  const b = JSON.parse('['.repeat(depth) + '1' + ']'.repeat(depth))
  const c = JSON.parse('['.repeat(depth) + '2' + ']'.repeat(depth))
  assert.throws(() => isDeepStrictEqual(a, b), RangeError, 'the oracle itself overflows here')
  assert.equal(parsedEqual(a, b), true)
  assert.equal(parsedEqual(a, c), false)
})
