'use strict'
// Process-matrix store: native vs the js/ backend (proper-lockfile + fs/promises), one run.
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { spawn } = require('node:child_process')

const { makeEntry } = require('../__test__/store-fixtures.js')
const entry = (sessionId, extra = {}) => makeEntry('worker', sessionId, { taskRef: '0', ...extra })

const percentile = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]
}

/** Read → CAS warm-up calls each child makes on an entry of its own before the start. */
const WARM_UP = 100

/**
 * N processes incrementing one counter by read → CAS → retry; throughput and latencies. With
 * `ownEntries` each process works on an entry of its own instead: the same calls with nothing
 * to contend for, i.e. the most these processes can do on this machine (the rows' ceiling).
 * Each child first makes WARM_UP read → CAS calls on an entry of its own (compiling the JS,
 * loading the addon, first-call costs), so the timed part measures the steady state.
 */
async function contended(agentDir, backends, perProcess, mode = 'async', ownEntries = false) {
  const lib = path.join(__dirname, '..', 'lib', 'index.js')
  // Each child warms up, says "ready", and starts when every child is ready and the parent
  // says "go" on its stdin (so neither process start-up nor warm-up is measured); it reports
  // its own first/last instants and per-success latencies.
  const code = `
    const s = require(${JSON.stringify(lib)})
    const [agentDir, n, id] = [process.argv[1], Number(process.argv[2]), process.argv[3]]
    const now = () => performance.timeOrigin + performance.now()
    const step = async (entryId) => {
      const cur = await s.readEntry(agentDir, entryId)
      const next = { ...cur, taskRef: String(Number(cur.taskRef) + 1) }
      try { return ${JSON.stringify(mode)} === 'sync' ? s.writeEntryIfUnchangedSync(agentDir, cur, next) : await s.writeEntryIfUnchanged(agentDir, entryId, cur, next) } catch (e) { if (e.code !== 'ELOCKED') throw e; return false }
    }
    ;(async () => {
      const warm = require(${JSON.stringify(path.join(__dirname, '..', '__test__', 'store-fixtures.js'))}).makeEntry('worker', 'warm-' + process.pid, { taskRef: '0' })
      await s.writeEntry(agentDir, warm)
      for (let i = 0; i < ${WARM_UP}; i++) await step(warm.entryId)
      await s.removeEntry(agentDir, warm.entryId)
      process.stdout.write('ready\\n')
      await new Promise((r) => process.stdin.once('data', r))
      process.stdin.destroy()
      const lat = []
      let attempts = 0
      const cpu0 = process.cpuUsage()
      const t0 = now()
      for (let done = 0; done < n; ) {
        attempts++
        const a = now()
        if (await step('worker-' + id)) { done++; lat.push(now() - a) }
      }
      const cpu = process.cpuUsage(cpu0)
      console.log(JSON.stringify({ t0, t1: now(), lat, attempts, cpuUs: cpu.user + cpu.system }))
    })()`
  const native = require('../lib/binding.js').loadNative()
  const ids = backends.map((_, i) => (ownEntries ? `own-${i}` : 'contended'))
  for (const id of new Set(ids)) await native.writeEntry(agentDir, entry(id))
  const children = backends.map((b, i) =>
    spawn(process.execPath, ['-e', code, agentDir, String(perProcess), ids[i]], {
      env: { ...process.env, PI_NATIVE_BACKEND: b },
      stdio: ['pipe', 'pipe', 'inherit'],
    }),
  )
  const outs = Promise.all(
    children.map(
      (p) =>
        new Promise((resolve, reject) => {
          let out = ''
          p.stdout.on('data', (d) => (out += d))
          p.on('close', (c) => (c === 0 ? resolve(JSON.parse(out.slice(out.indexOf('\n') + 1))) : reject(new Error(`bench child exited ${c}`))))
        }),
    ),
  )
  const ready = children.map((p) => new Promise((resolve) => p.stdout.once('data', resolve)))
  await Promise.race([Promise.all(ready), outs])
  for (const p of children) p.stdin.end('go\n')
  const results = await outs
  const seconds = (Math.max(...results.map((o) => o.t1)) - Math.min(...results.map((o) => o.t0))) / 1000
  const lat = results.flatMap((o) => o.lat)
  let final = 0
  for (const id of new Set(ids)) final += Number((await native.readEntry(agentDir, `worker-${id}`)).taskRef)
  const attempts = results.reduce((n, o) => n + o.attempts, 0)
  const cpuUs = results.reduce((n, o) => n + o.cpuUs, 0)
  return {
    attemptsPerSuccess: attempts / lat.length,
    cpuUsPerSuccess: cpuUs / lat.length,
    opsPerSec: lat.length / seconds,
    p50: percentile(lat, 50),
    p99: percentile(lat, 99),
    lost: backends.length * perProcess - final,
  }
}

