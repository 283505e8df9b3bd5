'use strict'
// Issue 10, "bounded recovery": 1,000 concurrent recoveries over a directory of 10,000 small
// session files, each with a 1 s deadline. Behavioural bounds (an order of magnitude above a
// normal run): every call settles by deadline + 300 ms, and a null comes only from the
// deadline; the process stays at ≤ 64 threads; the event loop never stalls for 50 ms (time the
// JS thread spent waiting for a CPU taken by other processes excluded, see loop-probe.js); work
// abandoned at the deadline stops, so a fresh call right after is served promptly.
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { loadNative } = require('../lib/binding.js')
const { startLoopProbe } = require('./loop-probe.js')

const FILES = 10_000
const CALLS = 1_000
const DEADLINE_MS = 1000

const where = fs.existsSync('/dev/shm') ? '/dev/shm' : os.tmpdir()
const dir = fs.mkdtempSync(path.join(where, 'pi-native-overload-'))
test.after(() => fs.rmSync(dir, { recursive: true, force: true }))

const header = JSON.stringify({ type: 'session', version: 3, id: 's', timestamp: '2026-10-03T10:00:00.000Z', cwd: '/w' })
const answer = (i) =>
  JSON.stringify({
    type: 'message',
    id: 'a',
    parentId: null,
    timestamp: '2026-10-03T10:00:01.000Z',
    message: { role: 'assistant', content: [{ type: 'text', text: `answer ${i}` }], stopReason: 'stop' },
  })

/** The newest file wins (A14): give file i the mtime base + i seconds. */
function populate() {
  const base = 1_700_000_000
  for (let i = 0; i < FILES; i++) {
    const p = path.join(dir, `2026_s${i}.jsonl`)
    fs.writeFileSync(p, `${header}\n${answer(i)}\n`)
    fs.utimesSync(p, base + i, base + i)
  }
}

const threads = () => Number(/^Threads:\s+(\d+)/m.exec(fs.readFileSync('/proc/self/status', 'utf8'))[1])

/**
 * One round of 1,000 calls. Correctness is asserted here; the time/thread/gap bounds are
 * returned as a list of violations (empty = met).
 */
async function round(native, expected) {
  // Probes: event-loop gaps between 2 ms ticks, and the peak thread count.
  let peakThreads = threads()
  const probe = startLoopProbe(2, () => {
    peakThreads = Math.max(peakThreads, threads())
  })
  const settled = await Promise.all(
    Array.from({ length: CALLS }, () => {
      const started = performance.now()
      return native.recoverLastAssistantFromSession(dir, undefined, { deadlineMs: DEADLINE_MS }).then((r) => ({ r, ms: performance.now() - started }))
    }),
  )
  const { maxGap, maxOwnGap } = probe.stop()

  const answered = settled.filter((s) => s.r !== null)
  for (const s of answered) {
    assert.equal(s.r.text, expected)
    assert.equal(s.r.sessionFile, path.join(dir, `2026_s${FILES - 1}.jsonl`))
  }
  // Nothing here is unrecoverable: a null means the deadline passed, and it came no earlier.
  for (const s of settled) if (s.r === null) assert.ok(s.ms >= DEADLINE_MS - 1, `null after ${s.ms} ms`)

  // The abandoned calls stopped: a new call is not stuck behind ~1,000 dead ones.
  const fresh = await native.recoverLastAssistantFromSession(dir, undefined, { deadlineMs: 3000 })
  assert.equal(fresh?.text, expected)

  const slowest = Math.max(...settled.map((s) => s.ms))
  const info = { slowest: Math.round(slowest), answered: answered.length, maxGap: Math.round(maxGap), maxOwnGap: Math.round(maxOwnGap), peakThreads }
  const violations = []
  if (slowest > DEADLINE_MS + 300) violations.push('a call settled after deadline + 300 ms')
  if (peakThreads > 64) violations.push('more than 64 threads')
  // A gap counts minus the time the JS thread waited for a CPU (outside load); the threads of
  // this process cannot hide behind that: they are bounded by count and run at lower priority.
  if (maxOwnGap >= 50) violations.push('an event-loop gap of 50 ms or more')
  return { info, violations }
}

// Its bounds are for native execution: under an emulator (scripts/test-arm64.sh sets
// PI_NATIVE_EMULATED) every JS instruction costs ~10× and the event-loop bound cannot hold.
const skip =
  (process.platform !== 'linux' && 'reads /proc/self/status') ||
  (process.env.PI_NATIVE_EMULATED && `wall-clock bounds for native execution; this run is under ${process.env.PI_NATIVE_EMULATED}`)

test('1,000 concurrent recoveries with a 1 s deadline stay bounded (native)', { skip }, async (t) => {
  const native = loadNative()
  populate()
  const expected = `answer ${FILES - 1}`
  // The bounds are wall-clock: a busy machine (other processes, a parallel test file) can
  // stall this process from outside. Up to 3 rounds; one that meets every bound passes. The
  // failure this test guards against (hundreds of threads, second-long stalls) fails all 3.
  const rounds = []
  for (let i = 0; i < 3; i++) {
    const r = await round(native, expected)
    rounds.push(r)
    t.diagnostic(JSON.stringify(r))
    if (r.violations.length === 0) return
  }
  assert.fail(`no round met the bounds: ${JSON.stringify(rounds)}`)
})
