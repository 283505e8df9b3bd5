'use strict'
// Differential fuzzing in npm test (issue 36 §1): each fast-check property of __test__/fuzz/ runs
// for its share of a fixed budget, both backends against the independent references (the SDK
// parser and migration, util.isDeepStrictEqual, JSON, Date.parse, Node's fs). The budget is
// PI_NATIVE_FUZZ_SECONDS: npm test (scripts/test.js) gives its first Node line 100 s; anything
// else (the other Node lines, arm64 under qemu, Windows under Wine, a plain `node --test`) gets
// the default of 5 s. The seed is new every run and printed; a failure prints a one-line replay
// (property, seed, path).
// PI_NATIVE_FUZZ_REPLAY=<property>:<seed>:<path> replays one case here. Longer runs:
// `npm run fuzz -- --seconds N`.
const test = require('node:test')
const assert = require('node:assert/strict')
const util = require('node:util')
const { PROPERTIES, runProperty } = require('./fuzz/run.js')

const SECONDS = Number(process.env.PI_NATIVE_FUZZ_SECONDS ?? 5)
const SEED = process.env.PI_NATIVE_FUZZ_SEED !== undefined ? Number(process.env.PI_NATIVE_FUZZ_SEED) : Date.now() | 0
// A replay's path holds colons itself: `<property>:<seed>:<path>`.
const [replayName, replaySeed, ...replayPath] = (process.env.PI_NATIVE_FUZZ_REPLAY ?? '').split(':')
// Even the shortest budget must have tried each property on some cases.
const MIN_CASES = 20

for (const [name, { share }] of Object.entries(PROPERTIES)) {
  const replay = replayName === name
  const skip = replayName && !replay ? `replaying ${replayName} only` : false
  test(`fuzz: ${name} (both backends vs the references)`, { skip }, async (t) => {
    const options = replay
      ? { seed: Number(replaySeed), path: replayPath.join(':') }
      : { seconds: SECONDS * share, seed: SEED }
    const r = await runProperty(name, options)
    t.diagnostic(`${name}: ${r.runs} cases, seed ${r.seed}`)
    if (r.failure) assert.fail(r.failure)
    if (!replay) assert.ok(r.runs >= MIN_CASES, `${name}: only ${r.runs} cases in ${options.seconds} s`)
  })
}

// The harness itself must not throw on what it generates. Found by CI's fuzz run (entry-values,
// seed 1250661381): an edit made a container refer to itself, a later one froze that container,
// and the harness then redefined a property of the now frozen container ("Cannot redefine
// property: readOnly") instead of handing the value to the backends.
test('fuzz harness: freezing a container that refers to itself builds a value', () => {
  const { build, containers } = require('./fuzz/values.js')
  const base = { entryId: 'worker-fuzz', pointers: [{ id: 'a', readOnly: false }] }
  const at = containers(structuredClone(base)).findIndex((c) => !Array.isArray(c) && 'readOnly' in c)
  const edits = [
    { at, kind: 'shared', key: 'readOnly', pick: at, value: undefined, dressing: {} },
    { at, kind: 'dress', key: undefined, pick: 0, value: 0, dressing: { frozen: true, proxy: true } },
  ]
  const v = build({ base, edits })
  const pointer = v.pointers[0]
  assert.ok(Object.isFrozen(pointer), 'the dressing applied')
  assert.ok(util.types.isProxy(pointer), 'its parent holds the dressed form')
  assert.equal(pointer.readOnly, pointer.readOnly.readOnly, 'the cycle kept')
})
