'use strict'
// Two machines sharing one folder, on one host (issue 28): an sshd bound to 127.0.0.1 on a
// free port, with a throw-away host key and client key, and one temp folder mounted twice with
// sshfs. Each mount is its own SSH session and its own sshfs process with its own caches, as
// two machines mounting one home directory would be. sshfs runs with its defaults (no cache
// options: that is how people mount it); only what running without a terminal needs is set.
//
// Everything is undone by `stop()`, by this process's `exit`, and, when this process dies
// without either (SIGKILL, a test runner's SIGTERM), by a detached guard process that watches
// it: no mount, sshd or temp folder is left behind.
//
// Run as a script with `--guard <json>`: the guard itself.
const { spawn, spawnSync, execFile } = require('node:child_process')
const fs = require('node:fs')
const net = require('node:net')
const os = require('node:os')
const path = require('node:path')

const SSHD = '/usr/sbin/sshd' // sshd re-executes itself, so it must be started by absolute path

function onPath(name) {
  for (const dir of (process.env.PATH || '').split(path.delimiter).concat(['/usr/sbin', '/sbin'])) {
    const p = path.join(dir, name)
    try {
      fs.accessSync(p, fs.constants.X_OK)
      return p
    } catch {}
  }
  return null
}

/** Why two sshfs mounts cannot be made here (a skip reason), or null when they can. */
function unavailable() {
  if (process.platform !== 'linux') return `sshfs mounts are set up on Linux only (this is ${process.platform})`
  if (process.env.PI_NATIVE_EMULATED) return `wall-clock bounds for native execution; this run is under ${process.env.PI_NATIVE_EMULATED}`
  if (typeof process.getuid !== 'function' || process.getuid() !== 0) return 'needs root (sshd with root login, FUSE mounts)'
  for (const tool of ['sshfs', 'ssh', 'ssh-keygen']) if (!onPath(tool)) return `${tool} is not installed (apt-get install openssh-server sshfs)`
  if (!fs.existsSync(SSHD)) return `${SSHD} is not installed (apt-get install openssh-server)`
  if (!onPath('fusermount3') && !onPath('fusermount') && !onPath('umount')) return 'no fusermount/umount to unmount with'
  try {
    fs.closeSync(fs.openSync('/dev/fuse', 'r+'))
  } catch (err) {
    return `/dev/fuse is unusable (${err.code || err.message})`
  }
  return null
}

function run(cmd, args, timeoutMs = 20_000) {
  return new Promise((resolve) => {
    execFile(cmd, args, { timeout: timeoutMs }, (err, stdout, stderr) => resolve({ err, stdout, stderr }))
  })
}

function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer()
    srv.once('error', reject)
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address()
      srv.close(() => resolve(port))
    })
  })
}

/** Unmount (lazily when busy) every mount point in `mounts` that is still mounted; synchronous. */
function unmountSync(mounts) {
  const um = onPath('fusermount3') || onPath('fusermount')
  for (const m of mounts) {
    if (!isMounted(m)) continue
    if (um) spawnSync(um, ['-u', m], { stdio: 'ignore', timeout: 10_000 })
    if (isMounted(m) && um) spawnSync(um, ['-u', '-z', m], { stdio: 'ignore', timeout: 10_000 })
    if (isMounted(m)) spawnSync('umount', ['-l', m], { stdio: 'ignore', timeout: 10_000 })
  }
}

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

function readQuietly(file) {
  try {
    return fs.readFileSync(file, 'utf8')
  } catch {
    return ''
  }
}

function killQuietly(pid, signal = 'SIGTERM') {
  try {
    process.kill(pid, signal)
  } catch {}
}

/** The start time of a live process (field 22 of /proc/<pid>/stat), or '' when it is gone. */
function startTime(pid) {
  const stat = readQuietly(`/proc/${pid}/stat`)
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19] ?? ''
}

/** Kill the adopted processes that are still the same processes (pid and start time). */
function killAdopted(dir) {
  for (const line of readQuietly(path.join(dir, 'adopted')).split('\n').filter(Boolean)) {
    const [pid, start] = line.split(' ')
    if (start && startTime(pid) === start) killQuietly(Number(pid), 'SIGKILL')
  }
}

/**
 * Everything `stop` undoes, in order: adopted processes (they may keep a mount busy, or be
 * stopped and never finish), mounts (they need sshd), sshd, files.
 */
function teardownSync({ mounts, sshdPid, dir }) {
  killAdopted(dir)
  unmountSync(mounts)
  // The guard was started before sshd: it finds sshd's pid in the folder.
  if (!sshdPid) sshdPid = Number(readQuietly(path.join(dir, 'sshd.pid')))
  if (sshdPid) killQuietly(sshdPid)
  if (dir) fs.rmSync(dir, { recursive: true, force: true })
}

/**
 * Start sshd and mount one fresh folder twice. Resolves `{ shared, a, b, port, adopt, stop }`:
 * `shared` is the folder itself (the "server's" local view), `a` and `b` its two sshfs mounts.
 * `stop()` undoes everything (idempotent).
 */
