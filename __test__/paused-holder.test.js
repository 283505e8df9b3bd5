'use strict'
// Fenced commits (issue 10): a holder paused past the 2 s stale threshold (SIGSTOP: a debugger,
// a closed laptop lid, a VM pause) is robbed by another process, as the protocol allows. When it
// resumes it must not report success: its publish is refused (store) or its withFileLock fails
// with ECOMPROMISED, the taker's content stays, nothing is torn and no temp file remains.
// Native backend; many holders paused at once so that 20+ rounds take one stale period.
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { spawn } = require('node:child_process')
const { root, sleep, procState } = require('./helpers.js')
const { makeEntry } = require('./store-fixtures.js')

const ROUNDS = 20
// Pausing a holder needs SIGSTOP/SIGCONT; Windows has no such signals (no test can pause a process there).
const NO_SIGSTOP = process.platform === 'win32' && 'needs SIGSTOP/SIGCONT to pause a holder; Windows has none'
// On tmpfs, i.e. in memory: every directory made is removed when the file's tests end.
const made = []
const base = () => {
  const d = fs.mkdtempSync(path.join(fs.existsSync('/dev/shm') ? '/dev/shm' : os.tmpdir(), 'pi-native-paused-'))
  made.push(d)
  return d
}
test.after(() => {
  for (const d of made) fs.rmSync(d, { recursive: true, force: true })
})

