'use strict'
// Processes and mounts for the fault-layer lock cases (faultfs-lock.test.js,
// faultfs-threads.isolated.test.js): children of __test__/faultfs-child.js with their messages,
// mounts of tools/faultfs and temp folders, all undone after the file's tests; and the checks
// made on what the children said (a timeline, overlapping critical sections).
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { spawn } = require('node:child_process')
const faultfs = require('./faultfs.js')

const CHILD = path.join(__dirname, 'faultfs-child.js')

/** Regular expression of a lock directory's path, for rules. */
const LOCK_RE = '\\.lock$'

/**
 * The two kinds of folder the native lock meets on a network or FUSE mount: one that moves a
 * lock prepared under a private name into place with renameat2(RENAME_NOREPLACE) (JuiceFS, and
 * a faultfs mount by default), and one that refuses rename flags (sshfs, SMB, GlusterFS:
 * faultfs `renameFlags: false`), where the lock is made by `mkdir` at its path. `creates` is the
 * rule fields that match the request making a lock at its path on that kind.
 */
const KINDS = [
  { name: 'rename', renameFlags: true, creates: { op: 'rename', dest: LOCK_RE }, what: 'a RENAME_NOREPLACE mount' },
  { name: 'mkdir', renameFlags: false, creates: { op: 'mkdir', path: LOCK_RE }, what: 'a mount without rename flags' },
]

/** Lock directories (and private ones being prepared) for `file` left in the folder `dir`. */
function leftovers(dir, file) {
  return fs.readdirSync(dir).filter((n) => n === `${file}.lock` || n.startsWith(`${file}.lock.`))
}
const sec = (ms) => `${(ms / 1000).toFixed(1)} s`

/**
 * What a test file needs, undone by `test.after`: `tmp(name)` (a temp folder),
 * `mount(backing, name, opts)` (a faultfs mount), `start(role, arg, env)` (a child).
 */
function setup(test, prefix) {
  const made = []
  const mounts = []
  const children = new Set()
  test.after(async () => {
    // Hung requests go first (a process blocked in one cannot even be killed), then
    // processes, then mounts.
    for (const m of mounts) await m.clear().catch(() => {})
    for (const c of children) c.kill('SIGKILL')
    await Promise.all([...children].map((c) => c.done))
    for (const m of mounts) await m.unmount()
    for (const d of made) fs.rmSync(d, { recursive: true, force: true })
  })

  const tmp = (name) => {
    const d = fs.mkdtempSync(path.join(os.tmpdir(), `pi-native-${prefix}-${name}-`))
    made.push(d)
    return d
  }

  /** Mount `backing` through faultfs (options of faultfs.mount). */
  async function mount(backing, name, opts = {}) {
    const m = await faultfs.mount({ backing, name, ...opts })
    mounts.push(m)
    return m
  }

  /**
   * Start a child of __test__/faultfs-child.js in `role`; its messages collect in `messages`.
   * `when(pred, what, ms)` resolves with the first message `pred` accepts (throws after `ms`,
   * or when the child ended without it).
   */
  function start(role, arg, env = {}) {
    const child = spawn(process.execPath, [CHILD, JSON.stringify({ role, ...arg })], {
      env: { ...process.env, ...env },
      stdio: ['pipe', 'pipe', 'pipe'],
    })
    const messages = []
    let stderr = ''
    let buf = ''
    const wakers = new Set()
    child.stdout.on('data', (d) => {
      buf += d
      for (let i = buf.indexOf('\n'); i >= 0; i = buf.indexOf('\n')) {
        messages.push(JSON.parse(buf.slice(0, i)))
        buf = buf.slice(i + 1)
      }
      for (const w of wakers) w()
    })
    child.stderr.on('data', (d) => (stderr += d))
    const p = {
      child,
      messages,
      label: arg.label ?? role,
      stderr: () => stderr,
      done: new Promise((resolve) => child.once('close', (code, signal) => resolve({ code, signal }))),
      send: (line) => child.stdin.write(`${line}\n`),
      kill: (sig) => child.kill(sig),
      async when(pred, what, timeoutMs = 20_000) {
        const deadline = Date.now() + timeoutMs
        for (;;) {
          const m = messages.find(pred)
          if (m) return m
          if (child.exitCode !== null || child.signalCode !== null) throw new Error(`${p.label} exited without ${what}: ${stderr}`)
          if (Date.now() > deadline) throw new Error(`${p.label}: no ${what} within ${timeoutMs} ms`)
          await new Promise((r) => {
            wakers.add(r)
            setTimeout(r, 50)
          }).finally(() => wakers.clear())
        }
      },
    }
    children.add(p)
    p.done.then(() => children.delete(p))
    return p
  }

  return { tmp, mount, start }
}

/** Wait for every process to end; throws with their timeline after `timeoutMs`. */
async function finished(procs, timeoutMs) {
  let timer
  const late = new Promise((r) => (timer = setTimeout(r, timeoutMs, 'timeout')))
  const first = await Promise.race([Promise.all(procs.map((p) => p.done)), late])
  clearTimeout(timer)
  if (first === 'timeout') throw new Error(`not finished within ${timeoutMs} ms:\n${timeline(procs)}`)
}

/** Every process's messages in time order, and what they wrote to stderr (failure messages). */
function timeline(procs) {
  const t0 = Math.min(...procs.flatMap((p) => p.messages.map((m) => m.t)))
  return procs
    .flatMap((p) => p.messages.map((m) => ({ ...m, who: p.label })))
    .sort((a, b) => a.t - b.t)
    .map(({ t, who, pid, ...m }) => `  +${String(t - t0).padStart(6)} ms ${who}: ${JSON.stringify(m)}`)
    .concat(procs.filter((p) => p.stderr().trim()).map((p) => `  ${p.label} stderr: ${p.stderr().trim().split('\n').slice(0, 6).join(' | ')}`))
    .join('\n')
}

/**
 * Critical sections that overlapped: an entry that found the marker there, or a section that
 * began before an earlier one ended (a process that ended inside was inside until its exit).
 */
function overlaps(procs) {
  const found = []
  const spans = []
  for (const p of procs) {
    const open = new Map()
    for (const m of p.messages) {
      if ('in' in m) {
        if (m.overlap) found.push(`${p.label} entered while another was inside (marker present) at ${m.t}`)
        open.set(m.in, m.t)
      }
      if ('out' in m) {
        spans.push({ who: p.label, from: open.get(m.out), to: m.t })
        open.delete(m.out)
      }
      if ('exit' in m) for (const from of open.values()) spans.push({ who: `${p.label} (ended inside)`, from, to: m.t })
    }
  }
  spans.sort((a, b) => a.from - b.from)
  let last = null
  for (const s of spans) {
    if (last && s.from < last.to) found.push(`${s.who} [${s.from}, ${s.to}] began inside ${last.who} [${last.from}, ${last.to}]`)
    if (!last || s.to > last.to) last = s
  }
  return found
}

/** Wait up to `ms` for rule `id` on mount `m` to satisfy `pred`; false (not thrown) when it does not. */
async function soon(m, id, pred, ms) {
  try {
    await m.until(id, pred, `rule ${id}`, ms)
    return true
  } catch (err) {
    if (!/timed out/.test(err.message)) throw err
    return false
  }
}

module.exports = { setup, finished, timeline, overlaps, soon, leftovers, LOCK_RE, KINDS, sec }
