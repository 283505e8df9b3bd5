'use strict'
// The fault layer for node:test files: mounts of tools/faultfs (a FUSE pass-through of a folder
// that answers like a network mount and injects faults into the real processes that use it;
// docs/FAULT-LAYER.md), and a client of its control socket.
//
//   const faultfs = require('./faultfs.js')
//   const skip = faultfs.available()            // a reason string when it cannot run here
//   const m = await faultfs.mount({ backing, attrTtlMs: 1000, wholeSeconds: true, name: 'a' })
//   const id = await m.addRule({ op: 'rmdir', path: '\\.lock$', kind: 'lost_reply' })
//   ... processes use m.dir ...
//   await m.until(id, (h) => h.fired >= 1, 'the release rmdir')
//   await m.unmount()
//
// A mount is one "machine": two mounts of one backing folder have their own kernel caches.
// Everything is undone by unmount(), by this process's `exit`, and (when this process dies
// without one, e.g. SIGKILL) by faultfs itself, which watches this process (--watch-pid) and
// then unmounts (lazily when busy) and exits.
const { spawn, spawnSync } = require('node:child_process')
const fs = require('node:fs')
const net = require('node:net')
const os = require('node:os')
const path = require('node:path')

const root = path.resolve(__dirname, '..')
/** statfs(2) f_type of every FUSE mount. */
const FUSE_MAGIC = 0x65735546

function onPath(name) {
  for (const dir of (process.env.PATH || '').split(path.delimiter).concat(['/usr/sbin', '/sbin', '/usr/bin', '/bin'])) {
    const p = path.join(dir, name)
    try {
      fs.accessSync(p, fs.constants.X_OK)
      return p
    } catch {}
  }
  return null
}

let built // { bin } | { reason }, once per process

/**
 * The faultfs binary: PI_NATIVE_FAULTFS_BIN, or `cargo build --release -p faultfs` in this
 * checkout (cargo decides whether anything changed; the first build takes about a minute).
 */
function build() {
  if (built) return built
  const given = process.env.PI_NATIVE_FAULTFS_BIN
  if (given) {
    built = fs.existsSync(given) ? { bin: given } : { reason: `PI_NATIVE_FAULTFS_BIN=${given} does not exist` }
    return built
  }
  const cargo = onPath('cargo') || (process.env.HOME && [path.join(process.env.HOME, '.cargo', 'bin', 'cargo')].find((p) => fs.existsSync(p)))
  const bin = path.join(root, 'target', 'release', 'faultfs')
  if (!cargo) {
    built = fs.existsSync(bin) ? { bin } : { reason: 'cargo is not installed and target/release/faultfs is not built' }
    return built
  }
  const r = spawnSync(cargo, ['build', '--release', '--quiet', '-p', 'faultfs'], { cwd: root, encoding: 'utf8', timeout: 900_000 })
  if (r.status !== 0 || !fs.existsSync(bin)) {
    built = { reason: `cargo build --release -p faultfs failed: ${(r.stderr || r.error?.message || '').trim().split('\n').slice(-5).join(' | ')}` }
  } else {
    built = { bin }
  }
  return built
}

/** Why faultfs cannot be mounted here (a skip reason), or null when it can. Builds it if need be. */
function available() {
  if (process.platform !== 'linux') return `faultfs is a Linux FUSE file system (this is ${process.platform})`
  if (process.env.PI_NATIVE_EMULATED) return `wall-clock bounds for native execution; this run is under ${process.env.PI_NATIVE_EMULATED}`
  if (typeof process.getuid !== 'function' || process.getuid() !== 0) return 'faultfs mounts need root'
  try {
    fs.closeSync(fs.openSync('/dev/fuse', 'r+'))
  } catch (err) {
    return `/dev/fuse is unusable (${err.code || err.message})`
  }
  if (!onPath('fusermount3') && !onPath('umount')) return 'neither fusermount3 (fuse3) nor umount is installed'
  return build().reason ?? null
}

/** Whether `dir` is a mount point now. */
function isMounted(dir) {
  try {
    return fs
      .readFileSync('/proc/self/mountinfo', 'utf8')
      .split('\n')
      .some((line) => line.split(' ')[4] === dir)
  } catch {
    return false
  }
}

