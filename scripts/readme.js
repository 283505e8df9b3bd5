#!/usr/bin/env node
'use strict'
// The fenced code blocks of the README and the docs pages, for the test that runs them
// (__test__/readme-examples.js) and for CI, which runs the README's own develop commands:
//   node scripts/readme.js develop install|test|all   # prints that command of the `sh develop` block
// Every block's info string says what it is, so each one is either run by a test or visibly
// marked as what else checks it (docs/DEVELOPING.md, "README examples"):
//   ```js / ```js esm / ```ts   the README's quick start (CommonJS, ES module, TypeScript): run as
//                               printed in a fresh `npm init -y` project that installed the tarball
//   ```sh install               the README's install line: run as printed in that project
//   ```sh checkout              making the tarball from a clone (not run: it clones from the network)
//   ```sh cli                   the CLI synopsis: every command and option in it is run, exit codes checked
//   ```sh develop               the commands for a clone (install, test, test:all): CI runs them as printed
//   ```js fragment / ```ts fragment  docs/GUIDE.md's fragments of a host's code: compiled and run
//                               with the host's free names (agentDir, pid, …) set
//   ```ts swap                  docs/SWAPPING.md's host swap blocks: compiled and run in models of the host files
// Any other info string fails the examples test.
const fs = require('node:fs')
const path = require('node:path')

const KINDS = {
  js: 'quickstart',
  'js esm': 'quickstart',
  ts: 'quickstart',
  'js fragment': 'fragment',
  'ts fragment': 'fragment',
  'ts swap': 'swap',
  'sh cli': 'cli',
  'sh develop': 'develop',
  'sh install': 'install',
  'sh checkout': 'checkout',
}

/** Every fenced block: { info, kind (undefined: not a known kind), body, line (of the first body line), heading }. */
function fences(text) {
  const lines = text.split('\n')
  const out = []
  let heading = ''
  for (let i = 0; i < lines.length; i++) {
    const h = /^#{1,6} (.*)$/.exec(lines[i])
    if (h) heading = h[1]
    const open = /^```(.*)$/.exec(lines[i])
    if (!open) continue
    const info = open[1].trim()
    const start = i + 1
    let end = start
    while (end < lines.length && lines[end] !== '```') end++
    if (end === lines.length) throw new Error(`README.md:${i + 1}: fence never closed`)
    out.push({ info, kind: KINDS[info], body: lines.slice(start, end).join('\n') + '\n', line: start + 1, heading })
    i = end
  }
  return out
}

/** The commands of a shell block: one per line, comments and blank lines left out. */
const commands = (body) =>
  body
    .split('\n')
    .map((l) => l.replace(/(^|\s)#.*$/, '').trim())
    .filter(Boolean)

/**
 * The `sh develop` block's commands as { install, test, all }: exactly one block of three
 * commands, an npm install, the fast `npm test` and the complete `npm run test:all`, each a plain
 * `npm` command line (no shell syntax).
 */
function developCommands(text) {
  const blocks = fences(text).filter((b) => b.kind === 'develop')
  if (blocks.length !== 1) throw new Error(`README.md must have exactly one \`\`\`sh develop block (has ${blocks.length})`)
  const cmds = commands(blocks[0].body)
  const [install, test, all] = cmds
  if (cmds.length !== 3 || !/^npm (?:install|ci)\b/.test(install) || !/^npm (?:test|run test)$/.test(test) || !/^npm run test:all$/.test(all)) {
    throw new Error(`README.md:${blocks[0].line}: the develop block must hold an npm install, npm test and npm run test:all, in that order; it has ${JSON.stringify(cmds)}`)
  }
  for (const c of cmds) if (!/^npm [A-Za-z0-9 =._:-]+$/.test(c)) throw new Error(`README.md: develop command ${JSON.stringify(c)} is not a plain npm command line`)
  return { install, test, all }
}

module.exports = { KINDS, fences, commands, developCommands }

if (require.main === module) {
  const [what, which] = process.argv.slice(2)
  const text = fs.readFileSync(path.join(__dirname, '..', 'README.md'), 'utf8')
  if (what === 'develop' && ['install', 'test', 'all'].includes(which)) process.stdout.write(`${developCommands(text)[which]}\n`)
  else {
    process.stderr.write('usage: node scripts/readme.js develop install|test|all\n')
    process.exitCode = 2
  }
}
