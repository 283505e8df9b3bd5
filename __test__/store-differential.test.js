'use strict'
// The store against Node itself: CAS outcomes vs util.isDeepStrictEqual, file bytes vs
// JSON.stringify, reads vs JSON.parse + a validator written from V1–V20, timestamps vs
// Date.parse — over generated inputs, for both backends.
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { isDeepStrictEqual } = require('node:util')
const { spawnSync } = require('node:child_process')
const { backends } = require('./helpers.js')
const { rng } = require('./session-gen.js')
const { makeEntry, tempAgentDir, matrixDir, leftovers } = require('./store-fixtures.js')
const { isProcessMatrixEntry } = require('../js/process-matrix-store.js')

const clone = (v) => structuredClone(v)

function base() {
  const e = makeEntry('worker', 'cas-1', { tmuxPanePid: 0, parentPid: 7, taskSummary: 'ünïcødé \u2028 "q"' })
  e.agent.resumeContext.contextPointers[0].metadata = { depth: { a: [1, 2, { b: null }] }, zero: 0 }
  return e
}

/** Reorder keys recursively (deep-strict equality ignores key order). */
function reorder(v) {
  if (Array.isArray(v)) return v.map(reorder)
  if (v && typeof v === 'object') return Object.fromEntries(Object.keys(v).reverse().map((k) => [k, reorder(v[k])]))
  return v
}

/** A random object node inside `v` (depth-first pick). */
function pickObject(r, v) {
  const nodes = []
  const walk = (x) => {
    if (x && typeof x === 'object') {
      nodes.push(x)
      for (const k of Object.keys(x)) walk(x[k])
    }
  }
  walk(v)
  return r.pick(nodes)
}

class Custom {}
const MUTATIONS = [
  ['identity', (v) => v],
  ['reorder', (v) => reorder(v)],
  ['extra key', (v, r) => ((pickObject(r, v).extra = 1), v)],
  ['undefined-valued key', (v, r) => ((pickObject(r, v).ghost = undefined), v)],
  ['-0 for 0', (v) => ((v.tmuxPanePid = -0), v)],
  ['-0 in metadata', (v) => ((v.agent.resumeContext.contextPointers[0].metadata.zero = -0), v)],
  ['1.0 stays equal', (v) => ((v.parentPid = 7.0), v)],
  ['string for number', (v) => ((v.pid = String(v.pid)), v)],
  ['NaN', (v) => ((v.pid = NaN), v)],
  ['null for value', (v) => ((v.taskSummary = null), v)],
  ['null prototype', (v) => Object.assign(Object.create(null), v)],
  ['null-prototype nested', (v) => ((v.agent = Object.assign(Object.create(null), v.agent)), v)],
  ['class instance', (v) => Object.assign(new Custom(), v)],
  ['Date value', (v) => ((v.startedAt = new Date(v.startedAt)), v)],
  ['Map value', (v) => ((v.agent.resumeContext.contextPointers[0].metadata = new Map()), v)],
  ['boxed number', (v) => ((v.pid = new Number(v.pid)), v)], // eslint-disable-line no-new-wrappers
  ['array hole', (v) => ((v.agent.resumeContext.resourceProfileNames = [, 'default'].slice(0)), v)], // eslint-disable-line no-sparse-arrays
  ['holey same length', (v) => { const a = new Array(1); v.agent.resumeContext.resourceProfileNames = a; return v }],
  ['array extra prop', (v) => ((v.agent.resumeContext.resourceProfileNames.extra = 1), v)],
  ['array undefined element', (v) => ((v.agent.resumeContext.resourceProfileNames = [undefined]), v)],
  ['symbol key', (v) => ((v[Symbol('s')] = 1), v)],
  ['non-enumerable extra (still equal)', (v) => (Object.defineProperty(v, 'hidden', { value: 1, enumerable: false }), v)],
  ['getter (still equal)', (v) => { const pid = v.pid; delete v.pid; Object.defineProperty(v, 'pid', { get: () => pid, enumerable: true }); return v }],
  ['frozen (still equal)', (v) => Object.freeze(v)],
  ['cycle', (v) => ((v.agent.self = v), v)],
  ['function value', (v) => ((v.fn = () => 1), v)],
  ['bigint value', (v) => ((v.pid = 1000n), v)],
  ['missing key', (v) => (delete v.taskSummary, v)],
  ['changed string', (v) => ((v.hostname = 'host-b'), v)],
  ['lone surrogate', (v) => ((v.taskSummary = '\ud800'), v)],
  ['array order', (v) => ((v.agent.resumeContext.resourceProfileNames = ['default', 'x'].reverse()), v)],
  ['numeric-looking key', (v) => ((v['10'] = 1), v)],
]

