'use strict'
// Liveness scenarios: native addon vs the js/ backend (and raw process.kill for the alive probe).
const { spawn } = require('node:child_process')

async function deadPid() {
  const child = spawn('true', [], { stdio: 'ignore' })
  await new Promise((r) => child.once('exit', r))
  return child.pid
}

module.exports = async function liveness({ compare, native, js }) {
  const alive = process.pid
  const dead = await deadPid()
  const rawKill = (pid) => {
    try {
      process.kill(pid, 0)
      return true
    } catch (err) {
      return err.code === 'EPERM'
    }
  }
  // The originals' own shape (SPEC C1, C3): process.kill straight, no layer in between.
  const originalCheck = (pid) => {
    if (pid === undefined || !Number.isInteger(pid) || pid <= 0) return { pid, alive: false, detail: 'no pid recorded' }
    try {
      process.kill(pid, 0)
      return { pid, alive: true, detail: 'process is alive' }
    } catch (err) {
      if (err.code === 'EPERM') return { pid, alive: true, detail: 'process exists but permission is denied' }
      if (err.code === 'ESRCH') return { pid, alive: false, detail: 'process does not exist' }
      return { pid, alive: false, detail: err.message }
    }
  }
  return [
    await compare({
      name: 'alive pid (self): checkProcessLiveness, original-shaped JS vs native',
      baseline: () => originalCheck(alive),
      native: () => native.checkProcessLiveness(alive),
      iterations: 20000,
      target: 1,
      targetText: '≥ 1×',
    }),
    await compare({
      name: 'alive pid (self): checkProcessLiveness',
      baseline: () => js.checkProcessLiveness(alive),
      native: () => native.checkProcessLiveness(alive),
      iterations: 20000,
      target: 1,
      targetText: '≥ 1×',
    }),
    await compare({
      name: 'alive pid: process.kill(pid, 0) vs isReloadSessionProcessAlive',
      baseline: () => rawKill(alive),
      native: () => native.isReloadSessionProcessAlive(alive),
      iterations: 20000,
      target: 1 / 1.2,
      targetText: 'within 1.2× of process.kill (≥ 0.83×)',
    }),
    await compare({
      name: 'alive pid: isReloadSessionProcessAlive',
      baseline: () => js.isReloadSessionProcessAlive(alive),
      native: () => native.isReloadSessionProcessAlive(alive),
      iterations: 20000,
      target: 1,
      targetText: '≥ 1×',
    }),
    await compare({
      name: 'dead pid: isReloadSessionProcessAlive',
      baseline: () => js.isReloadSessionProcessAlive(dead),
      native: () => native.isReloadSessionProcessAlive(dead),
      iterations: 5000,
      target: 5,
      targetText: '≥ 5×',
    }),
    await compare({
      name: 'dead pid: checkProcessLiveness',
      baseline: () => js.checkProcessLiveness(dead),
      native: () => native.checkProcessLiveness(dead),
      iterations: 5000,
      target: 5,
      targetText: '≥ 5×',
    }),
    await compare({
      name: 'start time: getProcessStartTime (alive pid)',
      baseline: () => js.getProcessStartTime(alive),
      native: () => native.getProcessStartTime(alive),
      iterations: 2000,
      target: 3,
      targetText: '≥ 3×',
    }),
    await compare({
      name: 'probePid (alive pid, reads procfs state)',
      baseline: () => js.probePid(alive),
      native: () => native.probePid(alive),
      iterations: 2000,
    }),
  ]
}
