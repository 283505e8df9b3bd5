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
const { torture, quantile } = require('./cas-torture.js')

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