for (const [name, s] of backends()) {
  test(`${name}: CAS agrees with util.isDeepStrictEqual on ${MUTATIONS.length * 12} generated expected values`, async () => {
    const a = tempAgentDir()
    const r = rng(42)
    const file = () => path.join(matrixDir(a), 'worker-cas-1.json')
    let agreed = 0
    let matches = 0
    for (let round = 0; round < 12; round++) {
      for (const [label, mutate] of MUTATIONS) {
        const current = base()
        // Sometimes the file itself carries -0 (JSON.stringify would write 0).
        const rawNegZero = round % 4 === 3
        fs.mkdirSync(matrixDir(a), { recursive: true })
        const text = JSON.stringify(current, null, '\t').replace('"tmuxPanePid": 0', rawNegZero ? '"tmuxPanePid": -0' : '"tmuxPanePid": 0')
        fs.writeFileSync(file(), text)
        let expected = mutate(clone(current), r)
        if (round % 3 === 1) {
          // A second mutation, where the first left the value mutable (frozen, getters…).
          try {
            expected = r.pick(MUTATIONS)[1](expected, r)
          } catch {}
        }
        const oracle = isDeepStrictEqual(JSON.parse(text), expected)
        const next = { ...base(), heartbeatAt: `2026-07-19T00:01:${String(round).padStart(2, '0')}.000Z` }
        const useSync = round % 2 === 1
        let got
        if (useSync) got = s.writeEntryIfUnchangedSync(a, expected, next)
        else got = await s.writeEntryIfUnchanged(a, 'worker-cas-1', expected, next)
        assert.equal(got, oracle, `${name} round ${round} ${label} (sync=${useSync}, rawNegZero=${rawNegZero})`)
        const after = fs.readFileSync(file(), 'utf8')
        assert.equal(after, oracle ? JSON.stringify(next, null, '\t') + '\n' : text, `${label}: file content`)
        agreed++
        if (oracle) matches++
      }
    }
    assert.ok(matches > 20 && matches < agreed - 100, `matches ${matches}/${agreed}`)
    assert.deepEqual(leftovers(a), ['worker-cas-1.json'])
  })

  test(`${name}: expected undefined matches only an absent, corrupt or invalid file`, async () => {
    const a = tempAgentDir()
    const e = base()
    const f = path.join(matrixDir(a), 'worker-cas-1.json')
    assert.equal(await s.writeEntryIfUnchanged(a, e.entryId, undefined, e), true) // absent
    assert.equal(await s.writeEntryIfUnchanged(a, e.entryId, undefined, e), false) // valid now
    assert.equal(await s.writeEntryIfUnchanged(a, e.entryId, null, e), false)
    fs.writeFileSync(f, '{corrupt')
    assert.equal(await s.writeEntryIfUnchanged(a, e.entryId, undefined, e), true)
    fs.writeFileSync(f, JSON.stringify({ ...e, status: 'bogus' }))
    assert.equal(await s.writeEntryIfUnchanged(a, e.entryId, undefined, e), true)
    // Valid only through V8's non-ISO Date.parse: the native CAS must ask V8 (suspended CAS).
    for (const [startedAt, valid] of [['2026/07/19', true], ['foo 1', true], ['garbage', false], ['2026-02-30', true]]) {
      fs.writeFileSync(f, JSON.stringify({ ...e, startedAt }))
      assert.equal(Number.isFinite(Date.parse(startedAt)), valid, startedAt)
      assert.equal(await s.writeEntryIfUnchanged(a, e.entryId, undefined, e), !valid, startedAt)
      fs.writeFileSync(f, JSON.stringify({ ...e, startedAt }))
      assert.equal(s.writeEntryIfUnchangedSync(a, { ...e, startedAt }, e), valid, `sync ${startedAt}`)
    }
    assert.deepEqual(leftovers(a), ['worker-cas-1.json'])
  })
}

// ---- serialization --------------------------------------------------------------------------------
test('file bytes are exactly JSON.stringify(entry, null, "\\t") + "\\n" (both backends)', async () => {
  const odd = makeEntry('master', 'ser', {
    taskSummary: 'quote " backslash \\ slash / tab \t nl \n ctrl \u0001 \u001f del \u007f é 🙂 \u2028 \u2029 lone \ud800 \udfff',
    numbers: [0, -0, 1e21, 1e-7, 0.1, 123456789012345680000, 5e-324, -1.5, NaN, Infinity, -Infinity, 2 ** 53],
    undef: undefined,
    fn: () => 1,
    sym: Symbol('x'),
    arr: [undefined, () => 1, Symbol('y'), null],
    date: new Date(0),
    nested: { toJSON: () => ({ replaced: true }) },
    '2': 'integer keys first',
    '1': 'ascending',
    empty: {},
    emptyArr: [],
  })
  for (const [name, s] of backends()) {
    const a = tempAgentDir()
    await s.writeEntry(a, odd)
    const raw = fs.readFileSync(s.entryPath(a, odd.entryId))
    assert.deepEqual(raw, Buffer.from(JSON.stringify(odd, null, '\t') + '\n', 'utf8'), name)
    s.writeEntryIfUnchangedSync(a, JSON.parse(raw.toString('utf8')), odd) // may or may not match; bytes when it does
  }
})

// ---- reads: JSON grammar and validation -------------------------------------------------------
/** The oracle read: JSON.parse then the V1–V20 validator (undefined on any failure). */
function oracleRead(text) {
  let v
  try {
    v = JSON.parse(text)
  } catch {
    return undefined
  }
  return isProcessMatrixEntry(v) ? v : undefined
}