/** Calls per process in a contention run (its ceiling's runs make as many). */
const PER_PROCESS = 300

/**
 * Several contention configurations (`contended`'s arguments after the folder), each run
 * `runs` times, interleaved (a, b, …, a, b, …): per configuration the run of median throughput,
 * with `lost` summed over all its runs and every run's throughput in `opsPerSecRuns`.
 */
async function contendedMedians(root, name, configs, runs = 3) {
  const all = configs.map(() => [])
  for (let r = 0; r < runs; r++) {
    for (const [i, c] of configs.entries()) all[i].push(await contended(path.join(root, `${name}-${i}-${r}`), ...c))
  }
  return all.map((xs) => {
    const median = [...xs].sort((a, b) => a.opsPerSec - b.opsPerSec)[(xs.length - 1) >> 1]
    return { ...median, lost: xs.reduce((n, x) => n + x.lost, 0), opsPerSecRuns: xs.map((x) => x.opsPerSec) }
  })
}

/** The throughputs of every run behind a median pair. */
const runsText = (nat, j) =>
  `median of ${nat.opsPerSecRuns.length} interleaved runs of ${PER_PROCESS} successes per process after ${WARM_UP} warm-up calls ` +
  `(ops/s native ${nat.opsPerSecRuns.map((x) => x.toFixed(0)).join(', ')}; js ${j.opsPerSecRuns.map((x) => x.toFixed(0)).join(', ')})`

/** What a success costs under contention: read → CAS attempts, and CPU time of all processes. */
const contentionCost = (nat, j) =>
  `attempts per success native ${nat.attemptsPerSuccess.toFixed(1)}, js ${j.attemptsPerSuccess.toFixed(1)}; ` +
  `CPU per success native ${(nat.cpuUsPerSuccess / 1000).toFixed(2)} ms, js ${(j.cpuUsPerSuccess / 1000).toFixed(2)} ms`

/** Medians (ns per call) of several async functions, over `rounds` interleaved batches of `n` calls each. */
async function interleavedMedians(fns, n = 300, rounds = 9) {
  const xs = Object.fromEntries(Object.keys(fns).map((k) => [k, []]))
  for (let r = 0; r < rounds; r++) {
    for (const [k, fn] of Object.entries(fns)) {
      const t = process.hrtime.bigint()
      for (let i = 0; i < n; i++) await fn()
      xs[k].push(Number(process.hrtime.bigint() - t) / n)
    }
  }
  return Object.fromEntries(Object.entries(xs).map(([k, v]) => [k, v.sort((a, b) => a - b)[(rounds - 1) >> 1]]))
}

/** Median wall time (ns) of `fn` (async), over `rounds` batches of `n` calls. */
const medianAsync = async (fn, n = 500, rounds = 9) => (await interleavedMedians({ fn }, n, rounds)).fn

/**
 * Median kernel CPU time (ns) per call of `fn` (sync): what its syscalls cost, whoever makes them.
 * Each round lasts at least `minMs`: where the kernel splits CPU time into user and system by
 * sampling at its tick (CONFIG_TICK_CPU_ACCOUNTING, 4 ms at HZ=250, as on this VM), a round of a
 * few ms holds zero or one sample and read 0.0 µs for a 4 µs read.
 */
function kernelNs(fn, minMs = 100, rounds = 9) {
  const xs = []
  for (let r = 0; r < rounds; r++) {
    const c = process.cpuUsage()
    const t0 = performance.now()
    let n = 0
    do {
      for (let i = 0; i < 100; i++) fn()
      n += 100
    } while (performance.now() - t0 < minMs)
    xs.push((process.cpuUsage(c).system * 1000) / n)
  }
  return xs.sort((a, b) => a - b)[(rounds - 1) >> 1]
}

/**
 * Where the store benchmarks run: tmpfs when there is one. On this VM's ext4 a directory
 * create+remove and a file create+rename cost ~300 µs each — the same for any implementation,
 * so the disk hides the library's own cost; a "(disk)" row shows the end-to-end figure too.
 */
function benchRoot() {
  const forced = process.env.PI_NATIVE_BENCH_DIR
  if (forced) return forced
  return fs.existsSync('/dev/shm') ? '/dev/shm' : os.tmpdir()
}

