'use strict'
// `pi-native matrix` on 200,000 entries (issue 42, item 3): the table, the problem list and the
// JSON document print whole, on both backends (no spread of 200,000 rows into one call, no string
// over V8's limit), and `--watch` draws its first frame of them and ends on SIGTERM. The folder is
// made of hard links to four entry files (50,000 names each: ext4 allows 65,000 links to a file),
// so it costs 200,000 names, not 200,000 files: listEntries reads each name as an entry (whose
// entryId matches one name in 50,000: the others are misnamed, each a problem line).
// A `*.slow.test.js` runs in `npm run test:all`, not in `npm test`.
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { spawn, spawnSync } = require('node:child_process')
const { root, watchReports } = require('./helpers.js')
const { makeEntry, tempAgentDir, matrixDir } = require('./store-fixtures.js')

const BIN = path.join(root, 'bin', 'pi-native.js')
const N = 200_000
const SOURCES = 4

let agentDir

test.before(() => {
  agentDir = tempAgentDir()
  const d = matrixDir(agentDir)
  fs.mkdirSync(d, { recursive: true })
  for (let k = 0; k < SOURCES; k++) {
    const file = path.join(d, `master-s${k}.json`)
    fs.writeFileSync(file, JSON.stringify(makeEntry('master', `s${k}`, { hostname: os.hostname(), pid: process.pid }), null, '\t') + '\n')
    for (let i = SOURCES + k; i < N; i += SOURCES) fs.linkSync(file, path.join(d, `master-s${i}.json`))
  }
})

test.after(() => fs.rmSync(agentDir, { recursive: true, force: true }))

for (const backend of ['native', 'js']) {
  const env = { ...process.env, PI_NATIVE_BACKEND: backend }

  test(`${backend}: matrix prints 200,000 entries and 199,996 misnamed files, human and --json`, () => {
    const h = spawnSync(process.execPath, [BIN, 'matrix', agentDir], { encoding: 'utf8', env, timeout: 300_000, killSignal: 'SIGKILL', maxBuffer: 1 << 30 })
    assert.equal(h.signal, null, `ended by ${h.signal}: ${h.stderr}`)
    assert.equal(h.status, 1, h.stderr)
    assert.equal(h.stderr, '')
    const rows = h.stdout.split('\n').filter((l) => /^master-s\d+ /.test(l))
    assert.equal(rows.length, N)
    assert.equal(h.stdout.split('\n').filter((l) => /^ {2}master-s\d+\.json: holds entry /.test(l)).length, N - SOURCES)
    assert.match(h.stdout, /\nsummary: 200000 valid entries \(0 orphans\), 0 invalid files, 199996 misnamed files,/)

    const j = spawnSync(process.execPath, [BIN, 'matrix', agentDir, '--json'], { encoding: 'utf8', env, timeout: 300_000, killSignal: 'SIGKILL', maxBuffer: 1 << 30 })
    assert.equal(j.signal, null)
    assert.equal(j.status, 1, j.stderr)
    const report = JSON.parse(j.stdout)
    assert.equal(report.entries.length, N)
    assert.equal(report.problems.length, N - SOURCES)
    assert.equal(report.entriesFrom, 'listEntries')
  })

  test(`${backend}: matrix --watch draws its first frame of 200,000 entries and ends on SIGTERM`, { skip: process.platform === 'win32' && 'needs a signal delivered to a child' }, async () => {
    const child = spawn(process.execPath, [BIN, 'matrix', agentDir, '--watch', '--json'], { stdio: ['ignore', 'pipe', 'pipe'], env })
    const { until, stderr, stop } = watchReports(child)
    try {
      const first = await until(() => true, 'the first frame', 300_000)
      assert.equal(first.report.entries.length, N)
      const exit = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })))
      child.kill('SIGTERM')
      assert.deepEqual(await exit, { code: null, signal: 'SIGTERM' })
      assert.equal(stderr(), '')
    } finally {
      stop()
      child.kill('SIGKILL')
    }
  })
}
