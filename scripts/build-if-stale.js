#!/usr/bin/env node
'use strict'
// Build the addon only when it is missing or older than its Rust sources. Runs as `prepare`
// (so `npm install` in a fresh clone builds it) and before `npm pack` (so a current binary is
// packed as is: `napi build` relinks even when nothing changed, ~20 s).
const { spawnSync } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')
const { napiCommand } = require('./tools.js')

const root = path.resolve(__dirname, '..')
const SOURCES = ['src', 'Cargo.toml', 'Cargo.lock', 'build.rs']

function newestMtime(p) {
  const st = fs.statSync(p)
  if (!st.isDirectory()) return st.mtimeMs
  return Math.max(0, ...fs.readdirSync(p).map((n) => newestMtime(path.join(p, n))))
}

/** Why the addon needs a build ('missing' | 'stale'), or null when the binary is current. */
function binaryState() {
  // Only this host's binary: cross-built ones (scripts/build-targets.sh) have their own builds.
  const host = `pi-native.${process.platform}-${process.arch}`
  const binaries = fs.readdirSync(root).filter((n) => n.startsWith(`${host}.`) || n.startsWith(`${host}-`))
  if (binaries.length === 0) return 'missing'
  const built = Math.min(...binaries.map((n) => fs.statSync(path.join(root, n)).mtimeMs))
  const sources = Math.max(...SOURCES.map((p) => newestMtime(path.join(root, p))))
  return sources > built ? 'stale' : null
}

function buildIfStale() {
  const state = binaryState()
  if (state === null) {
    process.stdout.write('pi-native: the addon is newer than its sources; not rebuilding\n')
    return 0
  }
  process.stdout.write(`pi-native: the addon is ${state === 'missing' ? 'missing' : 'older than its sources'}; building\n`)
  const [cmd, args] = napiCommand(['build', '--platform', '--release'])
  const r = spawnSync(cmd, args, { cwd: root, stdio: 'inherit' })
  return r.status ?? 1
}

module.exports = { binaryState, buildIfStale }

if (require.main === module) process.exitCode = buildIfStale()
