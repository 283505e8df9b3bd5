#!/usr/bin/env node
'use strict'
// `npm run bench`: every scenario, native vs the js/ backend, in one run. Prints a Markdown
// table (medians, ratios, targets met or missed) and writes bench/results/latest.{json,md}.
// `npm run bench -- store cold` runs only the named suites (liveness, session-recovery, store,
// events, large-folder, cold).
const { compare, write } = require('./harness.js')
const { loadNative, loadJs } = require('../lib/binding.js')

const suites = {
  liveness: require('./liveness.js'),
  'session-recovery': require('./session-recovery.js'),
  store: require('./store.js'),
  events: require('./events.js'),
  'large-folder': require('./large-folder.js'),
  cold: require('./cold.js'),
}

async function main() {
  const only = process.argv.slice(2)
  const ctx = { compare, native: loadNative(), js: loadJs() }
  const results = []
  for (const [name, suite] of Object.entries(suites)) {
    if (only.length && !only.includes(name)) continue
    process.stderr.write(`bench: ${name}…\n`)
    results.push(...(await suite(ctx)))
  }
  process.stdout.write(`${write(results)}\n`)
}

main().catch((err) => {
  console.error(err)
  process.exit(1)
})
