'use strict'
// The cold path a host sees: its heartbeat calls the store once every few seconds, so each call
// meets sleeping threads, a halted CPU and caches other work has used. Every other store row times
// loops of back-to-back calls (throughput); this one times single calls, each after an idle pause,
// with each implementation in a process of its own.
//
// The two processes (native, js) live side by side and idle; the parent asks them in turn for one
// call, waiting PAUSE_MS after each answer, so every timed call comes PAUSE_MS after the last
// bench activity on the machine and 2 × PAUSE_MS after its own process's previous call, and both
// implementations meet the same phases of the machine. Each process first makes WARM_UP calls of
// every kind back to back (compiling its JS, loading the addon), as a host's long-running process
// has. Reported: p50 and p90 per implementation, and their ratios js/native; as a control, each
// process makes the same call again at once after the timed one (same machine phase, warm).
//
//   node bench/cold.js           # or: npm run bench -- cold (also part of the full run)
//   PI_NATIVE_BENCH_COLD_PAUSE_MS=500 PI_NATIVE_BENCH_COLD_SAMPLES=21 PI_NATIVE_BENCH_DIR=/dev/shm
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { spawn } = require('node:child_process')
const { setTimeout: sleep } = require('node:timers/promises')

const PAUSE_MS = Number(process.env.PI_NATIVE_BENCH_COLD_PAUSE_MS ?? 500)
const SAMPLES = Number(process.env.PI_NATIVE_BENCH_COLD_SAMPLES ?? 21)
const WARM_UP = 20
const LISTED = 10

/** The calls timed, in the order of a round. */
const OPS = {
  readEntry: 'readEntry',
  writeEntry: 'writeEntry',
  cas: 'writeEntryIfUnchanged, match (async CAS)',
  casSync: 'writeEntryIfUnchangedSync, match (sync CAS)',
  list: `listEntries, ${LISTED} entries`,
  probe: 'isReloadSessionProcessAlive (a live pid)',
}

/** In a child: the store under `agentDir`, one call per line read on stdin, its time on stdout. */
async function child(agentDir) {
  const lib = require('../lib/index.js')
  const { makeEntry } = require('../__test__/store-fixtures.js')
  if (lib.backend !== process.env.PI_NATIVE_BACKEND) throw new Error(`backend ${lib.backend}, asked for ${process.env.PI_NATIVE_BACKEND}`)
  for (let i = 1; i < LISTED; i++) await lib.writeEntry(agentDir, makeEntry('worker', `other-${i}`))
  let cur = makeEntry('master', 'self', { pid: process.pid })
  await lib.writeEntry(agentDir, cur)
  let beat = 0
  // A heartbeat: the next entry differs from the current one by its heartbeatAt.
  const next = () => ({ ...cur, heartbeatAt: new Date(Date.UTC(2026, 6, 19) + ++beat * 1000).toISOString() })
  const parent = process.ppid
  const run = {
    readEntry: () => lib.readEntry(agentDir, cur.entryId),
    writeEntry: () => lib.writeEntry(agentDir, cur),
    cas: async () => {
      const n = next()
      if (!(await lib.writeEntryIfUnchanged(agentDir, cur.entryId, cur, n))) throw new Error('async CAS did not match')
      cur = n
    },
    casSync: () => {
      const n = next()
      if (!lib.writeEntryIfUnchangedSync(agentDir, cur, n)) throw new Error('sync CAS did not match')
      cur = n
    },
    list: async () => {
      if ((await lib.listEntries(agentDir)).length !== LISTED) throw new Error('listEntries')
    },
    probe: () => {
      if (!lib.isReloadSessionProcessAlive(parent)) throw new Error('parent not alive')
    },
  }
  for (const op of Object.keys(OPS)) for (let i = 0; i < WARM_UP; i++) await run[op]()
  process.stdout.write('ready\n')
  let buffered = ''
  process.stdin.setEncoding('utf8')
  for await (const chunk of process.stdin) {
    buffered += chunk
    let nl
    while ((nl = buffered.indexOf('\n')) !== -1) {
      const op = buffered.slice(0, nl)
      buffered = buffered.slice(nl + 1)
      const t0 = process.hrtime.bigint()
      await run[op]()
      const t1 = process.hrtime.bigint()
      // The control: the same call again at once, in the same conditions of the machine.
      await run[op]()
      const t2 = process.hrtime.bigint()
      process.stdout.write(`${JSON.stringify({ op, ns: Number(t1 - t0), againNs: Number(t2 - t1) })}\n`)
    }
  }
}

