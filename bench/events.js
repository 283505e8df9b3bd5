'use strict'
// Supervision events: how soon a death and an entry change are known, and what
// watching costs while nothing happens. Run alone: `npm run bench -- events`.
//
//  - SIGKILL → waitForProcessExit settles, p50/p99: native (the kernel's notice) against the
//    hosts' polling at their interval (a timer per supervised pid at a random phase probing
//    isReloadSessionProcessAlive, every PI_NATIVE_BENCH_HOST_INTERVAL_MS, default 25 s: the
//    watcher poll of SPEC §1.B) and against the JS backend (probing every 250 ms).
//  - 1,000 live pids watched, nothing happening: threads added, CPU and context switches (all
//    threads of the process, voluntary + involuntary: every wake-up is one) per second, for
//    native, the JS backend's probing and the hosts' timers. Linux (/proc/self/task).
//  - another process's writeEntry → watchEntries event, p50/p99: native against the JS backend
//    (fs.watch).
//  - memory of a watch while 100,000 distinct entries are created and removed over time (a
//    worker thread writes them, 1,000 at a time): RSS and heap after a full GC at 10,000 and at
//    the end, with a consumer that reads every event and with one that has stopped reading.
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { spawn } = require('node:child_process')
const { makeEntry } = require('../__test__/store-fixtures.js')

const LIB = path.join(__dirname, '..', 'lib', 'index.js')
const HOST_INTERVAL_MS = Number(process.env.PI_NATIVE_BENCH_HOST_INTERVAL_MS ?? 25000)
/** The quiet window measured before and after 1,000 waits are set up. */
const IDLE_WINDOW_MS = 5000
const now = () => performance.timeOrigin + performance.now()
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

const percentile = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)]
}

/** `n` processes that sleep for `seconds` (`sleep`; Node itself where there is none). */
async function sleepers(n, seconds = 600) {
  const kids = []
  for (let i = 0; i < n; i++) {
    kids.push(
      process.platform === 'win32'
        ? spawn(process.execPath, ['-e', `setTimeout(() => {}, ${seconds * 1000})`], { stdio: 'ignore' })
        : spawn('sleep', [String(seconds)], { stdio: 'ignore' }),
    )
  }
  await Promise.all(kids.map((k) => new Promise((r) => k.once('spawn', r))))
  return kids
}

/** Kill → settle latencies (ms) of `samples` waits made with `lib`, one death at a time. */
async function exitLatencies(lib, samples, gapMs) {
  const out = []
  const kids = await sleepers(samples)
  for (const k of kids) {
    const settled = lib.waitForProcessExit(k.pid).then(now)
    // Somewhere in a probing interval, as a real death would fall.
    await sleep(gapMs + Math.random() * gapMs)
    const t = now()
    k.kill('SIGKILL')
    out.push((await settled) - t)
  }
  return out
}

/**
 * The hosts' way: a probe timer per pid, started at a random phase of the interval (workers
 * start at any time), all pids killed at once: each is noticed at its timer's next tick.
 */
async function hostPollingLatencies(lib, samples) {
  const kids = await sleepers(samples)
  const t = now()
  for (const k of kids) k.kill('SIGKILL')
  const noticed = kids.map(
    (k) =>
      new Promise((resolve) => {
        let timer
        const tick = () => {
          if (!lib.isReloadSessionProcessAlive(k.pid)) {
            clearInterval(timer)
            resolve(now() - t)
          }
        }
        setTimeout(() => {
          tick()
          timer = setInterval(tick, HOST_INTERVAL_MS)
        }, Math.random() * HOST_INTERVAL_MS)
      }),
  )
  return Promise.all(noticed)
}

/**
 * In a fresh process: watch `pids` by `mode` (`native`, `js`, `host-timers`) and measure a quiet
 * `windowMs` before and after: threads, CPU and context switches of all its threads.
 */