function lazyUnmountSync(dir) {
  if (!isMounted(dir)) return
  const um = onPath('fusermount3')
  if (um) spawnSync(um, ['-u', '-z', dir], { stdio: 'ignore', timeout: 10_000 })
  if (isMounted(dir)) spawnSync('umount', ['-l', dir], { stdio: 'ignore', timeout: 10_000 })
}

// Mounts of this process not yet unmounted, undone at exit.
const live = new Set()
process.on('exit', () => {
  for (const m of live) {
    // faultfs releases hung requests and unmounts on SIGTERM; the lazy unmount here covers
    // a faultfs that cannot answer.
    try {
      process.kill(m.child.pid, 'SIGTERM')
    } catch {}
    lazyUnmountSync(m.dir)
    fs.rmSync(m.work, { recursive: true, force: true })
  }
})

const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

/** Wait until `check()` is truthy (polled every `everyMs`), or throw naming `what` after `timeoutMs`. */
async function waitFor(what, check, timeoutMs = 10_000, everyMs = 10) {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const v = await check()
    if (v) return v
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)
    await sleep(everyMs)
  }
}

/** A JSON-lines client of a faultfs control socket; answers come in the order asked. */
function controlClient(sock) {
  return new Promise((resolve, reject) => {
    const s = net.connect(sock)
    const waiting = []
    let buf = ''
    let failed = null
    s.setEncoding('utf8')
    s.on('data', (d) => {
      buf += d
      for (let i = buf.indexOf('\n'); i >= 0; i = buf.indexOf('\n')) {
        const line = buf.slice(0, i)
        buf = buf.slice(i + 1)
        const w = waiting.shift()
        if (waiting.length === 0) s.unref()
        w?.resolve(JSON.parse(line))
      }
    })
    const fail = (err) => {
      failed = err
      for (const w of waiting.splice(0)) w.reject(err)
    }
    s.on('error', (err) => {
      reject(err)
      fail(err)
    })
    s.on('close', () => fail(new Error('faultfs control socket closed')))
    s.once('connect', () => {
      s.unref()
      resolve({
        /** Send one command; resolves with its answer, rejects when it says `ok: false`. */
        ask(cmd) {
          if (failed) return Promise.reject(failed)
          return new Promise((res, rej) => {
            waiting.push({
              resolve: (a) => (a.ok ? res(a) : rej(new Error(`faultfs ${cmd.cmd}: ${a.error}`))),
              reject: rej,
            })
            s.ref()
            s.write(JSON.stringify(cmd) + '\n')
          })
        },
        close: () => s.destroy(),
      })
    })
  })
}

/**
 * Mount `backing` (a fresh temp folder when omitted) through faultfs at a fresh mount point.
 * Options: attrTtlMs, entryTtlMs (kernel caches, default 1000 each, as FUSE's), negativeTtlMs
 * (default 0: not cached), wholeSeconds (times truncated to seconds, reported and stored),
 * renumberInodes (inode numbers of this mount's own), renameFlags (default true: a rename's
 * flags such as RENAME_NOREPLACE are passed through, as JuiceFS and local folders do; false: any
 * rename with flags is answered EINVAL, as sshfs, SMB and GlusterFS clients answer), name (the
 * "machine"), logAll (log every request, not only those a rule acted on).
 * Resolves `{ dir, backing, name, pid, addRule, removeRule, release, clear, hits, until, rules,
 * log, unmount }`.
 */
