'use strict'
// How scripts and tests start npm and napi on every OS: the JS entry point of each tool, run by
// a Node binary. On Windows `npm` and `node_modules/.bin/napi` are .cmd shims, which
// child_process does not start without a shell (Node refuses .cmd/.bat files since its fix for
// CVE-2024-27980), and a shell would split arguments that hold spaces again.
const fs = require('node:fs')
const path = require('node:path')

const root = path.resolve(__dirname, '..')

/**
 * `<platform>-<arch>`, with `-musl` on a Linux whose C library is not glibc (Alpine): the key of
 * the tools published per platform (Node and Bun builds, wheels), which differ for musl.
 */
function platformKey() {
  const musl = process.platform === 'linux' && !process.report?.getReport().header.glibcVersionRuntime
  return `${process.platform}-${process.arch}${musl ? '-musl' : ''}`
}

/** npm's CLI script: the one running this process (npm_execpath), else the one beside this Node. */
function npmCli() {
  const dir = path.dirname(process.execPath)
  const candidates = [
    process.env.npm_execpath,
    path.join(dir, 'node_modules', 'npm', 'bin', 'npm-cli.js'), // Windows layout
    path.join(dir, '..', 'lib', 'node_modules', 'npm', 'bin', 'npm-cli.js'), // Unix layout
  ]
  return candidates.find((c) => c && path.basename(c) === 'npm-cli.js' && fs.existsSync(c))
}

/**
 * `[command, args]` that runs npm with `args` under the Node binary `node` (default: this one).
 * Falls back to `npm` on PATH where no npm-cli.js is found (a Unix npm is a plain executable).
 */
function npmCommand(args, node = process.execPath) {
  const cli = npmCli()
  return cli ? [node, [cli, ...args]] : ['npm', args]
}

/** `[command, args]` that runs the napi CLI installed in this repository's node_modules. */
function napiCommand(args) {
  const pkg = require.resolve('@napi-rs/cli/package.json', { paths: [root] })
  const bin = require(pkg).bin.napi
  return [process.execPath, [path.join(path.dirname(pkg), bin), ...args]]
}

module.exports = { npmCommand, napiCommand, platformKey }