function idleCost(mode, pids, windowMs) {
  const script = `
    const fs = require('node:fs')
    process.env.PI_NATIVE_BACKEND = ${JSON.stringify(mode === 'js' ? 'js' : 'native')}
    const lib = require(${JSON.stringify(LIB)})
    const pids = JSON.parse(process.argv[1])
    const sample = () => {
      let switches = 0
      let waiter = 0 // the supervision waiter's own (thread name pi-native-supervise)
      const tasks = fs.readdirSync('/proc/self/task')
      for (const t of tasks) {
        const status = fs.readFileSync('/proc/self/task/' + t + '/status', 'utf8')
        const n = Number(/voluntary_ctxt_switches:\\s+(\\d+)/.exec(status)[1]) + Number(/nonvoluntary_ctxt_switches:\\s+(\\d+)/.exec(status)[1])
        switches += n
        if (/^Name:\\s+pi-native-supe/m.test(status)) waiter += n
      }
      const cpu = process.cpuUsage()
      return { threads: tasks.length, switches, waiter, cpuUs: cpu.user + cpu.system, at: performance.now() }
    }
    const measure = async (ms) => {
      const a = sample()
      await new Promise((r) => setTimeout(r, ms))
      const b = sample()
      const s = (b.at - a.at) / 1000
      return { threads: b.threads, switchesPerS: (b.switches - a.switches) / s, waiterSwitches: b.waiter - a.waiter, cpuMsPerS: (b.cpuUs - a.cpuUs) / 1000 / s }
    }
    ;(async () => {
      await new Promise((r) => setTimeout(r, 1000)) // start-up settles
      const before = await measure(${windowMs})
      const ac = new AbortController()
      if (${JSON.stringify(mode)} === 'host-timers') {
        for (const pid of pids) setInterval(() => lib.isReloadSessionProcessAlive(pid), ${HOST_INTERVAL_MS}).unref()
      } else {
        for (const pid of pids) lib.waitForProcessExit(pid, { signal: ac.signal, ref: false }).catch(() => {})
      }
      // Start-up of the waits settles (and the garbage their set-up made is collected).
      await new Promise((r) => setTimeout(r, 2000))
      const after = await measure(${windowMs})
      ac.abort()
      console.log(JSON.stringify({ before, after, mode: lib.exitWatchMode() }))
      process.exit(0)
    })()`
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['-e', script, JSON.stringify(pids)], { stdio: ['ignore', 'pipe', 'inherit'] })
    let out = ''
    child.stdout.on('data', (d) => (out += d))
    child.once('exit', (code) => (code === 0 ? resolve(JSON.parse(out)) : reject(new Error(`idle cost (${mode}) exited ${code}`))))
  })
}

/** Another process writes an entry `writes` times; lags (ms) from each writeEntry call to its event. */
async function entryLatencies(lib, backend, writes) {
  const agentDir = fs.mkdtempSync(path.join(os.tmpdir(), 'pi-native-bench-events-'))
  const entry = makeEntry('worker', 'bench')
  await lib.writeEntry(agentDir, entry)
  const ac = new AbortController()
  const seen = new Map()
  const consumer = (async () => {
    for await (const ev of lib.watchEntries(agentDir, { signal: ac.signal })) {
      if (ev.entry) seen.set(ev.entry.taskRef, now())
    }
  })().catch(() => {})
  const script = `
    process.env.PI_NATIVE_BACKEND = ${JSON.stringify(backend)}
    const s = require(${JSON.stringify(LIB)})
    const [agentDir, entryJson, n] = process.argv.slice(1)
    const entry = JSON.parse(entryJson)
    ;(async () => {
      const starts = []
      for (let i = 0; i < Number(n); i++) {
        await new Promise((r) => setTimeout(r, 15 + Math.random() * 15))
        starts.push(performance.timeOrigin + performance.now())
        await s.writeEntry(agentDir, { ...entry, taskRef: String(i) })
      }
      console.log(JSON.stringify(starts))
    })()`
  const child = spawn(process.execPath, ['-e', script, agentDir, JSON.stringify(entry), String(writes)], { stdio: ['ignore', 'pipe', 'inherit'] })
  let out = ''
  child.stdout.on('data', (d) => (out += d))
  await new Promise((r) => child.once('exit', r))
  const starts = JSON.parse(out)
  await sleep(500)
  ac.abort()
  await consumer
  fs.rmSync(agentDir, { recursive: true, force: true })
  const lags = []
  starts.forEach((t, i) => {
    if (seen.has(String(i))) lags.push(seen.get(String(i)) - t)
  })
  return { lags, missed: writes - lags.length }
}

/**
 * A fresh process watches (initial: true) while a worker thread there creates and removes `n`
 * distinct entries, 1,000 at a time with a 10 ms pause; `paused`: the consumer reads one event
 * and then stops. Returns `{ samples: [{ written, rss, heap }], events }`, each sample after a
 * full GC (every 10,000 entries, and 1 s after the last).
 */