/** One-rule violations (each must read as absent) and edge cases that stay valid. */
function validationCases() {
  const e = () => makeEntry('worker', 'v')
  const rc = (f) => (x) => (f(x.agent.resumeContext), x)
  const violations = {
    'V1 array': () => [e()],
    'V1 null': () => null,
    'V1 number': () => 5,
    'V2 agent missing': (x = e()) => (delete x.agent, x),
    'V2 agentId blank': (x = e()) => ((x.agent.agentId = ' \u00a0\ufeff'), x),
    'V2 agentId number': (x = e()) => ((x.agent.agentId = 5), x),
    'V2 sessionId blank': rc((r) => (r.sessionId = '\u3000')).bind(null, e()),
    'V2 cwd missing': rc((r) => delete r.cwd).bind(null, e()),
    'V2 provider': rc((r) => (r.provider = 'PI')).bind(null, e()),
    'V2 sessionDir null': rc((r) => (r.sessionDir = null)).bind(null, e()),
    'V2 modelRef number': rc((r) => (r.modelRef = 1)).bind(null, e()),
    'V2 resourceProfileNames not array': rc((r) => (r.resourceProfileNames = 'x')).bind(null, e()),
    'V2 resourceProfileNames blank element': rc((r) => (r.resourceProfileNames = ['a', ' '])).bind(null, e()),
    'V2 contextPointers missing': rc((r) => delete r.contextPointers).bind(null, e()),
    'V2 pointer kind': rc((r) => (r.contextPointers[0].kind = 'file')).bind(null, e()),
    'V2 pointer readOnly': rc((r) => (r.contextPointers[0].readOnly = 'true')).bind(null, e()),
    'V2 pointer uri blank': rc((r) => (r.contextPointers[0].uri = '')).bind(null, e()),
    'V2 pointer metadata array': rc((r) => (r.contextPointers[0].metadata = [])).bind(null, e()),
    'V2 pointer digest null': rc((r) => (r.contextPointers[0].digest = null)).bind(null, e()),
    'V3 role': (x = e()) => ((x.role = 'Worker'), x),
    'V4 resumable not object': (x = e()) => ((x.resumable = 'yes'), x),
    'V4 resumable agent differs': (x = e()) => ((x.resumable = { agent: { ...clone(x.agent), agentId: 'other' }, lastCode: 'running' }), x),
    // Raw text: JSON.stringify cannot write -0; equal agents except 0 vs -0 are not deep-strict-equal.
    'V4 resumable agent -0 vs 0': (x = e()) => {
      x.agent.resumeContext.contextPointers[0].metadata = { z: 0 }
      x.resumable = { agent: clone(x.agent), lastCode: 'running' }
      const text = JSON.stringify(x)
      const at = text.lastIndexOf('"z":0')
      return `${text.slice(0, at)}"z":-0${text.slice(at + 5)}`
    },
    'V4 lastCode': (x = e()) => ((x.resumable = { agent: clone(x.agent), lastCode: 'done' }), x),
    'V4 taskRef 513': (x = e()) => ((x.resumable = { agent: clone(x.agent), lastCode: 'running', taskRef: 'r'.repeat(513) }), x),
    'V5 terminal code 1.5': (x = e()) => ((x.status = 'closed'), (x.terminal = { code: 1.5, signal: null, observedAt: '2026-07-19T00:00:00Z' }), x),
    'V5 terminal signal 101': (x = e()) => ((x.status = 'closed'), (x.terminal = { code: null, signal: 's'.repeat(101), observedAt: '2026-07-19T00:00:00Z' }), x),
    'V5 terminal observedAt bad': (x = e()) => ((x.status = 'closed'), (x.terminal = { code: 0, signal: null, observedAt: 'garbage' }), x),
    'V5 notificationDeliveredAt null': (x = e()) => ((x.status = 'closed'), (x.terminal = { code: 0, signal: null, observedAt: '2026-07-19T00:00:00Z', notificationDeliveredAt: null }), x),
    'V6 terminal but running': (x = e()) => ((x.terminal = { code: 0, signal: null, observedAt: '2026-07-19T00:00:00Z' }), x),
    'V7 resumable status without payload': (x = e()) => ((x.status = 'resumable'), x),
    'V8 entryId': (x = e()) => ((x.entryId = 'worker-other'), x),
    'V9 pid 1.5': (x = e()) => ((x.pid = 1.5), x),
    'V9 pid 2^53': (x = e()) => ((x.pid = 2 ** 53), x),
    'V9 pid string': (x = e()) => ((x.pid = '1'), x),
    'V10 hostname 256': (x = e()) => ((x.hostname = 'h'.repeat(256)), x),
    'V10 hostname null': (x = e()) => ((x.hostname = null), x),
    'V11 startedAt empty': (x = e()) => ((x.startedAt = ''), x),
    'V11 heartbeatAt month 13': (x = e()) => ((x.heartbeatAt = '2026-13-01T00:00:00Z'), x),
    'V11 heartbeatAt beyond range': (x = e()) => ((x.heartbeatAt = '+275760-09-13T00:00:00.001Z'), x),
    'V11 startedAt surrounding space': (x = e()) => ((x.startedAt = ' 2026-07-19T00:00:00Z '), x),
    'V12 status': (x = e()) => ((x.status = 'stopped'), x),
    'V13 parentPid 0': (x = e()) => ((x.parentPid = 0), x),
    'V13 parentPid null': (x = e()) => ((x.parentPid = null), x),
    'V14 parentSessionId 513': (x = e()) => ((x.parentSessionId = 'p'.repeat(513)), x),
    'V15 tmuxSession number': (x = e()) => ((x.tmuxSession = 1), x),
    'V16 tmuxPanePid 1.5': (x = e()) => ((x.tmuxPanePid = 1.5), x),
    'V17 taskRef 513': (x = e()) => ((x.taskRef = 't'.repeat(513)), x),
    'V17 taskSummary 2001 (UTF-16 units)': (x = e()) => ((x.taskSummary = '🙂'.repeat(1000) + 'x'), x),
  }
  const valid = {
    base: () => e(),
    'V2 blank optional strings allowed': rc((r) => ((r.sessionDir = ''), (r.modelRef = ' '))).bind(null, e()),
    'V2 empty pointers and names': rc((r) => ((r.contextPointers = []), (r.resourceProfileNames = []))).bind(null, e()),
    'V2 metadata anything inside': rc((r) => (r.contextPointers[0].metadata = { deep: [null, { x: -0 }] })).bind(null, e()),
    'V4 resumable equal agent': (x = e()) => ((x.status = 'resumable'), (x.resumable = { agent: clone(x.agent), lastCode: 'closed', taskRef: 'r'.repeat(512) }), x),
    'V5 closed with terminal': (x = e()) => ((x.status = 'closed'), (x.terminal = { code: -9, signal: 'SIGKILL', observedAt: 'Sat, 19 Jul 2026 00:00:00 GMT', notificationDeliveredAt: '2026-07-19' }), x),
    'V9 pid 0 and negative': (x = e()) => ((x.pid = -12), x),
    'V10 hostname empty': (x = e()) => ((x.hostname = ''), x),
    'V11 non-ISO timestamps': (x = e()) => ((x.startedAt = '2026/07/19'), (x.heartbeatAt = 'foo 1'), x),
    'V11 max date': (x = e()) => ((x.heartbeatAt = '+275760-09-13T00:00:00.000Z'), x),
    'V11 hour 24': (x = e()) => ((x.heartbeatAt = '2026-07-19T24:00:00Z'), x),
    'V16 tmuxPanePid negative': (x = e()) => ((x.tmuxPanePid = -3), x),
    'V17 taskSummary 2000 units': (x = e()) => ((x.taskSummary = '🙂'.repeat(1000)), x),
    'V18 windDownReason anything': (x = e()) => ((x.windDownReason = null), x),
    'V19 unknown fields kept': (x = e()) => ((x.future = { a: 1 }), x),
  }
  return { violations, valid }
}

