'use strict'
// Hostile files in the folders (issue 42), both backends: files that are huge, sparse, not
// regular (FIFOs, devices, procfs), deeply nested, or that turn into a FIFO between two calls.
// Every read must settle, stay bounded in memory, and answer as for an unparsable file; a
// nesting the original can parse costs no more than the original's parse; a watch goes on.
// Memory cases run in child processes under a cap enforced from here (the child's resident
// set is read from /proc and the child killed past it), so the suite itself survives.
const { test } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { spawn, spawnSync } = require('node:child_process')
const { backends } = require('./helpers.js')
const { makeEntry, tempAgentDir, matrixDir } = require('./store-fixtures.js')
const { within } = require('./events-helpers.js')
const { isDeepStrictEqual } = require('node:util')

const root = path.resolve(__dirname, '..')
// The documented bound of an entry read (README "Hostile files", SECURITY.md).
const ENTRY_MAX_BYTES = 64 * 1024 * 1024
const linux = process.platform === 'linux'
const noFifo = process.platform === 'win32' && 'no FIFOs at file-system paths on Windows'
const noProc = !linux && 'reads /proc'

// ---- a child process under a memory cap -------------------------------------------------------

/** Resident set of `pid` in bytes (Linux), or undefined once it is gone. */
function rss(pid) {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))
    return m ? Number(m[1]) * 1024 : undefined
  } catch {
    return undefined
  }
}

/** Threads of `pid` blocked in a FIFO's open (waiting for a writer that never comes). */
function stuckInFifoOpen(pid) {
  let n = 0
  let tasks
  try {
    tasks = fs.readdirSync(`/proc/${pid}/task`)
  } catch {
    return 0
  }
  for (const t of tasks) {
    try {
      if (fs.readFileSync(`/proc/${pid}/task/${t}/wchan`, 'utf8').trim() === 'wait_for_partner') n++
    } catch {}
  }
  return n
}

/**
 * Run `body` (the text of an async function of `(s, arg)`, `s` the backend) in a child Node.
 * Resolves `{ result, hwm, code, signal, overCap, timedOut, stuck, stderr }`: `result` is what
 * the body returned (JSON), `hwm` the child's peak resident set (bytes). The child is killed
 * when its resident set passes `capBytes`, after `deadlineMs` without an answer, or as soon as
 * one of its threads is seen blocked in a FIFO's open (`watchFifo`).
 */
function child(backend, body, arg, { capBytes = 512 * 1024 * 1024, deadlineMs = 60_000, watchFifo = false } = {}) {
  const script = `
    const { loadNative, loadJs } = require(${JSON.stringify(path.join(root, 'lib', 'binding.js'))})
    const s = ${backend === 'js' ? 'loadJs' : 'loadNative'}()
    const body = ${body}
    body(s, JSON.parse(process.argv[1])).then(
      (result) => {
        process.stdout.write(JSON.stringify({ result, hwm: process.resourceUsage().maxRSS * 1024 }) + '\\n')
        process.exit(0)
      },
      (err) => {
        process.stdout.write(JSON.stringify({ error: String(err && err.stack || err) }) + '\\n')
        process.exit(1)
      },
    )`
  return new Promise((resolve) => {
    const c = spawn(process.execPath, ['-e', script, JSON.stringify(arg)], { stdio: ['ignore', 'pipe', 'pipe'] })
    let out = ''
    let stderr = ''
    let overCap = false
    let timedOut = false
    let stuck = 0
    let peak = 0
    c.stdout.on('data', (d) => (out += d))
    c.stderr.on('data', (d) => (stderr += d))
    // The cap: a bound on the harm a failing backend does to this machine, not a timing.
    const watch = setInterval(() => {
      const now = rss(c.pid)
      if (now !== undefined) peak = Math.max(peak, now)
      if (now !== undefined && now > capBytes) {
        overCap = true
        c.kill('SIGKILL')
      }
      if (watchFifo && linux) {
        const n = stuckInFifoOpen(c.pid)
        if (n > 0) {
          stuck = n
          c.kill('SIGKILL')
        }
      }
    }, 10)
    const deadline = setTimeout(() => {
      timedOut = true
      c.kill('SIGKILL')
    }, deadlineMs)
    c.on('close', (code, signal) => {
      clearInterval(watch)
      clearTimeout(deadline)
      const line = out.trim().split('\n').pop()
      let parsed = {}
      try {
        parsed = JSON.parse(line)
      } catch {}
      resolve({ ...parsed, code, signal, overCap, timedOut, stuck, peak, stderr: stderr.slice(-2000) })
    })
  })
}