async function twoMounts({ label = 'two-mounts' } = {}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `pi-native-${label}-`))
  const state = { mounts: [path.join(dir, 'a'), path.join(dir, 'b')], sshdPid: 0, dir }
  // Undo at exit unless stop() did; the guard covers deaths without an exit event.
  const atExit = () => teardownSync(state)
  process.on('exit', atExit)
  const guard = spawn(process.execPath, [__filename, '--guard', JSON.stringify({ parent: process.pid, mounts: state.mounts, dir })], {
    detached: true,
    stdio: 'ignore',
  })
  guard.unref()
  let sshd
  let stopped = false
  const stop = async () => {
    if (stopped) return
    stopped = true
    process.removeListener('exit', atExit)
    killAdopted(dir)
    unmountSync(state.mounts)
    if (sshd && sshd.exitCode === null && sshd.signalCode === null) {
      const gone = new Promise((r) => sshd.once('exit', r))
      sshd.kill('SIGTERM')
      await gone
    }
    fs.rmSync(dir, { recursive: true, force: true })
    killQuietly(guard.pid)
  }
  try {
    const key = (name) => {
      const r = spawnSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', `pi-native-${name}`, '-f', path.join(dir, name)])
      if (r.status !== 0) throw new Error(`ssh-keygen ${name}: ${r.stderr}`)
    }
    key('host_key')
    key('client_key')
    fs.copyFileSync(path.join(dir, 'client_key.pub'), path.join(dir, 'authorized_keys'))
    // sshd refuses to start without its privilege-separation directory (normally made by the
    // service unit, which is not used here).
    fs.mkdirSync('/run/sshd', { recursive: true, mode: 0o755 })
    for (const m of ['shared', 'a', 'b']) fs.mkdirSync(path.join(dir, m))
    // A port can be taken between freePort() and sshd's bind: try a few.
    for (let attempt = 1; ; attempt++) {
      const port = await freePort()
      const config = [
        'ListenAddress 127.0.0.1',
        `Port ${port}`,
        `HostKey ${path.join(dir, 'host_key')}`,
        `AuthorizedKeysFile ${path.join(dir, 'authorized_keys')}`,
        'PidFile none',
        'PermitRootLogin prohibit-password',
        'PubkeyAuthentication yes',
        'PasswordAuthentication no',
        'KbdInteractiveAuthentication no',
        'UsePAM no',
        // The temp folder is inside a world-writable TMPDIR, which StrictModes rejects.
        'StrictModes no',
        'Subsystem sftp internal-sftp',
        'MaxStartups 100',
        'LogLevel ERROR',
      ].join('\n')
      fs.writeFileSync(path.join(dir, 'sshd_config'), config + '\n')
      sshd = spawn(SSHD, ['-D', '-e', '-f', path.join(dir, 'sshd_config')], { stdio: ['ignore', 'ignore', 'pipe'] })
      state.sshdPid = sshd.pid
      fs.writeFileSync(path.join(dir, 'sshd.pid'), String(sshd.pid))
      let log = ''
      sshd.stderr.on('data', (d) => (log += d))
      // Ready when the port accepts a connection; failed when sshd exits first.
      const ready = await new Promise((resolve) => {
        const deadline = Date.now() + 10_000
        const exited = () => resolve(false)
        sshd.once('exit', exited)
        const probe = () => {
          const s = net.connect(port, '127.0.0.1')
          s.once('connect', () => {
            s.destroy()
            sshd.removeListener('exit', exited)
            resolve(true)
          })
          s.once('error', () => {
            s.destroy()
            if (Date.now() > deadline) resolve(false)
            else setTimeout(probe, 50)
          })
        }
        probe()
      })
      if (ready) {
        state.port = port
        break
      }
      killQuietly(sshd.pid)
      if (attempt >= 3) throw new Error(`sshd did not start: ${log.trim()}`)
    }
    const [a, b] = state.mounts
    for (const m of [a, b]) {
      // sshfs defaults; only what a non-interactive run needs (key, no host-key prompt, no
      // password prompt, the port).
      const opts = [
        `IdentityFile=${path.join(dir, 'client_key')}`,
        'StrictHostKeyChecking=no',
        'UserKnownHostsFile=/dev/null',
        'BatchMode=yes',
        `port=${state.port}`,
      ].join(',')
      // sshfs detaches once the mount is up; its exit status tells whether it is.
      const r = await run('sshfs', ['-o', opts, `root@127.0.0.1:${path.join(dir, 'shared')}`, m])
      if (r.err || !isMounted(m)) throw new Error(`sshfs ${m}: ${r.err ? r.err.message : 'not mounted'} ${r.stderr}`.trim())
    }
    /** Have `pid` killed at teardown if it still runs then (e.g. a SIGSTOPped child). */
    const adopt = (pid) => fs.appendFileSync(path.join(dir, 'adopted'), `${pid} ${startTime(pid)}\n`)
    return { shared: path.join(dir, 'shared'), a, b, port: state.port, adopt, stop }
  } catch (err) {
    await stop()
    throw err
  }
}

/** The guard: poll the parent; once it is gone, undo what it left (mounts, sshd, folder). */
function guardMain(spec) {
  const { parent } = spec
  const alive = () => {
    try {
      process.kill(parent, 0)
      return true
    } catch (err) {
      return err.code === 'EPERM'
    }
  }
  // Not killed along with the test process's group.
  for (const sig of ['SIGINT', 'SIGHUP']) process.on(sig, () => {})
  const timer = setInterval(() => {
    if (alive()) return
    clearInterval(timer)
    teardownSync(spec)
    process.exit(0)
  }, 200)
  // stop() ends the guard with SIGTERM once it has cleaned up itself.
  process.on('SIGTERM', () => process.exit(0))
}

if (require.main === module && process.argv[2] === '--guard') guardMain(JSON.parse(process.argv[3]))

module.exports = { twoMounts, unavailable, isMounted }
