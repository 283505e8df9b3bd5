'use strict'
// Side-by-side timing: the JS baseline and the native implementation run in interleaved
// batches (so machine noise hits both alike); we report medians and the ratio js/native.
const os = require('node:os')
const fs = require('node:fs')
const path = require('node:path')

function timeBatch(fn, iterations) {
  const t0 = process.hrtime.bigint()
  for (let i = 0; i < iterations; i++) fn()
  return Number(process.hrtime.bigint() - t0) / iterations
}

async function timeBatchAsync(fn, iterations) {
  const t0 = process.hrtime.bigint()
  for (let i = 0; i < iterations; i++) await fn()
  return Number(process.hrtime.bigint() - t0) / iterations
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b)
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2
}

/**
 * Run one scenario. `baseline` and `native` are functions (sync or async via `async: true`);
 * `target` is the minimum acceptable ratio baseline/native (e.g. 5 for "≥ 5× faster").
 */
async function compare({ name, baseline, native, iterations = 1000, nativeIterations = iterations, rounds = 15, async = false, target, targetText }) {
  const b = []
  const n = []
  const once = async ? timeBatchAsync : timeBatch
  await once(baseline, Math.max(1, iterations / 10)) // warm-up
  await once(native, Math.max(1, nativeIterations / 10))
  for (let r = 0; r < rounds; r++) {
    if (r % 2) {
      b.push(await once(baseline, iterations))
      n.push(await once(native, nativeIterations))
    } else {
      n.push(await once(native, nativeIterations))
      b.push(await once(baseline, iterations))
    }
  }
  const baselineNs = median(b)
  const nativeNs = median(n)
  const ratio = baselineNs / nativeNs
  return { name, baselineNs, nativeNs, ratio, target, targetText, met: target === undefined ? null : ratio >= target }
}

/**
 * How an idle CPU waits for work (Linux only; undefined elsewhere or when sysfs does not say).
 * Every async row pays for waking an idle thread and its CPU, so the ratios depend on it: in a
 * VM whose guest does not poll before halting (`guest_halt_poll_ns` 0), each wake-up of an idle
 * CPU is a VM exit, which costs the JS backend's many round trips far more than native's one.
 */
function cpuIdle() {
  const read = (f) => {
    try {
      return fs.readFileSync(f, 'utf8').trim()
    } catch {
      return undefined
    }
  }
  const driver = read('/sys/devices/system/cpu/cpuidle/current_driver')
  if (!driver) return undefined
  const pollNs = read('/sys/module/haltpoll/parameters/guest_halt_poll_ns')
  return driver === 'haltpoll' && pollNs !== undefined ? `${driver}, guest halt polling ${pollNs} ns` : driver
}

function machine() {
  const cpus = os.cpus()
  return {
    cpu: cpus[0] ? cpus[0].model : 'unknown',
    cores: cpus.length,
    memoryGiB: Math.round(os.totalmem() / 2 ** 30),
    os: `${os.type()} ${os.release()}`,
    cpuIdle: cpuIdle(),
    node: process.version,
    date: new Date().toISOString(),
  }
}

function fmtNs(ns) {
  if (ns >= 1e9) return `${(ns / 1e9).toFixed(2)} s`
  if (ns >= 1e6) return `${(ns / 1e6).toFixed(2)} ms`
  if (ns >= 1e3) return `${(ns / 1e3).toFixed(2)} µs`
  return `${ns.toFixed(0)} ns`
}

function markdown(results, m) {
  const lines = [
    `Machine: ${m.cpu}, ${m.cores} cores, ${m.memoryGiB} GiB, ${m.os}${m.cpuIdle ? ` (cpuidle ${m.cpuIdle})` : ''}, Node ${m.node} (${m.date.slice(0, 10)})`,
    '',
    '| scenario | baseline (js) | native | ratio | target | |',
    '|---|---:|---:|---:|---|---|',
  ]
  for (const r of results) {
    const status = r.met === null ? '' : r.met ? 'met' : '**missed**'
    // A row measured in something other than time carries `unit` and plain values.
    const show = r.unit ? (v) => `${v.toFixed(1)} ${r.unit}` : fmtNs
    const baseline = r.unit ? r.baselineValue : r.baselineNs
    const native = r.unit ? r.nativeValue : r.nativeNs
    lines.push(
      `| ${r.name} | ${Number.isFinite(baseline) ? show(baseline) : '-'} | ${show(native)} | ${Number.isFinite(r.ratio) ? `${r.ratio.toFixed(2)}×` : '-'} | ${r.targetText ?? ''} | ${status} |`,
    )
  }
  const notes = results.filter((r) => r.notes).map((r) => `- ${r.name}: ${r.notes}`)
  if (notes.length) lines.push('', ...notes)
  return lines.join('\n')
}

/** Write bench/results/<name>.{json,md} and return the Markdown. */
function write(results, name = 'latest') {
  const m = machine()
  const dir = path.join(__dirname, 'results')
  fs.mkdirSync(dir, { recursive: true })
  fs.writeFileSync(path.join(dir, `${name}.json`), `${JSON.stringify({ machine: m, results }, null, 2)}\n`)
  const md = markdown(results, m)
  fs.writeFileSync(path.join(dir, `${name}.md`), `${md}\n`)
  return md
}

module.exports = { compare, write, fmtNs }
