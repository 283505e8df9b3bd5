'use strict'
// The operator CLI on generated agentDirs and session directories: every message and exit code,
// human and --json, --watch, and the unprivileged cases (eperm, unreadable folders) under uid 65534.
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { spawn, spawnSync } = require('node:child_process')
const { root, reapedPid, zombie, worldReadableCopy, worldExecutableNode } = require('./helpers.js')
const { makeEntry, tempAgentDir, matrixDir } = require('./store-fixtures.js')

const BIN = path.join(root, 'bin', 'pi-native.js')
/**
 * Run the CLI and return spawnSync's result. A child that could not be started at all (no
 * output: Wine's process creation failed once under the load of a full CI run) is started
 * again, twice at most; a child that ran is never run again, whatever it did.
 */
const cli = (...args) => {
  for (let attempt = 1; ; attempt++) {
    const r = spawnSync(process.execPath, [BIN, ...args], { encoding: 'utf8', cwd: root })
    if (r.output != null || attempt === 3) return r
  }
}
const cliJson = (...args) => {
  const r = cli(...args, '--json')
  if (r.stdout == null) throw new Error(`pi-native ${args.join(' ')} --json did not start: ${r.error}`)
  return { status: r.status, out: JSON.parse(r.stdout), stderr: r.stderr }
}
const tmp = (prefix) => fs.mkdtempSync(path.join(os.tmpdir(), prefix))
const VERSION = require('../package.json').version

// ---- global: version, help, usage ---------------------------------------------------------------

test('--version, help, help <command>, <command> --help / -h', () => {
  for (const args of [['--version'], ['-v'], ['version']]) {
    const r = cli(...args)
    assert.equal(r.status, 0)
    assert.equal(r.stdout, `${VERSION}\n`)
  }
  for (const args of [['help'], ['--help'], ['-h']]) {
    const r = cli(...args)
    assert.equal(r.status, 0, args.join(' '))
    for (const c of ['pid', 'recover', 'matrix', 'help']) assert.match(r.stdout, new RegExp(`^  ${c} `, 'm'))
    assert.match(r.stdout, /^usage: pi-native <command>/)
  }
  const codes = { pid: [0, 1, 2, 3, 4, 5], recover: [0, 1, 2, 3, 4, 5, 6], matrix: [0, 1, 2] }
  for (const [c, list] of Object.entries(codes)) {
    const viaHelp = cli('help', c)
    assert.equal(viaHelp.status, 0)
    assert.equal(cli(c, '--help').stdout, viaHelp.stdout)
    assert.equal(cli(c, '-h').stdout, viaHelp.stdout)
    assert.match(viaHelp.stdout, new RegExp(`^usage: pi-native ${c}`))
    for (const code of list) assert.match(viaHelp.stdout, new RegExp(`^  ${code}  \\S`, 'm'), `${c} documents exit ${code}`)
  }
  assert.match(cli('help', 'matrix').stdout, /--watch/)
  assert.match(cli('help', 'recover').stdout, /--session-id/)
})

test("every command's --help matches the README: its usage line is the synopsis line, its exit codes are the table's column", () => {
  const { fences, commands } = require('../scripts/readme.js')
  const readme = fs.readFileSync(path.join(root, 'README.md'), 'utf8')
  const synopsis = commands(fences(readme).find((b) => b.kind === 'cli').body).map((l) => l.replace(/^npx /, ''))
  const lines = readme.split('\n')
  const header = lines.find((l) => l.startsWith('| exit | `matrix` |'))
  const columns = header.split('|').slice(2, -1).map((c) => /`(\w+)`/.exec(c)[1])
  const rows = lines.filter((l) => /^\| [0-9] \|/.test(l)).map((l) => l.split('|').slice(1, -1).map((c) => c.trim()))
  for (const c of ['matrix', 'recover', 'pid', 'help']) {
    const help = cli(c, '--help').stdout
    const usage = synopsis.find((l) => l.startsWith(`pi-native ${c} `))
    assert.equal(help.split('\n')[0], `usage: ${usage}`, `${c} --help's usage line is the README's synopsis line`)
    if (c === 'help') continue
    const documented = rows.filter((r) => r[columns.indexOf(c) + 1] !== '—').map((r) => Number(r[0]))
    const listed = [...help.matchAll(/^ {2}(\d) {2}\S/gm)].map((m) => Number(m[1]))
    assert.deepEqual(listed, documented, `${c} --help lists the exit codes of the README's table`)
  }
})

