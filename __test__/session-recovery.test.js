'use strict'
// pi-native/session-recovery: the behaviors pinned by pi-crew's tests (SPEC §4.4), and a
// differential suite against an oracle built on the real SDK parser and migration.
const test = require('node:test')
const { startLoopProbe } = require('./loop-probe.js')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { backends, root } = require('./helpers.js')
const { makeSessionDir } = require('./session-gen.js')
const { loadSdk, recoverOracle } = require('./session-oracle.js')

const tmpRoot = fs.mkdtempSync(path.join(os.tmpdir(), 'pi-native-sr-'))
test.after(() => fs.rmSync(tmpRoot, { recursive: true, force: true }))
let dirCounter = 0
const freshDir = () => {
  const d = path.join(tmpRoot, `d${dirCounter++}`)
  fs.mkdirSync(d)
  return d
}

// ---- record builders ---------------------------------------------------------------------------
const header = (id = 'sess-1') => ({ type: 'session', version: 3, id, timestamp: '2026-10-03T10:00:00.000Z', cwd: '/w' })
let seq = 0
const base = (type) => ({ type, id: (seq++).toString(16).padStart(8, '0'), parentId: null, timestamp: '2026-10-03T10:00:01.000Z' })
const user = (text) => ({ ...base('message'), message: { role: 'user', content: text, timestamp: 1 } })
const assistant = (text, stopReason = 'stop', extra = []) => ({
  ...base('message'),
  message: { role: 'assistant', content: [...extra, ...(text ? [{ type: 'text', text }] : [])], stopReason, timestamp: 2 },
})
const toolResult = () => ({ ...base('message'), message: { role: 'toolResult', toolCallId: 'c', toolName: 'bash', content: [{ type: 'text', text: 'ok' }], isError: false, timestamp: 3 } })
const jsonl = (records) => records.map((r) => JSON.stringify(r)).join('\n') + '\n'
const writeSession = (dir, name, records, mtimeSec) => {
  const p = path.join(dir, name)
  fs.writeFileSync(p, typeof records === 'string' ? records : jsonl(records))
  if (mtimeSec !== undefined) fs.utimesSync(p, mtimeSec, mtimeSec)
  return p
}

// ---- the oracle: A13–A24 around the SDK's own parseSessionEntries + migrateSessionEntries -----
let sdk
test.before(async () => {
  sdk = await loadSdk()
})
const oracle = (sessionDir, sessionId) => recoverOracle(sdk, sessionDir, sessionId)

function assertSameResult(actual, expected, label) {
  assert.deepStrictEqual(actual, expected, label)
  if (expected) assert.deepStrictEqual(Object.keys(actual), Object.keys(expected), `${label}: property order`)
}

// ---- differential suite -----------------------------------------------------------------------
const CASES = 1200
let generated
test.before(() => {
  const parent = path.join(tmpRoot, 'gen')
  generated = []
  for (let seed = 1; seed <= CASES; seed++) generated.push(makeSessionDir(parent, seed))
})

for (const [name, impl] of backends()) {
  test(`${name}: ${CASES} generated session directories match the SDK oracle`, async () => {
    let recovered = 0
    for (const { dir, sessionId } of generated) {
      const expected = oracle(dir, sessionId)
      const actual = await impl.recoverLastAssistantFromSession(dir, sessionId)
      assertSameResult(actual, expected, `${name} ${dir} id=${JSON.stringify(sessionId)}`)
      if (expected) recovered++
    }
    // The generator must exercise both outcomes substantially.
    assert.ok(recovered > CASES * 0.3 && recovered < CASES * 0.95, `recovered ${recovered}/${CASES}`)
  })
}

