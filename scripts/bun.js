'use strict'
// Bun, for the smoke test of every capability under a runtime that is not Node
// (__test__/bun.test.js): the npm package bun@1.4.5's platform binary, installed on demand into
// .cache/bun/ (not a regular dependency; its install script is not needed and not run).
const { spawnSync } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')
const { platformKey } = require('./tools.js')

const root = path.resolve(__dirname, '..')
const VERSION = '1.4.5'
// Bun's npm packages per platform: only those this project's tests run on.
const PACKAGES = {
  'linux-x64': '@oven/bun-linux-x64',
  'linux-arm64': '@oven/bun-linux-aarch64',
  'linux-x64-musl': '@oven/bun-linux-x64-musl',
  'darwin-arm64': '@oven/bun-darwin-aarch64',
  'darwin-x64': '@oven/bun-darwin-x64',
}

/** Path of the Bun binary for this platform, installing it when missing; null where Bun has none. */
function ensureBun() {
  const pkg = PACKAGES[platformKey()]
  if (!pkg) return null
  const dir = path.join(root, '.cache', 'bun', VERSION)
  const bin = path.join(dir, 'node_modules', ...pkg.split('/'), 'bin', 'bun')
  if (!fs.existsSync(bin)) {
    fs.mkdirSync(dir, { recursive: true })
    const r = spawnSync('npm', ['install', '--prefix', dir, '--no-save', '--no-audit', '--no-fund', '--no-package-lock', '--ignore-scripts', `bun@${VERSION}`], { stdio: ['ignore', 'ignore', 'inherit'] })
    if (r.status !== 0 || !fs.existsSync(bin)) throw new Error(`could not install bun@${VERSION}`)
  }
  return bin
}

module.exports = { ensureBun }

if (require.main === module) console.log(ensureBun())