function watchMemory(backend, n, paused) {
  const script = `
    const { Worker } = require('node:worker_threads')
    const fs = require('node:fs')
    const path = require('node:path')
    const s = require(${JSON.stringify(path.join(__dirname, '..', backend === 'native' ? 'lib/native.js' : 'js/index.js'))})
    const [agentDir, n, paused, text] = process.argv.slice(1)
    const dir = path.join(agentDir, 'state', 'process-matrix')
    fs.mkdirSync(dir, { recursive: true })
    const samples = []
    const sample = (written) => {
      global.gc()
      const m = process.memoryUsage()
      samples.push({ written, rss: m.rss, heap: m.heapUsed })
    }
    let events = 0
    const it = s.watchEntries(agentDir, { initial: true })
    ;(async () => {
      for await (const _ of it) {
        events++
        if (paused === '1') await new Promise(() => {}) // stops reading, the watch stays open
      }
    })()
    const w = new Worker(\`
      const fs = require('node:fs')
      const path = require('node:path')
      const { workerData: { dir, n, text }, parentPort } = require('node:worker_threads')
      ;(async () => {
        for (let i = 0; i < n; i++) {
          const file = path.join(dir, 'worker-mem-' + i + '.json')
          fs.writeFileSync(file, text.replaceAll('SID', 'mem-' + i))
          fs.unlinkSync(file)
          if (i % 1000 === 999) {
            await new Promise((r) => setTimeout(r, 10))
            if ((i + 1) % 10000 === 0) parentPort.postMessage(i + 1)
          }
        }
      })()\`, { eval: true, workerData: { dir, n: Number(n), text } })
    w.on('message', (written) => sample(written))
    w.once('exit', () => setTimeout(() => {
      sample(Number(n))
      console.log(JSON.stringify({ samples, events }))
      process.exit(0)
    }, 1000))`
  const agentDir = fs.mkdtempSync(path.join(os.tmpdir(), 'pi-native-bench-mem-'))
  const text = `${JSON.stringify(makeEntry('worker', 'SID'), null, '\t')}\n`
  const r = require('node:child_process').spawnSync(process.execPath, ['--expose-gc', '-e', script, agentDir, String(n), paused ? '1' : '0', text], {
    encoding: 'utf8',
    maxBuffer: 1 << 24,
  })
  fs.rmSync(agentDir, { recursive: true, force: true })
  if (r.status !== 0) throw new Error(`watch memory (${backend}): ${r.stderr}`)
  return JSON.parse(r.stdout.trim().split('\n').at(-1))
}

const ms = (x) => `${x.toFixed(x < 10 ? 2 : 1)} ms`
const mib = (x) => `${(x / 2 ** 20).toFixed(1)} MiB`