test('the generator covers the adversarial shapes', () => {
  let bom = 0, crlf = 0, torn = 0, nul = 0, lone = 0
  for (const { dir } of generated) {
    for (const n of fs.readdirSync(dir)) {
      const p = path.join(dir, n)
      if (!n.endsWith('.jsonl') || !fs.statSync(p).isFile()) continue
      const b = fs.readFileSync(p)
      const t = b.toString('utf8')
      if (t.startsWith('\ufeff')) bom++
      if (t.includes('\r\n')) crlf++
      if (b.length && b[b.length - 1] !== 0x0a) torn++
      if (/^null\r?$/m.test(t)) nul++
      if (t.includes('\\ud800')) lone++
    }
  }
  for (const [k, v] of Object.entries({ bom, crlf, torn, nul, lone })) assert.ok(v >= 10, `${k}: ${v}`)
})

// ---- SPEC §4.4 pinned behaviors, both backends --------------------------------------------------
for (const [name, impl] of backends()) {
  const recover = impl.recoverLastAssistantFromSession

  test(`${name}: full session → last assistant text with sessionId, file, stopReason`, async () => {
    const dir = freshDir()
    const file = writeSession(dir, '2026-10-03T10-00-00-000Z_sess-1.jsonl', [
      header(),
      { ...base('model_change'), provider: 'p', modelId: 'm' },
      user('first'),
      assistant('answer one'),
      user('second'),
      assistant('answer two'),
    ])
    const r = await recover(dir, 'sess-1')
    assert.deepEqual(Object.keys(r), ['sessionId', 'sessionFile', 'text', 'timestamp', 'stopReason'])
    assert.equal(r.text, 'answer two')
    assert.equal(r.sessionId, 'sess-1')
    assert.equal(r.stopReason, 'stop')
    assert.equal(r.sessionFile, file)
    assert.equal(typeof r.timestamp, 'string')
  })

  test(`${name}: trailing user / toolResult, text-less tool calls, torn tail, pending, user-only`, async () => {
    let dir = freshDir()
    writeSession(dir, 'a_s.jsonl', [header('s'), user('q'), assistant('spoken'), user('late question')])
    assert.equal((await recover(dir, 's')).text, 'spoken')

    dir = freshDir()
    writeSession(dir, 'a_s.jsonl', [
      header('s'),
      user('q'),
      assistant('spoken'),
      assistant('', 'toolUse', [{ type: 'toolCall', id: 'c', name: 'bash', arguments: {} }]),
      toolResult(),
    ])
    const r = await recover(dir, 's')
    assert.equal(r.text, 'spoken')
    assert.equal(r.stopReason, 'stop')

    dir = freshDir()
    writeSession(dir, 'a_s.jsonl', jsonl([header('s'), assistant('kept')]) + JSON.stringify(assistant('torn')).slice(0, 40))
    assert.equal((await recover(dir, 's')).text, 'kept')

    dir = freshDir()
    writeSession(dir, 'a_s.jsonl', [header('s'), assistant('complete'), assistant('streaming', 'pending')])
    assert.equal((await recover(dir, 's')).text, 'complete')

    dir = freshDir()
    writeSession(dir, 'a_s.jsonl', [header('s'), user('only me'), user('again')])
    assert.equal(await recover(dir, 's'), null)
  })

  test(`${name}: candidate order — id match beats newer files; newest id match wins; missing/empty dirs`, async () => {
    const dir = freshDir()
    writeSession(dir, '2026-01-01_target.jsonl', [header('target'), assistant('from match')], 1_790_000_000)
    writeSession(dir, '2026-01-02_other.jsonl', [header('other'), assistant('from newer other')], 1_790_000_100)
    assert.equal((await recover(dir, 'target')).text, 'from match')
    writeSession(dir, '2026-01-03_target.jsonl', [header('target'), assistant('newest match')], 1_790_000_050)
    assert.equal((await recover(dir, 'target')).text, 'newest match')
    // Without an id, the newest file of all wins and the id comes from its name.
    const r = await recover(dir)
    assert.equal(r.text, 'from newer other')
    assert.equal(r.sessionId, '2026-01-02_other')
    assert.equal(await recover(path.join(dir, 'missing')), null)
    assert.equal(await recover(freshDir(), 'x'), null)
  })

  // A14/K1: a tie keeps the order of Node's readdir, which is byte order on Unix and the file
  // system's own order on Windows (NTFS: by upper-cased name, so 'other' before '_sess-1').
  // Found by the session-folders fuzz under Wine (seed 1225324379).
  test(`${name}: equal mtimes keep the order of Node's readdir`, async () => {
    const dir = freshDir()
    const names = ['_sess-1.jsonl', 'other.jsonl', 'Zed.jsonl', 'b.jsonl', '~x.jsonl']
    for (const n of names) writeSession(dir, n, [header(n), assistant(`from ${n}`)], 1_790_000_001.5)
    const first = fs.readdirSync(dir).find((n) => n.endsWith('.jsonl'))
    const r = await recover(dir)
    assert.equal(r.text, `from ${first}`, `readdir order: ${fs.readdirSync(dir).join(' ')}`)
    assertSameResult(r, await oracle(dir), 'vs the SDK oracle')
  })

  test(`${name}: a 1 MiB single unterminated line → null`, async () => {
    const dir = freshDir()
    writeSession(dir, 'big_s.jsonl', 'x'.repeat(1024 * 1024))
    assert.equal(await recover(dir, 's'), null)
  })

  test(`${name}: bad input resolves null (never rejects, never crashes)`, async () => {
    for (const bad of [undefined, null, 42, {}, [], 'a\0b', '', Symbol('x')]) {
      assert.equal(await recover(bad, 's'), null, String(bad?.toString?.()))
    }
    const dir = freshDir()
    writeSession(dir, 'a_s.jsonl', [header('s'), assistant('hi')])
    // A non-string id does not group but is echoed (A16).
    const r = await recover(dir, 7)
    assert.equal(r.sessionId, 7)
    await assert.rejects(recover(dir, 's', { deadlineMs: 'soon' }), { name: 'TypeError', message: /options\.deadlineMs/ })
    await assert.rejects(recover(dir, 's', 5), { name: 'TypeError', message: /"options"/ })
  })

  test(`${name}: options — maxFiles, maxFileBytes, deadlineMs`, async () => {
    const dir = freshDir()
    writeSession(dir, 'a_s.jsonl', [header('s'), assistant('older')], 1_790_000_000)
    writeSession(dir, 'b_s.jsonl', [header('s'), user('no answer here')], 1_790_000_100)
    assert.equal((await recover(dir, 's')).text, 'older')
    assert.equal(await recover(dir, 's', { maxFiles: 1 }), null)
    assert.equal(await recover(dir, 's', { maxFileBytes: 10 }), null)
    assert.equal(await recover(dir, 's', { deadlineMs: 0 }), null)
  })

  test(`${name}: deriveSessionPaths (A1–A6)`, () => {
    const R = path.join(tmpRoot, 'artifacts')
    assert.deepEqual(impl.deriveSessionPaths({ agentId: '01_02-agent:helper', artifactsRoot: R }), {
      sessionId: 'helper',
      sessionDir: path.join(R, 'sessions', 'helper'),
    })
    assert.deepEqual(impl.deriveSessionPaths({ sessionId: 'crew-team20261003', agentId: '02_05-verifier', artifactsRoot: R }), {
      sessionId: 'crew-team20261003',
      sessionDir: path.join(R, 'sessions', '02_05-verifier'),
    })
    assert.equal(impl.deriveSessionPaths({ agentId: '../evil', artifactsRoot: R }), null)
    assert.equal(impl.deriveSessionPaths({ sessionId: 'a b/c', artifactsRoot: R }), null)
    assert.equal(impl.deriveSessionPaths({}), null)
    assert.equal(impl.deriveSessionPaths({ agentId: 'ok' }), null)
    assert.equal(impl.deriveSessionPaths({ agentId: 'x\n', artifactsRoot: R }), null)
    // Explicit sessionDir is verbatim, artifactsRoot not needed.
    assert.deepEqual(impl.deriveSessionPaths({ agentId: 'a:b', sessionDir: './x/../y' }), { sessionId: 'b', sessionDir: './x/../y' })
    // An unsafe agentId is tolerated when the sessionId is safe.
    assert.deepEqual(impl.deriveSessionPaths({ sessionId: 'ok', agentId: 'no way', artifactsRoot: 'rel/../r' }), {
      sessionId: 'ok',
      sessionDir: path.join('rel/../r', 'sessions', 'ok'),
    })
    assert.throws(() => impl.deriveSessionPaths({ agentId: 5 }), TypeError)
    assert.throws(() => impl.deriveSessionPaths(undefined), TypeError)
  })

  test(`${name}: appendWorkerSessionArgs (A7–A10)`, () => {
    const ctx = { sessionId: 'sid', sessionDir: '/d' }
    const spawnArgs = ['/cli.js', '--mode', 'json', '-p', 'task text']
    const builtArgs = ['--mode', 'json', '-p', 'task text']
    const spawnRef = spawnArgs
    assert.equal(impl.appendWorkerSessionArgs(spawnArgs, builtArgs, ctx), true)
    assert.equal(spawnArgs, spawnRef, 'mutated in place')
    assert.deepEqual(spawnArgs, ['/cli.js', '--mode', 'json', '-p', '--session-id', 'sid', '--session-dir', '/d', 'task text'])
    assert.deepEqual(builtArgs, ['--mode', 'json', '-p', '--session-id', 'sid', '--session-dir', '/d', 'task text'])
    assert.equal(impl.appendWorkerSessionArgs(spawnArgs, builtArgs, ctx), false)
    assert.equal(spawnArgs.filter((a) => a === '--session-id').length, 1)
    const plain = ['x', '--mode', 'text']
    const partly = ['--session-dir', '/mine']
    assert.equal(impl.appendWorkerSessionArgs(plain, partly, ctx), true)
    assert.deepEqual(plain, ['x', '--mode', 'text', '--session-id', 'sid', '--session-dir', '/d'])
    assert.deepEqual(partly, ['--session-dir', '/mine', '--session-id', 'sid'])
    const eqForm = ['--session-id=x']
    impl.appendWorkerSessionArgs(eqForm, [], ctx)
    assert.deepEqual(eqForm, ['--session-id=x', '--session-id', 'sid', '--session-dir', '/d'])
  })

  test(`${name}: recovery gate and crash predicate (A11–A12)`, () => {
    const saved = process.env.PI_CREW_SESSION_RECOVERY
    try {
      delete process.env.PI_CREW_SESSION_RECOVERY
      assert.equal(impl.resolveSessionRecoveryEnabled(undefined), true)
      assert.equal(impl.resolveSessionRecoveryEnabled(true), true)
      assert.equal(impl.resolveSessionRecoveryEnabled(false), false)
      process.env.PI_CREW_SESSION_RECOVERY = '0'
      assert.equal(impl.resolveSessionRecoveryEnabled(true), false)
      process.env.PI_CREW_SESSION_RECOVERY = '1'
      assert.equal(impl.resolveSessionRecoveryEnabled(false), true)
      process.env.PI_CREW_SESSION_RECOVERY = 'false'
      assert.equal(impl.resolveSessionRecoveryEnabled(undefined), false)
      process.env.PI_CREW_SESSION_RECOVERY = ' Yes '
      assert.equal(impl.resolveSessionRecoveryEnabled(false), true)
      process.env.PI_CREW_SESSION_RECOVERY = 'on'
      assert.equal(impl.resolveSessionRecoveryEnabled(false), false)
    } finally {
      if (saved === undefined) delete process.env.PI_CREW_SESSION_RECOVERY
      else process.env.PI_CREW_SESSION_RECOVERY = saved
    }
    const cases = [
      [{ exitCode: null }, false, true],
      [{ exitCode: 0 }, false, false],
      [{ exitCode: 1 }, false, false],
      [{ exitCode: 137 }, false, false],
      [{ exitCode: 0 }, true, true],
      [{ exitCode: 0, exitStatus: { exitCode: null } }, false, true],
      [{ exitCode: null, exitStatus: { exitCode: 0, killed: false } }, true, false],
      [{ exitCode: 1, exitStatus: { killed: true } }, false, true],
      [{ exitCode: 1, exitStatus: null }, false, false],
    ]
    for (const [result, killed, want] of cases) {
      assert.equal(impl.shouldAttemptSessionRecovery(result, killed), want, JSON.stringify([result, killed]))
    }
  })
}

