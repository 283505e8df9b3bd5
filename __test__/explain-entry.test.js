'use strict'
// The CLI's rule-by-rule explainer against the store's own validator: on every generated value
// they must agree on valid / invalid, and single-rule violations must be named by their rule.
const test = require('node:test')
const assert = require('node:assert/strict')
const { rng } = require('./session-gen.js')
const { makeEntry } = require('./store-fixtures.js')
const { isProcessMatrixEntry } = require('../js/process-matrix-store.js')
const { explainEntry } = require('../bin/explain-entry.js')

const STATUS = ['running', 'winding_down', 'resumable', 'adopted', 'closed']
const KINDS = ['repository', 'worktree', 'artifact', 'evidence', 'memory-query', 'skill', 'prompt', 'service']
const POOL = [
  null, true, false, 0, -0, 1, -7, 1.5, 2 ** 53, 2 ** 53 - 1, -(2 ** 53), 1e400, NaN, '', ' ', '\u3000', 'x', 'master', 'worker',
  'pi', 'external', 'r'.repeat(101), 'r'.repeat(256), 's'.repeat(513), 't'.repeat(2001), '2026-07-19T00:00:00Z', 'garbage', 'foo 1',
  [], ['a'], [' '], {}, { a: 1 }, ...STATUS, ...KINDS,
]

/** A valid entry with a random selection of the optional parts. */
function validBase(r) {
  const role = r.pick(['master', 'worker'])
  const e = makeEntry(role, r.pick(['s1', 'w-2', 'ünï']))
  const rc = e.agent.resumeContext
  if (r.chance(0.3)) rc.sessionDir = r.pick(['', '/d'])
  if (r.chance(0.3)) rc.contextPointers.push({ id: 'p2', kind: r.pick(KINDS), uri: 'u', readOnly: false, digest: 'd', metadata: { x: [1] } })
  if (r.chance(0.2)) rc.contextPointers = []
  if (r.chance(0.3)) e.parentPid = 1 + r.int(100)
  if (r.chance(0.2)) e.parentSessionId = 'p'
  if (r.chance(0.2)) e.tmuxSession = 't'
  if (r.chance(0.2)) e.tmuxPanePid = r.pick([0, -3, 9])
  if (r.chance(0.2)) e.taskRef = 'r'.repeat(512)
  if (r.chance(0.2)) e.taskSummary = 's'
  if (r.chance(0.2)) e.windDownReason = r.pick([null, 'parent_lost', 5])
  if (r.chance(0.3)) {
    e.resumable = { agent: structuredClone(e.agent), lastCode: r.pick(STATUS) }
    if (r.chance(0.5)) e.resumable.taskSummary = 'x'.repeat(2000)
    if (r.chance(0.5)) e.status = 'resumable'
  }
  if (r.chance(0.3) && e.status !== 'resumable') {
    e.status = 'closed'
    e.terminal = { code: r.pick([null, 0, -9]), signal: r.pick([null, 'SIGKILL']), observedAt: '2026-07-19T00:00:00Z' }
    if (r.chance(0.5)) e.terminal.notificationDeliveredAt = r.pick(['2026-07-19', 'garbage'])
  }
  return e
}

/** Every object / array node with its key list, for random mutation. */
function nodes(v) {
  const out = []
  const walk = (x) => {
    if (x && typeof x === 'object') {
      out.push(x)
      for (const k of Object.keys(x)) walk(x[k])
    }
  }
  walk(v)
  return out
}

const isObj = (x) => x !== null && typeof x === 'object'

function mutate(r, v) {
  const n = 1 + r.int(3)
  for (let i = 0; i < n; i++) {
    const node = r.pick(nodes(v))
    const keys = Object.keys(node)
    const op = r.int(10)
    if (op < 6 && keys.length) node[r.pick(keys)] = structuredClone(r.pick(POOL))
    else if (op < 8 && keys.length) delete node[r.pick(keys)]
    else if (op < 9) node[r.pick(['status', 'terminal', 'resumable', 'parentPid', 'extra', 'digest', 'metadata'])] = structuredClone(r.pick(POOL))
    else if (node === v && isObj(v.resumable)) v.resumable.agent = structuredClone(v.agent)
  }
  return v
}

