'use strict'
// The CLI on hostile folders (issue 42, item 3): a FIFO named as an entry, a link to /dev/zero,
// a 600 MB sparse entry, a link to /proc/self/pagemap, and session files of the same kinds:
// `matrix` and `recover` answer with exit 0 or 1 and a line that says what the file is, never
// exit 2, a signal or a hang (each run has a deadline). Every string that came from a file
// (entry ids, host names, file names, parser messages, recovered text) reaches the terminal
// escaped: no C0 control but the line feed, no DEL, no C1 (U+009B is CSI to an 8-bit terminal);
// `--json` stays valid JSON carrying the same strings, escaped as JSON. The oracle for "the
// same strings" is JSON.parse of the output against what the test wrote.
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { spawnSync } = require('node:child_process')
const { root } = require('./helpers.js')
const { makeEntry, tempAgentDir, matrixDir } = require('./store-fixtures.js')
const { inline, multiline, jsonParts, jsonSafe, writeTable } = require('../bin/terminal.js')

const BIN = path.join(root, 'bin', 'pi-native.js')
const posix = process.platform !== 'win32'
const linux = process.platform === 'linux'

/** Runs the CLI with a deadline: a hang is a failure, not a stuck suite. */
function cli(args, env = {}) {
  const r = spawnSync(process.execPath, [BIN, ...args], { encoding: 'utf8', timeout: 60_000, killSignal: 'SIGKILL', maxBuffer: 1 << 30, env: { ...process.env, ...env } })
  assert.equal(r.error?.code, undefined, `pi-native ${args.join(' ')}: ${r.error}`)
  assert.equal(r.signal, null, `pi-native ${args.join(' ')} ended by ${r.signal}`)
  return r
}

// Terminal controls: C0 but the line feed, DEL, C1.
const CONTROLS = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/u

function assertNoControls(text, what) {
  const m = CONTROLS.exec(text)
  assert.equal(m, null, `${what} holds U+${m?.[0].charCodeAt(0).toString(16).padStart(4, '0')} at ${m?.index}: ${JSON.stringify(text.slice(Math.max(0, (m?.index ?? 0) - 40), (m?.index ?? 0) + 40))}`)
}

for (const backend of ['native', 'js']) {
  const env = { PI_NATIVE_BACKEND: backend }

  test(`${backend}: matrix on a FIFO entry, a /dev/zero link, a 600 MB sparse entry, a /proc/self/pagemap link: exit 1 and what each file is, never a hang`, { skip: !linux && 'FIFOs, /dev/zero and /proc are Linux fixtures here' }, () => {
    const cases = [
      ['fifo', (f) => spawnSync('mkfifo', [f]), 'not-a-file', /is a FIFO \(named pipe\), not a regular file/],
      ['zero', (f) => fs.symlinkSync('/dev/zero', f), 'not-a-file', /is a character device, not a regular file/],
      ['sparse', (f) => fs.truncateSync((fs.writeFileSync(f, ''), f), 600 * 1024 * 1024), 'too-large', /holds more than 64 MiB/],
      ['pagemap', (f) => fs.symlinkSync('/proc/self/pagemap', f), null, /master-x\.json: /],
    ]
    for (const [name, make, kind, says] of cases) {
      const a = tempAgentDir()
      try {
        fs.mkdirSync(matrixDir(a), { recursive: true })
        make(path.join(matrixDir(a), 'master-x.json'))
        const ok = makeEntry('master', 'ok', { hostname: 'elsewhere' })
        fs.writeFileSync(path.join(matrixDir(a), 'master-ok.json'), JSON.stringify(ok, null, '\t') + '\n')
        const h = cli(['matrix', a], env)
        assert.equal(h.status, 1, `${name}: ${h.stderr}`)
        assert.match(h.stdout, says, name)
        assert.match(h.stdout, /^master-ok\s/m, `${name}: the valid entry is listed`)
        const j = cli(['matrix', a, '--json'], env)
        assert.equal(j.status, 1, name)
        const report = JSON.parse(j.stdout)
        assert.deepEqual(report.entries.map((e) => e.entryId), ['master-ok'], name)
        const problem = report.problems.find((p) => p.file === 'master-x.json')
        assert.ok(problem, name)
        if (kind) assert.equal(problem.kind, kind, name)
        assert.equal(h.stderr + j.stderr, '', name)
      } finally {
        fs.rmSync(a, { recursive: true, force: true })
      }
    }
  })

  test(`${backend}: recover on session files that are a FIFO, a /dev/zero link and a 600 MB sparse file: exit 1, each reason, never a hang`, { skip: !linux && 'FIFOs and /dev/zero are Linux fixtures here' }, () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pi-native-hostile-sessions-'))
    try {
      spawnSync('mkfifo', [path.join(dir, '1_fifo.jsonl')])
      fs.symlinkSync('/dev/zero', path.join(dir, '2_zero.jsonl'))
      fs.writeFileSync(path.join(dir, '3_sparse.jsonl'), '')
      fs.truncateSync(path.join(dir, '3_sparse.jsonl'), 600 * 1024 * 1024)
      const h = cli(['recover', dir], env)
      assert.equal(h.status, 1, h.stderr)
      assert.match(h.stdout, /1_fifo\.jsonl: (is a FIFO \(named pipe\), not a regular file|not looked at)/)
      assert.match(h.stdout, /2_zero\.jsonl: (is a character device, not a regular file|not looked at)/)
      assert.match(h.stdout, /3_sparse\.jsonl: (is 629145600 bytes, over the 67108864-byte cap|not looked at)/)
      const j = JSON.parse(cli(['recover', dir, '--json'], env).stdout)
      assert.equal(j.outcome, 'nothing-recoverable')
      assert.equal(j.candidates.length, 3)
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  })
}

