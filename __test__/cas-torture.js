'use strict'
// The SIGKILL torture of issue 28 ("Also seen"): 4 writer processes on 3 entries of one agentDir
// on tmpfs, two of them sharing one entry; each loops read → bump → CAS with no pause, async or
// sync at random, retrying on `false` and on ELOCKED; writers are SIGKILLed at random and
// started again; a reader lists the matrix meanwhile. Used by cas-torture.isolated.test.js and
// runnable alone for long local runs:
//   node __test__/cas-torture.js [--runs N] [--seconds S] [--backend native|js] [--trace DIR]
//     [--first-kill MS] [--kill-every MIN-MAX] [--modes M0,M1,M2,M3 (random|sync|async each)]
//     [--killable 0,1,2,3] [--strace W (writer W's first start under strace, into DIR)]
//     [--holder HOLD-PAUSE (this process holds the shared lock HOLD ms every HOLD+PAUSE ms)]
// which prints one JSON line per run and a summary: times to first success per kind of start,
// and per writer start the longest stretch without a success.
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { spawn } = require('node:child_process')
const { makeEntry } = require('./store-fixtures.js')

const CHILD = path.join(__dirname, 'cas-torture-child.js')
const ENTRIES = ['worker-shared', 'worker-solo-1', 'worker-solo-2']
/** Writer i's entry: writers 0 and 1 share the first one. */
const WRITERS = [ENTRIES[0], ENTRIES[0], ENTRIES[1], ENTRIES[2]]
const now = () => performance.timeOrigin + performance.now()
/** How long after a kill a lock the killed writer left may still be in the way (see maxClearGap). */
const LEFT_LOCK_MS = 2600
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

/** Parse a writer's log (see cas-torture-child.js). */
function parseLog(file) {
  const out = { start: undefined, tries: [], oks: [], attempts: [], error: undefined }
  let text = ''
  try {
    text = fs.readFileSync(file, 'utf8')
  } catch {}
  for (const l of text.split('\n')) {
    const f = l.split(' ')
    if (f[0] === 's') out.start = Number(f[1])
    else if (f[0] === 't' && f.length === 3) out.tries.push({ t: Number(f[1]), v: Number(f[2]) })
    else if (f[0] === 'k' && f.length === 3) out.oks.push({ t: Number(f[1]), v: Number(f[2]) })
    else if (f[0] === 'a' && f.length === 7)
      out.attempts.push({ t0: +f[1], tRead: +f[2], tEnd: +f[3], v: +f[4], mode: f[5], outcome: f[6] })
    else if (f[0] === 'e') out.error = l
  }
  return out
}

/**
 * One torture run. Resolves a report: final values, successes, lost/duplicated updates, and per
 * writer start the time to its first success (censored at its end when it had none).
 */
