'use strict'
// watchEntries under torture (issue 35): random creates, CAS writes and removes (this process
// and another one), entry files renamed out of the folder and back in, every folder of the path
// renamed away and back, removed, made again or replaced by a prepared one, writes into folders
// that are not at the path, and a slow consumer that also stops reading now and then. After
// every quiet moment the consumer's view equals a fresh listEntries of the watched path; no
// event carries a state that was never at the path (each write has a unique token, and the test
// knows which tokens have been at the path); the iteration never hangs.
//
// PI_NATIVE_TORTURE_SECONDS: seconds per backend (default 15; npm test gives its first Node
// line 30). PI_NATIVE_TORTURE_SEED: replay a run (the seed is printed with any failure).
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { spawn } = require('node:child_process')
const { root, backends } = require('./helpers.js')
const { makeEntry } = require('./store-fixtures.js')
const { sleep, consume, converges } = require('./events-helpers.js')

const SECONDS = Number(process.env.PI_NATIVE_TORTURE_SECONDS ?? 15)
const wine = process.env.PI_NATIVE_EMULATED === 'wine' && 'Wine: a watched folder removed is not announced until its watch closes'
// Windows refuses to rename a folder while a handle below it is open (any watch of the path).
const windows = process.platform === 'win32' && 'Windows refuses to rename a folder above a watched one'

