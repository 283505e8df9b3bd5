'use strict'
// The SDK oracle of the session-recovery tests (__test__/oracle): the real
// @earendil-works/pi-coding-agent 1.6.0, installed from its own lockfile on first use.
// It declares node >= 22.19 (as do ten of its dependencies), so it is not a root devDependency:
// there, `npm install` on Node 20 would print an EBADENGINE warning per package. npm runs here
// under a Node that satisfies those engines (this one, or the cached Node 24 of the test
// matrix), and with --ignore-scripts: the oracle is only imported, never built.
const { spawnSync } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')
const { ensureNode } = require('./node-versions.js')
const { npmCommand } = require('./tools.js')

const root = path.resolve(__dirname, '..')
const dir = path.join(root, '__test__', 'oracle')
const pkg = path.join(dir, 'node_modules', '@earendil-works', 'pi-coding-agent')

function satisfiesSdkEngines(version) {
  const [major, minor] = version.split('.').map(Number)
  return major > 22 || (major === 22 && minor >= 19)
}

/** Absolute path of the installed SDK package, installing it when missing. */
function ensureOracle() {
  if (fs.existsSync(path.join(pkg, 'package.json'))) return pkg
  const node = satisfiesSdkEngines(process.versions.node) ? process.execPath : ensureNode('24')
  const env = { ...process.env, PATH: `${path.dirname(node)}${path.delimiter}${process.env.PATH}` }
  const [cmd, args] = npmCommand(['ci', '--ignore-scripts', '--no-audit', '--no-fund', '--prefer-offline'], node)
  const r = spawnSync(cmd, args, { cwd: dir, env, encoding: 'utf8' })
  if (r.status !== 0 || !fs.existsSync(path.join(pkg, 'package.json'))) {
    throw new Error(`could not install the SDK oracle in ${dir}:\n${r.stdout}\n${r.stderr}`)
  }
  return pkg
}

module.exports = { ensureOracle }

if (require.main === module) console.log(ensureOracle())