/** Fail with what the child did when it did not answer normally. */
function answered(r, label) {
  const what = r.overCap ? 'passed its memory cap' : r.timedOut ? 'never answered' : r.stuck ? `had ${r.stuck} thread(s) stuck in a FIFO's open` : r.error ? `threw ${r.error}` : r.signal ? `died of ${r.signal}` : null
  assert.equal(what, null, `${label}: the child ${what}\n${r.stderr}`)
  assert.equal(r.code, 0, `${label}: exit code\n${r.stderr}`)
}

// ---- row 1: huge, sparse, procfs, device, FIFO, over the limit ------------------------------

/** Hostile `master-x.json` files: [label, make(path), skip]. */
const HOSTILE = [
  ['a 10 GiB sparse file', (p) => fs.truncateSync((fs.writeFileSync(p, ''), p), 10 * 1024 ** 3), false],
  ['a symlink to /proc/self/pagemap', (p) => fs.symlinkSync('/proc/self/pagemap', p), noProc],
  ['a symlink to /dev/zero', (p) => fs.symlinkSync('/dev/zero', p), process.platform === 'win32' && 'no /dev/zero'],
  ['a FIFO', (p) => assert.equal(spawnSync('mkfifo', [p]).status, 0), noFifo],
  [
    'a valid entry just over the size limit',
    (p) => {
      const e = makeEntry('master', 'x')
      const head = JSON.stringify(e).slice(0, -1) + ',"pad":"'
      const fd = fs.openSync(p, 'w')
      fs.writeSync(fd, head)
      fs.writeSync(fd, Buffer.alloc(ENTRY_MAX_BYTES - Buffer.byteLength(head) - 1, 'x'))
      fs.writeSync(fd, '"}')
      fs.closeSync(fd)
      assert.equal(fs.statSync(p).size, ENTRY_MAX_BYTES + 1)
    },
    false,
  ],
]

// readEntry, listEntries and a CAS (whose read is made under the lock) on the hostile file,
// beside a valid entry. The CAS with `expected` undefined matches an absent or unparsable
// file, so it replaces the hostile file with the next entry.
const READS = `async (s, a) => {
  const read = await s.readEntry(a, 'master-x')
  const listed = (await s.listEntries(a)).map((e) => e.entryId)
  const next = { ...(await s.readEntry(a, 'master-good')), entryId: 'master-x' }
  next.agent = { ...next.agent, resumeContext: { ...next.agent.resumeContext, sessionId: 'x' } }
  const cas = await s.writeEntryIfUnchanged(a, 'master-x', undefined, next)
  const after = (await s.readEntry(a, 'master-x'))?.entryId
  return { read: read === undefined ? 'undefined' : read.entryId, listed, cas, after }
}`

for (const [label, make, skip] of HOSTILE) {
  test(`${label} named master-x.json: both backends read it as absent, bounded, and replace it by a CAS`, { skip }, async () => {
    for (const [name] of backends()) {
      const a = tempAgentDir()
      const dir = matrixDir(a)
      fs.mkdirSync(dir, { recursive: true })
      fs.writeFileSync(path.join(dir, 'master-good.json'), JSON.stringify(makeEntry('master', 'good')))
      make(path.join(dir, 'master-x.json'))
      try {
        const r = await child(name, READS, a, { capBytes: 512 * 1024 * 1024, deadlineMs: 60_000 })
        answered(r, `${name} ${label}`)
        assert.deepStrictEqual(r.result, { read: 'undefined', listed: ['master-good'], cas: true, after: 'master-x' }, name)
      } finally {
        fs.rmSync(a, { recursive: true, force: true })
      }
    }
  })
}

// The same files as session candidates (held today: skipped by size), and a session file over
// the 64 MiB rule: recovery answers from the one good file.
const SESSION = [
  '{"type":"session","version":3,"id":"s","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/"}',
  '{"type":"message","id":"m","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"assistant","content":[{"type":"text","text":"hello"}],"stopReason":"stop"}}',
  '',
].join('\n')

const SESSION_HOSTILE = [
  ['sparse.jsonl', (p) => fs.truncateSync((fs.writeFileSync(p, ''), p), 10 * 1024 ** 3)],
  ['pagemap.jsonl', (p) => fs.symlinkSync('/proc/self/pagemap', p)],
  ['zero.jsonl', (p) => fs.symlinkSync('/dev/zero', p)],
  ['fifo.jsonl', (p) => assert.equal(spawnSync('mkfifo', [p]).status, 0)],
  [
    'big.jsonl',
    (p) => {
      fs.writeFileSync(p, SESSION)
      fs.truncateSync(p, 64 * 1024 * 1024 + 1)
    },
  ],
]

