'use strict'
// Pure-JavaScript liveness backend, written from SPEC.md §2.C. It is the fallback when the
// native binary cannot load and the baseline of the benchmarks. Same surface as the addon.
const fs = require('node:fs')
const os = require('node:os')
const { execFileSync } = require('node:child_process')

function isReloadSessionProcessAlive(pid) {
  if (pid === undefined || !Number.isFinite(pid) || pid <= 0) return false
  try {
    process.kill(pid, 0)
    return true
  } catch (err) {
    return err && err.code === 'EPERM'
  }
}

function defaultIsPidAlive(owner) {
  if (owner.hostname !== os.hostname()) return true
  try {
    process.kill(owner.pid, 0)
    return true
  } catch (err) {
    return Boolean(err) && err.code === 'EPERM'
  }
}

function checkProcessLiveness(pid) {
  if (pid === undefined || !Number.isInteger(pid) || pid <= 0) {
    return { pid, alive: false, detail: 'no pid recorded' }
  }
  try {
    process.kill(pid, 0)
    return { pid, alive: true, detail: 'process is alive' }
  } catch (err) {
    const code = err && err.code
    if (code === 'EPERM') return { pid, alive: true, detail: 'process exists but permission is denied' }
    if (code === 'ESRCH') return { pid, alive: false, detail: 'process does not exist' }
    return { pid, alive: false, detail: err instanceof Error ? err.message : String(err) }
  }
}

function getProcessStartTime(pid) {
  try {
    process.kill(pid, 0)
  } catch {
    return undefined
  }
  if (process.platform === 'linux') {
    try {
      const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8')
      const close = stat.lastIndexOf(')')
      if (close < 0) return undefined
      const ticks = Number(stat.slice(close + 1).trim().split(/\s+/)[19])
      return Number.isFinite(ticks) ? Math.floor(ticks * 100) : undefined
    } catch {
      return undefined
    }
  }
  if (process.platform === 'darwin' || process.platform === 'win32') {
    if (!Number.isFinite(pid) || pid <= 0) return undefined
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

// ---- new API ------------------------------------------------------------------------------

function requireNumber(value, name) {
  if (typeof value !== 'number') throw new TypeError(`The "${name}" argument must be of type number`)
  return value
}

const isPositivePid = (x) => Number.isInteger(x) && x >= 1 && x <= 0x7fffffff

/** Linux procfs fields after the command name, or undefined. */
function procStat(pid) {
  if (process.platform !== 'linux') return undefined
  try {
    const text = fs.readFileSync(`/proc/${pid}/stat`, 'latin1')
    const fields = text.slice(text.lastIndexOf(')') + 1).trim().split(/\s+/)
    return { state: fields[0], ticks: Number(fields[19]) }
  } catch {
    return undefined
  }
}

function killState(pid) {
  try {
    process.kill(pid, 0)
    return 'alive'
  } catch (err) {
    return err && err.code === 'EPERM' ? 'eperm' : 'dead'
  }
}

function stateOf(x) {
  if (!isPositivePid(x)) return 'invalid'
  const state = killState(x)
  if (state === 'dead') return state
  const stat = procStat(x)
  if (stat && (stat.state === 'Z' || stat.state === 'X' || stat.state === 'x')) return 'zombie'
  if (!stat && process.platform === 'linux') return killState(x)
  return state
}

function probePid(pid) {
  return stateOf(requireNumber(pid, 'pid'))
}

function probePids(pids) {
  if (!Array.isArray(pids)) throw new TypeError('The "pids" argument must be an array of numbers')
  const out = []
  for (let i = 0; i < pids.length; i++) out.push(stateOf(requireNumber(pids[i], `pids[${i}]`)))
  return out
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

function getProcessIdentity(pid) {
  const x = requireNumber(pid, 'pid')
  const state = stateOf(x)
  if (state === 'dead' || state === 'invalid') return undefined
  const stat = procStat(x)
  if (!stat || !Number.isFinite(stat.ticks)) return undefined
  const startTimeMs = linuxBootTimeMs() + Math.floor((stat.ticks * 1000) / CLOCK_TICKS)
  return { pid: x, startTimeMs, state }
}

function isSameProcess(identity) {
  if (
    identity === null ||
    typeof identity !== 'object' ||
    typeof identity.pid !== 'number' ||
    typeof identity.startTimeMs !== 'number'
  ) {
    throw new TypeError('The "identity" argument must be an object with numeric "pid" and "startTimeMs"')
  }
  if (!isPositivePid(identity.pid)) return false
  const now = getProcessIdentity(identity.pid)
  return (
    now !== undefined && (now.state === 'alive' || now.state === 'eperm') && now.startTimeMs === identity.startTimeMs
  )
}

module.exports = {
  isReloadSessionProcessAlive,
  defaultIsPidAlive,
  checkProcessLiveness,
  getProcessStartTime,
  probePid,
  probePids,
  getProcessIdentity,
  isSameProcess,
}
