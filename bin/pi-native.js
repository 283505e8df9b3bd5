#!/usr/bin/env node
'use strict'
// pi-native operator CLI. Every command and exit code is documented in README.md (CLI section).
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { parseArgs } = require('node:util')
const lib = require('../lib/index.js')
const { RECOVERY_DEFAULTS } = require('../lib/contract/options.js')
const { diagnoseMatrixDir, explainCandidates, formatAge, sessionIdOfFile } = require('./diagnose.js')
const { inline, multiline, Output, writeTable } = require('./terminal.js')

const VERSION = require('../package.json').version

// Exit codes shared by all commands; command-specific ones are listed in each command's help.
const EXIT = { ok: 0, notFound: 1, usage: 2 }

const COMMANDS = {
  pid: {
    usage: 'pi-native pid <pid...> [--json]',
    summary: 'probe state, start time and identity of each pid',
    options: { json: { type: 'boolean' } },
    details: `Probes each pid with the library (probePid, getProcessIdentity, getProcessStartTime).
States: alive, dead, zombie (exited, not yet reaped by its parent), eperm (exists, but
signalling it is not permitted), invalid (not a usable pid, e.g. 0 or above 2^31-1).

exit codes (the state of the first pid that is not alive decides):
  0  every pid is alive
  1  dead
  2  usage error
  3  zombie
  4  not permitted (eperm)
  5  invalid pid`,
  },
  recover: {
    usage: 'pi-native recover <sessionDir> [--session-id ID] [--json]',
    summary: 'what session recovery returns for a session directory, and why not',
    options: { json: { type: 'boolean' }, 'session-id': { type: 'string' } },
    details: `Runs recoverLastAssistantFromSession(sessionDir, ID) and prints the recovered text, the
file it came from and how long it took. When nothing is recovered it says why: the path is
missing or not a directory, it holds no *.jsonl file, or each candidate file looked at is listed
with the reason it gave nothing (empty, over the size cap, unreadable, no complete assistant
turn, old format the SDK cannot migrate, or not looked at beyond the first ${RECOVERY_DEFAULTS.maxFiles}).

exit codes:
  0  recovered
  1  candidates looked at, nothing recoverable
  2  usage error
  3  no candidate *.jsonl file in the directory
  4  the directory does not exist
  5  the path is not a directory
  6  the directory cannot be listed (e.g. permission denied)`,
  },
  matrix: {
    usage: 'pi-native matrix [agentDir] [--json] [--watch]',
    summary: 'process-matrix entries with liveness, and every file the store cannot use',
    options: { json: { type: 'boolean' }, watch: { type: 'boolean' } },
    details: `agentDir defaults to $PI_CODING_AGENT_DIR, else ~/.pi/agent; the entries live in
<agentDir>/state/process-matrix. Prints the valid entries (what listEntries returns) with
liveness (alive, dead, zombie, recycled, foreign-host), heartbeat age and parent; live workers
whose parent is gone are marked (orphan). Then every problem in the folder, in plain words:
files that are unreadable, not regular files (a FIFO, a device), too large to be an entry,
not JSON, start with a BOM, break a schema rule (V1-V17, named with the field), or whose name
does not match their entryId; stray files; stale .lock directories with their age; orphaned
temporary files of interrupted writes. A summary line closes. Locks being held and writes in
progress are shown as "in flight", not as problems. Text from the files is printed with control
characters escaped (\u001b).
--json prints the same as one JSON document. --watch redraws once per change of the folder
(file-system notifications; with --json one document per line) and the moment a process shown
alive ends (waitForProcessExit); a redraw that would show nothing new is left out. It runs until
Ctrl-C, SIGTERM or SIGHUP, and then ends by that signal (exit status 130, 143 or 129 in a
shell), whether started directly or through npx.

exit codes:
  0  healthy: no problems (dead or orphaned processes are reported, not problems)
  1  problems found, or no process-matrix directory / not a directory / unreadable
  2  usage error`,
  },
  help: {
    usage: 'pi-native help [command]',
    summary: 'this overview, or the details of one command',
    options: {},
    details: 'exit codes: 0 ok, 2 unknown command',
  },
}