/** Raw file texts: JSON grammar edges around a valid entry. */
function grammarCases() {
  const t = JSON.stringify(makeEntry('worker', 'v'), null, '\t')
  return {
    plain: t,
    bom: `\ufeff${t}`,
    nbsp: `\u00a0${t}`,
    'trailing comma': t.replace(/\n}$/, ',\n}'),
    comment: `// c\n${t}`,
    'crlf and spaces': `\r\n ${t.replace(/\n/g, '\r\n')} \r\n`,
    'duplicate status, last wins': t.replace('"status": "running"', '"status": "bogus", "status": "running"'),
    'duplicate status, last loses': t.replace('"status": "running"', '"status": "running", "status": "bogus"'),
    '__proto__ key': t.replace('"status"', '"__proto__": {"x": 1}, "status"'),
    'pid 1e3': t.replace('"pid": 1000', '"pid": 1e3'),
    'pid 1.0': t.replace('"pid": 1000', '"pid": 1.0'),
    'pid 1e400': t.replace('"pid": 1000', '"pid": 1e400'),
    'pid 9007199254740993': t.replace('"pid": 1000', '"pid": 9007199254740993'),
    'pid -0': t.replace('"pid": 1000', '"pid": -0'),
    'pid leading zero': t.replace('"pid": 1000', '"pid": 01000'),
    'pid +1': t.replace('"pid": 1000', '"pid": +1000'),
    'lone surrogate escapes': t.replace('"hostname": "host-a"', '"hostname": "\\ud800\\udc00\\udfff"'),
    'raw control char': t.replace('"hostname": "host-a"', '"hostname": "a\tb"'),
    'invalid utf-8 bytes': Buffer.concat([Buffer.from(t.replace('"host-a"', '"host-')), Buffer.from([0xff, 0xfe]), Buffer.from('"' + t.slice(t.indexOf('"host-a"') + 8))]),
    'deep metadata (1000 levels)': t.replace('"readOnly": true', `"readOnly": true, "metadata": {"d": ${'['.repeat(1000)}${']'.repeat(1000)}}`),
    'top-level array': `[${t}]`,
    empty: '',
    'only whitespace': ' \n\t',
    'NaN literal': t.replace('"pid": 1000', '"pid": NaN'),
  }
}

