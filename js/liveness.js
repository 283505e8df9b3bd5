'use strict'
// Pure-JavaScript liveness primitives, written from SPEC.md §2.C: `process.kill(pid, 0)` and
// procfs reads, as the originals do them. The public functions (argument checks, results) are
// the shared contract layer's. Fallback when the native binary cannot load; benchmark baseline.
const fs = require('node:fs')
const { execFileSync } = require('node:child_process')
const { createLiveness, legacyTicksFromProc, EPERM } = require('../lib/contract/liveness.js')

/** `process.kill(pid, 0)` as an errno: 0 on success, else the error's (negative) errno. */
function kill0(pid) {
  try {
    process.kill(pid, 0)
    return 0
  } catch (err) {
    return err.errno
  }
}

/** C4 for an int32 pid: probe gate, then the platform's original route. */
function startTime(pid) {
  if (kill0(pid) !== 0) return undefined
  if (process.platform === 'linux') return legacyTicksFromProc(pid)
  if (process.platform === 'darwin' || process.platform === 'win32') {
    if (pid <= 0) return undefined
    try {
      const text =
        process.platform === 'darwin'
          ? execFileSync('ps', ['-p', String(pid), '-o', 'lstart='], { encoding: 'utf8', timeout: 5000 })
          : execFileSync(
              'powershell',
              ['-Command', `Get-Process -Id ${pid} | Select-Object -ExpandProperty StartTime`],
              { encoding: 'utf8', timeout: 5000 },
            )
      const trimmed = text.trim()
      if (!trimmed) return undefined
      const ms = new Date(trimmed).getTime()
      return Number.isNaN(ms) ? undefined : ms
    } catch {
      return undefined
    }
  }
  return undefined
}

/** Linux procfs fields after the command name, or undefined. */
function procStat(pid) {
  if (process.platform !== 'linux') return undefined
  try {
    const text = fs.readFileSync(`/proc/${pid}/stat`, 'latin1')
    const fields = text.slice(text.lastIndexOf(')') + 1).trim().split(/\s+/)
    return { state: fields[0], threads: Number(fields[17]), ticks: Number(fields[19]) }
  } catch {
    return undefined
  }
}

function killState(pid) {
  const errno = kill0(pid)
  if (errno === 0) return 'alive'
  return errno === EPERM ? 'eperm' : 'dead'
}

/** State of a positive int32 pid. */
function state(pid) {
  const found = killState(pid)
  if (found === 'dead') return found
  const stat = procStat(pid)
  // The letter is the leader thread's: after its pthread_exit it shows `Z` while other threads
  // run; the process has ended once num_threads is down to the leader.
  if (stat && (stat.state === 'Z' || stat.state === 'X' || stat.state === 'x') && !(stat.threads > 1)) return 'zombie'
  if (!stat && process.platform === 'linux') return killState(pid)
  return found
}

let bootTimeMs
function linuxBootTimeMs() {
  if (bootTimeMs === undefined) {
    const line = fs
      .readFileSync('/proc/stat', 'latin1')
      .split('\n')
      .find((l) => l.startsWith('btime '))
    bootTimeMs = Number(line.slice(6).trim()) * 1000
  }
  return bootTimeMs
}

// USER_HZ as the kernel exports it to user space; 100 on every mainstream Linux architecture.
// (The addon asks sysconf(_SC_CLK_TCK); JavaScript cannot.)
const CLOCK_TICKS = 100

function identity(pid) {
  const found = state(pid)
  if (found === 'dead') return undefined
  const stat = procStat(pid)
  if (!stat || !Number.isFinite(stat.ticks)) return undefined
  const startTimeMs = linuxBootTimeMs() + Math.floor((stat.ticks * 1000) / CLOCK_TICKS)
  return { pid, startTimeMs, state: found }
}

function sameProcess(pid, startTimeMs) {
  const now = identity(pid)
  return now !== undefined && (now.state === 'alive' || now.state === 'eperm') && now.startTimeMs === startTimeMs
}

module.exports = createLiveness({ kill0, startTime, state, identity, sameProcess })