async function torture({
  backend = 'native',
  seconds = 10,
  firstKill = 2000,
  killEvery = [300, 1500],
  trace = false,
  traceDir,
  /** Each writer's CAS: 'random' (sync or async at random, per attempt), 'sync' or 'async'. */
  modes = ['random', 'random', 'random', 'random'],
  /** Writer index whose first start runs under strace (a diagnostic: it slows that writer). */
  strace,
  /** The writers that may be killed. */
  killable = [0, 1, 2, 3],
  /**
   * [hold, pause] ms: this process also takes the shared entry's lock (as proper-lockfile
   * does: one mkdir, retried) and keeps it `hold` ms, then leaves it `pause` ms, over and over,
   * like a host's long `withFileLock` beside the writers (under 2 s: it is not refreshed).
   */
  holder,
  where = fs.existsSync('/dev/shm') ? '/dev/shm' : os.tmpdir(),
} = {}) {
  const agentDir = fs.mkdtempSync(path.join(where, 'pi-native-torture-'))
  const logDir = traceDir ?? fs.mkdtempSync(path.join(where, 'pi-native-torture-log-'))
  fs.mkdirSync(logDir, { recursive: true })
  const matrix = path.join(agentDir, 'state', 'process-matrix')
  fs.mkdirSync(matrix, { recursive: true })
  for (const id of ENTRIES) {
    const e = makeEntry('worker', id.slice('worker-'.length), { taskRef: '0' })
    fs.writeFileSync(path.join(matrix, `${id}.json`), JSON.stringify(e, null, '\t') + '\n')
  }
  const env = { ...process.env, PI_NATIVE_BACKEND: backend }
  const children = new Set()
  const track = (p) => {
    children.add(p)
    p.exited = new Promise((r) => p.once('exit', (code, signal) => r({ code, signal })))
    p.exited.then(() => children.delete(p))
    return p
  }
  /** Every writer start: { writer, gen, log, proc, killed, spawnedAt, endedAt, stderr }. */
  const starts = []
  const current = []
  const startWriter = (w) => {
    const gen = starts.filter((s) => s.writer === w).length
    const log = path.join(logDir, `w${w}-${gen}.log`)
    const args = [CHILD, 'writer', agentDir, WRITERS[w], log, modes[w]]
    if (trace) args.push('trace')
    const [cmd, argv] =
      strace === w && gen === 0
        ? ['strace', ['-f', '-tt', '-o', `${log}.strace`, '-e', 'trace=mkdir,rmdir,rename,inotify_add_watch,poll,futex', process.execPath, ...args]]
        : [process.execPath, args]
    // Under strace, in a process group of its own, killed as a group (strace killed alone
    // would leave the writer running).
    const detached = cmd === 'strace'
    const proc = track(spawn(cmd, argv, { env, stdio: ['ignore', 'ignore', 'pipe'], detached }))
    if (detached) {
      proc.kill = (sig) => {
        try {
          process.kill(-proc.pid, sig)
        } catch {} // already gone
      }
    }
    const s = { writer: w, gen, log, proc, killed: false, spawnedAt: now(), stderr: '' }
    proc.stderr.on('data', (d) => (s.stderr += d))
    starts.push(s)
    current[w] = s
  }
  const readerLog = path.join(logDir, 'reader.log')
  let kills = 0
  let holds = 0
  /** Lock directories the killed writers left behind (each stale 2 s later). */
  const leftLocks = []
  let stopAt
  try {
    track(spawn(process.execPath, [CHILD, 'reader', agentDir, readerLog], { env, stdio: 'ignore' }))
    for (let w = 0; w < WRITERS.length; w++) startWriter(w)
    const holding = holder ? holdAtIntervals() : null
    stopAt = await killAtRandom()
    if (holding) await holding
  } catch (err) {
    fs.rmSync(agentDir, { recursive: true, force: true })
    throw err
  } finally {
    // Stopped as they are killed (a SIGTERM handler would not run inside a writer's chain of
    // settled promises anyway); the accounting treats every end alike.
    for (const p of children) p.kill('SIGKILL')
    await Promise.all([...children].map((p) => p.exited))
  }
  return account()

  /** The foreign holder (`holder`), until the end. */
  async function holdAtIntervals() {
    const lock = path.join(matrix, `${ENTRIES[0]}.json.lock`)
    const end = now() + seconds * 1000
    while (now() < end - holder[0]) {
      try {
        fs.mkdirSync(lock)
      } catch {
        await sleep(1) // held by a writer (or left by a killed one, until a writer takes it over)
        continue
      }
      await sleep(holder[0])
      fs.rmdirSync(lock)
      holds++
      await sleep(holder[1])
    }
  }

  /** Kill writers at random and start them again until the end; resolves the end's time. */
  async function killAtRandom() {
    const t0 = now()
    const end = t0 + seconds * 1000
    const rnd = (a, b) => a + Math.random() * (b - a)
    let next = t0 + firstKill
    while (next < end) {
      await sleep(Math.max(0, next - now()))
      const w = killable[Math.floor(Math.random() * killable.length)]
      const s = current[w]
      s.proc.kill('SIGKILL')
      await s.proc.exited
      s.killed = true
      s.endedAt = now()
      // A lock directory right after the kill may be the dead writer's (stale in 2 s) or its
      // sibling's (gone in microseconds): looked at twice, 50 ms apart, same inode.
      const lock = path.join(matrix, `${WRITERS[w]}.json.lock`)
      const ino = () => {
        try {
          return fs.statSync(lock).ino
        } catch {
          return undefined
        }
      }
      const first = ino()
      startWriter(w)
      if (first !== undefined) {
        await sleep(50)
        if (ino() === first) leftLocks.push({ entry: WRITERS[w], t: s.endedAt })
      }
      kills++
      next = now() + rnd(killEvery[0], killEvery[1])
    }
    await sleep(Math.max(0, end - now()))
    return now()
  }

  /** The report, from the entries' final values and the logs; removes the run's folders. */
  function account() {
    const final = {}
    for (const id of ENTRIES) final[id] = Number(JSON.parse(fs.readFileSync(path.join(matrix, `${id}.json`), 'utf8')).taskRef)
    const leftover = fs.readdirSync(matrix).filter((n) => !ENTRIES.some((id) => n === `${id}.json`))
    const problems = []
    const perEntry = Object.fromEntries(ENTRIES.map((id) => [id, { oks: new Map(), unlogged: [] }]))
    const startsOut = []
    for (const s of starts) {
      const log = parseLog(s.log)
      const id = WRITERS[s.writer]
      if (log.error) problems.push(`writer ${s.writer}.${s.gen}: ${log.error}`)
      if (!s.killed && s.stderr.trim()) problems.push(`writer ${s.writer}.${s.gen} stderr: ${s.stderr.trim()}`)
      for (const ok of log.oks) {
        const seen = perEntry[id].oks.get(ok.v)
        if (seen) problems.push(`${id}: value ${ok.v} written twice (${seen} and ${s.writer}.${s.gen})`)
        perEntry[id].oks.set(ok.v, `${s.writer}.${s.gen}`)
      }
      // A killed writer may have committed its last CAS without logging it.
      const lastTry = log.tries[log.tries.length - 1]
      if (lastTry && !log.oks.some((o) => o.v === lastTry.v)) perEntry[id].unlogged.push(lastTry.v)
      // A writer killed before its store loaded (Node's start-up, seconds on a busy machine) never ran.
      if (log.start === undefined) {
        startsOut.push({ writer: s.writer, gen: s.gen, entry: id, killed: s.killed, ran: false })
        continue
      }
      const startT = log.start
      const endT = s.killed ? s.endedAt : stopAt
      const firstOk = log.oks[0]
      // Started while a lock left by a killed writer on its entry could still be in the way
      // (fresh for 2 s, then taken over).
      const lockLeft = leftLocks.some((l) => l.entry === id && l.t <= s.spawnedAt + 1 && s.spawnedAt - l.t < LEFT_LOCK_MS)
      startsOut.push({
        writer: s.writer,
        gen: s.gen,
        entry: id,
        killed: s.killed,
        lockLeft,
        // Ms from the writer's first line (its store loaded) to its first success; null = none.
        ttfs: firstOk ? firstOk.t - startT : null,
        lived: endT - startT,
        ran: true,
        spawnToStart: log.start - s.spawnedAt,
        // The longest time without a success: from the start to the first, between two, and
        // from the last to the writer's end.
        maxGap: maxGap([startT, ...log.oks.map((o) => o.t), endT]),
        // The same, less the time a lock left by a killed writer on this entry explains: from the
        // kill until the lock is stale (2 s after it was made, so before) and one more scheduled
        // attempt (≤ 500 ms of B17), with 100 ms to spare.
        maxClearGap: maxGap(
          [startT, ...log.oks.map((o) => o.t), endT],
          leftLocks.filter((l) => l.entry === id).map((l) => [l.t, l.t + LEFT_LOCK_MS]),
        ),
        successes: log.oks.length,
        tries: log.tries.length,
        attempts: trace ? log.attempts : undefined,
        startT,
      })
    }
    let lost = 0
    for (const id of ENTRIES) {
      const { oks, unlogged } = perEntry[id]
      for (const v of oks.keys()) if (v > final[id]) problems.push(`${id}: success ${v} beyond the final value ${final[id]}`)
      for (let v = 1; v <= final[id]; v++) {
        if (oks.has(v)) continue
        const i = unlogged.indexOf(v)
        if (i >= 0) unlogged.splice(i, 1)
        else lost++, problems.push(`${id}: value ${v} on the way to ${final[id]} written by nobody`)
      }
    }
    const readerLines = fs.existsSync(readerLog) ? fs.readFileSync(readerLog, 'utf8').split('\n') : []
    const breaches = readerLines.filter((l) => l.startsWith('x '))
    problems.push(...breaches.map((l) => `reader: ${l}`))
    const listings = readerLines.filter((l) => l.startsWith('r ')).length
    if (listings === 0) problems.push('the reader saw nothing')
    fs.rmSync(agentDir, { recursive: true, force: true })
    if (!traceDir) fs.rmSync(logDir, { recursive: true, force: true })
    return { backend, seconds, kills, holds, final, leftover, lost, problems, listings, leftLocks, starts: startsOut }
  }
}