async function mount({ backing, attrTtlMs = 1000, entryTtlMs = 1000, negativeTtlMs = 0, wholeSeconds = false, renumberInodes = false, renameFlags = true, name = 'faultfs', logAll = false } = {}) {
  const reason = available()
  if (reason) throw new Error(`faultfs cannot run here: ${reason}`)
  const work = fs.mkdtempSync(path.join(os.tmpdir(), `pi-native-faultfs-${name}-`))
  fs.chmodSync(work, 0o755)
  const dir = path.join(work, 'mnt')
  fs.mkdirSync(dir)
  const ownBacking = !backing
  if (ownBacking) {
    backing = path.join(work, 'backing')
    fs.mkdirSync(backing)
  }
  const sock = path.join(work, 'control.sock')
  const args = [backing, dir, '--control', sock, '--attr-ttl-ms', String(attrTtlMs), '--entry-ttl-ms', String(entryTtlMs), '--negative-ttl-ms', String(negativeTtlMs), '--name', name, '--watch-pid', String(process.pid)]
  if (wholeSeconds) args.push('--whole-seconds')
  if (renumberInodes) args.push('--renumber-inodes')
  if (!renameFlags) args.push('--no-rename-flags')
  if (logAll) args.push('--log-all')
  const child = spawn(build().bin, args, { stdio: ['ignore', 'pipe', 'pipe'] })
  const state = { child, dir, work }
  live.add(state)
  let stderr = ''
  child.stderr.setEncoding('utf8')
  child.stderr.on('data', (d) => (stderr += d))
  let stdout = ''
  child.stdout.setEncoding('utf8')
  child.stdout.on('data', (d) => (stdout += d))
  const exited = new Promise((r) => child.once('exit', (code, signal) => r({ code, signal })))
  let gone = null
  exited.then((e) => (gone = e))
  const cleanup = () => {
    live.delete(state)
    lazyUnmountSync(dir)
    fs.rmSync(work, { recursive: true, force: true })
  }
  let control
  try {
    await waitFor(
      `faultfs ${name} to mount ${dir}`,
      () => {
        if (gone) throw new Error(`faultfs exited (${JSON.stringify(gone)}): ${stderr.trim()}`)
        // Ready once it said so and the kernel answers statfs of the mount point as FUSE.
        return stdout.includes('"ready":true') && fs.statfsSync(dir).type === FUSE_MAGIC
      },
      20_000,
    )
    control = await controlClient(sock)
  } catch (err) {
    child.kill('SIGKILL')
    cleanup()
    throw err
  }
  // Neither holds this process open: a test that forgets unmount() still ends (exit undoes it).
  child.unref()
  child.stdout.unref?.()
  child.stderr.unref?.()
  const ask = (cmd) => control.ask(cmd)
  let unmounted = null
  const handle = {
    /** The mount point. */
    dir,
    /** The backing folder (the "server's" copy). */
    backing,
    name,
    /** The faultfs process. */
    pid: child.pid,
    /** Add a rule (docs/FAULT-LAYER.md); resolves with its id. */
    addRule: async (rule) => (await ask({ cmd: 'add', rule })).id,
    /** Remove a rule; the requests it holds go on. */
    removeRule: async (id) => {
      await ask({ cmd: 'remove', id })
    },
    /** Let the requests a `hang` rule holds now go on; resolves with how many. */
    release: async (id) => (await ask({ cmd: 'release', id })).released,
    /** Remove every rule. */
    clear: async () => {
      await ask({ cmd: 'clear' })
    },
    /** `{ matched, fired, hanging, active }` of a rule. */
    hits: async (id) => {
      const { matched, fired, hanging, active } = await ask({ cmd: 'hits', id })
      return { matched, fired, hanging, active }
    },
    /** Wait until `pred(hits(id))` holds (deadline `timeoutMs`, default 20 s). */
    until: (id, pred, what = `rule ${id}`, timeoutMs = 20_000) =>
      waitFor(
        `${what} (faultfs ${name})`,
        async () => {
          const h = await handle.hits(id)
          return pred(h) ? h : null
        },
        timeoutMs,
      ),
    /** Every rule with its counters. */
    rules: async () => (await ask({ cmd: 'list' })).rules,
    /** Requests logged after `since` (a seq): those rules acted on (all with logAll). */
    log: async (since = 0) => (await ask({ cmd: 'log', since })).entries,
    /** Release everything, unmount, end faultfs, remove the mount point (and a temp backing). */
    unmount: () =>
      (unmounted ??= (async () => {
        try {
          await ask({ cmd: 'clear' })
        } catch {}
        control.close()
        if (!gone) child.kill('SIGTERM')
        const ended = await Promise.race([exited, sleep(10_000).then(() => null)])
        if (!ended) {
          lazyUnmountSync(dir)
          child.kill('SIGKILL')
          await exited
        }
        live.delete(state)
        lazyUnmountSync(dir)
        if (isMounted(dir)) throw new Error(`${dir} is still mounted`)
        // The work folder holds the mount point, the socket, and a backing folder made here.
        fs.rmSync(work, { recursive: true, force: true })
      })()),
  }
  return handle
}

module.exports = { available, mount, isMounted, waitFor, FUSE_MAGIC }
