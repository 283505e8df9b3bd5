'use strict'
// Work on large folders in slices, shared by both backends (issue 42: 200,000 entries must not
// hold the event loop for more than 20 ms at a stretch). A slice runs for at most SLICE_MS, then
// the event loop gets a turn (setImmediate: I/O callbacks and timers run in between). 2 ms, not
// 4: a V8 collection of what the work keeps (5–15 ms at 200,000 entries) lands inside a slice,
// so a stall is a slice plus a pause (bench large-folder, docs/BENCHMARKS.md run F).
const SLICE_MS = 2
const nextTurn = () => new Promise((resolve) => setImmediate(resolve))

/** A slice clock: `due()` says the slice is used up, `pause()` gives the event loop its turn. */
class Slices {
  #start = performance.now()

  due() {
    return performance.now() - this.#start >= SLICE_MS
  }

  async pause() {
    await nextTurn()
    this.#start = performance.now()
  }
}

// Runs sorted with Array#sort at once (a few ms for 4,096 names), then merged pass by pass.
const RUN = 4096
// Elements merged between two looks at the clock.
const STRIDE = 1024

/**
 * `names` sorted by UTF-16 code units (JS's default `sort()`, whose order `<` gives too), in
 * slices: runs sorted one at a time, then merged, yielding whenever a slice is used up. A new
 * array (the argument may be reused).
 */
async function sortInSlices(names, slices = new Slices()) {
  const n = names.length
  if (n <= RUN) return names.slice().sort()
  // Already in order (native dirScan lists in this order): a look, and a copy.
  let sorted = true
  for (let i = 1; i < n && sorted; i++) {
    sorted = names[i - 1] <= names[i]
    if ((i & 4095) === 0 && slices.due()) await slices.pause()
  }
  if (sorted) return names.slice()
  // Copies, not `new Array(n)`: V8 makes an array that large a slow dictionary.
  let src = names.slice()
  for (let lo = 0; lo < n; lo += RUN) {
    const run = names.slice(lo, lo + RUN).sort()
    for (let i = 0; i < run.length; i++) src[lo + i] = run[i]
    if (slices.due()) await slices.pause()
  }
  let dst = names.slice()
  for (let width = RUN; width < n; width *= 2) {
    for (let lo = 0; lo < n; lo += 2 * width) {
      const mid = Math.min(lo + width, n)
      const hi = Math.min(lo + 2 * width, n)
      let i = lo
      let j = mid
      let k = lo
      while (k < hi) {
        const end = Math.min(k + STRIDE, hi)
        for (; k < end; k++) dst[k] = j >= hi || (i < mid && src[i] <= src[j]) ? src[i++] : src[j++]
        if (slices.due()) await slices.pause()
      }
    }
    ;[src, dst] = [dst, src]
  }
  return src
}

module.exports = { SLICE_MS, Slices, nextTurn, sortInSlices }