/**
 * The longest step between consecutive `times`, each less the part of it that the `excused`
 * intervals ([from, to] pairs) cover.
 */
function maxGap(times, excused = []) {
  let m = 0
  for (let i = 1; i < times.length; i++) {
    const [a, b] = [times[i - 1], times[i]]
    // The union of the excused intervals within [a, b].
    const parts = excused
      .map(([x, y]) => [Math.max(a, x), Math.min(b, y)])
      .filter(([x, y]) => y > x)
      .sort((p, q) => p[0] - q[0])
    let covered = 0
    let reach = a
    for (const [x, y] of parts) {
      if (y <= reach) continue
      covered += y - Math.max(x, reach)
      reach = y
    }
    m = Math.max(m, b - a - covered)
  }
  return m
}

/** p-quantile of sorted numbers (nearest rank). */
function quantile(sorted, p) {
  if (!sorted.length) return NaN
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(p * sorted.length) - 1))]
}

module.exports = { torture, quantile, ENTRIES, WRITERS }

if (require.main === module) {
  const args = process.argv.slice(2)
  const opt = (name, dflt) => {
    const i = args.indexOf(`--${name}`)
    return i >= 0 ? args[i + 1] : dflt
  }
  const runs = Number(opt('runs', 10))
  const seconds = Number(opt('seconds', 10))
  const backend = opt('backend', 'native')
  const traceDir = opt('trace', undefined)
  const firstKill = Number(opt('first-kill', 2000))
  const killEvery = opt('kill-every', '300-1500').split('-').map(Number)
  const modes = opt('modes', 'random,random,random,random').split(',')
  const killable = opt('killable', '0,1,2,3').split(',').map(Number)
  const strace = opt('strace', undefined) === undefined ? undefined : Number(opt('strace'))
  const holder = opt('holder', undefined)?.split('-').map(Number)
  ;(async () => {
    const all = []
    for (let r = 0; r < runs; r++) {
      const dir = traceDir ? path.join(traceDir, `run${r}`) : undefined
      const rep = await torture({ backend, seconds, firstKill, killEvery, modes, killable, strace, holder, trace: !!traceDir, traceDir: dir })
      all.push(rep)
      const fmt = (s) => (!s.ran ? '-' : s.ttfs === null ? `>${s.lived.toFixed(0)}` : s.ttfs.toFixed(0))
      const firstRound = rep.starts.filter((s) => s.gen === 0).map((s) => `w${s.writer}:${fmt(s)}`)
      const restarts = rep.starts.filter((s) => s.gen > 0)
      const worst = restarts.filter((s) => s.ran).reduce((m, s) => Math.max(m, s.ttfs ?? s.lived), 0)
      console.log(
        JSON.stringify({
          run: r,
          final: rep.final,
          kills: rep.kills,
          holds: rep.holds,
          lost: rep.lost,
          problems: rep.problems.slice(0, 5),
          listings: rep.listings,
          firstRound: firstRound.join(' '),
          worstRestart: Math.round(worst),
          gaps: rep.starts.map((s) => `w${s.writer}.${s.gen}:${s.ran ? `${Math.round(s.maxGap)}/${Math.round(s.maxClearGap)}${s.lockLeft ? 'L' : ''}` : '-'}`).join(' '),
          maxClearGap: Math.round(Math.max(...rep.starts.filter((s) => s.ran).map((s) => s.maxClearGap))),
        }),
      )
    }
    const dist = (xs) => {
      const sorted = [...xs].sort((a, b) => a - b)
      return { n: xs.length, p50: Math.round(quantile(sorted, 0.5)), p90: Math.round(quantile(sorted, 0.9)), max: Math.round(sorted[sorted.length - 1]) }
    }
    const sum = (pred) => {
      const xs = all.flatMap((r) => r.starts.filter((s) => s.ran && pred(s)))
      const done = xs.filter((s) => s.ttfs !== null).map((s) => s.ttfs)
      const none = xs.filter((s) => s.ttfs === null)
      const sorted = done.sort((a, b) => a - b)
      return {
        n: xs.length,
        noSuccess: none.length,
        noSuccessLived: none.map((s) => Math.round(s.lived)).sort((a, b) => b - a).slice(0, 10),
        p50: Math.round(quantile(sorted, 0.5)),
        p90: Math.round(quantile(sorted, 0.9)),
        p99: Math.round(quantile(sorted, 0.99)),
        max: Math.round(sorted[sorted.length - 1] ?? NaN),
      }
    }
    console.log(
      JSON.stringify({
        backend,
        runs,
        seconds,
        lost: all.reduce((a, r) => a + r.lost, 0),
        problems: all.reduce((a, r) => a + r.problems.length, 0),
        firstRoundShared: sum((s) => s.gen === 0 && s.writer < 2),
        firstRoundSolo: sum((s) => s.gen === 0 && s.writer >= 2),
        restartShared: sum((s) => s.gen > 0 && s.writer < 2 && !s.lockLeft),
        restartSolo: sum((s) => s.gen > 0 && s.writer >= 2 && !s.lockLeft),
        restartAfterLeftLock: sum((s) => s.gen > 0 && s.lockLeft),
        neverRan: all.reduce((a, r) => a + r.starts.filter((s) => !s.ran).length, 0),
        clearGapShared: dist(all.flatMap((r) => r.starts.filter((s) => s.ran && s.writer < 2).map((s) => s.maxClearGap))),
        clearGapSolo: dist(all.flatMap((r) => r.starts.filter((s) => s.ran && s.writer >= 2).map((s) => s.maxClearGap))),
      }),
    )
  })()
}