// ESC, CSI, OSC (title; 52 = clipboard write), C1 CSI, DEL, a bell, a carriage return.
const EVIL = '\u001b[2J\u001b]0;owned\u0007\u001b]52;c;ZXZpbA==\u0007\u009b31m\u007f\r'

test('matrix: entry ids, host names, parent session ids, file names and parser messages from the folder are escaped; --json carries them as JSON escapes', { skip: !posix && 'file names with control characters are POSIX-only' }, () => {
  const a = tempAgentDir()
  try {
    const d = matrixDir(a)
    fs.mkdirSync(d, { recursive: true })
    const sessionId = `s${EVIL}`
    const entry = makeEntry('worker', sessionId, { hostname: `h${EVIL}`, parentSessionId: `p${EVIL}`, parentPid: 1 })
    fs.writeFileSync(path.join(d, `${entry.entryId}.json`), JSON.stringify(entry, null, '\t') + '\n')
    fs.writeFileSync(path.join(d, `stray${EVIL}.txt`), 'x')
    fs.writeFileSync(path.join(d, `bad${EVIL}.json`), `{"x": "${EVIL.replace(/[\u0000-\u001f]/g, '')}" oops`)
    const h = cli(['matrix', a])
    assert.equal(h.status, 1)
    assertNoControls(h.stdout, 'matrix stdout')
    assertNoControls(h.stderr, 'matrix stderr')
    assert.ok(h.stdout.includes(inline(entry.entryId)), 'the entry id, escaped')
    assert.ok(h.stdout.includes(inline(entry.hostname)), 'the host name, escaped')
    assert.ok(h.stdout.includes(inline(`stray${EVIL}.txt`)), 'the stray file, escaped')
    const j = cli(['matrix', a, '--json'])
    assertNoControls(j.stdout, 'matrix --json stdout')
    const report = JSON.parse(j.stdout)
    assert.deepEqual(report.entries.map((e) => [e.entryId, e.hostname, e.parentSessionId]), [[entry.entryId, entry.hostname, entry.parentSessionId]])
    assert.deepEqual(report.problems.map((p) => p.file).sort(), [`bad${EVIL}.json`, `stray${EVIL}.txt`].sort())
  } finally {
    fs.rmSync(a, { recursive: true, force: true })
  }
})

test('recover: the recovered text, file name, stop reason and timestamp are escaped (line feeds and tabs kept); --json carries them exactly', { skip: !posix && 'file names with control characters are POSIX-only' }, () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pi-native-hostile-recover-'))
  try {
    const text = `first line\n\tsecond ${EVIL} end`
    const name = `2026-01-01T00-00-00-000Z_s${EVIL}.jsonl`
    const line = (o) => JSON.stringify(o) + '\n'
    fs.writeFileSync(
      path.join(dir, name),
      line({ type: 'session', version: 3, id: `s${EVIL}`, timestamp: '2026-01-01T00:00:00.000Z', cwd: '/' }) +
        line({ type: 'message', id: 'a', parentId: null, timestamp: `t${EVIL}`, message: { role: 'assistant', content: [{ type: 'text', text }], stopReason: `stop${EVIL}` } }),
    )
    const h = cli(['recover', dir])
    assert.equal(h.status, 0, h.stderr)
    assertNoControls(h.stdout.replaceAll('\t', ' '), 'recover stdout (tabs aside)')
    assert.ok(h.stdout.includes('first line\n\tsecond '), 'line feeds and tabs of the text are kept')
    assert.ok(h.stdout.includes(multiline(text)))
    assert.ok(h.stdout.includes(inline(`stop${EVIL}`)))
    const j = cli(['recover', dir, '--json'])
    assertNoControls(j.stdout, 'recover --json stdout')
    const out = JSON.parse(j.stdout)
    assert.equal(out.result.text, text)
    assert.equal(out.result.stopReason, `stop${EVIL}`)
    assert.equal(out.result.sessionFile, path.join(dir, name))
    assert.equal(out.fileSessionId, `s${EVIL}`)
    // A usage error quoting an argument escapes it too.
    const u = cli(['pid', `1${EVIL}`])
    assert.equal(u.status, 2)
    assertNoControls(u.stderr, 'usage error')
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
})