test('usage errors exit 2 with a message and the usage; unknown commands suggest the closest one', () => {
  const cases = [
    [[], /a command is required/, /commands:/],
    [['matrx'], /unknown command 'matrx'; did you mean 'matrix'\?/, /pi-native help lists the commands/],
    [['recovr'], /did you mean 'recover'\?/],
    [['PID'], /did you mean 'pid'\?/],
    [['hlep'], /did you mean 'help'\?/],
    [['xyzzy-frobnicate'], /^pi-native: unknown command 'xyzzy-frobnicate'\n/],
    [['--bogus'], /unknown option --bogus\n/],
    [['help', 'matrx'], /did you mean 'matrix'\?/],
    [['help', 'pid', 'matrix'], /help: at most one command/],
    [['pid'], /at least one pid is required/, /usage: pi-native pid/],
    [['pid', 'abc'], /not a pid: abc/],
    [['pid', '-5'], /Unknown option '-5'/],
    [['pid', '1', '--bogus'], /Unknown option '--bogus'/],
    [['pid', '1', '--session-id', 'x'], /Unknown option '--session-id'/],
    [['recover'], /exactly one session directory/, /usage: pi-native recover/],
    [['recover', 'a', 'b'], /exactly one session directory/],
    [['recover', '/tmp', '--session-id'], /argument missing/],
    [['matrix', 'a', 'b'], /at most one agentDir/, /usage: pi-native matrix/],
    [['matrix', '--watch=1'], /--watch/],
  ]
  for (const [args, ...patterns] of cases) {
    const r = cli(...args)
    assert.equal(r.status, 2, `${args.join(' ')}: ${r.stdout}${r.stderr}`)
    assert.equal(r.stdout, '', args.join(' '))
    assert.match(r.stderr, /^pi-native: /)
    for (const p of patterns) assert.match(r.stderr, p, args.join(' '))
  }
  assert.doesNotMatch(cli('xyzzy-frobnicate').stderr, /did you mean/)
})

// ---- pid ---------------------------------------------------------------------------------------

// The zombie fixture needs a POSIX shell, and Windows has no zombies.
const noZombies = process.platform === 'win32' && 'needs a zombie (POSIX sh); Windows has none'

test('pid: alive 0, dead 1, zombie 3, invalid 5; the first pid that is not alive decides; human and --json', { skip: noZombies }, async () => {
  const dead = await reapedPid()
  const z = await zombie()
  try {
    const alive = cli('pid', String(process.pid))
    assert.equal(alive.status, 0, alive.stderr)
    const [header, row] = alive.stdout.trim().split('\n')
    assert.match(header, /^PID\s+STATE\s+STARTED\s+LEGACY-START$/)
    assert.match(row, new RegExp(`^${process.pid}\\s+alive\\s+\\d{4}-\\d\\d-\\d\\dT`))
    const expect = [
      [[String(process.pid), '1'], 0],
      [[String(dead)], 1],
      [[String(z.pid)], 3],
      [['0'], 5],
      [['99999999999'], 5],
      [[String(process.pid), String(z.pid), String(dead)], 3],
      [[String(dead), String(z.pid)], 1],
      [['0', String(dead)], 5],
    ]
    for (const [pids, code] of expect) {
      assert.equal(cli('pid', ...pids).status, code, `pid ${pids.join(' ')}`)
      assert.equal(cliJson('pid', ...pids).status, code, `pid --json ${pids.join(' ')}`)
    }
    const r = cliJson('pid', String(process.pid), String(dead), String(z.pid), '0')
    assert.deepEqual(
      r.out.map((x) => [x.pid, x.state]),
      [
        [process.pid, 'alive'],
        [dead, 'dead'],
        [z.pid, 'zombie'],
        [0, 'invalid'],
      ],
    )
    assert.equal(r.out[0].identity.pid, process.pid)
    assert.equal(typeof r.out[0].identity.startTimeMs, 'number')
    // qemu-user fakes the starttime of /proc/<own pid>/stat for the process it runs, so only a
    // native run can compare the CLI's reading with this process's own.
    if (process.env.PI_NATIVE_EMULATED !== 'qemu') {
      assert.equal(r.out[0].legacyStartTime, require('pi-native').getProcessStartTime(process.pid))
    }
    assert.equal(r.out[1].identity, null)
    assert.match(cli('pid', String(z.pid)).stdout, new RegExp(`^${z.pid}\\s+zombie`, 'm'))
  } finally {
    z.holder.kill('SIGKILL')
  }
})