/** Every read case as [label, file body, want]: violations (absent), valid edges, grammar edges (undefined: the oracle decides). */
function readCases() {
  const { violations, valid } = validationCases()
  const text = (v) => (typeof v === 'string' ? v : JSON.stringify(v))
  return [
    ...Object.entries(violations).map(([label, make]) => [label, text(make()), false]),
    ...Object.entries(valid).map(([label, make]) => [label, text(make()), true]),
    ...Object.entries(grammarCases()).map(([label, body]) => [`grammar: ${label}`, body, undefined]),
  ]
}

for (const [name, s] of backends()) {
  test(`${name}: reads agree with JSON.parse + the V1–V20 validator (one violation at a time, edges, grammar)`, async () => {
    const a = tempAgentDir()
    const dir = matrixDir(a)
    fs.mkdirSync(dir, { recursive: true })
    let n = 0
    const check = async (label, text, want) => {
      const f = path.join(dir, `case-${n++}.json`)
      fs.writeFileSync(f, text)
      const got = await s.readEntry(a, path.basename(f, '.json'))
      const oracle = oracleRead(Buffer.isBuffer(text) ? text.toString('utf8') : text)
      assert.deepStrictEqual(got, oracle, `${name} ${label}: oracle`)
      if (oracle !== undefined) assert.equal(JSON.stringify(got), JSON.stringify(oracle), `${label}: key order`)
      if (want !== undefined) assert.equal(got !== undefined, want, `${name} ${label}: expected ${want ? 'valid' : 'absent'}`)
    }
    for (const [label, body, want] of readCases()) await check(label, body, want)
    // listEntries sees the same set, in name order.
    const listed = await s.listEntries(a)
    const names = fs.readdirSync(dir).filter((x) => x.endsWith('.json')).sort()
    const want = names.map((x) => oracleRead(fs.readFileSync(path.join(dir, x), 'utf8'))).filter((v) => v !== undefined)
    assert.deepStrictEqual(listed, want)
    assert.ok(want.length > 15)
  })

  // The JS backend reads a listing ahead and parses it later, in pieces of ~48 KiB, and parses
  // what waits once 32 Mi characters do (js/process-matrix-store.js); native reads on 4 threads
  // and hands pieces over. 40 MiB of valid entries among invalid files crosses every one of those
  // boundaries.
  test(`${name}: listEntries across read-ahead batches, pieces and parses of what waited: the oracle's entries, in name order`, async (t) => {
    const a = tempAgentDir()
    t.after(() => fs.rmSync(a, { recursive: true, force: true }))
    const dir = matrixDir(a)
    fs.mkdirSync(dir, { recursive: true })
    const r = rng(0x42)
    const big = (i) => {
      const e = makeEntry('worker', `big-${i}`)
      e.agent.resumeContext.contextPointers[0].metadata = { blob: String(i).repeat(4 << 20) }
      return `${JSON.stringify(e, null, '\t')}\n`
    }
    const small = (i) => `${JSON.stringify(makeEntry('master', `s-${i}`, { taskRef: 'x'.repeat(r.int(500)) }), null, '\t')}\n`
    const invalid = ['', '{', 'null', '[]', '{"entryId":"worker-x"}', `${JSON.stringify(makeEntry('worker', 'bad', { pid: 1.5 }))}`]
    // Most valid entries are in files named after their id, as hardened mode's listing wants.
    const put = (id, text) => fs.writeFileSync(path.join(dir, `${r.chance(0.9) ? id : `case-${id}`}.json`), text)
    let bigs = 0
    for (let i = 0; i < 400; i++) {
      const roll = r.int(40)
      if (roll === 0 && bigs < 10) put(`worker-big-${bigs}`, big(bigs++))
      else if (roll < 4) fs.writeFileSync(path.join(dir, `case-invalid-${i}.json`), r.pick(invalid))
      else put(`master-s-${i}`, small(i))
    }
    while (bigs < 10) put(`worker-big-${bigs}`, big(bigs++))
    fs.mkdirSync(path.join(dir, 'case-dir.json'))
    const names = fs.readdirSync(dir).filter((x) => x.endsWith('.json') && x !== 'case-dir.json').sort()
    const read = names.map((x) => [x.slice(0, -5), oracleRead(fs.readFileSync(path.join(dir, x), 'utf8'))]).filter(([, v]) => v !== undefined)
    const want = read.map(([, v]) => v)
    assert.ok(want.length > 300, `${want.length} valid`)
    assert.deepStrictEqual(await s.listEntries(a), want)
    // Hardened mode's listing: only entries in files named after their id.
    const strict = read.filter(([id, v]) => v.entryId === id).map(([, v]) => v)
    assert.ok(strict.length > 200 && strict.length < want.length)
    process.env.PI_NATIVE_HARDENED = '1'
    try {
      assert.deepStrictEqual(await s.listEntries(a), strict)
    } finally {
      delete process.env.PI_NATIVE_HARDENED
    }
  })

  // mkfifo: Windows has no FIFOs at file-system paths (named pipes live under \\.\pipe\).
  const noFifo = process.platform === 'win32' && 'no FIFOs at file-system paths on Windows'
  test(`${name}: a FIFO or a directory named *.json reads as absent and never hangs`, { skip: noFifo }, async () => {
    const a = tempAgentDir()
    const good = makeEntry('worker', 'good')
    await s.writeEntry(a, good)
    const dir = matrixDir(a)
    assert.equal(spawnSync('mkfifo', [path.join(dir, 'worker-fifo.json')]).status, 0)
    fs.mkdirSync(path.join(dir, 'worker-dir.json'))
    if (name === 'native') {
      assert.equal(await s.readEntry(a, 'worker-fifo'), undefined)
      assert.deepStrictEqual(await s.listEntries(a), [good])
    }
    assert.equal(await s.readEntry(a, 'worker-dir'), undefined)
    fs.rmSync(path.join(dir, 'worker-fifo.json'))
  })
}

