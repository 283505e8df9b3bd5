'use strict'
// `pi-native matrix --watch`: a frame per change batch (the entries present at the start make
// one frame, not one each; a redraw that shows nothing new is left out), the path followed when
// the folder appears or is made again, and the end: SIGINT, SIGTERM or SIGHUP end it by that
// same signal whether it was started directly or through `npm exec` (as npm itself ends), a
// parent that went away ends it, and a signal ends it promptly even while a frame cannot be
// computed. Every wait is for a report or an exit, with a deadline.
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { spawn, spawnSync } = require('node:child_process')
const { root, watchReports } = require('./helpers.js')
const { npmCommand } = require('../scripts/tools.js')
const { makeEntry, tempAgentDir, matrixDir } = require('./store-fixtures.js')

const BIN = path.join(root, 'bin', 'pi-native.js')
const noSignals = process.platform === 'win32' && "needs signals delivered to a child (on Windows child.kill() terminates it) and fs.watch events, which Wine does not emulate"
const store = require('pi-native/process-matrix-store')

/** Resolves with `{ code, signal }` when `child` exits; rejects after `ms`. */
function exited(child, ms = 15_000, what = 'the exit') {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve({ code: child.exitCode, signal: child.signalCode })
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no ${what} within ${ms} ms`)), ms)
    child.once('exit', (code, signal) => {
      clearTimeout(timer)
      resolve({ code, signal })
    })
  })
}

const watch = (a, { json = true, env = {} } = {}) =>
  spawn(process.execPath, [BIN, 'matrix', a, '--watch', ...(json ? ['--json'] : [])], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } })

test('matrix --watch: redraws on each change of the folder, also when it appears later or is made again', { skip: noSignals }, async () => {
  const a = tempAgentDir()
  const child = watch(a)
  const { until, stderr, stop } = watchReports(child)
  try {
    const first = await until(() => true, 'initial')
    assert.deepEqual(first.report.problems.map((p) => p.kind), ['missing-directory'])
    await store.writeEntry(a, makeEntry('master', 'w1'))
    await until((r) => r.report.entries.some((e) => e.entryId === 'master-w1'), 'first entry')
    fs.writeFileSync(path.join(matrixDir(a), 'broken.json'), '{')
    const broken = await until((r) => r.report.problems.some((p) => p.file === 'broken.json'), 'broken file')
    assert.equal(broken.report.healthy, false)
    fs.unlinkSync(path.join(matrixDir(a), 'broken.json'))
    await until((r) => r.at >= broken.at && r.report.healthy, 'healed')
    // The folder removed and made again: the new folder is watched.
    fs.rmSync(matrixDir(a), { recursive: true })
    const gone = await until((r) => r.report.problems.some((p) => p.kind === 'missing-directory') && r.at > broken.at, 'folder gone')
    await store.writeEntry(a, makeEntry('worker', 'again'))
    const again = await until((r) => r.at >= gone.at && r.report.entries.some((e) => e.entryId === 'worker-again'), 'folder made again')
    fs.writeFileSync(path.join(matrixDir(a), 'stray.txt'), 'x')
    await until((r) => r.at >= again.at && r.report.problems.some((p) => p.file === 'stray.txt'), 'change inside the new folder')
    child.kill('SIGINT')
    assert.deepEqual(await exited(child), { code: null, signal: 'SIGINT' })
    assert.equal(stderr(), '')
  } finally {
    stop()
    child.kill('SIGKILL')
    fs.rmSync(a, { recursive: true, force: true })
  }
})

test('matrix --watch: 50 entries present at the start make one frame; each later change one frame, never one that repeats the last', { skip: noSignals }, async () => {
  const a = tempAgentDir()
  for (let i = 0; i < 50; i++) await store.writeEntry(a, makeEntry('worker', `w${i}`, { hostname: 'elsewhere' }))
  const child = watch(a)
  const { until, reports, stderr, stop } = watchReports(child)
  // What a frame shows, clock aside (heartbeat ages move on their own).
  const shows = (r) => JSON.stringify([r.report.entries.map(({ heartbeatAgeMs, ...e }) => e), r.report.problems.map((p) => [p.file, p.kind]), r.report.inFlight.map((p) => [p.file, p.kind])])
  try {
    await until((r) => r.report.entries.length === 50, 'the first frame')
    // A change made after the first frame: the frame that shows it must be the second one.
    await store.writeEntry(a, makeEntry('master', 'sentinel', { hostname: 'elsewhere' }))
    await until((r) => r.report.entries.some((e) => e.entryId === 'master-sentinel'), 'the sentinel')
    assert.deepEqual(reports.map((r) => r.report.entries.length), [50, 51], 'one frame for the 50 present, one for the change')
    // A burst of changes (another process writes 20 entries, then a last one): whatever the
    // batches, no frame repeats the one before it, and the last one shows everything.
    const burst = spawnSync(process.execPath, ['-e', `
      const store = require(${JSON.stringify(path.join(root, 'lib', 'process-matrix-store.js'))})
      const { makeEntry } = require(${JSON.stringify(path.join(__dirname, 'store-fixtures.js'))})
      ;(async () => {
        await Promise.all(Array.from({ length: 20 }, (_, i) => store.writeEntry(process.argv[1], makeEntry('worker', 'b' + i, { hostname: 'elsewhere' }))))
        await store.writeEntry(process.argv[1], makeEntry('master', 'last', { hostname: 'elsewhere' }))
      })()`, a], { encoding: 'utf8' })
    assert.equal(burst.status, 0, burst.stderr)
    await until((r) => r.report.entries.length === 72, 'the burst and the last entry')
    for (let i = 1; i < reports.length; i++) assert.notEqual(shows(reports[i]), shows(reports[i - 1]), `frame ${i + 1} repeats frame ${i}`)
    assert.ok(reports.length <= 2 + 21, `${reports.length} frames`)
    child.kill('SIGTERM')
    assert.deepEqual(await exited(child), { code: null, signal: 'SIGTERM' })
    assert.equal(stderr(), '')
  } finally {
    stop()
    child.kill('SIGKILL')
    fs.rmSync(a, { recursive: true, force: true })
  }
})

test('matrix --watch (human): a timestamped frame; SIGTERM ends it by SIGTERM', { skip: noSignals }, async () => {
  const a = tempAgentDir()
  fs.mkdirSync(matrixDir(a), { recursive: true })
  const child = watch(a, { json: false })
  try {
    let out = ''
    await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no frame: ${out}`)), 15_000)
      child.stdout.on('data', (d) => {
        out += d
        if (out.includes('summary:')) (clearTimeout(timer), resolve())
      })
    })
    assert.match(out, /^pi-native matrix --watch {2}\d{4}-\d\d-\d\dT.*\(Ctrl-C to stop\)\n\nno valid entries in /)
    child.kill('SIGTERM')
    assert.deepEqual(await exited(child), { code: null, signal: 'SIGTERM' })
  } finally {
    child.kill('SIGKILL')
    fs.rmSync(a, { recursive: true, force: true })
  }
})

