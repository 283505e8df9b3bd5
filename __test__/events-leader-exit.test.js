'use strict'
// A process whose main thread called pthread_exit while another thread runs (issue 35, case 3):
// Linux shows its leader as `Z` in /proc/PID/stat, yet the process runs. "Exited" means every
// thread gone, on every path that decides it: waitForProcessExit's first look, the kernel's
// wake-up, the probing fallback and the JS backend's probe; probePid / getProcessIdentity /
// isSameProcess say it runs. The legacy functions keep the originals' answer (kill(pid, 0)).
// Oracle: the helper's real fate — it ends only when the test closes its stdin — and /proc.
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { spawn } = require('node:child_process')
const { backends, sleep } = require('./helpers.js')
const { leaderExitHelper, within } = require('./events-helpers.js')
const events = require('../lib/contract/events.js')

const native = require('../lib/binding.js').loadNative()

const helper = leaderExitHelper()

/** Linux: state letter and thread count of /proc/PID/stat. */
function stat(pid) {
  try {
    const text = fs.readFileSync(`/proc/${pid}/stat`, 'latin1')
    const f = text.slice(text.lastIndexOf(')') + 2).split(' ')
    return { state: f[0], threads: Number(f[17]) }
  } catch {
    return undefined
  }
}

/** A running helper whose main thread has ended: `{ pid, end() }` (end closes its stdin). */
async function leaderGone() {
  const child = spawn(helper.bin, [], { stdio: ['pipe', 'pipe', 'inherit'] })
  await new Promise((resolve, reject) => {
    child.once('error', reject)
    child.stdout.once('data', resolve)
  })
  const exited = new Promise((r) => child.once('exit', r))
  if (process.platform === 'linux') {
    for (let i = 0; i < 300 && stat(child.pid)?.state !== 'Z'; i++) await sleep(10)
    assert.deepEqual(stat(child.pid), { state: 'Z', threads: 2 }, 'the leader is a zombie, its other thread runs')
  } else {
    await sleep(100)
  }
  return {
    pid: child.pid,
    end: () => child.stdin.end(),
    exited,
    kill: () => child.kill('SIGKILL'),
  }
}

for (const [name, s] of backends()) {
  test(`${name}: a process whose main thread ended (pthread_exit) but another runs is alive, not a zombie`, { skip: helper.skip }, async () => {
    const p = await leaderGone()
    try {
      assert.equal(s.probePid(p.pid), 'alive')
      assert.deepEqual(s.probePids([p.pid]), ['alive'])
      const id = s.getProcessIdentity(p.pid)
      if (id !== undefined) {
        assert.equal(id.state, 'alive')
        assert.equal(s.isSameProcess(id), true)
      } else {
        assert.ok(name === 'js' && process.platform !== 'linux', 'identities exist wherever the backend reads them')
      }
      // The legacy functions answer as the originals do (kill(pid, 0) succeeds).
      assert.equal(s.isReloadSessionProcessAlive(p.pid), true)
      assert.equal(s.checkProcessLiveness(p.pid).detail, 'process is alive')
      assert.equal(s.defaultIsPidAlive({ pid: p.pid, hostname: os.hostname() }), true)
      p.end()
      await p.exited
      assert.equal(s.probePid(p.pid), 'dead')
    } finally {
      p.kill()
    }
  })

  test(`${name}: waitForProcessExit waits for the last thread, not the main one`, { skip: helper.skip }, async () => {
    const p = await leaderGone()
    try {
      const id = s.getProcessIdentity(p.pid)
      const waits = [s.waitForProcessExit(p.pid), ...(id ? [s.waitForProcessExit(id)] : [])]
      // Long enough for a probing backend to have looked twice.
      assert.equal(await within(Promise.race(waits), 2.5 * events.EXIT_PROBE_INTERVAL_MS), undefined, 'pending while a thread runs')
      p.end()
      assert.deepEqual(await within(Promise.all(waits), 5000), { value: waits.map(() => true) })
    } finally {
      p.kill()
    }
  })
}

test('the probing fallback waits for the last thread too', { skip: helper.skip }, async () => {
  // A kernel route that refuses every pid (no pidfds, EPERM): the native probe decides.
  const { waitForProcessExit } = events.createExitWaits({
    exitWatch: { mode: () => 'pidfd', open: () => ({ add: () => -1, cancel() {}, ref() {} }) },
    ended: events.probeEnded(native),
  })
  const p = await leaderGone()
  try {
    const wait = waitForProcessExit(p.pid)
    assert.equal(await within(wait, 2.5 * events.EXIT_PROBE_INTERVAL_MS), undefined)
    p.end()
    assert.deepEqual(await within(wait, 5000), { value: true })
  } finally {
    p.kill()
  }
})
