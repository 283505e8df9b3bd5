'use strict'
// Runs the differential fuzz properties (fast-check) for a time budget, both backends against
// the independent references. A failure is shrunk to a minimal case and reported with a
// one-line replay (property, seed and path). Used by __test__/fuzz.test.js (npm test's fixed
// budget) and scripts/fuzz.js (`npm run fuzz -- --seconds N`).
const fc = require('fast-check')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { inspect } = require('node:util')
const { backends } = require('../helpers.js')
const { loadSdk } = require('../session-oracle.js')
const { valueProperty, sequenceProperty } = require('./store.js')
const { recoveryProperty, describe } = require('./recovery.js')

/** The properties, each with its share of a budget and a compact form of its counterexample. */
const PROPERTIES = {
  'entry-values': { share: 0.4, make: (ctx) => valueProperty(ctx.backends, ctx.tmp) },
  'session-folders': { share: 0.3, make: (ctx) => recoveryProperty(ctx.backends, ctx.tmp, ctx.sdk), show: ([folder]) => describe(folder) },
  'cas-sequences': { share: 0.3, make: (ctx) => sequenceProperty(ctx.backends, ctx.tmp) },
}

// Runs per fast-check batch: each batch is a whole fc.check with its own seed, so a failure
// shrinks completely whatever the budget left; fast-check grows its values over a batch's
// runs. A budget under 10 s (a few seconds per property) runs short batches.
const batchSize = (seconds) => (seconds >= 10 ? 100 : 20)
// A single case that takes longer is a hang (fails the property).
const CASE_TIMEOUT_MS = 60_000

/** Folders for one case, removed after it. */
function workspace() {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'pi-native-fuzz-'))
  let n = 0
  const made = []
  return {
    tmp: () => {
      const d = path.join(root, String(n++))
      fs.mkdirSync(d)
      made.push(d)
      return d
    },
    cleanup: () => {
      for (const d of made.splice(0)) fs.rmSync(d, { recursive: true, force: true })
    },
    dispose: () => fs.rmSync(root, { recursive: true, force: true }),
  }
}

function show(name, counterexample) {
  const p = PROPERTIES[name]
  let text
  try {
    text = p.show ? JSON.stringify(p.show(counterexample), null, 1) : fc.stringify(counterexample)
  } catch {
    text = inspect(counterexample, { depth: 8, breakLength: 160 }) // deeper than fast-check's printer recurses
  }
  return text.length > 6000 ? `${text.slice(0, 6000)} … (${text.length} characters)` : text
}

/** The replay of one case: the line to run, and what `runProperty` takes for it. */
const replayLine = (name, seed, p) => `npm run fuzz -- --property ${name} --seed ${seed} --path ${p}`

/**
 * Run property `name` for `seconds` (or replay one case: `seed` and `path`). Resolves
 * `{ name, runs, seed, failure }`; `failure` is a report whose first line is the replay.
 */
async function runProperty(name, { seconds = 10, seed = Date.now() | 0, path: replayPath } = {}) {
  const p = PROPERTIES[name]
  if (!p) throw new Error(`unknown fuzz property '${name}' (known: ${Object.keys(PROPERTIES).join(', ')})`)
  const ws = workspace()
  const ctx = { backends: backends(), tmp: ws.tmp, sdk: name === 'session-folders' ? await loadSdk() : null }
  const property = p.make(ctx).afterEach(ws.cleanup)
  const base = { timeout: CASE_TIMEOUT_MS, asyncReporter: null }
  let runs = 0
  try {
    const deadline = Date.now() + seconds * 1000
    for (let batch = 0; replayPath !== undefined || batch === 0 || Date.now() < deadline; batch++) {
      const s = replayPath !== undefined ? seed : (seed + batch * 7919) | 0
      const params = replayPath !== undefined ? { ...base, seed: s, path: replayPath, endOnFailure: true } : { ...base, seed: s, numRuns: batchSize(seconds) }
      const details = await fc.check(property, params)
      runs += details.numRuns
      if (details.failed) {
        const cause = details.errorInstance instanceof Error ? details.errorInstance.message : String(details.errorInstance)
        const failure = [
          `fuzz property ${name} failed after ${runs} cases; replay: ${replayLine(name, details.seed, details.counterexamplePath)}`,
          `shrunk ${details.numShrinks} times; counterexample: ${show(name, details.counterexample)}`,
          cause,
        ].join('\n')
        return { name, runs, seed, failure }
      }
      if (replayPath !== undefined) break
    }
    return { name, runs, seed, failure: null }
  } finally {
    ws.cleanup()
    ws.dispose()
  }
}

module.exports = { PROPERTIES, runProperty }
