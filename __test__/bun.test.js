'use strict'
// Runtimes that are not Node: Bun exports libuv-named functions of its own, so the recovery
// outbox (src/binding/settle.rs) must not be used there. Every capability is smoke-tested under
// Bun from npm (scripts/bun.js), and the same script under this Node for comparison.
const test = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const { spawnSync } = require('node:child_process')
const { ensureBun } = require('../scripts/bun.js')

const SMOKE = path.join(__dirname, 'fixtures', 'smoke.js')

function smoke(bin) {
  const r = spawnSync(bin, [SMOKE], { encoding: 'utf8', timeout: 60_000, env: { ...process.env, PI_NATIVE_BACKEND: 'native' } })
  assert.equal(r.status, 0, `${bin}: exit ${r.status} ${r.signal ?? ''}\n${r.stdout}\n${r.stderr}`)
  return JSON.parse(r.stdout.trim().split('\n').pop())
}

const bun = (() => {
  if (process.env.PI_NATIVE_EMULATED) return null // a second emulator inside qemu or Wine: not meaningful
  try {
    return ensureBun()
  } catch {
    return null
  }
})()

test('every capability works under Bun, which settles recovery without the libuv outbox', { skip: !bun && 'no Bun for this platform (or it could not be installed)', timeout: 120_000 }, () => {
  const r = smoke(bun)
  assert.match(r.runtime, /^bun /)
  assert.equal(r.checks.length, 14)
  assert.deepEqual(r.checks.filter((c) => !c.ok), [])
})

test('the same smoke under Node (where the outbox is used: that one check says so)', () => {
  const r = smoke(process.execPath)
  assert.deepEqual(
    r.checks.filter((c) => !c.ok).map((c) => c.name),
    ['recovery settles without the libuv outbox'],
  )
})