// ---- scale: tail reads, size caps, the event loop --------------------------------------------
const native = backends()[0][1]

test('long tail scans (marks searched per block, the lines between skipped) match the SDK oracle', async () => {
  // Files of 6–14 MiB with the answer near the front, so the backward scan crosses many blocks
  // (64 KiB doubling to 1 MiB): lines of random length straddle block edges, some over 1 MiB;
  // decoys that spell "assistant" or use \u escapes (raw, so the pre-filter's marks appear in
  // lines it must look at and reject) but do not qualify; answers written with escapes or as a
  // string content.
  let a = 12345
  const rand = (n) => {
    a = (Math.imul(a, 1103515245) + 12345) >>> 0
    return a % n
  }
  const decoys = [
    () => ({ ...base('message'), message: { role: 'assistant', content: [{ type: 'toolCall', id: 'c', name: 'bash', arguments: { command: 'x'.repeat(rand(3000)) } }], stopReason: 'toolUse' } }),
    () => assistant('not yet', 'pending'),
    () => ({ ...base('message'), message: { role: 'assistant', content: '', stopReason: 'stop' } }),
    () => toolResult(),
    () => user('u'.repeat(rand(200_000))),
    () => ({ ...base('message'), message: { role: 'toolResult', content: [{ type: 'text', text: 'y'.repeat(rand(1_500_000)) }] } }),
    () => JSON.stringify(user(`the assistant said ${'w'.repeat(rand(90_000))} cafe`)).replace('cafe', 'caf\\u00e9'),
    () => JSON.stringify(assistant('escaped but pending', 'pending')).replace('"assistant"', '"\\u0061ssistant"'),
  ]
  const decoyLine = () => {
    const d = decoys[rand(decoys.length)]()
    return typeof d === 'string' ? d : JSON.stringify(d)
  }
  const escaped = (text) =>
    JSON.stringify(assistant(text)).replace('"assistant"', '"\\u0061ssistant"').replace('"stopReason"', '"st\\u006fpReason"')
  const answers = [
    (i) => JSON.stringify(assistant(`front answer ${i}`)),
    (i) => escaped(`escaped answer ${i}`),
    (i) => JSON.stringify({ ...base('message'), message: { role: 'assistant', content: `string content ${i}`, stopReason: 'stop' } }),
    (i) => JSON.stringify(assistant(`long answer ${i} ${'z'.repeat(3_000_000)}`)),
  ]
  const dir = freshDir()
  for (let i = 0; i < 6; i++) {
    const lines = [JSON.stringify(header('s'))]
    for (let k = rand(5); k > 0; k--) lines.push(decoyLine())
    lines.push(answers[i % answers.length](i))
    const target = (6 + rand(9)) * 1024 * 1024
    let size = lines.reduce((n, l) => n + l.length + 1, 0)
    while (size < target) {
      const line = rand(7) === 0 ? ' \t' : decoyLine()
      lines.push(line)
      size += line.length + 1
    }
    const file = path.join(dir, `2026_s${i}.jsonl`)
    fs.writeFileSync(file, lines.join('\n') + (i % 2 ? '\n' : '\n  \n'))
    const expected = oracle(dir, `s${i}`)
    assert.match(expected?.text ?? '', /answer|content/, `file ${i}: the oracle finds the front answer`)
    for (const [name, impl] of backends()) {
      assertSameResult(await impl.recoverLastAssistantFromSession(dir, `s${i}`), expected, `${name} file ${i}`)
    }
    fs.rmSync(file)
  }
})

