#!/usr/bin/env node
'use strict'
// `npm run fuzz -- [--seconds N] [--property NAME]... [--seed S] [--path P]`: the differential
// fuzz properties of __test__/fuzz/ for longer than npm test's budget. The N seconds are shared
// among the chosen properties (default: all) by their weights; each prints its case count. With
// --seed and --path (from a failure's replay line) it runs that one case of --property.
// Exit code 1 if any property failed.
const { parseArgs } = require('node:util')
const { PROPERTIES, runProperty } = require('../__test__/fuzz/run.js')

const { values } = parseArgs({
  options: {
    seconds: { type: 'string', default: '60' },
    property: { type: 'string', multiple: true },
    seed: { type: 'string' },
    path: { type: 'string' },
  },
})
const names = values.property ?? Object.keys(PROPERTIES)
for (const n of names) {
  if (!PROPERTIES[n]) {
    console.error(`unknown property '${n}'; known: ${Object.keys(PROPERTIES).join(', ')}`)
    process.exit(2)
  }
}
if (values.path !== undefined && (names.length !== 1 || values.seed === undefined)) {
  console.error('--path replays one case: give it with --seed and exactly one --property')
  process.exit(2)
}

async function main() {
  const seconds = Number(values.seconds)
  if (!(seconds > 0)) throw new Error(`--seconds must be a positive number, got ${values.seconds}`)
  const total = names.reduce((s, n) => s + PROPERTIES[n].share, 0)
  const seed = values.seed !== undefined ? Number(values.seed) : Date.now() | 0
  let failed = 0
  for (const name of names) {
    const started = Date.now()
    const r = await runProperty(name, values.path !== undefined ? { seed, path: values.path } : { seconds: (seconds * PROPERTIES[name].share) / total, seed })
    const took = ((Date.now() - started) / 1000).toFixed(0)
    console.log(`${r.failure ? 'FAIL' : 'ok  '} ${name}: ${r.runs} cases in ${took} s (seed ${r.seed})`)
    if (r.failure) {
      failed++
      console.log(r.failure)
    }
  }
  process.exit(failed ? 1 : 0)
}
main().catch((err) => {
  console.error(err instanceof Error ? err.message : err)
  process.exit(2)
})
