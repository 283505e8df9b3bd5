'use strict'
// Issue 28, "Also seen": the SIGKILL torture (cas-torture.js). 4 writer processes on 3 entries
// of one agentDir on tmpfs, two sharing one entry, each looping read → bump → CAS with no
// pause (sync or async at random), SIGKILLed at random and started again, a reader listing
// meanwhile. Every success is accounted for: no value written twice, none skipped except the
// last try of a killed writer (which may have landed unlogged), and the reader never sees an
// entry go back or go missing. Every writer start gets its first success, and then each next
// one, within the bounds below (COMPATIBILITY.md, "Time to first success under contention").
//
// Wall-clock bounds, hence isolated. Longer local runs: PI_NATIVE_TORTURE_RUNS (default 1) and
// PI_NATIVE_TORTURE_SECONDS (default 12 for the native backend; the JS backend, the original's
// behaviour with proper-lockfile, runs half as long and only its accounting is asserted), or
// `node __test__/cas-torture.js --runs N` for the distributions.
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { spawn } = require('node:child_process')
const { torture, quantile } = require('./cas-torture.js')
const { root } = require('./helpers.js')
const { makeEntry } = require('./store-fixtures.js')

const runs = Number(process.env.PI_NATIVE_TORTURE_RUNS || 1)
const seconds = Number(process.env.PI_NATIVE_TORTURE_SECONDS || 12)

// Between two successes (or from its start to the first) a writer waits at most about one CAS
// call's retry budget (B17: 25 + 50 + … + 500 ms ≈ 3.3 s) for reasons other than a lock a
// killed writer left on its entry, whose time in the way (until stale, 2 s, L3, and one more
// scheduled attempt) is subtracted (cas-torture.js, maxClearGap). Measured on a 2-core host over
// 100+ runs: under 1 s (COMPATIBILITY.md).
const CLEAR_BOUND = 3300

// Under an emulator (scripts/test-arm64.sh, test-windows.sh set PI_NATIVE_EMULATED) every JS
// instruction and process start costs several times more: the bounds are for native execution.
const skip =
  process.env.PI_NATIVE_EMULATED && `wall-clock bounds for native execution; this run is under ${process.env.PI_NATIVE_EMULATED}`

function summary(reports) {
  const ran = reports.flatMap((r) => r.starts.filter((s) => s.ran))
  const ttfs = ran.filter((s) => s.ttfs !== null && !s.lockLeft).map((s) => s.ttfs).sort((a, b) => a - b)
  const gaps = ran.map((s) => s.maxClearGap).sort((a, b) => a - b)
  const r = (x) => Math.round(x)
  return {
    starts: ran.length,
    neverRan: reports.reduce((a, rep) => a + rep.starts.filter((s) => !s.ran).length, 0),
    kills: reports.reduce((a, rep) => a + rep.kills, 0),
    final: reports.map((rep) => rep.final),
    firstSuccessMs: { p50: r(quantile(ttfs, 0.5)), p90: r(quantile(ttfs, 0.9)), max: r(ttfs[ttfs.length - 1]) },
    longestClearStretchMs: { p50: r(quantile(gaps, 0.5)), p90: r(quantile(gaps, 0.9)), max: r(gaps[gaps.length - 1]) },
    leftLocks: reports.reduce((a, rep) => a + rep.leftLocks.length, 0),
    longestStretchWithLeftLocksMs: r(Math.max(...ran.map((s) => s.maxGap))),
  }
}

for (const backend of ['native', 'js']) {
  const s = backend === 'native' ? seconds : Math.max(4, seconds / 2)
  test(`SIGKILL torture, ${runs} × ${s} s (${backend}): no update lost or doubled${backend === 'native' ? ', every writer succeeds within its bound' : ''}`, { skip }, async (t) => {
    const reports = []
    for (let i = 0; i < runs; i++) reports.push(await torture({ backend, seconds: s }))
    t.diagnostic(JSON.stringify(summary(reports)))
    for (const rep of reports) {
      assert.deepEqual(rep.problems, [], `lost or doubled updates, or a reader breach: ${rep.problems.slice(0, 10).join('; ')}`)
      assert.equal(rep.lost, 0)
      assert.ok(rep.listings > 0, 'the reader listed the matrix')
      for (const e of Object.values(rep.final)) assert.ok(e > 0, `every entry was bumped: ${JSON.stringify(rep.final)}`)
      if (backend !== 'native') continue
      for (const st of rep.starts.filter((x) => x.ran)) {
        const what = `writer ${st.writer} start ${st.gen} (${st.entry}${st.lockLeft ? ', a killed writer left its lock' : ''})`
        assert.ok(
          st.maxClearGap < CLEAR_BOUND,
          `${what}: ${Math.round(st.maxClearGap)} ms without a success (${Math.round(st.maxGap)} ms with left locks' time)`,
        )
      }
    }
  })
}

