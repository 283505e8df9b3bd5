#!/usr/bin/env node
'use strict'
// pi-native CLI. Exit codes: 0 ok, 1 not found, 2 usage error.
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const lib = require('../lib/index.js')

const USAGE = `usage: pi-native <command> [options]

commands:
  pid <pid...> [--json]    probe state, legacy start time and identity of each pid
  recover <sessionDir> [--session-id ID] [--json]
                           what session recovery returns for a worker's session directory
  matrix [agentDir] [--json]
                           process-matrix entries with liveness (agentDir defaults to
                           $PI_CODING_AGENT_DIR, else ~/.pi/agent); orphans are marked

exit codes: 0 ok, 1 not found, 2 usage error`

class UsageError extends Error {}

const VALUE_OPTIONS = new Set(['--session-id'])

function parse(argv) {
  const flags = new Set()
  const values = {}
  const args = []
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]
    if (a === '--json' || a === '--help' || a === '-h') flags.add(a)
    else if (VALUE_OPTIONS.has(a)) {
      if (i + 1 >= argv.length) throw new UsageError(`${a} needs a value`)
      values[a] = argv[++i]
    } else if (a.startsWith('--')) throw new UsageError(`unknown option ${a}`)
    else args.push(a)
  }
  return { flags, values, args }
}

function table(rows, headers) {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => String(r[i]).length)))
  const line = (cells) => cells.map((c, i) => String(c).padEnd(widths[i])).join('  ').trimEnd()
  return [line(headers), ...rows.map(line)].join('\n')
}

function cmdPid(args, json) {
  if (args.length === 0) throw new UsageError('pid: at least one pid is required')
  const pids = args.map((a) => {
    if (!/^\d+$/.test(a)) throw new UsageError(`pid: not a pid: ${a}`)
    return Number(a)
  })
  const report = pids.map((pid) => {
    const state = lib.probePid(pid)
    const identity = state === 'invalid' ? undefined : lib.getProcessIdentity(pid)
    return { pid, state, legacyStartTime: lib.getProcessStartTime(pid) ?? null, identity: identity ?? null }
  })
  if (json) process.stdout.write(`${JSON.stringify(report, null, 2)}\n`)
  else {
    const rows = report.map((r) => [
      r.pid,
      r.state,
      r.identity ? new Date(r.identity.startTimeMs).toISOString() : '-',
      r.legacyStartTime ?? '-',
    ])
    process.stdout.write(`${table(rows, ['PID', 'STATE', 'STARTED', 'LEGACY-START'])}\n`)
  }
  return report.every((r) => r.state !== 'dead' && r.state !== 'invalid') ? 0 : 1
}

async function cmdRecover(args, values, json) {
  if (args.length !== 1) throw new UsageError('recover: exactly one session directory is required')
  const started = process.hrtime.bigint()
  const result = await lib.recoverLastAssistantFromSession(args[0], values['--session-id'])
  const ms = Number(process.hrtime.bigint() - started) / 1e6
  if (json) process.stdout.write(`${JSON.stringify({ result, elapsedMs: ms, backend: lib.backend }, null, 2)}\n`)
  else if (result === null) process.stdout.write(`nothing recoverable in ${args[0]} (${ms.toFixed(1)} ms)\n`)
  else {
    process.stdout.write(
      [
        `file:        ${result.sessionFile}`,
        `session id:  ${result.sessionId}`,
        `stop reason: ${result.stopReason}`,
        `timestamp:   ${result.timestamp || '-'}`,
        `elapsed:     ${ms.toFixed(1)} ms (${lib.backend})`,
        '',
        result.text,
        '',
      ].join('\n'),
    )
  }
  return result === null ? 1 : 0
}

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

function age(ms) {
  if (!Number.isFinite(ms)) return '-'
  const s = Math.max(0, Math.round(ms / 1000))
  if (s < 120) return `${s}s`
  if (s < 7200) return `${Math.round(s / 60)}m`
  if (s < 172800) return `${Math.round(s / 3600)}h`
  return `${Math.round(s / 86400)}d`
}

async function cmdMatrix(args, json) {
  if (args.length > 1) throw new UsageError('matrix: at most one agentDir')
  const agentDir = args[0] ?? process.env.PI_CODING_AGENT_DIR ?? path.join(os.homedir(), '.pi', 'agent')
  const dir = lib.processMatrixDir(agentDir)
  if (!fs.existsSync(dir)) {
    process.stderr.write(`pi-native: no process matrix at ${dir}\n`)
    return 1
  }
  const now = Date.now()
  const entries = await lib.listEntries(agentDir)
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
  if (json) {
    process.stdout.write(`${JSON.stringify({ agentDir, entries: rows }, null, 2)}\n`)
    return 0
  }
  if (rows.length === 0) {
    process.stdout.write(`no entries in ${dir}\n`)
    return 0
  }
  const color = process.stdout.isTTY ? (t) => `\x1b[1;33m${t}\x1b[0m` : (t) => t
  const lines = table(
    rows.map((r) => [
      r.orphan ? `${r.entryId} (orphan)` : r.entryId,
      r.role,
      r.status,
      r.pid,
      r.hostname,
      r.liveness,
      age(r.heartbeatAgeMs),
      r.parentPid === null ? '-' : `${r.parentPid}${r.parentSessionId ? ` (${r.parentSessionId})` : ''}`,
    ]),
    ['ENTRY', 'ROLE', 'STATUS', 'PID', 'HOST', 'LIVENESS', 'HEARTBEAT', 'PARENT'],
  ).split('\n')
  process.stdout.write(`${lines.map((l, i) => (i > 0 && rows[i - 1].orphan ? color(l) : l)).join('\n')}\n`)
  return 0
}

async function main(argv) {
  const [command, ...rest] = argv
  try {
    const { flags, values, args } = parse(rest)
    if (!command || command === '--help' || command === '-h' || flags.has('--help') || flags.has('-h')) {
      process.stdout.write(`${USAGE}\n`)
      return command ? 0 : 2
    }
    if (command === 'pid') return cmdPid(args, flags.has('--json'))
    if (command === 'recover') return await cmdRecover(args, values, flags.has('--json'))
    if (command === 'matrix') return await cmdMatrix(args, flags.has('--json'))
    throw new UsageError(`unknown command ${command}`)
  } catch (err) {
    if (!(err instanceof UsageError)) throw err
    process.stderr.write(`pi-native: ${err.message}\n${USAGE}\n`)
    return 2
  }
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
