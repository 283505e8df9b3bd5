'use strict'
// TypeScript compilers (and @types/node) for the packed-package tests, installed on demand from
// pinned versions into .cache/typescript/<name>@<version>/ — not root devDependencies, which
// hold only the TypeScript the repository builds and tests with (5.9.3).
// The published types must compile under the defaults of every TypeScript a host may run:
// 4.7 (the first with `module: node16` and `exports` types), 5.x, and the current releases.
const { spawnSync } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')
const { npmCommand } = require('./tools.js')

const root = path.resolve(__dirname, '..')

/** The TypeScript releases the published types are compiled with (the repository's own first). */
const TYPESCRIPT_VERSIONS = [require('typescript/package.json').version, '4.7.4', '6.0.3', '7.0.2']
/** The @types/node of the Node floor (engines `>= 20`), for code that uses Node's globals. */
const TYPES_NODE = '20.19.43'

/** The folder of `name` at `version` (its package root), installing it into .cache when missing. */
function ensurePackage(name, version) {
  const dir = path.join(root, '.cache', 'typescript', `${name.replace('/', '+')}@${version}`)
  const pkg = path.join(dir, 'node_modules', name)
  const installed = () => {
    try {
      return JSON.parse(fs.readFileSync(path.join(pkg, 'package.json'), 'utf8')).version === version
    } catch {
      return false
    }
  }
  if (!installed()) {
    fs.mkdirSync(dir, { recursive: true })
    const [cmd, args] = npmCommand(['install', '--prefix', dir, '--no-save', '--no-audit', '--no-fund', '--no-package-lock', '--ignore-scripts', `${name}@${version}`])
    const r = spawnSync(cmd, args, { encoding: 'utf8' })
    if (r.status !== 0 || !installed()) throw new Error(`could not install ${name}@${version} into ${dir}:\n${r.stdout}\n${r.stderr}`)
  }
  return pkg
}

/** `[command, args]` that runs `tsc` of TypeScript `version` (the repository's own needs no install). */
function tscCommand(version, args) {
  const own = require('typescript/package.json').version
  const pkg = version === own ? path.dirname(require.resolve('typescript/package.json', { paths: [root] })) : ensurePackage('typescript', version)
  const bin = JSON.parse(fs.readFileSync(path.join(pkg, 'package.json'), 'utf8')).bin.tsc
  return [process.execPath, [path.join(pkg, bin), ...args]]
}

/** The package root of @types/node at TYPES_NODE. */
const typesNode = () => ensurePackage('@types/node', TYPES_NODE)

module.exports = { TYPESCRIPT_VERSIONS, TYPES_NODE, tscCommand, typesNode }

if (require.main === module) {
  for (const v of process.argv.slice(2).length ? process.argv.slice(2) : TYPESCRIPT_VERSIONS) {
    const [cmd, args] = tscCommand(v, ['--version'])
    console.log(v, spawnSync(cmd, args, { encoding: 'utf8' }).stdout.trim())
  }
}