module.exports = async function events({ native, js }) {
  const results = []
  const load = os.loadavg()[0].toFixed(1)

  // ---- SIGKILL → settle ----
  process.stderr.write(`bench events: exits (native, JS backend, then host polling every ${HOST_INTERVAL_MS} ms)…\n`)
  const nat = await exitLatencies(native, 200, 10)
  const probe = await exitLatencies(js, 40, 125)
  const host = await hostPollingLatencies(native, 100)
  for (const p of [50, 99]) {
    const n = percentile(nat, p)
    const h = percentile(host, p)
    results.push({
      name: `SIGKILL → waitForProcessExit settles, p${p}: hosts' polling at ${HOST_INTERVAL_MS / 1000} s vs native (${native.exitWatchMode()})`,
      baselineNs: h * 1e6,
      nativeNs: n * 1e6,
      ratio: h / n,
      targetText: p === 99 ? 'native ≤ 10 ms' : undefined,
      met: p === 99 ? n <= 10 : null,
      notes:
        p === 99
          ? `native ${nat.length} deaths one at a time: p50 ${ms(percentile(nat, 50))}, p99 ${ms(n)}, max ${ms(Math.max(...nat))}; ` +
            `JS backend (probing every 250 ms), ${probe.length} deaths: p50 ${ms(percentile(probe, 50))}, p99 ${ms(percentile(probe, 99))}; ` +
            `hosts' timers, ${host.length} pids at random phases: p50 ${ms(percentile(host, 50))}, p99 ${ms(h)}; load average ${load}`
          : undefined,
    })
  }

  // ---- 1,000 idle watched pids ----
  if (process.platform === 'linux') {
    process.stderr.write('bench events: 1,000 watched pids, idle…\n')
    const kids = await sleepers(1000)
    const pids = kids.map((k) => k.pid)
    const cost = {}
    for (const mode of ['native', 'js', 'host-timers']) cost[mode] = await idleCost(mode, pids, IDLE_WINDOW_MS)
    for (const k of kids) k.kill('SIGKILL')
    const d = (c) => ({
      threads: c.after.threads - c.before.threads,
      switches: c.after.switchesPerS - c.before.switchesPerS,
      cpu: c.after.cpuMsPerS - c.before.cpuMsPerS,
    })
    const dn = d(cost.native)
    const dj = d(cost.js)
    const dh = d(cost['host-timers'])
    const fmt = (c, x) =>
      `${x.threads >= 0 ? '+' : ''}${x.threads} threads, ${c.after.switchesPerS.toFixed(1)} switches/s (idle before: ${c.before.switchesPerS.toFixed(1)}), CPU ${c.after.cpuMsPerS.toFixed(2)} ms/s (before ${c.before.cpuMsPerS.toFixed(2)})`
    results.push({
      name: '1,000 watched live pids, idle: wake-ups/s added (context switches, all threads), JS backend probing vs native',
      unit: '/s',
      baselineValue: dj.switches,
      nativeValue: dn.switches,
      ratio: NaN,
      targetText: 'native: 0 wake-ups/s added',
      // The waiter's own wake-ups decide; the whole process's also count V8's and libuv's
      // threads, which the hosts' timers row shows wake up as often without any native wait.
      met: cost.native.after.waiterSwitches === 0 && dn.threads <= 1,
      notes:
        `native (${cost.native.mode}): ${fmt(cost.native, dn)}, the waiter thread ${cost.native.after.waiterSwitches} wake-ups in ${IDLE_WINDOW_MS / 1000} s; ` +
        `JS backend (probe every 250 ms): ${fmt(cost.js, dj)}; hosts' timers (one per pid, ${HOST_INTERVAL_MS / 1000} s): ${fmt(cost['host-timers'], dh)}`,
    })
  }

  // ---- writeEntry in another process → event ----
  process.stderr.write('bench events: entry changes from another process…\n')
  const en = await entryLatencies(native, 'native', 200)
  const ej = await entryLatencies(js, 'js', 200)
  for (const p of [50, 99]) {
    const n = percentile(en.lags, p)
    const j = percentile(ej.lags, p)
    results.push({
      name: `another process's writeEntry → watchEntries event, p${p}: JS backend (fs.watch) vs native (${native.entryWatchMode()})`,
      baselineNs: j * 1e6,
      nativeNs: n * 1e6,
      ratio: j / n,
      targetText: 'native ≤ 50 ms',
      met: n <= 50,
      notes:
        p === 99
          ? `from the writeEntry call (its lock, temp file and rename included); native ${en.lags.length} writes seen, ${en.missed} coalesced; JS ${ej.lags.length} seen, ${ej.missed} coalesced; load average ${load}`
          : undefined,
    })
  }
  // ---- memory of a watch over 100,000 distinct entries ----
  process.stderr.write('bench events: a watch while 100,000 distinct entries come and go…\n')
  for (const paused of [false, true]) {
    const runs = {}
    for (const backend of ['native', 'js']) runs[backend] = watchMemory(backend, 100000, paused)
    // Over the second half while the writer still runs (60,000 → 90,000: by the 100,000th the
    // writer thread is going away): memory that grew with the entries seen would grow here as
    // before. The first half includes V8's young generation growing to its working size.
    const growth = (r) => {
      const from = r.samples.find((x) => x.written === 60000)
      const to = r.samples.find((x) => x.written === 90000)
      return { rss: to.rss - from.rss, heap: to.heap - from.heap }
    }
    const gn = growth(runs.native)
    const gj = growth(runs.js)
    const describe = (r, g) =>
      `RSS every 10,000 entries ${r.samples.map((x) => mib(x.rss)).join(' → ')} (the last 1 s after the writer ended); from 60,000 to 90,000: RSS ${g.rss >= 0 ? '+' : ''}${mib(g.rss)}, heap ${g.heap >= 0 ? '+' : ''}${mib(g.heap)}; ${r.events} events`
    results.push({
      name: `100,000 distinct entries created and removed under a watch, ${paused ? 'consumer stopped reading' : 'consumer reading'}: RSS growth from 60,000 to 90,000, JS backend vs native`,
      unit: ' MiB',
      baselineValue: gj.rss / 2 ** 20,
      nativeValue: gn.rss / 2 ** 20,
      ratio: NaN,
      targetText: 'native: flat (RSS < 2 MiB, heap < 1 MiB)',
      met: gn.rss < 2 * 2 ** 20 && gn.heap < 2 ** 20,
      notes: `native: ${describe(runs.native, gn)}; JS backend: ${describe(runs.js, gj)}`,
    })
  }
  return results
}