test('long scans shared by two threads (past 8 MiB from the end) match the SDK oracle', async () => {
  // A native scan still without an answer 8 MiB from the end hands out the rest in 1 MiB
  // chunks cut at line starts, to itself and a second thread; the nearest chunk holding an
  // answer decides. Answers at the front, just past the sharing point (the scanning thread's
  // own chunk, the helper's first), on a 1.5 MiB line several cuts fall into, far from both
  // ends; decoys on both sides; no answer at all; and the last 18 MiB blank (not shared: the
  // answer's NBSP goes only with the whole-text trim). Distances count from the sharing point.
  const filler = (n) => JSON.stringify({ ...base('message'), message: { role: 'toolResult', content: [{ type: 'text', text: 'x'.repeat(n) }] } })
  const fill = (bytes) => {
    const lines = []
    for (let size = 0; size < bytes; size += 60_001) lines.push(filler(60_000 - 120))
    return lines
  }
  const MiB = 1024 * 1024
  const SHARE = 8 * MiB
  const dir = freshDir()
  const late = JSON.stringify(assistant('late', 'pending')).replace('"assistant"', '"\\u0061ssistant"')
  const shapes = {
    'at the front': () => [assistant('decoy'), ...fill(MiB / 2), assistant('at the front'), late, ...fill(SHARE + 9 * MiB)],
    'chunk 0': () => [assistant('decoy'), ...fill(9 * MiB), assistant('chunk 0'), late, ...fill(SHARE + 0.5 * MiB)],
    'chunk 1': () => [assistant('decoy'), ...fill(9 * MiB), assistant('chunk 1'), late, ...fill(SHARE + 1.5 * MiB)],
    long: () => [assistant('decoy'), ...fill(9 * MiB), assistant(`long ${'a'.repeat(1.5 * MiB)}`), ...fill(SHARE + 2 * MiB)],
    middle: () => [assistant('decoy'), ...fill(9 * MiB), assistant('middle'), late, ...fill(SHARE + 4 * MiB)],
    none: () => [assistant('only decoy', 'pending'), ...fill(SHARE + 9 * MiB)],
    trimmed: () => [assistant('decoy'), ...fill(9 * MiB), `${JSON.stringify(assistant('trimmed'))}\u00a0`, ' \t\n'.repeat(6 * MiB)],
  }
  for (const [shape, make] of Object.entries(shapes)) {
    const lines = [header('s'), ...make()].map((l) => (typeof l === 'string' ? l : JSON.stringify(l)))
    fs.writeFileSync(path.join(dir, '2026_s.jsonl'), `${lines.join('\n')}\n`)
    const expected = oracle(dir, 's')
    if (shape === 'none') assert.equal(expected, null)
    else assert.ok(expected?.text.startsWith(shape), `${shape}: the oracle finds ${expected?.text.slice(0, 20)}`)
    for (const [name, impl] of backends()) {
      assertSameResult(await impl.recoverLastAssistantFromSession(dir, 's'), expected, `${name} ${shape}`)
    }
  }
})

