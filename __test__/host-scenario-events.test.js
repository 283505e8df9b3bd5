'use strict'
// pi-adaptative's worker-side parent watch, end to end with real processes and only the public
// package, written twice: the polling original (a timer at the host's interval asks whether the
// parent pid is alive and reads the parent's master entry for a directive) and the same watch on
// the supervision events (waitForProcessExit on the parent's identity, watchEntries for its
// entry). The parent is SIGKILLed, or it sets its entry to `winding_down`; what is measured is
// the time from that moment to the worker starting to wind down (its own entry written as
// `winding_down` with the reason).
//
// The host's watcher polls every 25 s (SPEC §1.B); here the original polls every POLL_MS, the
// same code at a test-sized interval. Its latency is uniform over the interval by nature.
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { spawn } = require('node:child_process')
const { root } = require('./helpers.js')

const POLL_MS = 1000

const PARENT = `
const pkg = require(${JSON.stringify(root)})
const os = require('node:os')
const [agentDir] = process.argv.slice(1) // -e: arguments start at argv[1]
const now = () => new Date().toISOString()
const master = {
  entryId: pkg.buildEntryId('master', 'parent-session'), role: 'master',
  agent: { agentId: 'master', resumeContext: { provider: 'pi', sessionId: 'parent-session', cwd: process.cwd(), resourceProfileNames: [], contextPointers: [] } },
  pid: process.pid, hostname: os.hostname(), startedAt: now(), heartbeatAt: now(), status: 'running',
}
pkg.writeEntry(agentDir, master).then(() => console.log('REGISTERED'))
setInterval(() => {}, 1000)
`

const WORKER = `
const pkg = require(${JSON.stringify(root)})
const os = require('node:os')
const [agentDir, parentPidText, parentEntryId, mode, pollMs] = process.argv.slice(1)
const parentPid = Number(parentPidText)
const now = () => new Date().toISOString()
const stamp = () => performance.timeOrigin + performance.now()
let entry = {
  entryId: pkg.buildEntryId('worker', 'child-session'), role: 'worker',
  agent: { agentId: 'worker', resumeContext: { provider: 'pi', sessionId: 'child-session', cwd: process.cwd(), resourceProfileNames: [], contextPointers: [] } },
  pid: process.pid, hostname: os.hostname(), startedAt: now(), heartbeatAt: now(), status: 'running', parentPid,
  parentSessionId: 'parent-session',
}
const directive = (parent) => parent?.status === 'winding_down' || parent?.status === 'closed'
let winding = false
const ac = new AbortController()
async function windDown(reason) {
  if (winding) return
  winding = true
  const at = stamp()
  ac.abort()
  clearInterval(timer)
  const next = { ...entry, status: 'winding_down', windDownReason: reason }
  const ok = await pkg.writeEntryIfUnchanged(agentDir, entry.entryId, entry, next)
  console.log(JSON.stringify({ windingDown: reason, at, cas: ok, backend: pkg.backend }))
  process.exit(0)
}
let timer
;(async () => {
  await pkg.writeEntry(agentDir, entry)
  if (mode === 'poll') {
    // The original: one tick per interval, the pid probe first, then the parent's entry.
    timer = setInterval(async () => {
      if (!pkg.isReloadSessionProcessAlive(parentPid)) return windDown('parent_lost')
      if (directive(await pkg.readEntry(agentDir, parentEntryId))) windDown('parent_shutdown')
    }, Number(pollMs))
  } else {
    // On events: the parent's end (its identity, so a reused pid is not mistaken for it) and
    // the changes of its entry.
    const parent = pkg.getProcessIdentity(parentPid) ?? parentPid
    pkg.waitForProcessExit(parent, { signal: ac.signal }).then(() => windDown('parent_lost'), () => {})
    const changes = pkg.watchEntries(agentDir, { signal: ac.signal })
    ;(async () => {
      for await (const ev of changes) if (ev.entryId === parentEntryId && directive(ev.entry)) windDown('parent_shutdown')
    })().catch(() => {})
    // What the parent said before the watch began.
    if (directive(await pkg.readEntry(agentDir, parentEntryId))) windDown('parent_shutdown')
  }
  console.log('WATCHING')
})()
`