// ---- recover -----------------------------------------------------------------------------------

const line = (o) => `${JSON.stringify(o)}\n`
const header = (id, version = 3) => line({ type: 'session', version, id, timestamp: '2026-10-03T10:00:00.000Z', cwd: '/' })
const assistant = (text, stopReason = 'stop') =>
  line({ type: 'message', id: 'a', parentId: null, timestamp: 'T1', message: { role: 'assistant', content: [{ type: 'text', text }], stopReason } })
const user = line({ type: 'message', id: 'u', parentId: null, timestamp: 'T0', message: { role: 'user', content: 'hi' } })

/** Write files with strictly decreasing mtimes in the given order (first = newest). */
function writeOrdered(dir, files) {
  const now = Date.now() / 1000
  files.forEach(([name, content], i) => {
    const p = path.join(dir, name)
    if (content === 'DIR') fs.mkdirSync(p)
    else if (typeof content === 'number') {
      fs.writeFileSync(p, '')
      fs.truncateSync(p, content) // sparse: the size is what counts
    } else fs.writeFileSync(p, content)
    fs.utimesSync(p, now - 100 * (i + 1), now - 100 * (i + 1))
  })
}

test('recover: recovered (0), nothing recoverable (1), no candidates (3), missing (4), not a directory (5); human and --json', { skip: process.platform === 'win32' && 'the fixtures include a POSIX symbolic link to nothing, which Windows does not give an unprivileged user' }, () => {
  const dir = tmp('pi-native-cli-recover-')
  try {
    // recovered
    const ok = path.join(dir, 'ok')
    fs.mkdirSync(ok)
    const file = path.join(ok, '2026-10-03T10-00-00-000Z_w1.jsonl')
    fs.writeFileSync(file, header('w1') + assistant('final words'))
    const human = cli('recover', ok, '--session-id', 'w1')
    assert.equal(human.status, 0, human.stderr)
    assert.match(human.stdout, /final words/)
    assert.ok(human.stdout.includes(`file:        ${file}`))
    const json = cliJson('recover', ok)
    assert.equal(json.status, 0)
    assert.equal(json.out.outcome, 'recovered')
    assert.deepEqual(json.out.result, { sessionId: '2026-10-03T10-00-00-000Z_w1', sessionFile: file, text: 'final words', timestamp: 'T1', stopReason: 'stop' })
    assert.equal(typeof json.out.elapsedMs, 'number')

    // the directory itself
    const notDir = path.join(dir, 'plain.jsonl')
    fs.writeFileSync(notDir, header('x') + assistant('x'))
    const empty = path.join(dir, 'empty')
    fs.mkdirSync(empty)
    const others = path.join(dir, 'others')
    fs.mkdirSync(others)
    fs.writeFileSync(path.join(others, 'notes.txt'), 'x')
    fs.writeFileSync(path.join(others, 'session.json'), '{}')
    const dirCases = [
      [path.join(dir, 'missing'), 4, 'missing', /^nothing recoverable: .*missing does not exist\n$/],
      [path.join(dir, 'missing', 'deeper'), 4, 'missing', /does not exist/],
      [notDir, 5, 'not-a-directory', /plain\.jsonl is not a directory \(recover takes the session directory, not a session file\)/],
      [empty, 3, 'no-candidates', /no session files \(\*\.jsonl\) in .*empty \(it is empty\)/],
      [others, 3, 'no-candidates', /no session files \(\*\.jsonl\) in .*others \(it holds 2 other entries\)/],
    ]
    for (const [p, code, outcome, message] of dirCases) {
      const h = cli('recover', p)
      assert.equal(h.status, code, p)
      assert.match(h.stdout, message)
      const j = cliJson('recover', p)
      assert.equal(j.status, code)
      assert.equal(j.out.outcome, outcome)
      assert.equal(j.out.result, null)
      assert.deepEqual(j.out.candidates, [])
      assert.match(j.out.message, message.source.startsWith('^') ? /./ : message)
    }

    // candidates that give nothing, each with its reason
    const a = path.join(dir, 'a')
    fs.mkdirSync(a)
    writeOrdered(a, [
      ['1-empty.jsonl', ''],
      ['2-huge.jsonl', 64 * 1024 * 1024 + 1],
      ['3-dir.jsonl', 'DIR'],
      ['4-old.jsonl', header('old') + assistant('old but never looked at')],
    ])
    fs.symlinkSync(path.join(a, 'nowhere'), path.join(a, '5-dangling.jsonl'))
    const b = path.join(dir, 'b')
    fs.mkdirSync(b)
    writeOrdered(b, [
      ['1-user-only.jsonl', header('u') + user + assistant('still thinking', 'pending')],
      ['2-legacy.jsonl', header('l', 1) + '5\n' + assistant('legacy')],
      ['3-torn.jsonl', header('t') + assistant('no newline yet').trimEnd()],
      ['x_wanted.jsonl', header('w') + user],
    ])
    const ja = cliJson('recover', a)
    assert.equal(ja.status, 1)
    assert.equal(ja.out.outcome, 'nothing-recoverable')
    assert.deepEqual(
      ja.out.candidates.map((c) => [path.basename(c.file), c.lookedAt, c.reason]),
      [
        ['1-empty.jsonl', true, 'empty'],
        ['2-huge.jsonl', true, 'size-cap'],
        ['3-dir.jsonl', true, 'unreadable'],
        ['4-old.jsonl', false, 'not-looked-at'],
        ['5-dangling.jsonl', false, 'unreadable'],
      ],
    )
    assert.match(ja.out.message, /looked at 3 of 5 session files/)
    const ha = cli('recover', a)
    assert.equal(ha.status, 1)
    assert.match(ha.stdout, /^nothing recoverable in .*: looked at 3 of 5 session files/)
    assert.match(ha.stdout, /^  1-empty\.jsonl: is empty$/m)
    assert.match(ha.stdout, /^  2-huge\.jsonl: is 67108865 bytes, over the 67108864-byte cap/m)
    assert.match(ha.stdout, /^  3-dir\.jsonl: is a directory, not a regular file$/m)
    assert.match(ha.stdout, /^  4-old\.jsonl: not looked at: only the 3 first candidates are/m)
    assert.match(ha.stdout, /^  5-dangling\.jsonl: cannot be read \(ENOENT/m)

    // --session-id puts the matching file first; it takes the place of the oldest
    const jb = cliJson('recover', b, '--session-id', 'wanted')
    assert.equal(jb.status, 1)
    assert.deepEqual(
      jb.out.candidates.map((c) => [path.basename(c.file), c.matchesSessionId, c.reason]),
      [
        ['x_wanted.jsonl', true, 'no-assistant-turn'],
        ['1-user-only.jsonl', false, 'no-assistant-turn'],
        ['2-legacy.jsonl', false, 'unmigratable'],
        ['3-torn.jsonl', false, 'not-looked-at'],
      ],
    )
    assert.equal(jb.out.sessionId, 'wanted')
    const hb = cli('recover', b, '--session-id', 'wanted')
    assert.match(hb.stdout, /^  x_wanted\.jsonl \(matches --session-id\): has no complete assistant turn/m)
    assert.match(hb.stdout, /^  2-legacy\.jsonl: is an old-format session the SDK cannot migrate/m)
    // Without the id, the torn file is looked at: its last line has no newline yet.
    const jt = cliJson('recover', b)
    assert.deepEqual(
      jt.out.candidates.map((c) => [path.basename(c.file), c.reason]).slice(0, 3),
      [
        ['1-user-only.jsonl', 'no-assistant-turn'],
        ['2-legacy.jsonl', 'unmigratable'],
        ['3-torn.jsonl', 'no-assistant-turn'],
      ],
    )
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
})

// ---- matrix ------------------------------------------------------------------------------------

test('matrix: entries with liveness (alive, dead, zombie, recycled, foreign-host), orphans marked; healthy exits 0', { skip: noZombies }, async () => {
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
    // The reaped pid may be given to a new process meanwhile on a busy machine: then the entry's
    // pid belongs to a process started after it was registered (recycled). The oracle is
    // process.kill, asked before and after the run.
    const inUse = () => {
      try {
        process.kill(dead, 0)
        return true
      } catch (err) {
        return err.code !== 'ESRCH'
      }
    }
    const before = inUse()
    const json = cliJson('matrix', a)
    const after = inUse()
    assert.equal(json.status, 0, json.stderr)
    assert.equal(json.out.healthy, true)
    assert.deepEqual(json.out.problems, [])
    const rows = Object.fromEntries(json.out.entries.map((r) => [r.entryId, r]))
    assert.equal(rows['master-m1'].liveness, 'alive')
    if (before === after) assert.equal(rows['worker-dead'].liveness, before ? 'recycled' : 'dead')
    else assert.ok(['dead', 'recycled'].includes(rows['worker-dead'].liveness), rows['worker-dead'].liveness)
    assert.equal(rows['worker-zombie'].liveness, 'zombie')
    assert.equal(rows['worker-recycled'].liveness, 'recycled')
    assert.equal(rows['worker-remote'].liveness, 'foreign-host')
    assert.equal(rows['worker-orphan'].orphan, true)
    assert.equal(rows['worker-child'].orphan, false)
    assert.equal(typeof rows['master-m1'].heartbeatAgeMs, 'number')
    assert.deepEqual(json.out.summary, { entries: 7, orphans: 1, invalidFiles: 0, nameMismatches: 0, strayFiles: 0, staleLocks: 0, orphanedTempFiles: 0, inFlight: 0, problems: 0 })
    const human = cli('matrix', a)
    assert.equal(human.status, 0)
    assert.match(human.stdout, /^ENTRY\s+ROLE\s+STATUS\s+PID\s+HOST\s+LIVENESS\s+HEARTBEAT\s+PARENT/)
    assert.match(human.stdout, /worker-orphan \(orphan\)/)
    assert.match(human.stdout, /\nsummary: 7 valid entries \(1 orphan\), 0 invalid files, .* — healthy\n$/)
    assert.doesNotMatch(human.stdout, /problems in/)
    // The default agentDir comes from PI_CODING_AGENT_DIR.
    const viaEnv = spawnSync(process.execPath, [BIN, 'matrix', '--json'], { encoding: 'utf8', env: { ...process.env, PI_CODING_AGENT_DIR: a } })
    assert.equal(JSON.parse(viaEnv.stdout).agentDir, a)
  } finally {
    live.kill('SIGKILL')
    z.holder.kill('SIGKILL')
  }
})

/** An agentDir holding one example of every kind of problem, plus two valid entries. */
function brokenAgentDir() {
  const a = tempAgentDir('pi-native-cli-matrix-')
  const d = matrixDir(a)
  fs.mkdirSync(d, { recursive: true })
  const w = (name, v) => fs.writeFileSync(path.join(d, name), typeof v === 'string' ? v : JSON.stringify(v, null, '\t'))
  w('master-ok.json', makeEntry('master', 'ok'))
  w('renamed.json', makeEntry('worker', 'r'))
  w('worker-v8.json', makeEntry('worker', 'v8', { entryId: 'v8' }))
  const kind = makeEntry('worker', 'kind')
  kind.agent.resumeContext.contextPointers[0].kind = 'file'
  w('worker-kind.json', kind)
  w('worker-bom.json', `\ufeff${JSON.stringify(makeEntry('worker', 'bom'))}`)
  w('worker-bombad.json', `\ufeff{}`)
  w('worker-nj.json', '{oops')
  w('worker-empty.json', '')
  w('worker-array.json', '[]')
  w('notes.txt', 'x')
  fs.mkdirSync(path.join(d, 'worker-dir.json'))
  fs.symlinkSync(path.join(d, 'nowhere'), path.join(d, 'worker-link.json'))
  const stale = path.join(d, 'worker-v8.json.lock')
  fs.mkdirSync(stale)
  const old = new Date(Date.now() - 10 * 60 * 1000)
  fs.utimesSync(stale, old, old)
  fs.mkdirSync(path.join(d, 'master-ok.json.lock')) // held right now
  const uuid = '12345678-1234-4234-8234-123456789abc'
  const deadWriter = `worker-kind.json.4194999.${uuid}.tmp` // above pid_max: never alive
  w(deadWriter, 'x')
  const live = `master-ok.json.${process.pid}.${uuid}.tmp`
  w(live, 'x')
  const oldLive = `renamed.json.${process.pid}.${uuid.replace('c', 'd')}.tmp`
  w(oldLive, 'x')
  fs.utimesSync(path.join(d, oldLive), old, old)
  return { a, d, deadWriter, live, oldLive }
}

test("matrix: a native lock's private folder (network folders) is in flight while young, an orphaned temp once 5 minutes old", () => {
  const a = tempAgentDir('pi-native-cli-private-')
  const d = matrixDir(a)
  fs.mkdirSync(d, { recursive: true })
  const young = 'master-x.json.lock.0f8fad5b-d9cb-469f-a165-70867728950e'
  const left = 'master-x.json.lock.1f8fad5b-d9cb-469f-a165-70867728950e'
  fs.mkdirSync(path.join(d, young))
  fs.mkdirSync(path.join(d, left))
  const old = new Date(Date.now() - 3_600_000)
  fs.utimesSync(path.join(d, left), old, old)
  const j = cliJson('matrix', a)
  assert.deepEqual(j.out.problems.map((p) => [p.file, p.kind]), [[left, 'orphaned-temp']])
  assert.match(j.out.problems[0].reason, /sweepOrphanTempFiles removes it/)
  assert.deepEqual(j.out.inFlight.map((p) => [p.file, p.kind]), [[young, 'lock']])
  assert.equal(j.out.summary.strayFiles, 0)
  fs.rmSync(a, { recursive: true, force: true })
})

test('matrix: every file that is not a valid entry, with the reason; stale locks and orphaned temp files; exit 1', { skip: process.platform === 'win32' && 'the fixtures include a POSIX symbolic link to nothing, which Windows does not give an unprivileged user' }, () => {
  const { a, d, deadWriter, live, oldLive } = brokenAgentDir()
  const j = cliJson('matrix', a)
  assert.equal(j.status, 1)
  assert.equal(j.out.healthy, false)
  assert.equal(j.out.dir, d)
  assert.deepEqual(j.out.entries.map((e) => e.entryId).sort(), ['master-ok', 'worker-r'])
  const byFile = Object.fromEntries(j.out.problems.map((p) => [p.file, p]))
  const kinds = Object.fromEntries(j.out.problems.map((p) => [p.file, p.kind]))
  assert.deepEqual(kinds, {
    'notes.txt': 'stray',
    'renamed.json': 'name-mismatch',
    'worker-array.json': 'schema',
    'worker-bom.json': 'bom',
    'worker-bombad.json': 'bom',
    'worker-dir.json': 'unreadable',
    'worker-empty.json': 'not-json',
    'worker-kind.json': 'schema',
    'worker-link.json': 'unreadable',
    'worker-nj.json': 'not-json',
    'worker-v8.json': 'schema',
    'worker-v8.json.lock': 'stale-lock',
    [deadWriter]: 'orphaned-temp',
    [oldLive]: 'orphaned-temp',
  })
  assert.deepEqual([byFile['worker-v8.json'].rule, byFile['worker-v8.json'].field], ['V8', 'entryId'])
  assert.deepEqual([byFile['worker-kind.json'].rule, byFile['worker-kind.json'].field], ['V2', 'agent.resumeContext.contextPointers[0].kind'])
  assert.deepEqual([byFile['worker-array.json'].rule, byFile['worker-array.json'].field], ['V1', ''])
  assert.equal(byFile['renamed.json'].entryId, 'worker-r')
  assert.ok(byFile['worker-v8.json.lock'].ageMs >= 9 * 60 * 1000)
  assert.equal(byFile[deadWriter].pid, 4194999)
  assert.deepEqual(j.out.inFlight.map((p) => [p.file, p.kind]).sort(), [
    [live, 'temp'],
    ['master-ok.json.lock', 'lock'],
  ])
  assert.deepEqual(j.out.summary, { entries: 2, orphans: 0, invalidFiles: 9, nameMismatches: 1, strayFiles: 1, staleLocks: 1, orphanedTempFiles: 2, inFlight: 2, problems: 14 })

  // "Held right now" means refreshed within 2 s: a holder would have refreshed it meanwhile
  // (the first run can take longer than that under emulation).
  fs.utimesSync(path.join(d, 'master-ok.json.lock'), new Date(), new Date())
  const h = cli('matrix', a)
  assert.equal(h.status, 1)
  const expected = [
    /^ENTRY\s+ROLE/m,
    new RegExp(`^problems in ${d.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}:$`, 'm'),
    /^  notes\.txt: a file the store does not use/m,
    /^  renamed\.json: holds entry "worker-r" but is not named "worker-r\.json"/m,
    /^  worker-v8\.json: breaks schema rule V8: entryId must be role \+ "-" \+ agent\.resumeContext\.sessionId = "worker-v8"; it is the string "v8"/m,
    /^  worker-kind\.json: breaks schema rule V2: agent\.resumeContext\.contextPointers\[0\]\.kind must be one of "repository".*; it is the string "file"/m,
    /^  worker-array\.json: breaks schema rule V1: the file must hold one JSON object; it holds an array/m,
    /^  worker-bom\.json: starts with a byte-order mark \(BOM\).*the rest is a valid entry: save it again without the BOM$/m,
    /^  worker-bombad\.json: starts with a byte-order mark \(BOM\).*the rest is not a valid entry either$/m,
    /^  worker-nj\.json: is not valid JSON \(/m,
    /^  worker-empty\.json: is empty, so the store ignores it$/m,
    /^  worker-dir\.json: is a directory, not an entry file$/m,
    /^  worker-link\.json: cannot be read \(ENOENT.*a symbolic link to nothing\)$/m,
    /^  worker-v8\.json\.lock: stale lock: not refreshed for 10m/m,
    new RegExp(`^  ${deadWriter.replace(/\./g, '\\.')}: orphaned temporary file .* writer pid 4194999 is gone`, 'm'),
    new RegExp(`^  ${oldLive.replace(/\./g, '\\.')}: temporary file 10m old; writer pid ${process.pid} still exists`, 'm'),
    /^in flight:$/m,
    /^  master-ok\.json\.lock: lock held by a writer right now/m,
    new RegExp(`^  ${live.replace(/\./g, '\\.')}: write in progress by pid ${process.pid}`, 'm'),
    /\nsummary: 2 valid entries \(0 orphans\), 9 invalid files, 1 misnamed file, 1 stray file, 1 stale lock, 2 orphaned temp files, 2 in flight — 14 problems\n$/,
  ]
  for (const re of expected) assert.match(h.stdout, re)
  fs.rmSync(a, { recursive: true, force: true })
})

test('matrix: only invalid files → "no valid entries" and the reasons (the 10-misnamed-entries report)', () => {
  const a = tempAgentDir()
  const d = matrixDir(a)
  fs.mkdirSync(d, { recursive: true })
  for (let i = 0; i < 10; i++) fs.writeFileSync(path.join(d, `w${i}.json`), JSON.stringify(makeEntry('worker', `s${i}`, { entryId: `w${i}` })))
  const h = cli('matrix', a)
  assert.equal(h.status, 1)
  assert.match(h.stdout, /^no valid entries in /)
  assert.equal(h.stdout.match(/breaks schema rule V8: entryId must be/g).length, 10)
  assert.match(h.stdout, /summary: 0 valid entries \(0 orphans\), 10 invalid files,.* — 10 problems\n$/)
  fs.rmSync(a, { recursive: true, force: true })
})

test('matrix: missing folder and a folder that is a file are problems with their own message (exit 1)', () => {
  const a = tempAgentDir()
  const missing = cli('matrix', a)
  assert.equal(missing.status, 1)
  assert.match(missing.stdout, /^there is no process-matrix directory at .*state[\\/]process-matrix: no host has registered an entry under this agentDir yet/)
  const jm = cliJson('matrix', path.join(a, 'nope'))
  assert.equal(jm.status, 1)
  assert.deepEqual(jm.out.problems.map((p) => p.kind), ['missing-directory'])
  assert.equal(jm.out.summary.problems, 1)
  fs.mkdirSync(path.join(a, 'state'))
  fs.writeFileSync(matrixDir(a), 'not a folder')
  const file = cli('matrix', a)
  assert.equal(file.status, 1)
  assert.match(file.stdout, /state[\\/]process-matrix exists but is not a directory, so the store can neither read nor write entries there/)
  assert.deepEqual(cliJson('matrix', a).out.problems.map((p) => p.kind), ['not-a-directory'])
  fs.rmSync(a, { recursive: true, force: true })
})

// matrix --watch: __test__/cli-watch.test.js and cli-watch-events.test.js.

// ---- unprivileged: eperm, unreadable folders and files -----------------------------------------

test('as uid 65534: pid eperm exits 4; unreadable session dir exits 6; unreadable matrix folder and entry exit 1', { skip: process.getuid?.() !== 0 && 'needs root to drop privileges' }, () => {
  const copy = worldReadableCopy()
  const data = tmp('pi-native-cli-priv-')
  try {
    fs.cpSync(path.join(root, 'bin'), path.join(copy, 'bin'), { recursive: true })
    spawnSync('chmod', ['-R', 'a+rX', copy])
    fs.chmodSync(data, 0o755)
    const nodeCopy = worldExecutableNode(copy)
    const run = (...args) => spawnSync(nodeCopy, [path.join(copy, 'bin', 'pi-native.js'), ...args], { uid: 65534, gid: 65534, encoding: 'utf8', cwd: copy })

    const eperm = run('pid', '1')
    assert.equal(eperm.status, 4, eperm.stderr)
    assert.match(eperm.stdout, /^1\s+eperm/m)
    assert.equal(JSON.parse(run('pid', '1', '--json').stdout)[0].state, 'eperm')

    const sessions = path.join(data, 'sessions')
    fs.mkdirSync(sessions, { mode: 0o700 })
    fs.chmodSync(sessions, 0o700)
    fs.writeFileSync(path.join(sessions, 'a.jsonl'), header('a') + assistant('secret'))
    const r = run('recover', sessions)
    assert.equal(r.status, 6, r.stdout + r.stderr)
    assert.match(r.stdout, /^nothing recoverable: cannot list .*sessions \(EACCES\)/)
    assert.equal(JSON.parse(run('recover', sessions, '--json').stdout).outcome, 'unreadable')

    const locked = path.join(data, 'locked')
    fs.mkdirSync(matrixDir(locked), { recursive: true })
    fs.chmodSync(matrixDir(locked), 0o700)
    const m = run('matrix', locked, '--json')
    assert.equal(m.status, 1, m.stderr)
    assert.deepEqual(JSON.parse(m.stdout).problems.map((p) => p.kind), ['unreadable-directory'])
    assert.match(run('matrix', locked).stdout, /^cannot list .*process-matrix \(EACCES: permission denied/)

    const open = path.join(data, 'open')
    fs.mkdirSync(matrixDir(open), { recursive: true })
    spawnSync('chmod', ['-R', 'a+rx', open])
    fs.writeFileSync(path.join(matrixDir(open), 'master-x.json'), JSON.stringify(makeEntry('master', 'x')), { mode: 0o600 })
    fs.chmodSync(path.join(matrixDir(open), 'master-x.json'), 0o600)
    const f = run('matrix', open)
    assert.equal(f.status, 1, f.stderr)
    assert.match(f.stdout, /^  master-x\.json: cannot be read \(EACCES: permission denied/m)
  } finally {
    fs.rmSync(copy, { recursive: true, force: true })
    fs.rmSync(data, { recursive: true, force: true })
  }
})