test('a mark split by a block edge, in a line that spans blocks, still makes the line a candidate', async () => {
  // The answer's only mark (a literal "assistant", or the "\\u" of an escaped one) is cut at
  // every point by an edge 64 KiB, 192 KiB or 320 KiB before the end, where the backward scan's
  // blocks meet (without the edge check the line is skipped and an earlier decoy answers).
  const dir = freshDir()
  const filler = (bytes) =>
    JSON.stringify({ ...base('message'), message: { role: 'toolResult', content: [{ type: 'text', text: '' }] } }).replace(
      '"text":""',
      `"text":"${'x'.repeat(bytes)}"`,
    )
  const variants = [
    { mark: 'assistant', name: 'literal', line: (t) => JSON.stringify(assistant(t)) },
    { mark: '\\u', name: 'escape', line: (t) => JSON.stringify(assistant(t)).replace('"assistant"', '"\\u0061ssistant"') },
  ]
  let files = 0
  for (const { mark, name: kind, line } of variants) {
    for (const edge of [64, 192, 320].map((k) => k * 1024)) {
      for (let cut = 1; cut < mark.length; cut++) {
        const answer = line(`split ${kind} ${edge} ${cut}`)
        const at = answer.indexOf(mark) // the mark's offset in its line
        assert.ok(at > 0)
        // Bytes after the answer's first `cut` mark bytes, to the end of the file: exactly `edge`.
        const after = edge - (answer.length + 1 - at - cut)
        const tail = filler(after - 1 - filler(0).length)
        assert.equal(tail.length + 1, after)
        const text = [JSON.stringify(header('s')), JSON.stringify(assistant('decoy before')), filler(5000), answer, tail].join('\n') + '\n'
        const file = path.join(dir, '2026_s.jsonl')
        fs.writeFileSync(file, text)
        assert.equal(text.length - (text.indexOf(answer) + at + cut), edge) // ASCII: bytes = chars
        const expected = oracle(dir, 's')
        assert.equal(expected?.text, `split ${kind} ${edge} ${cut}`)
        for (const [name, impl] of backends()) {
          assertSameResult(await impl.recoverLastAssistantFromSession(dir, 's'), expected, `${name} ${kind} edge ${edge} cut ${cut}`)
        }
        files++
      }
    }
  }
  assert.equal(files, 27)
})

