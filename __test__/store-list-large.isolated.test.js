'use strict'
// Issue 10, "large lists without a long block": listEntries over 20,000 entries returns exactly
// the accepted entries in name order, and the event loop keeps running while it works (the
// hand-off is parsed a slice at a time). The gap bound is generous (the design target is a few
// milliseconds per slice; one JSON.parse of the whole ~30 MB listing takes well over 100 ms).
// Gaps exclude time the JS thread waited for a CPU taken by other processes (loop-probe.js).
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { backends } = require('./helpers.js')
const { writeLargeMatrix } = require('./store-fixtures.js')
const { startLoopProbe } = require('./loop-probe.js')

const where = fs.existsSync('/dev/shm') ? '/dev/shm' : os.tmpdir()
const agentDir = fs.mkdtempSync(path.join(where, 'pi-native-list-large-'))
test.after(() => fs.rmSync(agentDir, { recursive: true, force: true }))
const expected = writeLargeMatrix(agentDir, 20_000)

/** Run `fn` under a 1 ms loop probe; resolves { value, maxGap, maxOwnGap }. */
async function probed(fn) {
  const probe = startLoopProbe(1)
  try {
    const value = await fn()
    return { value, ...probe.stop() }
  } catch (err) {
    probe.stop()
    throw err
  }
}

// Under qemu (scripts/test-arm64.sh) the JS thread itself runs several times slower, slices and
// GC pauses included: the bound is tripled, which still fails one parse of the whole listing
// (350–590 ms there, against 80–140 ms on x64). Wine runs x64 code natively: the bound stays.
const bound = process.env.PI_NATIVE_EMULATED === 'qemu' ? 150 : 50

for (const [name, s] of backends()) {
  test(`listEntries of 20,000 entries: exact result${name === 'native' ? ', no long event-loop block' : ''} (${name})`, async (t) => {
    assert.ok(expected.length > 18_000 && expected.length < 20_000)
    // The JS backend follows the original (one JSON.parse per file on the JS thread); only the
    // native backend promises the bound. Wall-clock gaps can also come from outside (a busy
    // machine): up to 3 rounds, one under the bound passes; one big parse fails all 3.
    const gaps = []
    let ownGap
    for (let i = 0; i < (name === 'native' ? 3 : 1); i++) {
      const { value, maxGap, maxOwnGap } = await probed(() => s.listEntries(agentDir))
      assert.equal(value.length, expected.length)
      assert.deepStrictEqual(value, expected)
      gaps.push(`${maxOwnGap.toFixed(1)} (raw ${maxGap.toFixed(1)})`)
      ownGap = maxOwnGap
      if (ownGap < bound) break
    }
    t.diagnostic(`event-loop gaps (ms, own (raw)): ${gaps.join(', ')}; bound ${bound} ms`)
    if (name === 'native') assert.ok(ownGap < bound, `event-loop gaps ${gaps.join(', ')} ms, bound ${bound} ms`)
  })
}