module.exports = Object.assign(async function store({ compare, native, js }) {
  const where = benchRoot()
  const root = fs.mkdtempSync(path.join(where, 'pi-native-bench-store-'))
  const diskRoot = fs.mkdtempSync(path.join(os.tmpdir(), 'pi-native-bench-store-disk-'))
  const dirs = { native: path.join(root, 'n'), js: path.join(root, 'j') }
  const results = []
  try {
    for (const [k, impl] of [['native', native], ['js', js]]) await impl.writeEntry(dirs[k], entry('one'))
    const e = entry('one')
    results.push(
      await compare({
        name: 'readEntry',
        baseline: () => js.readEntry(dirs.js, 'worker-one'),
        native: () => native.readEntry(dirs.native, 'worker-one'),
        async: true,
        iterations: 200,
        target: 4,
        targetText: '≥ 4×',
      }),
    )
    results.push(
      await compare({
        name: 'writeEntry',
        baseline: () => js.writeEntry(dirs.js, e),
        native: () => native.writeEntry(dirs.native, e),
        async: true,
        iterations: 100,
        target: 6,
        targetText: '≥ 6×',
      }),
    )
    results.push(
      await compare({
        name: 'writeEntryIfUnchanged, match (async CAS)',
        baseline: () => js.writeEntryIfUnchanged(dirs.js, 'worker-one', e, e),
        native: () => native.writeEntryIfUnchanged(dirs.native, 'worker-one', e, e),
        async: true,
        iterations: 100,
        target: 8,
        targetText: '≥ 8×',
      }),
    )
    const disk = { native: path.join(diskRoot, 'n'), js: path.join(diskRoot, 'j') }
    for (const [k, impl] of [['native', native], ['js', js]]) await impl.writeEntry(disk[k], entry('one'))
    results.push(
      await compare({
        name: 'writeEntryIfUnchanged, match (async CAS) (disk)',
        baseline: () => js.writeEntryIfUnchanged(disk.js, 'worker-one', e, e),
        native: () => native.writeEntryIfUnchanged(disk.native, 'worker-one', e, e),
        async: true,
        iterations: 50,
        rounds: 9,
      }),
    )
    const stale = { ...e, pid: 1 }
    results.push(
      await compare({
        name: 'writeEntryIfUnchanged, mismatch (async CAS)',
        baseline: () => js.writeEntryIfUnchanged(dirs.js, 'worker-one', stale, e),
        native: () => native.writeEntryIfUnchanged(dirs.native, 'worker-one', stale, e),
        async: true,
        iterations: 100,
        target: 8,
        targetText: '≥ 8×',
      }),
    )
    results.push(
      await compare({
        name: 'writeEntryIfUnchangedSync, match (sync CAS)',
        baseline: () => js.writeEntryIfUnchangedSync(dirs.js, e, e),
        native: () => native.writeEntryIfUnchangedSync(dirs.native, e, e),
        iterations: 100,
        target: 2.5,
        targetText: '≥ 2.5×',
      }),
    )
    // Floors (a row that misses its target must show a measured physical limit). An async call
    // costs at least one round trip to a thread and back — Node's own fs.promises.stat is that
    // round trip plus one statx — and every call costs at least the kernel time of its syscalls
    // (measured on the native sync path, which makes the same ones).
    {
      const file = native.entryPath(dirs.native, 'worker-one')
      const hop = await medianAsync(() => fs.promises.stat(file))
      const kRead = kernelNs(() => fs.readFileSync(file))
      const kCas = kernelNs(() => native.writeEntryIfUnchangedSync(dirs.native, e, e))
      const floors = {
        // A cached read is made on the JS thread (ARCHITECTURE.md, "Reads on the JS thread").
        readEntry: [kRead, 'kernel time of the read\'s syscalls'],
        'writeEntryIfUnchanged, match (async CAS)': [hop + kCas, 'one libuv round trip + the CAS\'s 13 syscalls'],
        // A certain mismatch is answered on the JS thread (ARCHITECTURE.md, "CAS mismatches on
        // the JS thread"): the lock's lookup and the entry's read, no round trip.
        'writeEntryIfUnchanged, mismatch (async CAS)': [kRead, 'kernel time of the entry\'s read, answered on the JS thread'],
        'writeEntryIfUnchangedSync, match (sync CAS)': [kCas, 'kernel time of its 13 syscalls'],
      }
      // A control for the async rows, closer to what the call does than the additive floor: one
      // libuv round trip and then the same work run synchronously on the JS thread (so with
      // every thread wake-up and cache miss a real hop brings), interleaved with the call itself.
      const sameCas = (expected) => ({
        control: async () => {
          await fs.promises.stat(file)
          native.writeEntryIfUnchangedSync(dirs.native, expected, e)
        },
        async: () => native.writeEntryIfUnchanged(dirs.native, 'worker-one', expected, e),
      })
      const controls = {
        // readEntry has no sync twin: the control reads and parses the file with Node's own
        // readFileSync and JSON.parse (the same four syscalls, without the validation), on the
        // JS thread as a cached read is made, and awaits it as readEntry's caller does.
        readEntry: await interleavedMedians({
          control: async () => JSON.parse(fs.readFileSync(file, 'utf8')),
          async: () => native.readEntry(dirs.native, 'worker-one'),
        }),
        'writeEntryIfUnchanged, match (async CAS)': await interleavedMedians(sameCas(e)),
        // The same mismatch found under the lock, on the JS thread (the sync CAS), no round trip.
        'writeEntryIfUnchanged, mismatch (async CAS)': await interleavedMedians({
          control: async () => native.writeEntryIfUnchangedSync(dirs.native, stale, e),
          async: () => native.writeEntryIfUnchanged(dirs.native, 'worker-one', stale, e),
        }),
      }
      for (const r of results) {
        const f = floors[r.name]
        if (!f) continue
        const us = (ns) => `${(ns / 1000).toFixed(1)} µs`
        r.floorNs = f[0]
        r.notes = `floor ${us(f[0])} (${f[1]}; one hop ${us(hop)}) → best reachable ratio ${(r.baselineNs / f[0]).toFixed(2)}×; native is ${(r.nativeNs / f[0]).toFixed(2)}× its floor`
        const c = controls[r.name]
        if (c) {
          const what = {
            readEntry: 'the file read and parsed on the JS thread (readFileSync, JSON.parse)',
            'writeEntryIfUnchanged, mismatch (async CAS)': 'the same mismatch found under the lock by the sync CAS, on the JS thread',
          }[r.name] ?? 'one libuv round trip, then the same CAS synchronously on the JS thread'
          r.notes +=
            `; control (${what}) ${us(c.control)}, ` +
            `native interleaved with it ${us(c.async)} (${(c.async / c.control).toFixed(2)}× the control)`
          r.extra = { ...r.extra, controlNs: c.control, asyncNs: c.async }
        }
      }
    }
    for (const count of [10, 100, 1000]) {
      for (const [k, impl] of [['native', native], ['js', js]]) {
        const d = path.join(root, `list-${count}-${k}`)
        for (let i = 0; i < count; i++) await impl.writeEntry(d, entry(`l${i}`))
      }
      results.push(
        await compare({
          name: `listEntries, ${count} entries`,
          baseline: () => js.listEntries(path.join(root, `list-${count}-js`)),
          native: () => native.listEntries(path.join(root, `list-${count}-native`)),
          async: true,
          iterations: count >= 1000 ? 2 : count >= 100 ? 10 : 50,
          rounds: count >= 1000 ? 7 : 11,
          target: count === 1000 ? 15 : undefined,
          targetText: count === 1000 ? '≥ 15×' : undefined,
        }),
      )
    }
    // The ceiling of an 8-process row: the same processes and calls, each on an entry of its
    // own (nothing to contend for). Throughput under contention cannot exceed it, so ceiling /
    // js is the best ratio this machine allows the row.
    const ceilingNote = (label, nat, j, natFree, jsFree) =>
      `ceiling (${label}, 8 processes each on its own entry): native ${natFree.opsPerSec.toFixed(0)} ops/s ` +
      `(CPU per success ${(natFree.cpuUsPerSuccess / 1000).toFixed(2)} ms), js ${jsFree.opsPerSec.toFixed(0)} ops/s → best reachable ratio ` +
      `${(natFree.opsPerSec / j.opsPerSec).toFixed(1)}×; under contention native keeps ${((100 * nat.opsPerSec) / natFree.opsPerSec).toFixed(0)}% ` +
      `of its ceiling, js ${((100 * j.opsPerSec) / jsFree.opsPerSec).toFixed(0)}% of its own`
    let asyncRow // the 8-process async row, whose note the sync rows extend
    for (const n of [1, 2, 4, 8]) {
      const configs = [
        [Array(n).fill('js'), PER_PROCESS],
        [Array(n).fill('native'), PER_PROCESS],
        ...(n === 8
          ? [
              [Array(8).fill('native'), PER_PROCESS, 'async', true],
              [Array(8).fill('js'), PER_PROCESS, 'async', true],
            ]
          : []),
      ]
      const [j, nat, natFree, jsFree] = await contendedMedians(root, `c-${n}`, configs)
      const ratio = nat.opsPerSec / j.opsPerSec
      const ceiling = n === 8 ? ceilingNote('async', nat, j, natFree, jsFree) : null
      const row = {
        name: `contended CAS, ${n} process${n > 1 ? 'es' : ''} (throughput)`,
        baselineNs: 1e9 / j.opsPerSec,
        nativeNs: 1e9 / nat.opsPerSec,
        ratio,
        target: n === 8 ? 20 : undefined,
        targetText: n === 8 ? '≥ 20× throughput, 0 lost' : undefined,
        met: n === 8 ? ratio >= 20 && nat.lost === 0 && j.lost === 0 : null,
        notes: `${runsText(nat, j)}; native ${nat.opsPerSec.toFixed(0)} ops/s p50 ${nat.p50.toFixed(2)} ms p99 ${nat.p99.toFixed(2)} ms lost ${nat.lost}; js ${j.opsPerSec.toFixed(0)} ops/s p50 ${j.p50.toFixed(2)} ms p99 ${j.p99.toFixed(2)} ms lost ${j.lost}; ${contentionCost(nat, j)}${ceiling ? `; ${ceiling}` : ''}`,
      }
      results.push(row)
      if (n === 8) asyncRow = row
    }
    {
      const [j, nat, natFree, jsFree] = await contendedMedians(root, 'cs-8', [
        [Array(8).fill('js'), PER_PROCESS, 'sync'],
        [Array(8).fill('native'), PER_PROCESS, 'sync'],
        [Array(8).fill('native'), PER_PROCESS, 'sync', true],
        [Array(8).fill('js'), PER_PROCESS, 'sync', true],
      ])
      const ratio = nat.opsPerSec / j.opsPerSec
      const ceiling = ceilingNote('sync', nat, j, natFree, jsFree)
      // The async row's bound without the thread hop either: the same 8 processes, with
      // nothing to contend for and every CAS on the JS thread, against the JS backend's
      // contended async throughput (its row's baseline).
      asyncRow.notes +=
        `; with no thread hop either (the sync ceiling below, ${natFree.opsPerSec.toFixed(0)} ops/s), native reaches ` +
        `${((natFree.opsPerSec * asyncRow.baselineNs) / 1e9).toFixed(1)}× this row's js throughput`
      results.push({
        name: 'contended sync CAS, 8 processes (throughput)',
        baselineNs: 1e9 / j.opsPerSec,
        nativeNs: 1e9 / nat.opsPerSec,
        ratio,
        target: 5,
        targetText: '≥ 5× throughput, 0 lost',
        met: ratio >= 5 && nat.lost === 0 && j.lost === 0,
        notes: `${runsText(nat, j)}; native ${nat.opsPerSec.toFixed(0)} ops/s p50 ${nat.p50.toFixed(2)} ms p99 ${nat.p99.toFixed(2)} ms lost ${nat.lost}; js ${j.opsPerSec.toFixed(0)} ops/s p50 ${j.p50.toFixed(2)} ms p99 ${j.p99.toFixed(2)} ms lost ${j.lost}; ${contentionCost(nat, j)}; ${ceiling}`,
      })
    }
    const mixed = await contended(path.join(root, 'c-mixed'), ['native', 'js', 'native', 'js', 'native', 'js', 'native', 'js'], PER_PROCESS)
    results.push({
      name: 'contended CAS, 8 processes mixed native + js',
      baselineNs: NaN,
      nativeNs: 1e9 / mixed.opsPerSec,
      ratio: NaN,
      met: mixed.lost === 0 ? null : false,
      targetText: '0 lost',
      notes: `${mixed.opsPerSec.toFixed(0)} ops/s p50 ${mixed.p50.toFixed(2)} ms p99 ${mixed.p99.toFixed(2)} ms lost ${mixed.lost}`,
    })
  } finally {
    fs.rmSync(root, { recursive: true, force: true })
    fs.rmSync(diskRoot, { recursive: true, force: true })
  }
  for (const r of results) if (!r.name.endsWith('(disk)')) r.name += where.startsWith('/dev/shm') ? ' (tmpfs)' : ''
  return results
}, { contended })