test('sparse files: exactly 64 MiB is read, one byte more is skipped; 256 MiB with the cap lifted', async () => {
  const dir = freshDir()
  const tail = jsonl([assistant('at the very end')])
  const make = (name, size) => {
    const p = path.join(dir, name)
    const fd = fs.openSync(p, 'w')
    fs.writeSync(fd, `${JSON.stringify(header('s'))}\n`)
    fs.writeSync(fd, `\n${tail}`, size - tail.length - 1)
    fs.closeSync(fd)
    assert.equal(fs.statSync(p).size, size)
    return p
  }
  make('a_s.jsonl', 64 * 1024 * 1024)
  for (const [name, impl] of backends()) {
    assert.equal((await impl.recoverLastAssistantFromSession(dir, 's')).text, 'at the very end', name)
  }
  fs.rmSync(path.join(dir, 'a_s.jsonl'))
  make('a_s.jsonl', 64 * 1024 * 1024 + 1)
  for (const [name, impl] of backends()) assert.equal(await impl.recoverLastAssistantFromSession(dir, 's'), null, name)
  fs.rmSync(path.join(dir, 'a_s.jsonl'))
  make('a_s.jsonl', 256 * 1024 * 1024)
  assert.equal(await native.recoverLastAssistantFromSession(dir, 's'), null)
  const r = await native.recoverLastAssistantFromSession(dir, 's', { maxFileBytes: 512 * 1024 * 1024 })
  assert.equal(r.text, 'at the very end')
  fs.rmSync(dir, { recursive: true })
})

