'use strict'
const test = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const { spawnSync } = require('node:child_process')
const { root, reapedPid, zombie } = require('./helpers.js')

const cli = (...args) =>
  spawnSync(process.execPath, [path.join(root, 'bin', 'pi-native.js'), ...args], { encoding: 'utf8', cwd: root })

test('pid: live pids exit 0 with a table naming their state', () => {
  const r = cli('pid', String(process.pid))
  assert.equal(r.status, 0, r.stderr)
  const [header, row] = r.stdout.trim().split('\n')
  assert.match(header, /^PID\s+STATE\s+STARTED\s+LEGACY-START$/)
  assert.match(row, new RegExp(`^${process.pid}\\s+alive\\s+\\d{4}-\\d\\d-\\d\\dT`))
})

// The zombie fixture needs a POSIX shell, and Windows has no zombies.
const noZombies = process.platform === 'win32' && 'needs a zombie (POSIX sh); Windows has none'

test('pid --json: state, legacy start time and identity per pid; a dead pid exits 1', { skip: noZombies }, async () => {
  const dead = await reapedPid()
  const z = await zombie()
  try {
    const r = cli('pid', '--json', String(process.pid), String(dead), String(z.pid))
    assert.equal(r.status, 1)
    const report = JSON.parse(r.stdout)
    assert.deepEqual(
      report.map((x) => [x.pid, x.state]),
      [
        [process.pid, 'alive'],
        [dead, 'dead'],
        [z.pid, 'zombie'],
      ],
    )
    assert.equal(report[0].identity.pid, process.pid)
    assert.equal(typeof report[0].identity.startTimeMs, 'number')
    // qemu-user fakes the starttime of /proc/<own pid>/stat for the process it runs, so only a
    // native run can compare the CLI's reading with this process's own.
    if (process.env.PI_NATIVE_EMULATED !== 'qemu') {
      assert.equal(report[0].legacyStartTime, require('pi-native').getProcessStartTime(process.pid))
    }
    assert.equal(report[1].identity, null)
  } finally {
    z.holder.kill('SIGKILL')
  }
})

test('usage errors exit 2', () => {
  for (const args of [[], ['pid'], ['pid', 'abc'], ['pid', '-5'], ['frobnicate'], ['pid', '1', '--bogus']]) {
    const r = cli(...args)
    assert.equal(r.status, 2, `${args.join(' ')}: ${r.stdout}${r.stderr}`)
    assert.match(r.stdout + r.stderr, /usage: pi-native/)
  }
})

test('recover: prints the recovered text and file; --json; nothing recoverable exits 1', () => {
  const fs = require('node:fs')
  const os = require('node:os')
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pi-native-cli-'))
  try {
    const file = path.join(dir, '2026-10-03T10-00-00-000Z_w1.jsonl')
    fs.writeFileSync(
      file,
      [
        { type: 'session', version: 3, id: 'w1', timestamp: '2026-10-03T10:00:00.000Z', cwd: '/' },
        { type: 'message', id: 'a', parentId: null, timestamp: 'T1', message: { role: 'assistant', content: [{ type: 'text', text: 'final words' }], stopReason: 'stop' } },
      ]
        .map((r) => JSON.stringify(r))
        .join('\n') + '\n',
    )
    const human = cli('recover', dir, '--session-id', 'w1')
    assert.equal(human.status, 0, human.stderr)
    assert.match(human.stdout, /final words/)
    assert.ok(human.stdout.includes(file))
    const json = cli('recover', dir, '--json')
    assert.equal(json.status, 0)
    const parsed = JSON.parse(json.stdout)
    assert.deepEqual(parsed.result, { sessionId: '2026-10-03T10-00-00-000Z_w1', sessionFile: file, text: 'final words', timestamp: 'T1', stopReason: 'stop' })
    assert.equal(typeof parsed.elapsedMs, 'number')
    const none = cli('recover', path.join(dir, 'missing'))
    assert.equal(none.status, 1)
    assert.match(none.stdout, /nothing recoverable/)
    for (const bad of [['recover'], ['recover', 'a', 'b'], ['recover', dir, '--session-id']]) {
      assert.equal(cli(...bad).status, 2, bad.join(' '))
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
})

test('matrix: entries with liveness (alive, dead, zombie, recycled, foreign-host), orphans marked; --json', { skip: noZombies }, async () => {
  const fs = require('node:fs')
  const os = require('node:os')
  const { spawn } = require('node:child_process')
  const { makeEntry, tempAgentDir } = require('./store-fixtures.js')
  const store = require('pi-native/process-matrix-store')
  const a = tempAgentDir()
  const dead = await reapedPid()
  const z = await zombie()
  const live = spawn('sleep', ['30'], { stdio: 'ignore' })
  const host = os.hostname()
  const now = new Date().toISOString()
  const entries = [
    makeEntry('master', 'm1', { pid: process.pid, hostname: host, startedAt: now, heartbeatAt: now }),
    makeEntry('worker', 'dead', { pid: dead, hostname: host, parentPid: process.pid }),
    makeEntry('worker', 'zombie', { pid: z.pid, hostname: host, startedAt: now }),
    makeEntry('worker', 'recycled', { pid: process.pid, hostname: host, startedAt: '2001-01-01T00:00:00.000Z' }),
    makeEntry('worker', 'remote', { pid: 1, hostname: 'elsewhere.example' }),
    makeEntry('worker', 'orphan', { pid: live.pid, hostname: host, startedAt: now, parentPid: dead }),
    makeEntry('worker', 'child', { pid: live.pid, hostname: host, startedAt: now, parentPid: process.pid }),
  ]
  try {
    for (const e of entries) await store.writeEntry(a, e)
    const json = cli('matrix', a, '--json')
    assert.equal(json.status, 0, json.stderr)
    const rows = Object.fromEntries(JSON.parse(json.stdout).entries.map((r) => [r.entryId, r]))
    assert.equal(rows['master-m1'].liveness, 'alive')
    assert.equal(rows['worker-dead'].liveness, 'dead')
    assert.equal(rows['worker-zombie'].liveness, 'zombie')
    assert.equal(rows['worker-recycled'].liveness, 'recycled')
    assert.equal(rows['worker-remote'].liveness, 'foreign-host')
    assert.equal(rows['worker-orphan'].orphan, true)
    assert.equal(rows['worker-child'].orphan, false)
    assert.equal(typeof rows['master-m1'].heartbeatAgeMs, 'number')
    const human = cli('matrix', a)
    assert.equal(human.status, 0)
    assert.match(human.stdout, /^ENTRY\s+ROLE\s+STATUS\s+PID\s+HOST\s+LIVENESS\s+HEARTBEAT\s+PARENT/)
    assert.match(human.stdout, /worker-orphan \(orphan\)/)
    // The default agentDir comes from PI_CODING_AGENT_DIR.
    const viaEnv = spawnSync(process.execPath, [path.join(root, 'bin', 'pi-native.js'), 'matrix', '--json'], {
      encoding: 'utf8',
      env: { ...process.env, PI_CODING_AGENT_DIR: a },
    })
    assert.equal(JSON.parse(viaEnv.stdout).agentDir, a)
    assert.equal(cli('matrix', path.join(a, 'missing')).status, 1)
    assert.equal(cli('matrix', a, 'extra').status, 2)
  } finally {
    live.kill('SIGKILL')
    z.holder.kill('SIGKILL')
  }
})
