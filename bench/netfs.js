#!/usr/bin/env node
'use strict'
// What reading entries as the server has them (store/coherent_read.rs) costs per CAS, on a local
// folder (where it is off) and on each network file system this machine can serve (root: see
// __test__/two-mounts.js). Each row: one process making N matching writeEntryIfUnchanged calls
// in a row through mount A (a heartbeat), with coherent reads on, and the same with them off
// (PI_NATIVE_TEST_PLAIN_READS=1, a test hook read at load); median µs per call of 5 runs each.
// `node bench/netfs.js [kinds...]`.
const { spawnSync } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { twoMounts, unavailable, KINDS } = require('../__test__/two-mounts.js')

const N = Number(process.env.BENCH_NETFS_N ?? 200)
const RUNS = 5
const CHILD = `
  const lib = require(${JSON.stringify(path.join(__dirname, '..', 'lib', 'index.js'))})
  const { makeEntry } = require(${JSON.stringify(path.join(__dirname, '..', '__test__', 'store-fixtures.js'))})
  ;(async () => {
    const [dir, n] = process.argv.slice(1)
    let e = makeEntry('worker', 'bench', { taskRef: '0' })
    await lib.writeEntry(dir, e)
    const t0 = process.hrtime.bigint()
    for (let i = 0; i < Number(n); i++) {
      const next = { ...e, taskRef: String(i + 1) }
      if (!(await lib.writeEntryIfUnchanged(dir, e.entryId, e, next))) throw new Error('no match')
      e = next
    }
    console.log(Number(process.hrtime.bigint() - t0) / 1000 / Number(n))
  })().catch((err) => { console.error(err); process.exit(1) })
`

function perCall(dir, plain) {
  const times = []
  for (let r = 0; r < RUNS; r++) {
    const sub = path.join(dir, `bench-${plain ? 'plain' : 'coherent'}-${r}`)
    const out = spawnSync(process.execPath, ['-e', CHILD, sub, String(N)], {
      encoding: 'utf8',
      env: { ...process.env, PI_NATIVE_BACKEND: 'native', ...(plain ? { PI_NATIVE_TEST_PLAIN_READS: '1' } : {}) },
    })
    if (out.status !== 0) throw new Error(out.stderr)
    times.push(Number(out.stdout))
  }
  return times.sort((a, b) => a - b)[Math.floor(RUNS / 2)]
}

function row(label, dir) {
  const on = perCall(dir, false)
  const off = perCall(dir, true)
  const line = `| ${label} | ${on.toFixed(0)} | ${off.toFixed(0)} | ${(on - off).toFixed(0)} (${(((on - off) / off) * 100).toFixed(1)} %) |`
  process.stdout.write(`${line}\n`)
}

async function main() {
  const kinds = process.argv.slice(2).length ? process.argv.slice(2) : KINDS
  process.stdout.write(`CAS (matching, in a row) µs per call, median of ${RUNS} × ${N}\n\n| folder | coherent reads | plain reads | cost |\n|---|---:|---:|---:|\n`)
  const local = fs.mkdtempSync(path.join(os.tmpdir(), 'pi-native-bench-netfs-'))
  try {
    row(`local (${os.tmpdir()})`, local)
  } finally {
    fs.rmSync(local, { recursive: true, force: true })
  }
  for (const kind of kinds) {
    const why = unavailable(kind)
    if (why) {
      process.stdout.write(`| ${kind} | skipped: ${why} | | |\n`)
      continue
    }
    const m = await twoMounts({ kind, label: 'bench' })
    try {
      row(kind, m.a)
    } finally {
      await m.stop()
    }
  }
}

main().catch((err) => {
  console.error(err)
  process.exit(1)
})