for (const [name] of backends()) {
  test(`${name}: recovery skips session files that are huge, sparse, procfs, devices or FIFOs`, { skip: noFifo || noProc }, async () => {
    // One hostile candidate beside the good one (older, so the hostile one is tried first).
    const body = `async (s, dir) => {
      const r = await s.recoverLastAssistantFromSession(dir, undefined, { maxFiles: 2, deadlineMs: 30000 })
      return r && r.text
    }`
    for (const [n, make] of SESSION_HOSTILE) {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pi-native-hostile-session-'))
      try {
        fs.writeFileSync(path.join(dir, 'good.jsonl'), SESSION)
        fs.utimesSync(path.join(dir, 'good.jsonl'), new Date(1000), new Date(1000))
        make(path.join(dir, n))
        const r = await child(name, body, dir, { capBytes: 512 * 1024 * 1024, deadlineMs: 60_000 })
        answered(r, `${name} ${n}`)
        assert.equal(r.result, 'hello', `${name} ${n}`)
      } finally {
        fs.rmSync(dir, { recursive: true, force: true })
      }
    }
  })
}

// ---- row 7 (item 4): a file that becomes a FIFO between stat and open --------------------------

/**
 * A process that flips `target` between a symlink to a regular file and one to a FIFO, as fast
 * as it can, until killed (or its parent is gone).
 */
function flipper(target, file, fifo) {
  const code = `
    const fs = require('node:fs')
    const [t, file, fifo] = process.argv.slice(1)
    const parent = process.ppid
    for (let i = 0; ; i++) {
      if (i % 1024 === 0 && process.ppid !== parent) process.exit(0)
      const tmp = t + '.flip' + (i % 2)
      try { fs.unlinkSync(tmp) } catch {}
      fs.symlinkSync(i % 2 ? fifo : file, tmp)
      fs.renameSync(tmp, t)
    }`
  return spawn(process.execPath, ['-e', code, target, file, fifo], { stdio: 'ignore' })
}

const RACE_CALLS = 4000
for (const what of ['session recovery', 'store reads']) {
  test(`${what} never leave a thread in open() on a file that became a FIFO, both backends`, { skip: noFifo || (!linux && 'reads /proc/<pid>/task/*/wchan') }, async (t) => {
    const base = fs.mkdtempSync(path.join(os.tmpdir(), 'pi-native-flip-'))
    const session = what === 'session recovery'
    const dir = session ? path.join(base, 'sessions') : matrixDir(base)
    fs.mkdirSync(dir, { recursive: true })
    const file = path.join(base, 'real.data')
    fs.writeFileSync(file, session ? SESSION : JSON.stringify(makeEntry('master', 'x')))
    const fifo = path.join(base, 'pipe.fifo')
    assert.equal(spawnSync('mkfifo', [fifo]).status, 0)
    const target = path.join(dir, session ? 'x.jsonl' : 'master-x.json')
    fs.symlinkSync(file, target)
    const flip = flipper(target, file, fifo)
    t.after(() => {
      flip.kill('SIGKILL')
      fs.rmSync(base, { recursive: true, force: true })
    })
    // Calls in batches of 8, then a last check that nothing is stuck and plain fs work (the
    // libuv pool) still answers.
    const body = `async (s, a) => {
      const fs = require('node:fs')
      let answers = 0
      for (let i = 0; i < a.calls; i += 8) {
        const batch = Array.from({ length: 8 }, (_, k) =>
          a.session
            ? s.recoverLastAssistantFromSession(a.dir, undefined, { deadlineMs: 30000 })
            : k % 2 ? s.listEntries(a.base) : s.readEntry(a.base, 'master-x'))
        for (const r of await Promise.all(batch)) if (r) answers++
      }
      await Promise.all(Array.from({ length: 8 }, () => fs.promises.readFile(a.file)))
      return { answers }
    }`
    for (const [name] of backends()) {
      const r = await child(name, body, { session, dir, base, file, calls: RACE_CALLS }, { watchFifo: true, deadlineMs: 120_000 })
      answered(r, `${name} ${what}`)
      assert.ok(r.result.answers > 0, `${name}: some calls found the regular file`)
    }
  })
}

// ---- row 2: nesting costs no more than the original's parse ------------------------------------