const GLOBAL_USAGE = `usage: pi-native <command> [options]
       pi-native --version | --help | help [command]

commands:
${Object.entries(COMMANDS)
  .map(([name, c]) => `  ${name.padEnd(8)} ${c.summary}\n           ${c.usage}`)
  .join('\n')}

Every command takes --help. Exit codes: 0 ok, 1 not found or problems found, 2 usage error;
some commands use more (see pi-native help <command>).`

class UsageError extends Error {
  constructor(message, command) {
    super(message)
    this.command = command
  }
}

const stdout = new Output(process.stdout)
/** Writes `s` and a line feed (text of the CLI's own, or already escaped). */
const out = (s) => stdout.write(s.endsWith('\n') ? s : `${s}\n`)
/** Writes `v` as indented JSON, DEL and C1 escaped as JSON. */
const json = (v) => stdout.json(v, '  ')
const commandHelp = (name) => `usage: ${COMMANDS[name].usage}\n\n${COMMANDS[name].summary}.\n${COMMANDS[name].details}`

/** Levenshtein distance, for "did you mean". */
function distance(a, b) {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j)
  for (let i = 1; i <= a.length; i++) {
    const cur = [i]
    for (let j = 1; j <= b.length; j++) cur[j] = Math.min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1))
    prev = cur
  }
  return prev[b.length]
}

/** The known command closest to `word`, when it is close enough to be a likely typo. */
function closestCommand(word) {
  let best
  for (const name of Object.keys(COMMANDS)) {
    const d = distance(word.toLowerCase(), name)
    if (best === undefined || d < best.d) best = { name, d }
  }
  return best && best.d <= Math.max(2, Math.floor(best.name.length / 2)) ? best.name : undefined
}

function parseCommand(name, argv) {
  try {
    return parseArgs({ args: argv, options: { ...COMMANDS[name].options, help: { type: 'boolean', short: 'h' } }, allowPositionals: true, strict: true })
  } catch (err) {
    // parseArgs' messages name the option and suggest `--` for positionals that start with '-'.
    throw new UsageError(err.message.split('. To specify a positional')[0], name)
  }
}

// ---- pid ---------------------------------------------------------------------------------------
const PID_EXIT = { alive: 0, dead: 1, zombie: 3, eperm: 4, invalid: 5 }

async function cmdPid({ positionals, values }) {
  if (positionals.length === 0) throw new UsageError('pid: at least one pid is required', 'pid')
  const pids = positionals.map((a) => {
    if (!/^\d+$/.test(a)) throw new UsageError(`pid: not a pid: ${inline(a)}`, 'pid')
    return Number(a)
  })
  const report = pids.map((pid) => {
    const state = lib.probePid(pid)
    const identity = state === 'invalid' ? undefined : lib.getProcessIdentity(pid)
    return { pid, state, legacyStartTime: lib.getProcessStartTime(pid) ?? null, identity: identity ?? null }
  })
  if (values.json) await json(report)
  else {
    const rows = report.map((r) => [String(r.pid), r.state, r.identity ? new Date(r.identity.startTimeMs).toISOString() : '-', String(r.legacyStartTime ?? '-')])
    await writeTable(stdout, ['PID', 'STATE', 'STARTED', 'LEGACY-START'], rows)
  }
  const first = report.find((r) => r.state !== 'alive')
  return first ? PID_EXIT[first.state] : EXIT.ok
}

// ---- recover -----------------------------------------------------------------------------------
const RECOVER_EXIT = { recovered: 0, 'nothing-recoverable': 1, 'no-candidates': 3, missing: 4, 'not-a-directory': 5, unreadable: 6 }

