#!/usr/bin/env node
'use strict'
// pi-native operator CLI. Every command and exit code is documented in README.md (CLI section).
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { parseArgs } = require('node:util')
const lib = require('../lib/index.js')
const { RECOVERY_DEFAULTS } = require('../lib/contract/options.js')
const { diagnoseMatrixDir, explainCandidates, formatAge } = require('./diagnose.js')

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
files that are unreadable, not JSON, start with a BOM, break a schema rule (V1-V17, named with
the field), or whose name does not match their entryId; stray files; stale .lock directories
with their age; orphaned temporary files of interrupted writes. A summary line closes.
Locks being held and writes in progress are shown as "in flight", not as problems.
--json prints the same as one JSON document. --watch redraws whenever the folder changes
(file-system notifications; with --json one document per line) and the moment a process shown
alive ends (waitForProcessExit), until interrupted (Ctrl-C), then exits 0.

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

const out = (s) => process.stdout.write(s.endsWith('\n') ? s : `${s}\n`)
const json = (v) => out(JSON.stringify(v, null, 2))
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

function table(rows, headers) {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => String(r[i]).length)))
  const line = (cells) => cells.map((c, i) => String(c).padEnd(widths[i])).join('  ').trimEnd()
  return [line(headers), ...rows.map(line)].join('\n')
}

// ---- pid ---------------------------------------------------------------------------------------
const PID_EXIT = { alive: 0, dead: 1, zombie: 3, eperm: 4, invalid: 5 }

function cmdPid({ positionals, values }) {
  if (positionals.length === 0) throw new UsageError('pid: at least one pid is required', 'pid')
  const pids = positionals.map((a) => {
    if (!/^\d+$/.test(a)) throw new UsageError(`pid: not a pid: ${a}`, 'pid')
    return Number(a)
  })
  const report = pids.map((pid) => {
    const state = lib.probePid(pid)
    const identity = state === 'invalid' ? undefined : lib.getProcessIdentity(pid)
    return { pid, state, legacyStartTime: lib.getProcessStartTime(pid) ?? null, identity: identity ?? null }
  })
  if (values.json) json(report)
  else {
    const rows = report.map((r) => [r.pid, r.state, r.identity ? new Date(r.identity.startTimeMs).toISOString() : '-', r.legacyStartTime ?? '-'])
    out(table(rows, ['PID', 'STATE', 'STARTED', 'LEGACY-START']))
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
    if (values.json) json({ ...base, outcome: 'recovered', result })
    else {
      out(
        [
          `file:        ${result.sessionFile}`,
          `session id:  ${result.sessionId}`,
          `stop reason: ${result.stopReason}`,
          `timestamp:   ${result.timestamp || '-'}`,
          `elapsed:     ${elapsedMs.toFixed(1)} ms (${lib.backend})`,
          '',
          result.text,
        ].join('\n'),
      )
    }
    return RECOVER_EXIT.recovered
  }
  const d = inspectSessionDir(dir)
  if (d.outcome) {
    if (values.json) json({ ...base, outcome: d.outcome, message: d.message, result: null, candidates: [] })
    else out(`nothing recoverable: ${d.message}`)
    return RECOVER_EXIT[d.outcome]
  }
  const candidates = explainCandidates(dir, d.names, sessionId, RECOVERY_DEFAULTS)
  const looked = candidates.filter((c) => c.lookedAt).length
  const message = `nothing recoverable in ${dir}: looked at ${looked} of ${candidates.length} session ${candidates.length === 1 ? 'file' : 'files'}`
  if (values.json) json({ ...base, outcome: 'nothing-recoverable', message, result: null, candidates })
  else {
    const lines = candidates.map((c) => `  ${path.basename(c.file)}${c.matchesSessionId ? ' (matches --session-id)' : ''}: ${c.detail}`)
    out([`${message} (${elapsedMs.toFixed(1)} ms, ${lib.backend})`, ...lines].join('\n'))
  }
  return RECOVER_EXIT['nothing-recoverable']
}

// ---- matrix ------------------------------------------------------------------------------------

/** alive / dead / zombie / recycled / foreign-host for one entry. */
function entryLiveness(e) {
  if (e.hostname !== os.hostname()) return 'foreign-host'
  const state = Number.isInteger(e.pid) && e.pid > 0 ? lib.probePid(e.pid) : 'invalid'
  if (state === 'dead' || state === 'invalid') return 'dead'
  if (state === 'zombie') return 'zombie'
  // A process that started after the entry was registered is someone else: the pid was reused.
  const id = lib.getProcessIdentity(e.pid)
  const registered = Date.parse(e.startedAt)
  if (id && Number.isFinite(registered) && id.startTimeMs > registered + 1000) return 'recycled'
  return 'alive'
}