/** A valid entry with an extra property nesting `depth` arrays (V19 allows it). */
function writeDeepEntry(file, id, depth) {
  const head = JSON.stringify(makeEntry('master', id)).slice(0, -1) + ',"deep":'
  const fd = fs.openSync(file, 'w')
  fs.writeSync(fd, head)
  fs.writeSync(fd, Buffer.alloc(depth, '['))
  fs.writeSync(fd, Buffer.alloc(depth, ']'))
  fs.writeSync(fd, '}\n')
  fs.closeSync(fd)
}

/** How deep an array nesting goes, without recursion. */
const DEPTH_OF = `(v) => { let d = 0; while (Array.isArray(v)) { d++; v = v[0] }; return d }`

test('a valid entry nesting 10,000,000 arrays: native peak memory ≤ 1.25 × the JS backend, for readEntry, listEntries and a CAS', { skip: noProc, timeout: 600_000 }, async (t) => {
  const depth = 10_000_000
  const over = []
  const a = tempAgentDir()
  try {
    const dir = matrixDir(a)
    fs.mkdirSync(dir, { recursive: true })
    writeDeepEntry(path.join(dir, 'master-deep.json'), 'deep', depth)
    fs.writeFileSync(path.join(dir, 'master-good.json'), JSON.stringify(makeEntry('master', 'good')))
    const ops = {
      readEntry: `async (s, a) => { const e = await s.readEntry(a, 'master-deep'); return e === undefined ? -1 : (${DEPTH_OF})(e.deep) }`,
      listEntries: `async (s, a) => { const l = await s.listEntries(a); return l.map((e) => e.entryId).join() + ':' + (${DEPTH_OF})(l[0].deep) }`,
      // A heartbeat's CAS from a stale copy: the file is read and compared under the lock.
      cas: `async (s, a) => { const g = await s.readEntry(a, 'master-good'); const e = { ...g, entryId: 'master-deep' }; e.agent = { ...e.agent, resumeContext: { ...e.agent.resumeContext, sessionId: 'deep' } }; return s.writeEntryIfUnchanged(a, 'master-deep', e, e) }`,
    }
    const want = { readEntry: depth, listEntries: `master-deep,master-good:${depth}`, cas: false }
    for (const [op, body] of Object.entries(ops)) {
      const peaks = {}
      for (const name of ['js', 'native']) {
        const r = await child(name, body, a, { capBytes: 6 * 1024 ** 3, deadlineMs: 300_000 })
        answered(r, `${name} ${op}`)
        assert.deepStrictEqual(r.result, want[op], `${name} ${op}`)
        peaks[name] = Math.max(r.hwm, r.peak)
      }
      const ratio = peaks.native / peaks.js
      const line = `${op}: native peak ${(peaks.native / 2 ** 20).toFixed(0)} MiB vs js ${(peaks.js / 2 ** 20).toFixed(0)} MiB (${ratio.toFixed(2)}×)`
      t.diagnostic(line)
      if (ratio > 1.25) over.push(line)
    }
    assert.deepStrictEqual(over, [], 'native peak memory above 1.25 × the JS backend')
  } finally {
    fs.rmSync(a, { recursive: true, force: true })
  }
})

// A resumable copy of an agent that nests deeper than util.isDeepStrictEqual's stack (V4
// compares the two): a read answers, as for any other entry, instead of failing.
test('an entry whose agent nests 5,000 arrays (V4 compares it with its resumable copy) reads and lists, both backends', async () => {
  for (const [name, s] of backends()) {
    const a = tempAgentDir()
    const dir = matrixDir(a)
    fs.mkdirSync(dir, { recursive: true })
    const e = makeEntry('master', 'deep-agent', { status: 'resumable' })
    const nest = '['.repeat(5000) + ']'.repeat(5000)
    const agent = JSON.stringify(e.agent).slice(0, -1) + `,"deep":${nest}}`
    const text = JSON.stringify({ ...e, agent: 0, resumable: 0 })
      .replace('"agent":0', `"agent":${agent}`)
      .replace('"resumable":0', `"resumable":{"agent":${agent},"lastCode":"running"}`)
    fs.writeFileSync(path.join(dir, 'master-deep-agent.json'), text)
    const read = await s.readEntry(a, 'master-deep-agent').catch((err) => err)
    assert.equal(read?.entryId, 'master-deep-agent', `${name}: ${read}`)
    assert.deepStrictEqual((await s.listEntries(a)).map((x) => x.entryId), ['master-deep-agent'], name)
    // A copy that differs deep inside is invalid (V4), not an error.
    fs.writeFileSync(path.join(dir, 'master-deep-agent.json'), text.replace(nest + '},"lastCode"', nest.replace('[]', '[1]') + '},"lastCode"'))
    assert.equal(await s.readEntry(a, 'master-deep-agent'), undefined, name)
    fs.rmSync(a, { recursive: true, force: true })
  }
})