/** Lines of a child's stdout, awaited one by one. */
function lines(child) {
  const got = []
  const waiters = []
  let buf = ''
  child.stdout.on('data', (d) => {
    buf += d
    let i
    while ((i = buf.indexOf('\n')) >= 0) {
      got.push(buf.slice(0, i))
      buf = buf.slice(i + 1)
      for (const w of waiters.splice(0)) w()
    }
  })
  return async (pred) => {
    for (;;) {
      const hit = got.find(pred)
      if (hit !== undefined) return hit
      await new Promise((r) => waiters.push(r))
    }
  }
}

/**
 * One run: a parent, a worker watching it in `mode` with `backend`; `trigger` is `kill` (SIGKILL
 * the parent) or `directive` (another process sets the parent's entry to winding_down).
 * Returns the latency in ms and what the worker reported.
 */
async function run(mode, backend, trigger) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pi-native-parent-watch-'))
  const agentDir = path.join(dir, 'agent')
  const env = { ...process.env, PI_NATIVE_BACKEND: backend }
  const parent = spawn(process.execPath, ['-e', PARENT, agentDir], { env, stdio: ['ignore', 'pipe', 'inherit'] })
  const parentLine = lines(parent)
  await parentLine((l) => l === 'REGISTERED')
  const pkg = require('../lib/index.js')
  const parentEntryId = pkg.buildEntryId('master', 'parent-session')
  const worker = spawn(process.execPath, ['-e', WORKER, agentDir, String(parent.pid), parentEntryId, mode, String(POLL_MS)], {
    env,
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  const workerLine = lines(worker)
  const exited = new Promise((r) => worker.once('exit', r))
  try {
    await workerLine((l) => l === 'WATCHING')
    // Somewhere inside the polling interval, as a real death would fall.
    await new Promise((r) => setTimeout(r, 100 + Math.random() * POLL_MS))
    let at
    if (trigger === 'kill') {
      at = performance.timeOrigin + performance.now()
      parent.kill('SIGKILL')
    } else {
      const cur = await pkg.readEntry(agentDir, parentEntryId)
      at = performance.timeOrigin + performance.now()
      assert.equal(await pkg.writeEntryIfUnchanged(agentDir, parentEntryId, cur, { ...cur, status: 'winding_down', windDownReason: 'user_cleanup' }), true)
    }
    const report = JSON.parse(await workerLine((l) => l.startsWith('{')))
    assert.equal(await exited, 0)
    const own = await pkg.readEntry(agentDir, pkg.buildEntryId('worker', 'child-session'))
    return { latencyMs: report.at - at, report, own }
  } finally {
    parent.kill('SIGKILL')
    worker.kill('SIGKILL')
    fs.rmSync(dir, { recursive: true, force: true })
  }
}

const ROUTES = [
  ['poll', 'native', POLL_MS],
  ['events', 'native', 100],
  ['events', 'js', 250 + 100],
]

for (const trigger of ['kill', 'directive']) {
  test(`host scenario, worker parent watch, parent ${trigger === 'kill' ? 'SIGKILLed' : 'sets winding_down'}: polling every ${POLL_MS} ms vs events`, async (t) => {
    const measured = []
    for (const [mode, backend, bound] of ROUTES) {
      const r = await run(mode, backend, trigger)
      measured.push(`${mode}/${backend}: ${r.latencyMs.toFixed(1)} ms`)
      const reason = trigger === 'kill' ? 'parent_lost' : 'parent_shutdown'
      assert.equal(r.report.windingDown, reason, `${mode}/${backend}`)
      assert.equal(r.report.cas, true)
      assert.equal(r.report.backend, backend)
      assert.equal(r.own.status, 'winding_down')
      assert.equal(r.own.windDownReason, reason)
      // Polling is bounded by its interval; events by the kernel's notice (the JS backend
      // probes exits every 250 ms), with room for a loaded machine.
      assert.ok(r.latencyMs <= bound + 400, `${mode}/${backend}: ${r.latencyMs} ms`)
    }
    t.diagnostic(`time to wind down: ${measured.join(', ')}`)
  })
}
