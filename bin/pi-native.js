#!/usr/bin/env node
'use strict'
// pi-native CLI. Exit codes: 0 ok, 1 not found, 2 usage error.
const lib = require('../lib/index.js')

const USAGE = `usage: pi-native <command> [options]

commands:
  pid <pid...> [--json]    probe state, legacy start time and identity of each pid

exit codes: 0 ok, 1 not found, 2 usage error`

class UsageError extends Error {}

function parse(argv) {
  const flags = new Set()
  const args = []
  for (const a of argv) {
    if (a === '--json' || a === '--help' || a === '-h') flags.add(a)
    else if (a.startsWith('--')) throw new UsageError(`unknown option ${a}`)
    else args.push(a)
  }
  return { flags, args }
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

function main(argv) {
  const [command, ...rest] = argv
  try {
    const { flags, args } = parse(rest)
    if (!command || command === '--help' || command === '-h' || flags.has('--help') || flags.has('-h')) {
      process.stdout.write(`${USAGE}\n`)
      return command ? 0 : 2
    }
    if (command === 'pid') return cmdPid(args, flags.has('--json'))
    throw new UsageError(`unknown command ${command}`)
  } catch (err) {
    if (!(err instanceof UsageError)) throw err
    process.stderr.write(`pi-native: ${err.message}\n${USAGE}\n`)
    return 2
  }
}

process.exitCode = main(process.argv.slice(2))
