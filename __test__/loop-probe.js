'use strict'
// Event-loop gap probe for the wall-clock bound tests. A tick every `intervalMs`; for each gap
// between ticks it also reads how long the JS thread waited in the kernel's run queue
// (/proc/<pid>/task/<tid>/schedstat, Linux), so a stall imposed from outside (a busy machine,
// `nice npm test`) can be told apart from the loop being busy or blocked in this process.
const fs = require('node:fs')

const schedstat = `/proc/${process.pid}/task/${process.pid}/schedstat`
/** Nanoseconds the main thread has waited for a CPU so far, or null where unknown. */
function runQueueWaitNs() {
  try {
    return Number(fs.readFileSync(schedstat, 'utf8').split(' ')[1])
  } catch {
    return null
  }
}

/**
 * Start probing. `stop()` returns { maxGap, maxOwnGap }: the longest gap between ticks (ms), and
 * the longest gap minus the run-queue wait inside it (what this process itself held the loop
 * for; equal to maxGap where schedstat is unavailable). `onTick` runs on every tick.
 */
function startLoopProbe(intervalMs = 2, onTick = () => {}) {
  let maxGap = 0
  let maxOwnGap = 0
  let last = performance.now()
  let lastWait = runQueueWaitNs()
  const sample = () => {
    const now = performance.now()
    const wait = runQueueWaitNs()
    const gap = now - last
    const waited = wait !== null && lastWait !== null ? (wait - lastWait) / 1e6 : 0
    maxGap = Math.max(maxGap, gap)
    maxOwnGap = Math.max(maxOwnGap, gap - waited)
    last = now
    lastWait = wait
  }
  const timer = setInterval(() => {
    sample()
    onTick()
  }, intervalMs)
  return {
    stop() {
      sample()
      clearInterval(timer)
      return { maxGap, maxOwnGap }
    },
  }
}

module.exports = { startLoopProbe }