/** mulberry32: a small seeded generator, so a failing run can be replayed. */
function rng(seed) {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

// Another process writes and removes its own entries at the path, pausing on 'pause' (it
// answers 'paused' once its write in flight is done) until 'go'.
const WRITER = `
const s = require(process.argv[1])
const [agentDir, entryJson] = process.argv.slice(2)
let paused = false
let n = 0
process.stdin.setEncoding('utf8')
process.stdin.on('data', (d) => {
  for (const line of d.split('\\n')) {
    if (line === 'pause') paused = true
    if (line === 'go') paused = false
  }
})
;(async () => {
  const entry = JSON.parse(entryJson)
  for (;;) {
    if (paused) {
      process.stdout.write('paused\\n')
      while (paused) await new Promise((r) => setTimeout(r, 5))
    }
    const k = n++ % 6
    const id = 'worker-c' + k
    try {
      if (n % 5 === 0) await s.removeEntry(agentDir, id)
      else await s.writeEntry(agentDir, { ...entry, entryId: id, agent: { ...entry.agent, resumeContext: { ...entry.agent.resumeContext, sessionId: 'c' + k } }, taskRef: 'c' + n })
    } catch {}
    await new Promise((r) => setTimeout(r, 5 + Math.random() * 15))
  }
})()`

for (const [name, s] of backends()) {
  test(`${name}: watchEntries torture: ${SECONDS} s of random changes to the entries and to every folder of the path, a slow consumer`, { skip: wine || windows, timeout: (SECONDS + 120) * 1000 }, async (t) => {
    const seed = Number(process.env.PI_NATIVE_TORTURE_SEED ?? Math.floor(Math.random() * 2 ** 32))
    // Said first, so that a failed run can be replayed (PI_NATIVE_TORTURE_SEED).
    t.diagnostic(`${name}: seed ${seed}`)
    const rand = rng(seed)
    const pick = (xs) => xs[Math.floor(rand() * xs.length)]
    const top = fs.mkdtempSync(path.join(os.tmpdir(), 'pi-native-torture-'))
    const levels = ['base', 'agent', 'state', 'process-matrix']
    const pathOf = (l) => path.join(top, ...levels.slice(0, l + 1))
    const agentDir = pathOf(1)
    const matrix = pathOf(3)
    const outside = path.join(top, 'outside')
    fs.mkdirSync(outside)
    /** Tokens (taskRef) of states that have been at the watched path (over-approximated). */
    const legit = new Set()
    /** Folders moved away: { dir, level }. */
    const away = []
    let k = 0
    const token = () => `m${k++}`
    const entry = (i, t) => makeEntry('worker', `m${i}`, { taskRef: t })
    /** Mark every entry at the path as having been there (after a folder was put in place). */
    const markAtPath = () => {
      let names = []
      try {
        names = fs.readdirSync(matrix)
      } catch {}
      for (const n of names) {
        try {
          legit.add(JSON.parse(fs.readFileSync(path.join(matrix, n), 'utf8')).taskRef)
        } catch {}
      }
    }
    const exists = (p) => fs.existsSync(p)
    const counts = {}
    const ops = [
      [30, 'write', async () => {
        const t = token()
        legit.add(t)
        await s.writeEntry(agentDir, entry(Math.floor(rand() * 12), t))
      }],
      [15, 'cas', async () => {
        const i = Math.floor(rand() * 12)
        const now = await s.readEntry(agentDir, `worker-m${i}`)
        if (now === undefined) return false
        const t = token()
        legit.add(t)
        await s.writeEntryIfUnchanged(agentDir, `worker-m${i}`, now, { ...now, taskRef: t })
      }],
      [10, 'remove', () => s.removeEntry(agentDir, `worker-m${Math.floor(rand() * 12)}`)],
      [5, 'file out', () => {
        const i = Math.floor(rand() * 12)
        if (!exists(path.join(matrix, `worker-m${i}.json`))) return false
        fs.renameSync(path.join(matrix, `worker-m${i}.json`), path.join(outside, `worker-m${i}.${k++}.json`))
      }],
      [5, 'file in', () => {
        const names = fs.readdirSync(outside)
        if (names.length === 0 || !exists(matrix)) return false
        const n = pick(names)
        legit.add(JSON.parse(fs.readFileSync(path.join(outside, n), 'utf8')).taskRef)
        fs.renameSync(path.join(outside, n), path.join(matrix, `${n.split('.')[0]}.json`))
      }],
      [8, 'folder away', () => {
        const l = pick([0, 1, 2, 3].filter((x) => exists(pathOf(x))))
        if (l === undefined) return false
        const dir = path.join(top, `away-${k++}`)
        fs.renameSync(pathOf(l), dir)
        away.push({ dir, level: l })
      }],
      [8, 'folder back', () => {
        const ready = away.filter((a) => !exists(pathOf(a.level)) && (a.level === 0 || exists(pathOf(a.level - 1))))
        if (ready.length === 0) return false
        const a = pick(ready)
        fs.renameSync(a.dir, pathOf(a.level))
        away.splice(away.indexOf(a), 1)
        markAtPath()
      }],
      [4, 'folder removed', () => {
        const l = pick([0, 1, 2, 3].filter((x) => exists(pathOf(x))))
        if (l === undefined) return false
        fs.rmSync(pathOf(l), { recursive: true, force: true })
      }],
      [5, 'write elsewhere', () => {
        // Into a matrix folder that is not at the path: never news.
        const holders = away.map((a) => path.join(a.dir, ...levels.slice(a.level + 1))).filter(exists)
        if (holders.length === 0) return false
        const i = Math.floor(rand() * 12)
        fs.writeFileSync(path.join(pick(holders), `worker-m${i}.json`), `${JSON.stringify(entry(i, token()), null, '\t')}\n`)
      }],
      [3, 'folder made empty', () => fs.mkdirSync(matrix, { recursive: true })],
      [3, 'folder replaced', () => {
        // A prepared folder (with entries of its own) renamed into a free place on the path.
        const l = pick([0, 1, 2, 3].filter((x) => !exists(pathOf(x)) && (x === 0 || exists(pathOf(x - 1)))))
        if (l === undefined) return false
        const prep = path.join(top, `prep-${k++}`)
        const inner = path.join(prep, ...levels.slice(l + 1))
        fs.mkdirSync(inner, { recursive: true })
        for (let j = 0; j < 1 + Math.floor(rand() * 3); j++) {
          const i = Math.floor(rand() * 12)
          fs.writeFileSync(path.join(inner, `worker-m${i}.json`), `${JSON.stringify(entry(i, token()), null, '\t')}\n`)
        }
        fs.renameSync(prep, pathOf(l))
        markAtPath()
      }],
    ]
    const total = ops.reduce((n, [w]) => n + w, 0)
    const choose = () => {
      let x = rand() * total
      for (const op of ops) if ((x -= op[0]) < 0) return op
      return ops[0]
    }

    const writer = spawn(process.execPath, ['-e', WRITER, path.join(root, 'lib', 'index.js'), agentDir, JSON.stringify(makeEntry('worker', 'c0'))], {
      stdio: ['pipe', 'pipe', 'inherit'],
      env: { ...process.env, PI_NATIVE_BACKEND: name },
    })
    let out = ''
    writer.stdout.on('data', (d) => (out += d))
    const pauseWriter = async () => {
      const seen = out.split('paused').length
      writer.stdin.write('pause\n')
      while (out.split('paused').length === seen) await sleep(5)
    }

    const ac = new AbortController()
    let slow = false
    const c = consume(s.watchEntries(agentDir, { signal: ac.signal, initial: true }), {
      delayMs: () => (slow ? rand() * 4 : 0),
      check: (ev) => {
        const t = ev.entry?.taskRef
        if (ev.type === 'change' && t !== undefined && !t.startsWith('c') && !legit.has(t)) return `${ev.entryId} with ${t}, never at the path`
        return undefined
      },
    })
    const quiets = []
    try {
      const end = Date.now() + SECONDS * 1000
      while (Date.now() < end) {
        // A burst of changes, with the consumer slow or stopped part of the time.
        slow = rand() < 0.5
        if (rand() < 0.25) c.pause()
        const until = Date.now() + 300 + rand() * 1200
        while (Date.now() < until) {
          const [, what, op] = choose()
          try {
            if ((await op()) !== false) counts[what] = (counts[what] ?? 0) + 1
          } catch (err) {
            // A race with the other writer (a folder it just made, one it is writing into).
            if (!['ENOENT', 'ENOTEMPTY', 'EEXIST', 'ENOTDIR', 'EISDIR'].includes(err.code)) throw err
          }
          if (rand() < 0.3) await sleep(rand() * 5)
        }
        c.resume()
        // Quiet: the view must come to equal the listing.
        await pauseWriter()
        const t = Date.now()
        await converges(s, c, agentDir, 20000, `quiet moment ${quiets.length + 1} (seed ${seed})`)
        quiets.push(Date.now() - t)
        assert.equal(c.error, undefined, `the iteration failed (seed ${seed}): ${c.error}`)
        writer.stdin.write('go\n')
      }
    } finally {
      writer.kill()
      ac.abort()
    }
    // It ends when asked (no hang), with the abort's reason.
    await c.done
    assert.equal(c.error?.name, 'AbortError')
    assert.deepEqual(c.faults, [], `seed ${seed}`)
    const folderOps = (counts['folder away'] ?? 0) + (counts['folder back'] ?? 0) + (counts['folder removed'] ?? 0) + (counts['folder replaced'] ?? 0)
    assert.ok(quiets.length >= Math.min(5, SECONDS / 3) && folderOps >= 5, `too little happened: ${JSON.stringify(counts)}, ${quiets.length} quiet moments`)
    t.diagnostic(`${name}: seed ${seed}, ${c.events.length} events, ops ${JSON.stringify(counts)}, ${quiets.length} quiet moments, converged in ${Math.max(...quiets)} ms at most`)
    fs.rmSync(top, { recursive: true, force: true })
  })
}
