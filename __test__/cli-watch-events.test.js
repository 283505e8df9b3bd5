'use strict'
// `pi-native matrix --watch` on the supervision events (issue 29): a process shown alive that
// dies is redrawn as dead (no folder change happens, and the watch redraws on nothing else than
// events: only the exit wait can draw it), and an entry written by another process shows. How
// soon is the bench's business (docs/BENCHMARKS.md); here every wait has a deadline.
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { spawn } = require('node:child_process')
const { root, liveChild, watchReports } = require('./helpers.js')
const { makeEntry, tempAgentDir } = require('./store-fixtures.js')

const BIN = path.join(root, 'bin', 'pi-native.js')

for (const backend of ['native', 'js']) {
  test(`matrix --watch (${backend}): a death and an entry change are redrawn at once`, { skip: process.platform === 'win32' && 'needs SIGINT delivered to a child' }, async () => {
    const store = require('pi-native/process-matrix-store')
    const a = tempAgentDir()
    const victim = liveChild()
    await new Promise((r) => victim.once('spawn', r))
    await store.writeEntry(a, makeEntry('worker', 'victim', { pid: victim.pid, hostname: os.hostname(), startedAt: new Date().toISOString() }))
    const child = spawn(process.execPath, [BIN, 'matrix', a, '--watch', '--json'], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, PI_NATIVE_BACKEND: backend },
    })
    const { until, stderr, stop } = watchReports(child)
    const liveness = (r) => r.report.entries.find((e) => e.entryId === 'worker-victim')?.liveness
    try {
      await until((r) => liveness(r) === 'alive', 'the victim alive')
      let t = Date.now()
      victim.kill('SIGKILL')
      // Dead, or a zombie until the test's own process reaps it: either way it has exited.
      await until((r) => r.at >= t && ['dead', 'zombie'].includes(liveness(r)), 'the victim dead')
      t = Date.now()
      await store.writeEntry(a, makeEntry('master', 'late', { hostname: 'elsewhere' }))
      await until((r) => r.at >= t && r.report.entries.some((e) => e.entryId === 'master-late'), 'the new entry')
      const exit = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })))
      child.kill('SIGINT')
      assert.deepEqual(await exit, { code: null, signal: 'SIGINT' })
      assert.equal(stderr(), '')
    } finally {
      stop()
      child.kill('SIGKILL')
      victim.kill('SIGKILL')
      fs.rmSync(a, { recursive: true, force: true })
    }
  })
}