// Linux reads a cached entry on the JS thread (openat2 RESOLVE_CACHED + preadv2 RWF_NOWAIT,
// ARCHITECTURE.md "Reads on the JS thread"); what it answers must be what the pool's read answers,
// and a read the kernel would have to wait for must go to the pool.
const readNowSkip =
  process.platform !== 'linux'
    ? 'reads on the JS thread are Linux-only'
    : process.env.PI_NATIVE_EMULATED === 'qemu' && 'qemu-user does not implement openat2'
const memoryRoot = fs.existsSync('/dev/shm') && fs.statSync('/dev/shm').isDirectory() ? '/dev/shm' : null
for (const [where, root] of [['tmpdir', null], ['/dev/shm', memoryRoot]]) {
  test(`native (${where}): a cached entry is read on the JS thread, with the pool's answer`, { skip: readNowSkip || (where !== 'tmpdir' && !root && 'no /dev/shm') }, async () => {
    const binding = require('../index.js')
    const native = require('../lib/native.js')
    const a = root ? fs.mkdtempSync(path.join(root, 'pi-native-read-now-')) : tempAgentDir()
    try {
      const dir = matrixDir(a)
      fs.mkdirSync(dir, { recursive: true })
      let n = 0
      let taken = 0
      for (const [label, body] of readCases()) {
        const f = path.join(dir, `case-${n++}.json`)
        fs.writeFileSync(f, body)
        const pooled = await binding.storeRead(f) // the pool's answer; the directory is learned
        const now = binding.storeReadNow(f)
        const size = Buffer.byteLength(body)
        if (size > 0 && size <= 64 * 1024) {
          assert.notEqual(now, undefined, `${label}: a cached ${size}-byte file is read on the JS thread`)
          taken++
        }
        if (now !== undefined) assert.deepStrictEqual(now, pooled, `${label}: same answer as the pool`)
        const oracle = oracleRead(Buffer.isBuffer(body) ? body.toString('utf8') : body)
        assert.deepStrictEqual(await native.readEntry(a, path.basename(f, '.json')), oracle, `${label}: oracle`)
      }
      assert.ok(taken > 40, `${taken} reads on the JS thread`)
      // A read that would update the access time of a file on a disk (relatime: its first read
      // after a write) dirties the inode, which may wait for the journal: left to the pool.
      const fresh = path.join(dir, 'worker-fresh.json')
      fs.writeFileSync(fresh, JSON.stringify(makeEntry('worker', 'fresh')))
      const mount = spawnSync('findmnt', ['-n', '-o', 'FSTYPE,OPTIONS', '--target', dir], { encoding: 'utf8' }).stdout ?? ''
      const onDisk = !/^(tmpfs|ramfs)\s/.test(mount)
      if (onDisk && /\brelatime\b/.test(mount)) assert.equal(binding.storeReadNow(fresh), undefined, 'a fresh file on a relatime disk mount')
      if (!onDisk) assert.notEqual(binding.storeReadNow(fresh), undefined, 'a fresh file in memory')
      const freshPooled = await binding.storeRead(fresh)
      if (mount) assert.deepStrictEqual(binding.storeReadNow(fresh), freshPooled, 'once read, on the JS thread')
      // Not a regular file: answered on the JS thread as absent, as the pool answers.
      assert.equal(spawnSync('mkfifo', [path.join(dir, 'fifo.json')]).status, 0)
      fs.mkdirSync(path.join(dir, 'dir.json'))
      for (const name of ['fifo.json', 'dir.json']) {
        assert.equal(binding.storeReadNow(path.join(dir, name)), null, name)
        assert.equal(await binding.storeRead(path.join(dir, name)), null, name)
      }
      // A symlink to a valid entry is followed, as readFile follows it. (The kernel may refuse a
      // cached walk through a symlink, e.g. when following it must update its atime.)
      const good = makeEntry('worker', 'good')
      fs.writeFileSync(path.join(dir, 'target.data'), JSON.stringify(good))
      fs.symlinkSync('target.data', path.join(dir, 'worker-link.json'))
      assert.deepStrictEqual(await native.readEntry(a, 'worker-link'), good)
      const link = path.join(dir, 'worker-link.json')
      const linkNow = binding.storeReadNow(link)
      if (linkNow !== undefined) assert.deepStrictEqual(linkNow, await binding.storeRead(link))
      // Larger than 64 KiB, or empty: left to the pool.
      const big = makeEntry('worker', 'big')
      big.agent.resumeContext.contextPointers[0].metadata = { blob: 'x'.repeat(70 * 1024) }
      fs.writeFileSync(path.join(dir, 'worker-big.json'), JSON.stringify(big))
      assert.ok(isDeepStrictEqual(await native.readEntry(a, 'worker-big'), big), 'a 70 KiB entry reads')
      assert.equal(binding.storeReadNow(path.join(dir, 'worker-big.json')), undefined)
      fs.writeFileSync(path.join(dir, 'worker-empty.json'), '')
      assert.equal(await native.readEntry(a, 'worker-empty'), undefined)
      assert.equal(binding.storeReadNow(path.join(dir, 'worker-empty.json')), undefined)
      // A directory never read through the pool is not read on the JS thread.
      const other = root ? fs.mkdtempSync(path.join(root, 'pi-native-read-now-')) : tempAgentDir()
      try {
        await native.writeEntry(other, good)
        assert.equal(binding.storeReadNow(native.entryPath(other, 'worker-good')), undefined)
        assert.deepStrictEqual(await native.readEntry(other, 'worker-good'), good)
        assert.deepStrictEqual(binding.storeReadNow(native.entryPath(other, 'worker-good')), await binding.storeRead(native.entryPath(other, 'worker-good')))
      } finally {
        fs.rmSync(other, { recursive: true, force: true })
      }
    } finally {
      fs.rmSync(a, { recursive: true, force: true })
    }
  })
}

