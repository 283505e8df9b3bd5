'use strict'
// `pi-native matrix --watch` on the supervision events (issue 29): a process shown alive that
// dies is redrawn as dead at once (no folder change happens), and an entry written by another
// process shows without waiting for anything else.
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
      await new Promise((r) => setTimeout(r, 300)) // settled: no redraw is due
      let t = Date.now()
      victim.kill('SIGKILL')
      const dead = await until((r) => r.at >= t && liveness(r) === 'dead', 'the victim dead')
      // The native backend is told by the kernel; the JS backend probes every 250 ms.
      assert.ok(dead.at - t < (backend === 'native' ? 250 : 750), `death shown after ${dead.at - t} ms`)
      t = Date.now()
      await store.writeEntry(a, makeEntry('master', 'late', { hostname: 'elsewhere' }))
      const seen = await until((r) => r.at >= t && r.report.entries.some((e) => e.entryId === 'master-late'), 'the new entry')
      assert.ok(seen.at - t < 500, `entry shown after ${seen.at - t} ms`)
      const exit = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })))
      child.kill('SIGINT')
      assert.deepEqual(await exit, { code: 0, signal: null })
      assert.equal(stderr(), '')
    } finally {
      stop()
      child.kill('SIGKILL')
      victim.kill('SIGKILL')
      fs.rmSync(a, { recursive: true, force: true })
    }
  })
}