// What the torture found (issue 28): a waiter woken by the lock's removal (the notified handoff,
// from the third retry on) took the lock, then closed its inotify instance before its CAS ran,
// and closing one that had a watch waits for the kernel's teardown of it (an SRCU grace period:
// 8 ms median, 130 ms p99 on a loaded 2-vCPU VM; 60–570 ms beside the torture's writers). The
// lock was held all that time, the sibling went to its own notified wait, and so on: one writer
// then lost every compare for seconds. Here a foreign holder (this process) keeps the entry's
// lock while a native writer's async CAS waits past 75 ms, then removes it and times how long
// the writer's lock directory exists: one CAS, a fraction of a millisecond.
test('a writer woken by the lock\'s removal holds the lock only for its CAS (native)', { skip: skip || (process.platform !== 'linux' && 'the per-wait inotify watch is Linux\'s') }, async (t) => {
  const where = fs.existsSync('/dev/shm') ? '/dev/shm' : os.tmpdir()
  const agentDir = fs.mkdtempSync(path.join(where, 'pi-native-handoff-'))
  t.after(() => fs.rmSync(agentDir, { recursive: true, force: true }))
  const matrix = path.join(agentDir, 'state', 'process-matrix')
  fs.mkdirSync(matrix, { recursive: true })
  const id = 'worker-handoff'
  const file = path.join(matrix, `${id}.json`)
  const lock = `${file}.lock`
  fs.writeFileSync(file, JSON.stringify(makeEntry('worker', 'handoff', { taskRef: '0' }), null, '\t') + '\n')
  // The writer: on each line from stdin, one read → bump → async CAS; "c" before the CAS, its
  // result after, and at the end how many of its attempts came from a notified removal.
  const code = `
    const s = require(${JSON.stringify(root)})
    const [agentDir, id] = process.argv.slice(1)
    require('node:readline').createInterface({ input: process.stdin }).on('line', async (l) => {
      if (l === 'end') return console.log('n ' + require(${JSON.stringify(path.join(root, 'index.js'))}).lockNotifiedAttempts())
      const cur = await s.readEntry(agentDir, id)
      console.log('c')
      console.log('r ' + (await s.writeEntryIfUnchanged(agentDir, id, cur, { ...cur, taskRef: String(Number(cur.taskRef) + 1) })))
    })`
  const child = spawn(process.execPath, ['-e', code, agentDir, id], { env: { ...process.env, PI_NATIVE_BACKEND: 'native' }, stdio: ['pipe', 'pipe', 'inherit'] })
  t.after(() => child.kill('SIGKILL'))
  const lines = []
  let waiting = null
  require('node:readline')
    .createInterface({ input: child.stdout })
    .on('line', (l) => {
      lines.push(l)
      if (waiting) waiting()
    })
  const next = async () => {
    while (!lines.length) await new Promise((r) => (waiting = r))
    return lines.shift()
  }
  const holds = []
  for (let round = 0; round < 8; round++) {
    fs.mkdirSync(lock)
    child.stdin.write('go\n')
    assert.equal(await next(), 'c')
    // Past the 25 and 50 ms waits: the CAS now waits on its watch (until 175, then 375 ms).
    await new Promise((r) => setTimeout(r, 200))
    const before = fs.statSync(file).ino
    fs.rmdirSync(lock)
    // The writer's lock directory, from its mkdir until its release, looked at in a busy loop
    // that ends when it is gone again, or gone with the entry replaced (held between two looks).
    const t0 = performance.now()
    let made
    let hold
    while (hold === undefined && performance.now() - t0 < 3000) {
      const there = fs.existsSync(lock)
      const t = performance.now()
      if (there && made === undefined) made = t
      else if (!there && made !== undefined) hold = t - made
      else if (!there && fs.statSync(file).ino !== before) hold = 0
    }
    assert.equal(await next(), 'r true')
    assert.notEqual(hold, undefined, 'the writer took the lock and replaced the entry within 3 s')
    holds.push(hold)
  }
  child.stdin.write('end\n')
  const notified = Number((await next()).slice(2))
  holds.sort((a, b) => a - b)
  t.diagnostic(`lock held (ms): ${holds.map((h) => h.toFixed(2)).join(' ')}; notified attempts ${notified}`)
  assert.ok(notified >= 4, `the writer took the lock on a notified removal (${notified} of 8 rounds)`)
  // How long the lock is held (tens of microseconds for a CAS on tmpfs) is reported, not judged:
  // on a loaded machine the holder may lose its CPU while it holds the lock. The bench times it.
  t.diagnostic(`median hold ${quantile(holds, 0.5).toFixed(2)} ms`)
})
