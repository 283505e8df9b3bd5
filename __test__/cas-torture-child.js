'use strict'
// A child of the CAS torture (cas-torture.js): a writer that loops read → bump → CAS with no
// pause, or a reader that loops listEntries. Usage:
//   node cas-torture-child.js writer <agentDir> <entryId> <log file> [random|sync|async] [trace]
//   node cas-torture-child.js reader <agentDir> <log file>
// The store is the package's own (`require(<repo>)`), the backend per PI_NATIVE_BACKEND.
//
// Writer log lines (appended with one write each, so a SIGKILL loses at most the line being
// made): `s <t>` started; `t <t> <v>` about to CAS towards value v; `k <t> <v>` that CAS
// succeeded. With `trace`, also per attempt `a <t0> <tRead> <tEnd> <v> <mode> <outcome>`
// (outcome: 1 success, 0 false, L ELOCKED).
// Times are ms since the epoch, sub-ms (performance.timeOrigin + performance.now()).
// Reader log: `r <t> <id>=<v> …` whenever a value changed, and `x <t> <message>` on a breach.
const fs = require('node:fs')
const path = require('node:path')

const store = require(path.resolve(__dirname, '..'))
const now = () => performance.timeOrigin + performance.now()
const [role, agentDir] = process.argv.slice(2)

function writer(id, logFile, mode, trace) {
  const fd = fs.openSync(logFile, 'a')
  const line = (s) => fs.writeSync(fd, s + '\n')
  let traced = []
  const flush = () => {
    if (traced.length) fs.writeSync(fd, traced.join('\n') + '\n')
    traced = []
  }
  line(`s ${now().toFixed(3)}`)
  const loop = async () => {
    for (;;) {
      const t0 = now()
      const cur = await store.readEntry(agentDir, id)
      const tRead = now()
      const v = Number(cur.taskRef) + 1
      const next = { ...cur, taskRef: String(v) }
      const sync = mode === 'random' ? Math.random() < 0.5 : mode === 'sync'
      line(`t ${tRead.toFixed(3)} ${v}`)
      let outcome
      try {
        const ok = sync ? store.writeEntryIfUnchangedSync(agentDir, cur, next) : await store.writeEntryIfUnchanged(agentDir, id, cur, next)
        outcome = ok ? '1' : '0'
        if (ok) line(`k ${now().toFixed(3)} ${v}`)
      } catch (err) {
        if (err.code !== 'ELOCKED') throw err
        outcome = 'L'
      }
      if (trace) {
        traced.push(`a ${t0.toFixed(3)} ${tRead.toFixed(3)} ${now().toFixed(3)} ${v} ${sync ? 'S' : 'A'} ${outcome}`)
        flush()
      }
    }
  }
  loop().catch((err) => {
    flush()
    line(`e ${now().toFixed(3)} ${String(err && err.stack).replace(/\n/g, ' | ')}`)
    process.exit(1)
  })
}

function reader(logFile) {
  const fd = fs.openSync(logFile, 'a')
  const line = (s) => fs.writeSync(fd, s + '\n')
  const last = new Map()
  const loop = async () => {
    for (;;) {
      const entries = await store.listEntries(agentDir)
      const t = now()
      let changed = false
      for (const e of entries) {
        const v = Number(e.taskRef)
        const before = last.get(e.entryId)
        if (before !== undefined && v < before) line(`x ${t.toFixed(3)} ${e.entryId} went back from ${before} to ${v}`)
        if (before !== v) changed = true
        last.set(e.entryId, v)
      }
      if (entries.length !== 3) line(`x ${t.toFixed(3)} listed ${entries.length} entries`)
      if (changed) line(`r ${t.toFixed(3)} ${[...last].map(([k, v]) => `${k}=${v}`).join(' ')}`)
      // Let the event loop run between listings (the writers are the ones with no pause).
      await new Promise((r) => setImmediate(r))
    }
  }
  loop().catch((err) => {
    line(`x ${now().toFixed(3)} ${String(err && err.stack).replace(/\n/g, ' | ')}`)
    process.exit(1)
  })
}

if (role === 'writer') writer(process.argv[4], process.argv[5], process.argv[6] ?? 'random', process.argv[7] === 'trace')
else if (role === 'reader') reader(process.argv[4])
else throw new Error(`unknown role ${role}`)