/** A project whose node_modules/.bin has pi-native (this checkout's bin), for `npm exec`. */
function npxProject() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pi-native-npx-'))
  fs.writeFileSync(path.join(dir, 'package.json'), '{"name":"npx-project","private":true}\n')
  fs.mkdirSync(path.join(dir, 'node_modules', '.bin'), { recursive: true })
  fs.symlinkSync(BIN, path.join(dir, 'node_modules', '.bin', 'pi-native'))
  return dir
}

/** `[command, args]` of `npm exec --offline -- pi-native …`, as `npx pi-native …` runs (scripts/tools.js). */
const npx = (args) => npmCommand(['exec', '--offline', '--', 'pi-native', ...args])

test('matrix --watch ends by the signal it got, the same whether started directly or through npm exec (npx); a group Ctrl-C too', { skip: noSignals }, async () => {
  const a = tempAgentDir()
  await store.writeEntry(a, makeEntry('master', 'm', { hostname: 'elsewhere' }))
  const project = npxProject()
  const outcomes = []
  try {
    for (const how of ['direct', 'npx']) {
      for (const [signal, group] of [['SIGTERM', false], ['SIGINT', true], ['SIGHUP', false], ['SIGTERM', true]]) {
        const [cmd, args] = how === 'direct' ? [process.execPath, [BIN, 'matrix', a, '--watch', '--json']] : npx(['matrix', a, '--watch', '--json'])
        // Its own process group, as a shell gives a foreground job: Ctrl-C reaches every member.
        const child = spawn(cmd, args, { cwd: project, stdio: ['ignore', 'pipe', 'pipe'], detached: true })
        const { until, stop } = watchReports(child)
        try {
          await until(() => true, `the first frame (${how})`, 30_000)
          if (group) process.kill(-child.pid, signal)
          else child.kill(signal)
          outcomes.push([how, signal, group ? 'group' : 'process', await exited(child, 15_000, `${how} exit on ${signal}`)])
        } finally {
          stop()
          try {
            process.kill(-child.pid, 'SIGKILL')
          } catch {}
        }
      }
    }
  } finally {
    fs.rmSync(project, { recursive: true, force: true })
    fs.rmSync(a, { recursive: true, force: true })
  }
  for (const [how, signal, to, outcome] of outcomes) assert.deepEqual(outcome, { code: null, signal }, `${how}, ${signal} to the ${to}`)
})

