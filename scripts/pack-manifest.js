#!/usr/bin/env node
'use strict'
// `prepack` / `postpack`: the packed package.json must carry no `prepare` script (npm would list
// it as an install script in every consumer, and consumers have no Rust sources to build).
// `strip` saves package.json byte for byte and writes it without the build-from-source scripts; `restore`
// puts the saved bytes back. A backup left by an interrupted pack is restored before stripping.
const fs = require('node:fs')
const path = require('node:path')

const root = path.resolve(__dirname, '..')
const manifest = path.join(root, 'package.json')
const backup = path.join(root, '.cache', 'package.json.prepack')
const PACK_ONLY = ['prepare', 'prepack', 'postpack']

/** Replace package.json by rename, so a concurrent reader never sees a half-written file. */
function replaceManifest(text) {
  const temp = `${manifest}.${process.pid}.tmp`
  fs.writeFileSync(temp, text)
  fs.renameSync(temp, manifest)
}

function restore() {
  if (!fs.existsSync(backup)) return
  replaceManifest(fs.readFileSync(backup))
  fs.unlinkSync(backup)
}

function strip() {
  restore()
  const text = fs.readFileSync(manifest, 'utf8')
  const pkg = JSON.parse(text)
  fs.mkdirSync(path.dirname(backup), { recursive: true })
  fs.writeFileSync(backup, text)
  // prepack/postpack go too: they need scripts/, which is not packed (npm runs postpack from the
  // manifest it read before prepack, so the restore still happens).
  for (const k of PACK_ONLY) delete pkg.scripts[k]
  replaceManifest(`${JSON.stringify(pkg, null, 2)}\n`)
}

const action = process.argv[2]
if (action === 'strip') strip()
else if (action === 'restore') restore()
else {
  process.stderr.write('usage: node scripts/pack-manifest.js strip|restore\n')
  process.exitCode = 2
}