test('recover --session-id other: a file of another session is shown as that session\'s, not as "session id: other"', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pi-native-other-session-'))
  try {
    const line = (o) => JSON.stringify(o) + '\n'
    fs.writeFileSync(
      path.join(dir, '2026-01-01T00-00-00-000Z_mine.jsonl'),
      line({ type: 'session', version: 3, id: 'mine', timestamp: '2026-01-01T00:00:00.000Z', cwd: '/' }) +
        line({ type: 'message', id: 'a', parentId: null, timestamp: 't', message: { role: 'assistant', content: 'answer', stopReason: 'stop' } }),
    )
    const h = cli(['recover', dir, '--session-id', 'other'])
    assert.equal(h.status, 0)
    assert.doesNotMatch(h.stdout, /session id: +other\b/)
    assert.match(h.stdout, /^session id: +mine \(another session's file: no file named for --session-id other gave an answer\)$/m)
    const j = JSON.parse(cli(['recover', dir, '--session-id', 'other', '--json']).stdout)
    assert.equal(j.fileSessionId, 'mine')
    assert.equal(j.sessionId, 'other')
    assert.equal(j.result.sessionId, 'other', "the library's own answer is unchanged (the original's contract)")
    const same = cli(['recover', dir, '--session-id', 'mine'])
    assert.match(same.stdout, /^session id: +mine$/m)
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
})

test('the output helpers: streamed JSON is JSON.stringify\'s text; escapes keep the value; a 200,000-row table and report are written without spreading rows into a call', async () => {
  const samples = [
    { a: 1, b: [1, 2, { c: 'x' }], d: {}, e: [], f: null, g: undefined, h: () => 1, i: new Date(0), j: [undefined, () => 1], k: { l: [[1], { m: 'n\n' }] } },
    [],
    [{ x: [] }, 'y', 3],
    'just a string',
    { only: { deeper: { still: [1, { deep: true }] } } },
  ]
  for (const v of samples) {
    for (const space of ['', '  ']) assert.equal([...jsonParts(v, space)].join(''), JSON.stringify(v, null, space))
  }
  const evil = { s: `x${EVIL}\u2028` }
  assert.deepEqual(JSON.parse(jsonSafe(JSON.stringify(evil))), evil)
  assertNoControls(jsonSafe(JSON.stringify(evil)), 'jsonSafe')
  assertNoControls(inline(EVIL), 'inline')
  assertNoControls(multiline(`a\n${EVIL}`).replace('\n', ''), 'multiline')

  // 200,000 rows: once a spread into Math.max (RangeError) and one string for the whole table.
  let written = 0
  let lines = 0
  let largest = 0
  const sink = {
    write: async (s) => {
      written += s.length
      lines += s.split('\n').length - 1
      largest = Math.max(largest, s.length)
    },
  }
  const rows = Array.from({ length: 200_000 }, (_, i) => [`master-${i}`, 'running', String(i)])
  await writeTable(sink, ['ENTRY', 'STATUS', 'PID'], rows)
  assert.equal(lines, 200_001)
  assert.ok(largest < 1000, 'row by row')
  assert.ok(written > 200_000 * 20)
  const report = { entries: rows.map(([entryId, status, pid]) => ({ entryId, status, pid })), problems: [] }
  let parts = 0
  let text = ''
  for (const part of jsonParts(report, '  ')) {
    parts++
    if (text.length < 1e6) text += part
  }
  assert.ok(parts > 200_000, `${parts} parts`)
  assert.ok(text.startsWith(JSON.stringify(report, null, '  ').slice(0, 1000)))
})