/** A child process of `backend`, answering one call per `call(op)`. */
function startChild(backend, agentDir) {
  const p = spawn(process.execPath, [__filename, '--child', agentDir], {
    env: { ...process.env, PI_NATIVE_BACKEND: backend },
    stdio: ['pipe', 'pipe', 'inherit'],
  })
  p.stdout.setEncoding('utf8')
  const lines = []
  const waiting = []
  let buffered = ''
  p.stdout.on('data', (d) => {
    buffered += d
    let nl
    while ((nl = buffered.indexOf('\n')) !== -1) {
      const line = buffered.slice(0, nl)
      buffered = buffered.slice(nl + 1)
      if (waiting.length) waiting.shift().resolve(line)
      else lines.push(line)
    }
  })
  const exited = new Promise((resolve) => p.once('exit', resolve))
  exited.then((code) => {
    for (const w of waiting.splice(0)) w.reject(new Error(`cold bench child (${backend}) exited ${code}`))
  })
  const next = () => (lines.length ? Promise.resolve(lines.shift()) : new Promise((resolve, reject) => waiting.push({ resolve, reject })))
  return {
    ready: next(),
    async call(op) {
      p.stdin.write(`${op}\n`)
      return JSON.parse(await next())
    },
    async stop() {
      p.stdin.end()
      await exited
    },
  }
}

const percentile = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)]
}

function benchRoot() {
  const forced = process.env.PI_NATIVE_BENCH_DIR
  if (forced) return forced
  return fs.existsSync('/dev/shm') ? '/dev/shm' : os.tmpdir()
}

/** The cold rows: per call kind, js and native p50 (the row) and p90 (its note). */
async function cold() {
  const where = benchRoot()
  const root = fs.mkdtempSync(path.join(where, 'pi-native-bench-cold-'))
  const children = { native: startChild('native', path.join(root, 'n')), js: startChild('js', path.join(root, 'j')) }
  const times = Object.fromEntries(Object.keys(OPS).map((op) => [op, { native: [], js: [], nativeAgain: [], jsAgain: [] }]))
  try {
    for (const c of Object.values(children)) if ((await c.ready) !== 'ready') throw new Error('cold bench child not ready')
    await sleep(PAUSE_MS)
    for (let s = 0; s < SAMPLES; s++) {
      // Which implementation goes first alternates, round by round.
      const order = s % 2 ? ['js', 'native'] : ['native', 'js']
      for (const op of Object.keys(OPS)) {
        for (const b of order) {
          const { ns, againNs } = await children[b].call(op)
          times[op][b].push(ns)
          times[op][`${b}Again`].push(againNs)
          await sleep(PAUSE_MS)
        }
      }
    }
  } finally {
    await Promise.all(Object.values(children).map((c) => c.stop()))
    fs.rmSync(root, { recursive: true, force: true })
  }
  const { fmtNs } = require('./harness.js')
  const fs_ = where.startsWith('/dev/shm') ? ' (tmpfs)' : ''
  return Object.entries(OPS).map(([op, name]) => {
    const t = times[op]
    const p50 = { native: percentile(t.native, 50), js: percentile(t.js, 50) }
    const p90 = { native: percentile(t.native, 90), js: percentile(t.js, 90) }
    const again = { native: percentile(t.nativeAgain, 50), js: percentile(t.jsAgain, 50) }
    return {
      name: `cold: ${name}${op === 'probe' ? '' : fs_}`,
      baselineNs: p50.js,
      nativeNs: p50.native,
      ratio: p50.js / p50.native,
      met: null,
      notes:
        `one call ${PAUSE_MS} ms after any bench activity (${2 * PAUSE_MS} ms after its process's last call), ` +
        `each implementation in a process of its own, ${SAMPLES} calls each: p50 js ${fmtNs(p50.js)}, native ${fmtNs(p50.native)} ` +
        `(${(p50.js / p50.native).toFixed(2)}×); p90 js ${fmtNs(p90.js)}, native ${fmtNs(p90.native)} (${(p90.js / p90.native).toFixed(2)}×); ` +
        `control, the same call again at once: p50 js ${fmtNs(again.js)}, native ${fmtNs(again.native)} (${(again.js / again.native).toFixed(2)}×)`,
      extra: { p90JsNs: p90.js, p90NativeNs: p90.native, againJsNs: again.js, againNativeNs: again.native, pauseMs: PAUSE_MS, samples: SAMPLES },
    }
  })
}

module.exports = cold

if (require.main === module) {
  if (process.argv[2] === '--child') {
    child(process.argv[3]).catch((err) => {
      console.error(err)
      process.exit(1)
    })
  } else {
    // Alone: `node bench/cold.js` prints these rows and writes bench/results/cold.{json,md}.
    const { write } = require('./harness.js')
    cold()
      .then((results) => process.stdout.write(`${write(results, 'cold')}\n`))
      .catch((err) => {
        console.error(err)
        process.exit(1)
      })
  }
}