/** One snapshot of the matrix: the library's entries plus the diagnostics of the folder. */
async function matrixReport(agentDir) {
  const dir = lib.processMatrixDir(agentDir)
  const now = Date.now()
  const diag = diagnoseMatrixDir(dir, now)
  const entries = diag.state === 'ok' ? await lib.listEntries(agentDir) : []
  const rows = entries.map((e) => ({
    entryId: e.entryId,
    role: e.role,
    status: e.status,
    pid: e.pid,
    hostname: e.hostname,
    liveness: entryLiveness(e),
    heartbeatAgeMs: now - Date.parse(e.heartbeatAt),
    parentPid: e.parentPid ?? null,
    parentSessionId: e.parentSessionId ?? null,
  }))
  // An orphan: a live worker whose parent process is gone (or was never recorded).
  for (const r of rows) {
    const parentAlive = r.parentPid !== null && entryLiveness({ hostname: r.hostname, pid: r.parentPid, startedAt: '' }) === 'alive'
    r.orphan = r.role === 'worker' && r.status !== 'closed' && r.liveness === 'alive' && !parentAlive
  }
  const problems = diag.state === 'ok' ? diag.problems : [{ file: dir, kind: diag.state === 'missing' ? 'missing-directory' : diag.state === 'not-a-directory' ? 'not-a-directory' : 'unreadable-directory', reason: diag.reason }]
  const count = (kinds) => problems.filter((p) => kinds.includes(p.kind)).length
  const summary = {
    entries: rows.length,
    orphans: rows.filter((r) => r.orphan).length,
    invalidFiles: count(['unreadable', 'bom', 'not-json', 'schema']),
    nameMismatches: count(['name-mismatch']),
    strayFiles: count(['stray']),
    staleLocks: count(['stale-lock']),
    orphanedTempFiles: count(['orphaned-temp']),
    inFlight: diag.inFlight.length,
    problems: problems.length,
  }
  return { agentDir, dir, healthy: problems.length === 0, entries: rows, problems, inFlight: diag.inFlight, summary }
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

function renderMatrix(report, color) {
  const lines = []
  const { problems, entries: rows } = report
  const dirProblem = problems.find((p) => p.kind.endsWith('directory'))
  if (dirProblem) lines.push(dirProblem.reason)
  else if (rows.length === 0) lines.push(`no valid entries in ${report.dir}`)
  else {
    const t = table(
      rows.map((r) => [
        r.orphan ? `${r.entryId} (orphan)` : r.entryId,
        r.role,
        r.status,
        r.pid,
        r.hostname,
        r.liveness,
        formatAge(r.heartbeatAgeMs),
        r.parentPid === null ? '-' : `${r.parentPid}${r.parentSessionId ? ` (${r.parentSessionId})` : ''}`,
      ]),
      ['ENTRY', 'ROLE', 'STATUS', 'PID', 'HOST', 'LIVENESS', 'HEARTBEAT', 'PARENT'],
    ).split('\n')
    lines.push(...t.map((l, i) => (i > 0 && rows[i - 1].orphan ? color(l) : l)))
  }
  if (!dirProblem && problems.length > 0) {
    lines.push('', `problems in ${report.dir}:`)
    for (const p of problems) lines.push(`  ${p.file}: ${p.reason}`)
  }
  if (report.inFlight.length > 0) {
    lines.push('', 'in flight:')
    for (const p of report.inFlight) lines.push(`  ${p.file}: ${p.reason} (${formatAge(p.ageMs)})`)
  }
  lines.push('', summaryLine(report.summary))
  return lines.join('\n')
}

async function cmdMatrix({ positionals, values }) {
  if (positionals.length > 1) throw new UsageError('matrix: at most one agentDir', 'matrix')
  const agentDir = positionals[0] ?? process.env.PI_CODING_AGENT_DIR ?? path.join(os.homedir(), '.pi', 'agent')
  const color = process.stdout.isTTY ? (t) => `\x1b[1;33m${t}\x1b[0m` : (t) => t
  const show = async (watching) => {
    const report = await matrixReport(agentDir)
    if (values.json) out(watching ? JSON.stringify(report) : JSON.stringify(report, null, 2))
    else if (watching) {
      const head = `pi-native matrix --watch  ${new Date().toISOString()}  (Ctrl-C to stop)\n\n`
      out(process.stdout.isTTY ? `\x1b[2J\x1b[H${head}${renderMatrix(report, color)}` : `${head}${renderMatrix(report, color)}\n`)
    } else out(renderMatrix(report, color))
    return report
  }
  if (!values.watch) return (await show(false)).healthy ? EXIT.ok : EXIT.notFound
  return watchMatrix(agentDir, () => show(true))
}

/**
 * Redraw until SIGINT/SIGTERM: at once when an entry changes (watchEntries) or a process shown
 * alive ends (waitForProcessExit on its identity), and 50 ms after any other change of the
 * process-matrix folder (a lock, a temp or stray file; fs.watch). The folder may not exist yet
 * (or vanish): then the nearest existing ancestor is watched until it appears.
 */
function watchMatrix(agentDir, redraw) {
  const dir = lib.processMatrixDir(agentDir)
  return new Promise((resolve) => {
    let watcher
    let watched // { path, ino } of the folder being watched
    let timer
    let queued = false
    let running = Promise.resolve()
    const stopping = new AbortController()
    /** pid → { key, ac } of the exit waits of the processes shown alive. */
    const waits = new Map()
    const fail = (err) => process.stderr.write(`pi-native: ${err && err.message ? err.message : err}\n`)
    const draw = () =>
      redraw().then(followProcesses, fail)
    /** Redraw once more after what is running (bursts of notices make one redraw). */
    const redrawNow = () => {
      if (queued || stopping.signal.aborted) return
      queued = true
      running = running.then(() => {
        queued = false
        rewatch()
        return draw()
      })
    }
    const schedule = (_type, name) => {
      // Entry files are watchEntries' business; a burst of other notices (lock folder, temp
      // file) makes one redraw.
      if (typeof name === 'string' && name.endsWith('.json')) return
      clearTimeout(timer)
      timer = setTimeout(redrawNow, 50)
    }
    /** Wait for the end of every local process the report shows alive (and only those). */
    function followProcesses(report) {
      const wanted = new Map()
      for (const r of report.entries) {
        if (r.hostname !== os.hostname()) continue
        for (const pid of [r.pid, r.parentPid]) {
          if (!Number.isInteger(pid) || pid <= 0 || wanted.has(pid)) continue
          const id = lib.probePid(pid) === 'alive' ? lib.getProcessIdentity(pid) : undefined
          if (id) wanted.set(pid, id)
        }
      }
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
          redrawNow()
        }, () => {})
      }
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
        watcher = fs.watch(target, { persistent: true }, schedule)
        watcher.on('error', () => schedule())
      } catch (err) {
        watcher = undefined
        process.stderr.write(`pi-native: cannot watch ${target} (${err.code || err.message})\n`)
      }
    }
    // `initial`: the entries present when the watch starts come through it too, so the first
    // table and the watch cannot disagree about anything written in between.
    ;(async () => {
      for await (const _change of lib.watchEntries(agentDir, { signal: stopping.signal, initial: true })) redrawNow()
    })().catch((err) => {
      if (!stopping.signal.aborted) fail(err)
    })
    const stop = () => {
      clearTimeout(timer)
      stopping.abort()
      for (const w of waits.values()) w.ac.abort()
      if (watcher) watcher.close()
      process.removeListener('SIGINT', stop)
      process.removeListener('SIGTERM', stop)
      running.then(() => resolve(EXIT.ok))
    }
    process.on('SIGINT', stop)
    process.on('SIGTERM', stop)
    rewatch()
    running = running.then(draw)
  })
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
      out(VERSION)
      return EXIT.ok
    }
    if (first === '--help' || first === '-h') {
      out(GLOBAL_USAGE)
      return EXIT.ok
    }
    if (first === 'help') {
      const { positionals } = parseCommand('help', rest)
      if (positionals.length > 1) throw new UsageError('help: at most one command', 'help')
      if (positionals.length === 0) {
        out(GLOBAL_USAGE)
        return EXIT.ok
      }
      if (!Object.hasOwn(COMMANDS, positionals[0])) throw unknownCommand(positionals[0])
      out(commandHelp(positionals[0]))
      return EXIT.ok
    }
    if (!Object.hasOwn(COMMANDS, first)) throw unknownCommand(first)
    const parsed = parseCommand(first, rest)
    if (parsed.values.help) {
      out(commandHelp(first))
      return EXIT.ok
    }
    if (first === 'pid') return cmdPid(parsed)
    if (first === 'recover') return await cmdRecover(parsed)
    return await cmdMatrix(parsed)
  } catch (err) {
    if (!(err instanceof UsageError)) throw err
    const usage = err.command
      ? `usage: ${COMMANDS[err.command].usage}\n(pi-native help ${err.command} for details)`
      : err.brief
        ? 'usage: pi-native <command> [options]\n(pi-native help lists the commands)'
        : GLOBAL_USAGE
    process.stderr.write(`pi-native: ${err.message}\n${usage}\n`)
    return EXIT.usage
  }
}

function unknownCommand(word) {
  const near = word.startsWith('-') ? undefined : closestCommand(word)
  const what = word.startsWith('-') ? `unknown option ${word}` : `unknown command '${word}'`
  const err = new UsageError(near ? `${what}; did you mean '${near}'?` : what)
  err.brief = true
  return err
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code
  },
  (err) => {
    process.stderr.write(`pi-native: ${err && err.stack ? err.stack : err}\n`)
    process.exitCode = 2
  },
)