// Linux answers an async CAS that certainly does not match on the JS thread (ARCHITECTURE.md,
// "CAS mismatches on the JS thread"): only with the entry's lock directory absent, nothing of this
// process under way on the entry, and the file read without waiting. Its answer must be
// util.isDeepStrictEqual's, and every other case must go through the lock as the original does.
for (const [where, root] of [['tmpdir', null], ['/dev/shm', memoryRoot]]) {
  test(`native (${where}): a CAS that certainly does not match is answered on the JS thread, as util.isDeepStrictEqual answers`, { skip: readNowSkip || (where !== 'tmpdir' && !root && 'no /dev/shm') }, async (t) => {
    const binding = require('../index.js')
    const native = require('../lib/native.js')
    const { expectedRoute, validTimestamps } = require('../lib/expected.js')
    const a = root ? fs.mkdtempSync(path.join(root, 'pi-native-cas-now-')) : tempAgentDir()
    // The binding's first call, as writeEntryIfUnchanged makes it: `false` when answered here.
    const firstCall = (f, expected, next) => {
      const r = expectedRoute(expected)
      const ts = r.text === null ? [] : validTimestamps(expected)
      return binding.storeCas(f, expected, r.text, ts, JSON.stringify(next, null, '\t') + '\n', false, false, false)
    }
    try {
      const f = path.join(matrixDir(a), 'worker-cas-1.json')
      fs.mkdirSync(matrixDir(a), { recursive: true })
      const r = rng(7)
      let taken = 0
      let mismatches = 0
      for (let round = 0; round < 6; round++) {
        for (const [label, mutate] of MUTATIONS) {
          const current = base()
          const text = JSON.stringify(current, null, '\t').replace('"tmuxPanePid": 0', round % 2 ? '"tmuxPanePid": -0' : '"tmuxPanePid": 0')
          fs.writeFileSync(f, text)
          await binding.storeRead(f) // as readEntry before a CAS: learns the folder, reads once
          const expected = mutate(clone(current), r)
          const oracle = isDeepStrictEqual(JSON.parse(text), expected)
          const next = { ...base(), heartbeatAt: `2026-07-19T00:02:${String(round).padStart(2, '0')}.000Z` }
          if (expectedRoute(expected).judge) continue // compared by util.isDeepStrictEqual itself, under the lock
          if (!oracle) mismatches++
          // A CAS that did not match first: after a match the look is not even tried.
          assert.equal(await native.writeEntryIfUnchanged(a, 'worker-cas-1', null, next), false)
          const first = firstCall(f, expected, next)
          if (first === false) {
            taken++
            assert.equal(oracle, false, `${label} (round ${round}): answered "no match" on the JS thread`)
            assert.equal(fs.readFileSync(f, 'utf8'), text, `${label}: untouched`)
          } else {
            const got = await first // the lock's fast path, as lockedCall's first call
            if (typeof got === 'boolean') assert.equal(got, oracle, `${label} (round ${round}): on the pool`)
          }
          fs.writeFileSync(f, text)
          await binding.storeRead(f)
          assert.equal(await native.writeEntryIfUnchanged(a, 'worker-cas-1', expected, next), oracle, `${label} (round ${round}): public call`)
        }
      }
      // A missed refusal costs speed only; but most mismatches must be answered here.
      assert.ok(taken > mismatches / 2, `${taken} of ${mismatches} mismatches answered on the JS thread`)
      t.diagnostic(`${taken} of ${mismatches} mismatches answered on the JS thread`)

      const e = base()
      const other = { ...e, hostname: 'elsewhere' }
      await native.writeEntry(a, e)
      await binding.storeRead(f)
      assert.equal(firstCall(f, other, other), false, 'a mismatch, nothing held: answered here')
      // After a CAS on the entry that matched, the next goes to the pool without a look (a
      // heartbeat matches again and again); its mismatch there makes the look come back.
      assert.equal(await native.writeEntryIfUnchanged(a, e.entryId, e, e), true)
      await binding.storeRead(f)
      const predicted = firstCall(f, other, other)
      assert.ok(predicted instanceof Promise, 'after a match: to the pool')
      assert.equal(await predicted, false)
      assert.equal(firstCall(f, other, other), false, 'after a mismatch: answered here again')
      // The lock held (by any process: here a bare directory, as proper-lockfile makes it): the
      // original would wait for it, so the call goes through the lock.
      fs.mkdirSync(f + '.lock')
      const held = firstCall(f, other, other)
      assert.ok(held instanceof Promise, 'lock held: not answered on the JS thread')
      assert.equal(await held, null, 'the fast attempt found the lock busy')
      // A stale lock: the original takes it over, then answers; so must the call.
      const old = new Date(Date.now() - 10_000)
      fs.utimesSync(f + '.lock', old, old)
      assert.equal(await native.writeEntryIfUnchanged(a, e.entryId, other, other), false)
      assert.equal(fs.existsSync(f + '.lock'), false, 'the stale lock was taken over and released')
      // An operation of this process called earlier and not finished may take the lock first: a
      // writeEntry of `next`, then a CAS expecting `next`, must not be answered from the old file.
      const next = { ...e, heartbeatAt: '2026-07-19T00:09:00.000Z' }
      await binding.storeRead(f)
      assert.equal(firstCall(f, next, next), false, 'before: the old file does not match')
      // libuv's pool is kept busy meanwhile, so that the writeEntry is certainly still queued.
      const poolSize = Number(process.env.UV_THREADPOOL_SIZE) || 4
      const busy = Array.from({ length: poolSize }, () => new Promise((resolve) => require('node:crypto').pbkdf2('p', 's', 200_000, 32, 'sha256', resolve)))
      const writing = native.writeEntry(a, next)
      const afterWrite = firstCall(f, next, next)
      await Promise.all(busy)
      assert.ok(afterWrite instanceof Promise, 'a writeEntry under way: not answered on the JS thread')
      await writing
      await afterWrite
      assert.deepStrictEqual(await native.readEntry(a, e.entryId), next)
      // removeEntryIfUnchanged takes the same path.
      await binding.storeRead(f)
      assert.equal(await native.removeEntryIfUnchanged(a, other), false)
      assert.deepStrictEqual(await native.readEntry(a, e.entryId), next)
      assert.deepEqual(leftovers(a), ['worker-cas-1.json'])
    } finally {
      fs.rmSync(a, { recursive: true, force: true })
    }
  })
}