// A CAS whose `expected` nests as deep as the file it was read from: answered as
// util.isDeepStrictEqual answers (its RangeError: the original's answer), promptly, with the
// lock released and the file kept.
test('a CAS whose expected nests 100,000 arrays answers as util.isDeepStrictEqual, promptly, and releases the lock, both backends', async () => {
  for (const [name, s] of backends()) {
    const a = tempAgentDir()
    const dir = matrixDir(a)
    fs.mkdirSync(dir, { recursive: true })
    const file = path.join(dir, 'master-deep.json')
    writeDeepEntry(file, 'deep', 100_000)
    const text = fs.readFileSync(file, 'utf8')
    const expected = await s.readEntry(a, 'master-deep')
    let oracle
    try {
      oracle = { value: isDeepStrictEqual(JSON.parse(text), expected) }
    } catch (err) {
      oracle = { error: err.constructor.name }
    }
    const next = makeEntry('master', 'deep', { pid: 7 })
    for (const [label, call] of [
      ['writeEntryIfUnchanged', () => s.writeEntryIfUnchanged(a, 'master-deep', expected, next)],
      ['writeEntryIfUnchangedSync', async () => s.writeEntryIfUnchangedSync(a, expected, next)],
      ['removeEntryIfUnchanged', () => s.removeEntryIfUnchanged(a, expected)],
    ]) {
      const r = await within(call(), 30_000)
      assert.ok(r !== undefined, `${name} ${label}: settles within 30 s`)
      const got = 'error' in r ? { error: r.error.constructor.name } : { value: r.value }
      assert.deepStrictEqual(got, oracle, `${name} ${label}`)
      assert.equal(fs.readFileSync(file, 'utf8'), text, `${name} ${label}: the file is kept`)
      assert.deepStrictEqual(fs.readdirSync(dir).sort(), ['master-deep.json'], `${name} ${label}: no lock left`)
    }
    fs.rmSync(a, { recursive: true, force: true })
  }
})

// ---- row 3: a watch goes on past an entry it cannot compare ------------------------------------

for (const [name, s] of backends()) {
  test(`${name}: watchEntries goes on past entries nesting 2,000 arrays (written twice: compared with the state yielded)`, async (t) => {
    const a = tempAgentDir()
    const dir = matrixDir(a)
    fs.mkdirSync(dir, { recursive: true })
    const ac = new AbortController()
    t.after(() => {
      ac.abort()
      fs.rmSync(a, { recursive: true, force: true })
    })
    const it = s.watchEntries(a, { signal: ac.signal })[Symbol.asyncIterator]()
    const nextChange = async (label) => {
      for (;;) {
        const r = await within(it.next(), 30_000)
        assert.ok(r !== undefined, `${label}: an event within 30 s`)
        assert.equal(r.error, undefined, `${label}: the loop must not end (${r.error})`)
        assert.equal(r.value.done, false, `${label}: not done`)
        if (r.value.value.type === 'change') return r.value.value
      }
    }
    const deep = path.join(dir, 'master-deep.json')
    const write = (file, text) => {
      fs.writeFileSync(file + '.tmp', text)
      fs.renameSync(file + '.tmp', file)
    }
    // The rounds differ only at the bottom of the nesting, and one rewrites the same text: each
    // read is compared with the state last yielded all the way down.
    const innermost = (v) => {
      while (Array.isArray(v)) v = v[0]
      return v
    }
    const text = (n) => JSON.stringify(makeEntry('master', 'deep')).slice(0, -1) + `,"deep":${'['.repeat(2000)}${n}${']'.repeat(2000)}}`
    for (const [n, news] of [[1, true], [2, true], [2, false], [3, true]]) {
      write(deep, text(n))
      if (!news) continue // the same state again: compared equal, nothing to tell
      // The next change is this state: the rewrite of the same state before it told nothing.
      const ev = await nextChange(`deep ${n}`)
      assert.equal(ev.entryId, 'master-deep')
      assert.equal(innermost(ev.entry.deep), n)
    }
    // And the loop still reports other entries.
    write(path.join(dir, 'master-after.json'), JSON.stringify(makeEntry('master', 'after')))
    let ev = await nextChange('after')
    while (ev.entryId !== 'master-after') ev = await nextChange('after')
    assert.equal(ev.entry.entryId, 'master-after')
  })
}