/** Why the directory itself gives nothing: { outcome, message, names? } (names: its *.jsonl). */
function inspectSessionDir(dir) {
  let st
  try {
    st = fs.statSync(dir)
  } catch (err) {
    if (err.code === 'ENOENT' || err.code === 'ENOTDIR') return { outcome: 'missing', message: `${dir} does not exist` }
    return { outcome: 'unreadable', message: `cannot look at ${dir} (${err.code || err.message})` }
  }
  if (!st.isDirectory()) return { outcome: 'not-a-directory', message: `${dir} is not a directory (recover takes the session directory, not a session file)` }
  let names
  try {
    names = fs.readdirSync(dir)
  } catch (err) {
    return { outcome: 'unreadable', message: `cannot list ${dir} (${err.code || err.message})` }
  }
  const jsonl = names.filter((n) => n.endsWith('.jsonl'))
  if (jsonl.length === 0) {
    return { outcome: 'no-candidates', message: `no session files (*.jsonl) in ${dir}${names.length ? ` (it holds ${names.length} other ${names.length === 1 ? 'entry' : 'entries'})` : ' (it is empty)'}` }
  }
  return { outcome: null, names: jsonl }
}

async function cmdRecover({ positionals, values }) {
  if (positionals.length !== 1) throw new UsageError('recover: exactly one session directory is required', 'recover')
  const dir = positionals[0]
  const sessionId = values['session-id']
  const started = process.hrtime.bigint()
  const result = await lib.recoverLastAssistantFromSession(dir, sessionId)
  const elapsedMs = Number(process.hrtime.bigint() - started) / 1e6
  const base = { sessionDir: dir, sessionId: sessionId ?? null, backend: lib.backend, elapsedMs }
  if (result !== null) {
    // The library reports the id it was given (the original's contract), whichever file answered:
    // the CLI says whose file it is.
    const fileSessionId = sessionIdOfFile(result.sessionFile)
    if (values.json) await json({ ...base, outcome: 'recovered', fileSessionId, result })
    else {
      const other = sessionId !== undefined && sessionId !== fileSessionId
      await out(
        [
          `file:        ${inline(result.sessionFile)}`,
          `session id:  ${inline(fileSessionId)}${other ? ` (another session's file: no file named for --session-id ${inline(sessionId)} gave an answer)` : ''}`,
          `stop reason: ${inline(result.stopReason)}`,
          `timestamp:   ${inline(result.timestamp) || '-'}`,
          `elapsed:     ${elapsedMs.toFixed(1)} ms (${lib.backend})`,
          '',
          multiline(result.text),
        ].join('\n'),
      )
    }
    return RECOVER_EXIT.recovered
  }
  const d = inspectSessionDir(dir)
  if (d.outcome) {
    if (values.json) await json({ ...base, outcome: d.outcome, message: d.message, result: null, candidates: [] })
    else await out(`nothing recoverable: ${inline(d.message)}`)
    return RECOVER_EXIT[d.outcome]
  }
  const candidates = explainCandidates(dir, d.names, sessionId, RECOVERY_DEFAULTS)
  const looked = candidates.filter((c) => c.lookedAt).length
  const message = `nothing recoverable in ${dir}: looked at ${looked} of ${candidates.length} session ${candidates.length === 1 ? 'file' : 'files'}`
  if (values.json) await json({ ...base, outcome: 'nothing-recoverable', message, result: null, candidates })
  else {
    await out(`${inline(message)} (${elapsedMs.toFixed(1)} ms, ${lib.backend})`)
    for (const c of candidates) await out(`  ${inline(path.basename(c.file))}${c.matchesSessionId ? ' (matches --session-id)' : ''}: ${inline(c.detail)}`)
  }
  return RECOVER_EXIT['nothing-recoverable']
}

// ---- matrix ------------------------------------------------------------------------------------

/**
 * alive / dead / zombie / recycled / foreign-host for one entry. `probe(pid)` gives the pid's
 * state and identity (once per pid and report: 200,000 entries of one process probe it once).
 */
function entryLiveness(e, probe) {
  if (e.hostname !== os.hostname()) return 'foreign-host'
  const { state, identity } = Number.isInteger(e.pid) && e.pid > 0 ? probe(e.pid) : { state: 'invalid' }
  if (state === 'dead' || state === 'invalid') return 'dead'
  if (state === 'zombie') return 'zombie'
  // A process that started after the entry was registered is someone else: the pid was reused.
  const registered = Date.parse(e.startedAt)
  if (identity && Number.isFinite(registered) && identity.startTimeMs > registered + 1000) return 'recycled'
  return 'alive'
}

/** A probe of pids that asks the library once per pid; `seen` keeps the answers. */
function pidProbe() {
  const seen = new Map()
  const probe = (pid) => {
    let p = seen.get(pid)
    if (p === undefined) {
      const state = lib.probePid(pid)
      p = { state, identity: state === 'alive' || state === 'eperm' ? lib.getProcessIdentity(pid) : undefined }
      seen.set(pid, p)
    }
    return p
  }
  probe.seen = seen
  return probe
}

/** The identities of the local processes a report saw alive (kept out of its JSON). */
const ALIVE = new WeakMap()

const DIR_PROBLEM = { missing: 'missing-directory', 'not-a-directory': 'not-a-directory' }

/** One snapshot of the matrix: the library's entries plus the diagnostics of the folder. */
async function matrixReport(agentDir) {
  const dir = lib.processMatrixDir(agentDir)
  const now = Date.now()
  const diag = diagnoseMatrixDir(dir, now)
  // The store's own listing, unless the folder holds a file that a reader without bounds could
  // hang on or run out of memory on (a FIFO, a device, an oversized or /proc file: issue 42):
  // then the entries are the CLI's own reading, which agrees with listEntries' on every file
  // the store reads (__test__/explain-entry.test.js), and the report says so.
  const entriesFrom = diag.unsafe === null ? 'listEntries' : 'cli'
  let entries = []
  if (diag.state === 'ok') entries = entriesFrom === 'cli' ? diag.entries : await lib.listEntries(agentDir)
  diag.entries = null // 200,000 entries are not held twice
  const probe = pidProbe()
  const rows = entries.map((e) => ({
    entryId: e.entryId,
    role: e.role,
    status: e.status,
    pid: e.pid,
    hostname: e.hostname,
    liveness: entryLiveness(e, probe),
    heartbeatAgeMs: now - Date.parse(e.heartbeatAt),
    parentPid: e.parentPid ?? null,
    parentSessionId: e.parentSessionId ?? null,
  }))
  // An orphan: a live worker whose parent process is gone (or was never recorded).
  for (const r of rows) {
    const parentAlive = r.parentPid !== null && entryLiveness({ hostname: r.hostname, pid: r.parentPid, startedAt: '' }, probe) === 'alive'
    r.orphan = r.role === 'worker' && r.status !== 'closed' && r.liveness === 'alive' && !parentAlive
  }
  const problems = diag.state === 'ok' ? diag.problems : [{ file: dir, kind: DIR_PROBLEM[diag.state] ?? 'unreadable-directory', reason: diag.reason }]
  const counts = new Map()
  for (const p of problems) counts.set(p.kind, (counts.get(p.kind) ?? 0) + 1)
  const count = (kinds) => kinds.reduce((sum, k) => sum + (counts.get(k) ?? 0), 0)
  let orphans = 0
  for (const r of rows) if (r.orphan) orphans++
  const summary = {
    entries: rows.length,
    orphans,
    invalidFiles: count(['unreadable', 'not-a-file', 'too-large', 'bom', 'not-json', 'schema']),
    nameMismatches: count(['name-mismatch']),
    strayFiles: count(['stray']),
    staleLocks: count(['stale-lock']),
    orphanedTempFiles: count(['orphaned-temp']),
    inFlight: diag.inFlight.length,
    problems: problems.length,
  }
  const report = { agentDir, dir, healthy: problems.length === 0, entries: rows, entriesFrom, problems, inFlight: diag.inFlight, summary }
  if (diag.unsafe !== null) report.unsafeFile = diag.unsafe
  const alive = new Map()
  for (const [pid, p] of probe.seen) if (p.state === 'alive' && p.identity) alive.set(pid, p.identity)
  ALIVE.set(report, alive)
  return report
}

const plural = (n, one, many = `${one}s`) => `${n} ${n === 1 ? one : many}`

function summaryLine(s) {
  return (
    `summary: ${plural(s.entries, 'valid entry', 'valid entries')} (${plural(s.orphans, 'orphan')}), ` +
    `${plural(s.invalidFiles, 'invalid file')}, ${plural(s.nameMismatches, 'misnamed file')}, ${plural(s.strayFiles, 'stray file')}, ` +
    `${plural(s.staleLocks, 'stale lock')}, ${plural(s.orphanedTempFiles, 'orphaned temp file')}, ${s.inFlight} in flight` +
    ` — ${s.problems === 0 ? 'healthy' : plural(s.problems, 'problem')}`
  )
}

/** The human report, written row by row; every string from the folder escaped. */
async function writeMatrix(report, color) {
  const { problems, entries: rows } = report
  const dirProblem = problems.find((p) => p.kind.endsWith('directory'))
  if (dirProblem) await out(inline(dirProblem.reason))
  else if (rows.length === 0) await out(`no valid entries in ${inline(report.dir)}`)
  else {
    const cells = rows.map((r) => [
      inline(r.orphan ? `${r.entryId} (orphan)` : r.entryId),
      r.role,
      r.status,
      String(r.pid),
      inline(r.hostname),
      r.liveness,
      formatAge(r.heartbeatAgeMs),
      r.parentPid === null ? '-' : `${r.parentPid}${r.parentSessionId ? ` (${inline(r.parentSessionId)})` : ''}`,
    ])
    await writeTable(stdout, ['ENTRY', 'ROLE', 'STATUS', 'PID', 'HOST', 'LIVENESS', 'HEARTBEAT', 'PARENT'], cells, (line, i) => (rows[i].orphan ? color(line) : line))
  }
  if (!dirProblem && problems.length > 0) {
    await out(`\nproblems in ${inline(report.dir)}:`)
    for (const p of problems) await out(`  ${inline(p.file)}: ${inline(p.reason)}`)
  }
  if (report.entriesFrom === 'cli') {
    await out(`\nnote: the entries are this command's own reading of the folder: listEntries is not asked while it holds ${inline(report.unsafeFile)}, which a reader could wait on forever or read without end`)
  }
  if (report.inFlight.length > 0) {
    await out('\nin flight:')
    for (const p of report.inFlight) await out(`  ${inline(p.file)}: ${inline(p.reason)} (${formatAge(p.ageMs)})`)
  }
  await out(`\n${summaryLine(report.summary)}`)
}

/**
 * What a frame shows, without what only the clock changes (ages): two reports with the same key
 * draw the same frame, so the second is not drawn.
 */
function frameKey(report) {
  const rows = report.entries.map(({ heartbeatAgeMs, ...r }) => r)
  return JSON.stringify([rows, report.problems.map((p) => [p.file, p.kind, p.rule, p.field]), report.inFlight.map((p) => [p.file, p.kind])])
}

async function cmdMatrix({ positionals, values }) {
  if (positionals.length > 1) throw new UsageError('matrix: at most one agentDir', 'matrix')
  const agentDir = positionals[0] ?? process.env.PI_CODING_AGENT_DIR ?? path.join(os.homedir(), '.pi', 'agent')
  const color = process.stdout.isTTY ? (t) => `\x1b[1;33m${t}\x1b[0m` : (t) => t
  if (!values.watch) {
    const report = await matrixReport(agentDir)
    if (values.json) await json(report)
    else await writeMatrix(report, color)
    return report.healthy ? EXIT.ok : EXIT.notFound
  }
  const frame = async (report) => {
    if (values.json) return stdout.json(report)
    await out(`${process.stdout.isTTY ? '\x1b[2J\x1b[H' : ''}pi-native matrix --watch  ${new Date().toISOString()}  (Ctrl-C to stop)\n\n`)
    await writeMatrix(report, color)
    if (!process.stdout.isTTY) await out('')
  }
  return watchMatrix(agentDir, frame)
}

// How long the watch waits after a notice for more of the same change before it redraws (and
// at most, while notices keep coming): a burst of writes is one frame.
const SETTLE_MS = 25
const SETTLE_MAX_MS = 250
// Signals that end the watch; it then ends by the same signal, as `npx` (npm) itself does.
const STOP_SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP']

/**
 * Draw a frame, then another for each change batch, until a signal: when an entry changes
 * (watchEntries), a process shown alive ends (waitForProcessExit on its identity), or anything
 * else in the process-matrix folder changes (a lock, a temp or stray file; fs.watch). The folder
 * may not exist yet (or vanish): then the nearest existing ancestor is watched until it appears.
 * The entry watch starts before the first listing, so nothing written meanwhile is missed, and
 * the entries present are not news (no burst of frames at the start); a frame that would show
 * what the last one showed is not drawn.
 */
async function watchMatrix(agentDir, draw) {
  const dir = lib.processMatrixDir(agentDir)
  const stopping = new AbortController()
  const changes = lib.watchEntries(agentDir, { signal: stopping.signal })
  let watcher
  let watched // { path, ino } of the folder being watched
  let dirty = true
  let wake = null
  let lastNotice = 0
  let drawing = null // the frame being written, if any
  /** pid → { startTimeMs, ac } of the exit waits of the processes shown alive. */
  const waits = new Map()
  const fail = (err) => process.stderr.write(`pi-native: ${inline(err && err.message ? err.message : err)}\n`)
  const notice = () => {
    dirty = true
    lastNotice = Date.now()
    wake?.()
  }
  const onFolder = (_type, name) => {
    // Entry files are watchEntries' business.
    if (typeof name === 'string' && name.endsWith('.json')) return
    notice()
  }
  const rewatch = () => {
    let target = dir
    while (!isDir(target) && path.dirname(target) !== target) target = path.dirname(target)
    const ino = inode(target)
    // Same path and same inode: the watch is still good (a folder removed and made again is new).
    if (watched && watched.path === target && watched.ino === ino) return
    if (watcher) watcher.close()
    watched = { path: target, ino }
    try {
      watcher = fs.watch(target, { persistent: true }, onFolder)
      watcher.on('error', () => notice())
    } catch (err) {
      watcher = undefined
      process.stderr.write(`pi-native: cannot watch ${inline(target)} (${err.code || inline(err.message)})\n`)
    }
  }
  /**
   * Wait for the end of every local process the report saw alive (and only those), by the
   * identity it saw: one that ended meanwhile, before its wait began, ends the wait at once.
   */
  const followProcesses = (report) => {
    const wanted = ALIVE.get(report)
    for (const [pid, w] of waits) {
      const id = wanted.get(pid)
      if (id === undefined || id.startTimeMs !== w.startTimeMs) {
        w.ac.abort()
        waits.delete(pid)
      }
    }
    for (const [pid, id] of wanted) {
      if (waits.has(pid)) continue
      const ac = new AbortController()
      waits.set(pid, { startTimeMs: id.startTimeMs, ac })
      lib.waitForProcessExit(id, { signal: ac.signal, ref: false }).then(() => {
        waits.delete(pid)
        notice()
      }, () => {})
    }
  }
  ;(async () => {
    for await (const _change of changes) notice()
  })().catch((err) => {
    if (!stopping.signal.aborted) fail(err)
  })

  // The end: stop watching, let the frame being written finish (a reader gets whole frames),
  // then end by the signal. A frame still being computed is not waited for: a read the library
  // cannot finish must not keep the process from ending.
  const stop = (signal) => {
    if (stopping.signal.aborted) return
    stopping.abort()
    for (const w of waits.values()) w.ac.abort()
    if (watcher) watcher.close()
    clearInterval(parentCheck)
    Promise.resolve(drawing).finally(() => endBySignal(signal))
  }
  for (const signal of STOP_SIGNALS) process.on(signal, stop)
  // Started through `npx`, a SIGTERM to npm ends npm and its shell but not this process: a
  // parent that is gone ends the watch as a hang-up would.
  const parent = process.ppid
  const parentCheck = setInterval(() => {
    if (process.ppid !== parent) stop('SIGHUP')
  }, 1000)
  parentCheck.unref()

  for (let last; !stopping.signal.aborted; ) {
    if (!dirty) {
      await new Promise((resolve) => (wake = resolve))
      wake = null
      continue
    }
    // Let the batch finish: no notice for SETTLE_MS, or SETTLE_MAX_MS since the first.
    const first = Date.now()
    while (Date.now() - lastNotice < SETTLE_MS && Date.now() - first < SETTLE_MAX_MS) await sleep(SETTLE_MS)
    if (stopping.signal.aborted) break
    dirty = false
    rewatch()
    let report
    try {
      report = await matrixReport(agentDir)
    } catch (err) {
      fail(err)
      continue
    }
    if (stopping.signal.aborted) break
    const key = frameKey(report)
    if (key !== last) {
      last = key
      drawing = (async () => {
        await draw(report)
        await stdout.flush()
      })()
      try {
        await drawing
      } finally {
        drawing = null
      }
    }
    followProcesses(report)
  }
  return new Promise(() => {}) // the process ends by its signal (stop)
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

/** End this process by `signal` with its default action (the exit status a shell shows: 128 + n). */
function endBySignal(signal) {
  const code = 128 + os.constants.signals[signal]
  for (const s of STOP_SIGNALS) process.removeAllListeners(s)
  // Windows has no signal to end oneself by: the same number as an exit code.
  if (process.platform === 'win32') process.exit(code)
  process.kill(process.pid, signal)
  // Delivered at once; should it not be, the exit code says the same.
  setTimeout(() => process.exit(code), 1000).unref()
}

function inode(p) {
  try {
    return fs.statSync(p).ino
  } catch {
    return undefined
  }
}

function isDir(p) {
  try {
    return fs.statSync(p).isDirectory()
  } catch {
    return false
  }
}

// ---- dispatch ----------------------------------------------------------------------------------
async function main(argv) {
  const [first, ...rest] = argv
  try {
    if (first === undefined) throw new UsageError('a command is required')
    if (first === '--version' || first === '-v' || first === 'version') {
      await out(VERSION)
      return EXIT.ok
    }
    if (first === '--help' || first === '-h') {
      await out(GLOBAL_USAGE)
      return EXIT.ok
    }
    if (first === 'help') {
      const { positionals, values } = parseCommand('help', rest)
      if (values.help) {
        await out(commandHelp('help'))
        return EXIT.ok
      }
      if (positionals.length > 1) throw new UsageError('help: at most one command', 'help')
      if (positionals.length === 0) {
        await out(GLOBAL_USAGE)
        return EXIT.ok
      }
      if (!Object.hasOwn(COMMANDS, positionals[0])) throw unknownCommand(positionals[0])
      await out(commandHelp(positionals[0]))
      return EXIT.ok
    }
    if (!Object.hasOwn(COMMANDS, first)) throw unknownCommand(first)
    const parsed = parseCommand(first, rest)
    if (parsed.values.help) {
      await out(commandHelp(first))
      return EXIT.ok
    }
    if (first === 'pid') return await cmdPid(parsed)
    if (first === 'recover') return await cmdRecover(parsed)
    return await cmdMatrix(parsed)
  } catch (err) {
    if (!(err instanceof UsageError)) throw err
    const usage = err.command
      ? `usage: ${COMMANDS[err.command].usage}\n(pi-native help ${err.command} for details)`
      : err.brief
        ? 'usage: pi-native <command> [options]\n(pi-native help lists the commands)'
        : GLOBAL_USAGE
    process.stderr.write(`pi-native: ${inline(err.message)}\n${usage}\n`)
    return EXIT.usage
  }
}

function unknownCommand(word) {
  const near = word.startsWith('-') ? undefined : closestCommand(word)
  const what = word.startsWith('-') ? `unknown option ${inline(word)}` : `unknown command '${inline(word)}'`
  const err = new UsageError(near ? `${what}; did you mean '${near}'?` : what)
  err.brief = true
  return err
}

main(process.argv.slice(2))
  .then(async (code) => {
    await stdout.flush()
    process.exitCode = code
  })
  .catch((err) => {
    process.stderr.write(`pi-native: ${multiline(err && err.stack ? err.stack : err)}\n`)
    process.exitCode = 2
  })