/** Run a node script; resolves { code, out, child } when it exits. */
function node(script, env = {}) {
  const child = spawn(process.execPath, ['-e', script], {
    env: { ...process.env, PI_NATIVE_BACKEND: 'native', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let out = ''
  let err = ''
  child.stdout.on('data', (d) => (out += d))
  child.stderr.on('data', (d) => (err += d))
  // 'close', not 'exit': stdout may still hold data when the process has exited.
  const done = new Promise((resolve) => child.once('close', (code) => resolve({ code, out, err })))
  return { child, done }
}

async function untilStopped(pids) {
  for (let i = 0; i < 1000; i++) {
    if (pids.every((p) => procState(p) === 'T')) return
    await sleep(10)
  }
  throw new Error(`not all stopped: ${pids.map((p) => `${p}:${procState(p)}`).join(' ')}`)
}

/** One process that takes every lock over once it is stale and writes the taker's content. */
function taker(targets, mode) {
  const script = `
    const lockfile = require(${JSON.stringify(path.join(root, 'node_modules', 'proper-lockfile'))})
    const fs = require('node:fs')
    const targets = ${JSON.stringify(targets)}
    const store = require(${JSON.stringify(path.join(root, 'lib', 'index.js'))})
    Promise.all(targets.map(async (t) => {
      if (${JSON.stringify(mode)} === 'store') {
        // The original store's writer: proper-lockfile + atomic write (JS backend).
        await store.writeEntry(t.agentDir, t.entry)
      } else {
        const release = await lockfile.lock(t.file, { realpath: false, stale: undefined, retries: { retries: 20, minTimeout: 100, maxTimeout: 250, factor: 1 } })
        fs.writeFileSync(t.file, 'taker')
        await release()
      }
    })).then(() => console.log('TAKEN'), (e) => { console.error(e); process.exit(1) })`
  return node(script, { PI_NATIVE_BACKEND: 'js' })
}

function noTemp(dir) {
  return fs.readdirSync(dir).filter((n) => n.endsWith('.tmp'))
}

for (const kind of ['async', 'sync']) {
  test(`store CAS (${kind}) paused between compare and rename: ECOMPROMISED, taker's entry kept (${ROUNDS} rounds)`, { skip: NO_SIGSTOP }, async () => {
    const dir = base()
    const rounds = []
    for (let i = 0; i < ROUNDS; i++) {
      const agentDir = path.join(dir, `a${i}`)
      const running = makeEntry('worker', `s${i}`, { pid: 1000 + i })
      fs.mkdirSync(path.join(agentDir, 'state', 'process-matrix'), { recursive: true })
      fs.writeFileSync(path.join(agentDir, 'state', 'process-matrix', `${running.entryId}.json`), JSON.stringify(running, null, '\t') + '\n')
      const call =
        kind === 'async'
          ? `s.writeEntryIfUnchanged(a, e.entryId, e, { ...e, status: 'closed' })`
          : `Promise.resolve().then(() => s.writeEntryIfUnchangedSync(a, e, { ...e, status: 'closed' }))`
      const script = `
        const s = require(${JSON.stringify(path.join(root, 'lib', 'index.js'))})
        const a = ${JSON.stringify(agentDir)}
        const e = ${JSON.stringify(running)}
        ${call}.then((r) => console.log(JSON.stringify({ resolved: r })), (err) => console.log(JSON.stringify({ code: err.code, message: err.message })))`
      rounds.push({ agentDir, running, holder: node(script, { PI_NATIVE_TEST_STOP_BEFORE_COMMIT: '1' }) })
    }
    await untilStopped(rounds.map((r) => r.holder.child.pid))
    const takerEntry = (r) => ({ ...r.running, pid: 9000, heartbeatAt: '2026-12-02T00:00:09.000Z' })
    const t = taker(rounds.map((r) => ({ agentDir: r.agentDir, entry: takerEntry(r) })), 'store')
    const taken = await t.done
    assert.equal(taken.code, 0, taken.err)
    for (const r of rounds) r.holder.child.kill('SIGCONT')
    for (const r of rounds) {
      const res = await r.holder.done
      assert.equal(res.code, 0, res.err)
      const outcome = JSON.parse(res.out)
      assert.deepEqual(outcome, { code: 'ECOMPROMISED', message: 'Unable to update lock within the stale threshold' }, `${res.out}\n${res.err}\ntaker: ${taken.out}`)
      const mdir = path.join(r.agentDir, 'state', 'process-matrix')
      const text = fs.readFileSync(path.join(mdir, `${r.running.entryId}.json`), 'utf8')
      assert.equal(text, JSON.stringify(takerEntry(r), null, '\t') + '\n', "the taker's entry, whole")
      assert.deepEqual(noTemp(mdir), [])
      assert.deepEqual(fs.readdirSync(mdir), [`${r.running.entryId}.json`], 'no lock directory left')
    }
  })
}

for (const kind of ['withFileLock', 'withFileLockSync']) {
  test(`${kind}: a holder paused past the stale threshold fails with ECOMPROMISED after fn returns (${ROUNDS} rounds)`, { skip: NO_SIGSTOP }, async () => {
    const dir = base()
    const rounds = []
    for (let i = 0; i < ROUNDS; i++) {
      const file = path.join(dir, `f${i}.txt`)
      const body = `fs.writeFileSync(file, 'holder-before-pause'); process.kill(process.pid, 'SIGSTOP'); return 'fn-result'`
      const call =
        kind === 'withFileLock'
          ? `s.withFileLock(file, async () => { ${body} })`
          : `Promise.resolve().then(() => s.withFileLockSync(file, () => { ${body} }))`
      const script = `
        const fs = require('node:fs')
        const s = require(${JSON.stringify(path.join(root, 'lib', 'index.js'))})
        const file = ${JSON.stringify(file)}
        ${call}.then((r) => console.log(JSON.stringify({ resolved: r })), (err) => console.log(JSON.stringify({ code: err.code, message: err.message, file: err.file })))`
      rounds.push({ file, holder: node(script) })
    }
    await untilStopped(rounds.map((r) => r.holder.child.pid))
    const t = taker(rounds.map((r) => ({ file: r.file })), 'lock')
    const taken = await t.done
    assert.equal(taken.code, 0, taken.err)
    // The taker is done and has released; a later writer may hold the lock again: take it
    // once more for half of the rounds so that the resumed holder's release meets a lock
    // that is held by somebody else and must leave it alone.
    const lockfile = require('proper-lockfile')
    const relock = await Promise.all(rounds.slice(0, ROUNDS / 2).map((r) => lockfile.lock(r.file, { realpath: false })))
    for (const r of rounds) r.holder.child.kill('SIGCONT')
    for (const r of rounds) {
      const res = await r.holder.done
      assert.equal(res.code, 0, res.err)
      assert.deepEqual(JSON.parse(res.out), { code: 'ECOMPROMISED', message: 'Unable to update lock within the stale threshold' }) // proper-lockfile's shape (no `file`)
      assert.equal(fs.readFileSync(r.file, 'utf8'), 'taker')
    }
    for (const [i, r] of rounds.slice(0, ROUNDS / 2).entries()) {
      assert.ok(fs.statSync(`${r.file}.lock`).isDirectory(), "the later holder's lock survives the robbed holder's release")
      await relock[i]()
    }
    assert.deepEqual(fs.readdirSync(dir).filter((n) => !n.endsWith('.txt')), [], 'no lock or temp left')
  })
}