// Under qemu or Wine (scripts/test-arm64.sh, test-windows.sh set PI_NATIVE_EMULATED) a loaded
// machine can need more than the 5 s default deadline for this parse; the property is checked natively.
const emulated = process.env.PI_NATIVE_EMULATED && `a 64 MiB parse may exceed the 5 s default deadline under ${process.env.PI_NATIVE_EMULATED}`
test('the event loop keeps ticking while a 64 MiB file is recovered (full-parse path)', { skip: emulated }, async () => {
  const dir = freshDir()
  // No header: the exact full-file path, which parses every line of the 64 MiB. Written a MiB
  // at a time: made in one piece, the file's text and its copies (~200 MiB) were garbage when
  // the probe started, and their collection, its helper threads starved on a loaded machine,
  // held this thread for 116 ms once (CI, loaded run).
  const line = JSON.stringify(toolResult()) + '\n'
  const chunk = Buffer.from(line.repeat(Math.floor((1024 * 1024) / line.length)))
  const fd = fs.openSync(path.join(dir, 'big_s.jsonl'), 'w')
  try {
    fs.writeSync(fd, jsonl([assistant('first')]))
    for (let i = 0; i < 63; i++) fs.writeSync(fd, chunk)
  } finally {
    fs.closeSync(fd)
  }
  let ticks = 0
  // Gaps less the time the JS thread waited for a CPU other processes held (loop-probe.js): a
  // busy machine stalls every thread, a blocked loop only this one.
  const probe = startLoopProbe(1, () => ticks++)
  // A deadline far off: what is checked is the event loop, not how soon a loaded machine parses.
  const r = await native.recoverLastAssistantFromSession(dir, 's', { deadlineMs: 120_000 })
  const { maxGap, maxOwnGap } = probe.stop()
  assert.equal(r.text, 'first')
  assert.ok(ticks >= 5, `only ${ticks} ticks`)
  // Generous bound for a noisy 2-core machine; a blocked loop would show the whole parse time.
  assert.ok(maxOwnGap < 100, `event loop stalled ${maxOwnGap.toFixed(1)} ms (raw gap ${maxGap.toFixed(1)} ms)`)
  fs.rmSync(dir, { recursive: true })
})

