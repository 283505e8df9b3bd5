'use strict'
// sortInSlices (lib/contract/slices.js), the watch's sort of a large listing: the same order as
// Array#sort (the oracle), for inputs in order (native dirScan's), reversed, shuffled, with
// repeats and with characters outside the BMP, around the sizes where it changes method; and it
// gives the event loop turns on the way.
const test = require('node:test')
const assert = require('node:assert/strict')
const { sortInSlices } = require('../lib/contract/slices.js')

/** A Slices whose every slice is used up: counts the turns asked for. */
function eager() {
  return {
    pauses: 0,
    due: () => true,
    async pause() {
      this.pauses++
    },
  }
}

let seed = 42
const rand = (n) => {
  seed = (seed * 1103515245 + 12345) >>> 0
  return seed % n
}
const ALPHABET = ['a', 'b', 'z', 'A', '-', '0', '\u00e9', '\uff61', '\u{1f600}', '\ud800']
const name = () => Array.from({ length: 1 + rand(6) }, () => ALPHABET[rand(ALPHABET.length)]).join('')

test('sortInSlices orders as Array#sort, whatever the input order, and yields on large inputs', async () => {
  for (const n of [0, 1, 2, 4095, 4096, 4097, 9000, 20_000]) {
    const names = Array.from({ length: n }, name)
    const want = names.slice().sort()
    for (const [how, input] of [
      ['shuffled', names],
      ['in order', want],
      ['reversed', want.slice().reverse()],
    ]) {
      const before = input.slice()
      const slices = eager()
      const got = await sortInSlices(input, slices)
      assert.deepEqual(got, want, `${n} names, ${how}`)
      assert.notEqual(got, input, 'a new array')
      assert.deepEqual(input, before, 'the argument untouched')
      if (n > 4096) assert.ok(slices.pauses > 0, `${n} names, ${how}: turns given`)
    }
  }
})

test('sortInSlices: an input in order but for its last pair is sorted, not taken as it is', async () => {
  const names = Array.from({ length: 10_000 }, (_, i) => `w-${String(i).padStart(5, '0')}`)
  ;[names[9998], names[9999]] = [names[9999], names[9998]]
  assert.deepEqual(await sortInSlices(names, eager()), names.slice().sort())
})
