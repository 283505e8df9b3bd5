'use strict'
// Threads the store starts: a call on a small folder starts none of its own. `listEntries` of a
// one-entry folder used to start a thread per call (2,000 for 4,000 calls); under qemu's arm64
// emulation, where each thread leaves memory behind, that run passed 700 MB. strace counts the
// thread creations of a child process that makes the calls. Native backend.
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { spawnSync } = require('node:child_process')
const { root } = require('./helpers.js')

const linux = process.platform === 'linux'
const hasStrace = linux && spawnSync('strace', ['-V'], { stdio: 'ignore' }).status === 0

const CALLS = 400

test(
  `native listEntries and readEntry on a small folder: ${CALLS} calls start a bounded number of threads, not one per call`,
  { skip: !linux ? 'counts clone calls with strace: Linux only' : !hasStrace && 'strace is not installed' },
  () => {
    const base = fs.mkdtempSync(path.join(os.tmpdir(), 'pi-native-threads-'))
    try {
      const dir = path.join(base, 'state', 'process-matrix')
      fs.mkdirSync(dir, { recursive: true })
      fs.writeFileSync(path.join(dir, 'master-x.json'), JSON.stringify({ entryId: 'master-x' }))
      const script = `
        const { loadNative } = require(${JSON.stringify(path.join(root, 'lib', 'binding.js'))})
        const s = loadNative()
        ;(async () => {
          for (let i = 0; i < ${CALLS}; i += 2) await Promise.all([s.listEntries(process.argv[1]), s.readEntry(process.argv[1], 'master-x')])
        })()`
      const log = path.join(base, 'strace.log')
      const r = spawnSync('strace', ['-f', '-qq', '-o', log, '-e', 'trace=clone,clone3', process.execPath, '-e', script, base], { encoding: 'utf8' })
      assert.equal(r.status, 0, r.stderr)
      // Node's own threads (V8 platform workers, libuv's pool) and the addon's pools: a few dozen
      // at most, however many calls are made.
      const threads = fs
        .readFileSync(log, 'utf8')
        .split('\n')
        .filter((l) => /\bclone3?\(/.test(l) && /CLONE_THREAD/.test(l)).length
      assert.ok(threads < 40, `${threads} threads started for ${CALLS} calls`)
    } finally {
      fs.rmSync(base, { recursive: true, force: true })
    }
  },
)