test('explainEntry agrees with isProcessMatrixEntry on 30000 generated values (and after a JSON round trip)', () => {
  const r = rng(1313)
  let valid = 0
  let invalid = 0
  const rules = new Set()
  for (let i = 0; i < 30000; i++) {
    const v = r.chance(0.15) ? validBase(r) : mutate(r, validBase(r))
    for (const value of [v, JSON.parse(JSON.stringify(v) ?? 'null')]) {
      const why = explainEntry(value)
      const ok = isProcessMatrixEntry(value)
      assert.equal(why === null, ok, `${JSON.stringify(value)} -> ${JSON.stringify(why)}`)
      if (why) {
        assert.match(why.rule, /^V([1-9]|1[0-7])$/)
        assert.equal(typeof why.field, 'string')
        assert.ok(why.message.length > 10)
        rules.add(why.rule)
        invalid++
      } else valid++
    }
  }
  // The generator must reach both outcomes and most rules, or the agreement says little.
  assert.ok(valid > 3000 && invalid > 30000, `${valid} valid, ${invalid} invalid`)
  for (const rule of ['V1', 'V2', 'V3', 'V4', 'V5', 'V6', 'V7', 'V8', 'V9', 'V10', 'V11', 'V12', 'V13', 'V14', 'V15', 'V16', 'V17']) {
    if (rule !== 'V1') assert.ok(rules.has(rule), `generator reached ${rule}`)
  }
})

test('one violation at a time: the rule and the field are named', () => {
  const e = () => makeEntry('worker', 'v')
  const at = (f) => {
    const x = e()
    f(x, x.agent.resumeContext)
    return x
  }
  const cases = [
    [[e()], 'V1', ''],
    [null, 'V1', ''],
    [Object.assign(new (class X {})(), e()), 'V1', ''],
    [at((x) => delete x.agent), 'V2', 'agent'],
    [at((x) => (x.agent.agentId = ' \u00a0')), 'V2', 'agent.agentId'],
    [at((x, rc) => (rc.provider = 'PI')), 'V2', 'agent.resumeContext.provider'],
    [at((x, rc) => (rc.modelRef = 1)), 'V2', 'agent.resumeContext.modelRef'],
    [at((x, rc) => (rc.resourceProfileNames = ['a', ' '])), 'V2', 'agent.resumeContext.resourceProfileNames[1]'],
    [at((x, rc) => (rc.contextPointers[0].kind = 'file')), 'V2', 'agent.resumeContext.contextPointers[0].kind'],
    [at((x, rc) => (rc.contextPointers[0].metadata = [])), 'V2', 'agent.resumeContext.contextPointers[0].metadata'],
    [at((x) => (x.role = 'Worker')), 'V3', 'role'],
    [at((x) => (x.resumable = { agent: { ...structuredClone(x.agent), agentId: 'o' }, lastCode: 'running' })), 'V4', 'resumable.agent'],
    [at((x) => (x.resumable = { agent: structuredClone(x.agent), lastCode: 'done' })), 'V4', 'resumable.lastCode'],
    [at((x) => (x.resumable = { agent: structuredClone(x.agent), lastCode: 'running', taskRef: 'r'.repeat(513) })), 'V4', 'resumable.taskRef'],
    [at((x) => ((x.status = 'closed'), (x.terminal = { code: 1.5, signal: null, observedAt: '2026-07-19' }))), 'V5', 'terminal.code'],
    [at((x) => ((x.status = 'closed'), (x.terminal = { code: 0, signal: null, observedAt: 'garbage' }))), 'V5', 'terminal.observedAt'],
    [at((x) => (x.terminal = { code: 0, signal: null, observedAt: '2026-07-19' })), 'V6', 'status'],
    [at((x) => (x.status = 'resumable')), 'V7', 'resumable'],
    [at((x) => (x.entryId = 'bad')), 'V8', 'entryId'],
    [at((x) => (x.pid = 2 ** 53)), 'V9', 'pid'],
    [at((x) => (x.hostname = 'h'.repeat(256))), 'V10', 'hostname'],
    [at((x) => (x.heartbeatAt = '2026-13-01')), 'V11', 'heartbeatAt'],
    [at((x) => (x.status = 'stopped')), 'V12', 'status'],
    [at((x) => (x.parentPid = 0)), 'V13', 'parentPid'],
    [at((x) => (x.parentSessionId = 'p'.repeat(513))), 'V14', 'parentSessionId'],
    [at((x) => (x.tmuxSession = 1)), 'V15', 'tmuxSession'],
    [at((x) => (x.tmuxPanePid = 1.5)), 'V16', 'tmuxPanePid'],
    [at((x) => (x.taskSummary = '🙂'.repeat(1000) + 'x')), 'V17', 'taskSummary'],
  ]
  for (const [value, rule, field] of cases) {
    assert.equal(isProcessMatrixEntry(value), false)
    const why = explainEntry(value)
    assert.deepEqual([why.rule, why.field], [rule, field], JSON.stringify(why))
    if (field) assert.ok(why.message.includes(field), why.message)
  }
  assert.equal(explainEntry(e()), null)
  assert.match(explainEntry(at((x) => (x.entryId = 'bad'))).message, /"worker-v".*"bad"/)
})