/** The pids of the node processes running the CLI's `matrix <agentDir>` (npm's own left out; Linux /proc). */
function watchPids(agentDir) {
  const out = []
  for (const d of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue
    try {
      const argv = fs.readFileSync(`/proc/${d}/cmdline`, 'utf8').split('\0')
      if (argv[1]?.endsWith('pi-native') && argv[2] === 'matrix' && argv[3] === agentDir) out.push(Number(d))
    } catch {}
  }
  return out
}

test('matrix --watch through npm exec: a SIGTERM to npm alone (npm and its shell end, the watch is left behind) still ends the watch', { skip: process.platform !== 'linux' && 'finds the watch through /proc' }, async () => {
  const a = tempAgentDir()
  fs.mkdirSync(matrixDir(a), { recursive: true })
  const project = npxProject()
  const child = spawn(...npx(['matrix', a, '--watch', '--json']), { cwd: project, stdio: ['ignore', 'pipe', 'pipe'], detached: true })
  const { until, stop } = watchReports(child)
  try {
    await until(() => true, 'the first frame', 30_000)
    const [watcher] = watchPids(a)
    assert.ok(watcher, 'the watch process is found')
    child.kill('SIGTERM')
    assert.deepEqual(await exited(child), { code: null, signal: 'SIGTERM' }, 'npm ends by the signal')
    const deadline = Date.now() + 15_000
    while (fs.existsSync(`/proc/${watcher}`) && !/^State:\s+Z/m.test(readStatus(watcher))) {
      assert.ok(Date.now() < deadline, `the watch (pid ${watcher}) outlived npm by 15 s`)
      await new Promise((r) => setTimeout(r, 50))
    }
  } finally {
    stop()
    try {
      process.kill(-child.pid, 'SIGKILL')
    } catch {}
    for (const pid of watchPids(a)) process.kill(pid, 'SIGKILL')
    fs.rmSync(project, { recursive: true, force: true })
    fs.rmSync(a, { recursive: true, force: true })
  }
})

function readStatus(pid) {
  try {
    return fs.readFileSync(`/proc/${pid}/status`, 'utf8')
  } catch {
    return ''
  }
}

for (const backend of ['native', 'js']) {
  test(`matrix --watch (${backend}) with a FIFO named as an entry in the folder: frames come, the FIFO is listed, and SIGTERM ends it promptly`, { skip: noSignals }, async () => {
    const a = tempAgentDir()
    await store.writeEntry(a, makeEntry('master', 'm', { hostname: 'elsewhere' }))
    spawnSync('mkfifo', [path.join(matrixDir(a), 'master-fifo.json')])
    const child = watch(a, { env: { PI_NATIVE_BACKEND: backend } })
    const { until, stderr, stop } = watchReports(child)
    try {
      const first = await until(() => true, 'the first frame')
      assert.deepEqual(first.report.entries.map((e) => e.entryId), ['master-m'])
      assert.deepEqual(first.report.problems.map((p) => [p.file, p.kind]), [['master-fifo.json', 'not-a-file']])
      await store.writeEntry(a, makeEntry('worker', 'w', { hostname: 'elsewhere' }))
      await until((r) => r.report.entries.some((e) => e.entryId === 'worker-w'), 'a change')
      child.kill('SIGTERM')
      assert.deepEqual(await exited(child), { code: null, signal: 'SIGTERM' })
      assert.equal(stderr(), '')
    } finally {
      stop()
      child.kill('SIGKILL')
      fs.rmSync(a, { recursive: true, force: true })
    }
  })
}