test('recovery promises settle through the environment\'s own libuv handle, which holds the process only while one is pending', async () => {
  const { spawnSync } = require('node:child_process')
  const dir = freshDir()
  writeSession(dir, '2026-10-03T10-00-00-000Z_s.jsonl', [header(), user('q'), assistant('kept')])
  // One child per case, with nothing else to keep its loop alive: it prints what each call
  // settled with (a handle let go while a call is pending would exit first, silently) and must
  // then exit on its own (a handle still held would hang it until the timeout).
  const script = `
    const binding = require(${JSON.stringify(path.join(root, 'index.js'))})
    const s = require(${JSON.stringify(path.join(root, 'lib', 'native.js'))})
    const dir = process.argv[1]
    const cases = {
      scan: () => s.recoverLastAssistantFromSession(dir, 's'),
      deadline: () => s.recoverLastAssistantFromSession(dir, 's', { deadlineMs: 0 }),
      many: () => Promise.all(Array.from({ length: 50 }, (_, i) => s.recoverLastAssistantFromSession(i % 2 ? dir : dir + '-none', 's'))),
    }
    cases[process.argv[2]]().then((r) => {
      process.stdout.write(JSON.stringify({ outbox: binding.recoverySettlesThroughOutbox(), r }))
    })`
  for (const name of ['scan', 'deadline', 'many']) {
    const out = spawnSync(process.execPath, ['-e', script, dir, name], { encoding: 'utf8', timeout: 30000 })
    assert.equal(out.status, 0, `${name}: ${out.error ?? ''} ${out.stderr}`)
    const { outbox, r } = JSON.parse(out.stdout)
    assert.equal(outbox, true, `${name}: settled through napi-rs's thread-safe functions`)
    if (name === 'scan') assert.equal(r.text, 'kept')
    if (name === 'deadline') assert.equal(r, null)
    if (name === 'many') assert.deepEqual(r.map((x) => x && x.text), Array.from({ length: 50 }, (_, i) => (i % 2 ? 'kept' : null)))
  }
  fs.rmSync(dir, { recursive: true })
})

test('public module: subpath exports, ESM, root re-export', async () => {
  const sub = require('pi-native/session-recovery')
  assert.equal(typeof sub.recoverLastAssistantFromSession, 'function')
  assert.equal(require('pi-native').deriveSessionPaths, sub.deriveSessionPaths)
  const esm = await import('pi-native/session-recovery')
  assert.equal(esm.shouldAttemptSessionRecovery({ exitCode: null }, false), true)
  assert.equal(Object.getOwnPropertyDescriptor(sub, 'recoverLastAssistantFromSession').writable, true)
})