// RWF_NOWAIT: pages evicted from the page cache (written back, then dropped with dd's nocache
// flag, i.e. POSIX_FADV_DONTNEED) need disk I/O, which the JS thread must not wait for. The
// refused read starts readahead, and on a fast virtual disk that I/O sometimes completes before
// the kernel looks again, so a read may still succeed without waiting; most must be refused.
const diskSkip = readNowSkip || (spawnSync('dd', ['--version']).status !== 0 && 'no GNU dd')
test('native: an entry whose pages left the page cache is read on the pool, not on the JS thread', { skip: diskSkip }, async (t) => {
  const binding = require('../index.js')
  const native = require('../lib/native.js')
  const fsType = spawnSync('stat', ['-f', '-c', '%T', os.tmpdir()], { encoding: 'utf8' }).stdout.trim()
  if (/tmpfs|ramfs/.test(fsType)) return t.skip(`${os.tmpdir()} is ${fsType}: its pages cannot leave memory`)
  const a = tempAgentDir()
  try {
    let evicted = 0
    for (let i = 0; i < 20; i++) {
      const e = makeEntry('worker', `cold-${i}`)
      await native.writeEntry(a, e)
      const f = native.entryPath(a, e.entryId)
      const fd = fs.openSync(f, 'r')
      fs.fsyncSync(fd) // dirty pages cannot be dropped
      fs.closeSync(fd)
      assert.deepStrictEqual(await native.readEntry(a, e.entryId), e)
      assert.deepStrictEqual(binding.storeReadNow(f), await binding.storeRead(f), 'cached: read on the JS thread')
      assert.equal(spawnSync('dd', [`if=${f}`, 'iflag=nocache', 'count=0', 'status=none']).status, 0)
      if (binding.storeReadNow(f) === undefined) evicted++
      assert.deepStrictEqual(await native.readEntry(a, e.entryId), e, 'evicted: the pool reads it')
    }
    // Without RWF_NOWAIT every one of them is read on the JS thread (I checked).
    assert.ok(evicted >= 1, `${evicted} of 20 evicted files were left to the pool`)
    t.diagnostic(`${evicted} of 20 evicted files were left to the pool`)
  } finally {
    fs.rmSync(a, { recursive: true, force: true })
  }
})
