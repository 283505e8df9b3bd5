#!/usr/bin/env node
'use strict'
// Lint step of `npm test`: every rule ID that a comment in the code, or a page of the docs,
// cites (G1, A14, B17a, V8, C4, L10d, L10e', K2, T5, W-B6, …) must be defined in the rule table
// of docs/ARCHITECTURE.md ("Rule IDs"): the contract the IDs come from is not in this repository,
// so that table is the only place a reader can look one up.
//   node scripts/check-rule-ids.js [--root DIR]   # exit 1 and one line per undefined citation
// Comments are found by a parser, not a pattern: TypeScript's for JS/TS (strings, templates and
// regular expressions are not comments), a small lexer for Rust (strings, raw strings, char
// literals, nested block comments) and for shell (`#` outside quotes). Markdown is read whole.
const fs = require('node:fs')
const path = require('node:path')

const CODE_DIRS = ['src', 'lib', 'js', 'bin', 'scripts', '__test__', 'bench']
const CODE_FILES = ['build.rs', '.ci/run']
const DOCS = ['README.md', 'COMPATIBILITY.md', 'CHANGELOG.md', 'SECURITY.md', 'docs']
const SKIP_DIRS = new Set(['node_modules', '.cache', 'target', 'fixtures'])
const TABLE = path.join('docs', 'ARCHITECTURE.md')

// An ID stands alone: not inside a longer word (SHA1, x86_64) and not the tail of a W- ID.
// A trailing `'` belongs to the ID (SPEC L10 item (e') is `L10e'`) unless a letter follows (B20's).
const ID = /(?<![A-Za-z0-9_-])(W-[ABC][0-9]+|[GABVCLKT][0-9]+[a-z]?(?:'(?![A-Za-z]))?)(?![A-Za-z0-9_])/g

/** The IDs the rule table defines: the first cell of each row of the "Rule IDs" section. */
function definedIds(root) {
  const text = fs.readFileSync(path.join(root, TABLE), 'utf8')
  const start = text.search(/^## Rule IDs$/m)
  if (start === -1) throw new Error(`${TABLE} has no "## Rule IDs" section`)
  const next = text.slice(start + 1).search(/^## /m)
  const section = next === -1 ? text.slice(start) : text.slice(start, start + 1 + next)
  const ids = new Set()
  for (const m of section.matchAll(/^\| *`?([^|`]+?)`? *\|/gm)) if (m[1] !== 'ID' && !/^-+$/.test(m[1])) ids.add(m[1])
  if (ids.size === 0) throw new Error(`${TABLE}: the "Rule IDs" table is empty`)
  return ids
}

/** Comments of a JS/TS file as [offset, text], found by TypeScript's parser. */
function jsComments(file, text) {
  const ts = require('typescript')
  const kind = /\.[cm]?tsx?$/.test(file) ? ts.ScriptKind.TS : ts.ScriptKind.JS
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, false, kind)
  const seen = new Map()
  const add = (ranges) => {
    for (const r of ranges ?? []) seen.set(r.pos, text.slice(r.pos, r.end))
  }
  const visit = (node) => {
    add(ts.getLeadingCommentRanges(text, node.pos))
    add(ts.getTrailingCommentRanges(text, node.end))
    for (const child of node.getChildren(source)) visit(child)
  }
  visit(source)
  return [...seen]
}

/** Comments of a Rust file as [offset, text]. */
function rustComments(text) {
  const out = []
  let i = 0
  const n = text.length
  while (i < n) {
    const c = text[i]
    if (c === '/' && text[i + 1] === '/') {
      const end = text.indexOf('\n', i)
      const stop = end === -1 ? n : end
      out.push([i, text.slice(i, stop)])
      i = stop
    } else if (c === '/' && text[i + 1] === '*') {
      // Rust block comments nest.
      let depth = 1
      let j = i + 2
      while (j < n && depth > 0) {
        if (text[j] === '/' && text[j + 1] === '*') (depth++, (j += 2))
        else if (text[j] === '*' && text[j + 1] === '/') (depth--, (j += 2))
        else j++
      }
      out.push([i, text.slice(i, j)])
      i = j
    } else if (/[rb]/.test(c) && !/[A-Za-z0-9_]/.test(text[i - 1] ?? ' ') && /^(?:b?r#*")/.test(text.slice(i, i + 260))) {
      // Raw string r"…", r#"…"#, br"…": no escapes, ends at the quote and as many #.
      const m = /^b?r(#*)"/.exec(text.slice(i, i + 260))
      const close = `"${m[1]}`
      const end = text.indexOf(close, i + m[0].length)
      i = end === -1 ? n : end + close.length
    } else if (c === '"') {
      let j = i + 1
      while (j < n && text[j] !== '"') j += text[j] === '\\' ? 2 : 1
      i = j + 1
    } else if (c === "'") {
      // A char literal ('x', '\n', '\u{1F600}', '"') or a lifetime ('a, 'static).
      if (text[i + 1] === '\\') {
        const end = text.indexOf("'", i + 3)
        i = end === -1 ? n : end + 1
      } else {
        const cp = text.codePointAt(i + 1)
        const width = cp > 0xffff ? 2 : 1
        i = text[i + 1 + width] === "'" ? i + 2 + width : i + 1
      }
    } else i++
  }
  return out
}

/** Comments of a shell script as [offset, text]: `#` starting a word, outside quotes. */
function shellComments(text) {
  const out = []
  let i = 0
  const n = text.length
  while (i < n) {
    const c = text[i]
    if (c === '\\') i += 2
    else if (c === "'") {
      const end = text.indexOf("'", i + 1)
      i = end === -1 ? n : end + 1
    } else if (c === '"') {
      let j = i + 1
      while (j < n && text[j] !== '"') j += text[j] === '\\' ? 2 : 1
      i = j + 1
    } else if (c === '#' && (i === 0 || /\s/.test(text[i - 1]))) {
      const end = text.indexOf('\n', i)
      const stop = end === -1 ? n : end
      out.push([i, text.slice(i, stop)])
      i = stop
    } else i++
  }
  return out
}

/** [offset, text] pieces of `file` in which citations count, or null for a file not checked. */
function citingText(file, text) {
  if (/\.(?:[cm]?js|[cm]?ts)$/.test(file)) return jsComments(file, text)
  if (file.endsWith('.rs')) return rustComments(text)
  if (file.endsWith('.sh') || /^#!.*\b(?:ba)?sh\b/.test(text)) return shellComments(text)
  if (file.endsWith('.md')) return [[0, text]]
  return null
}

function walk(root, rel, files) {
  const full = path.join(root, rel)
  let stat
  try {
    stat = fs.statSync(full)
  } catch {
    return
  }
  if (stat.isFile()) files.push(rel)
  else if (stat.isDirectory()) {
    for (const name of fs.readdirSync(full).sort()) if (!SKIP_DIRS.has(name)) walk(root, path.join(rel, name), files)
  }
}

/** Every citation of an ID the table does not define: { file, line, id }. */
function undefinedCitations(root) {
  const ids = definedIds(root)
  const files = []
  for (const rel of [...CODE_DIRS, ...CODE_FILES, ...DOCS]) walk(root, rel, files)
  const found = []
  for (const file of files) {
    const text = fs.readFileSync(path.join(root, file), 'utf8')
    const pieces = citingText(file, text)
    if (!pieces) continue
    for (const [offset, piece] of pieces) {
      for (const m of piece.matchAll(ID)) {
        if (ids.has(m[1])) continue
        const line = text.slice(0, offset + m.index).split('\n').length
        found.push({ file: file.split(path.sep).join('/'), line, id: m[1] })
      }
    }
  }
  return found
}

module.exports = { definedIds, undefinedCitations, rustComments, shellComments, jsComments }

if (require.main === module) {
  const args = process.argv.slice(2)
  const at = args.indexOf('--root')
  const root = at === -1 ? path.resolve(__dirname, '..') : path.resolve(args[at + 1])
  const found = undefinedCitations(root)
  for (const f of found) process.stderr.write(`${f.file}:${f.line}: rule ${f.id} is not defined in ${TABLE} ("Rule IDs")\n`)
  if (found.length) {
    process.stderr.write(`${found.length} citation(s) of undefined rule IDs: define each in the table (one row per ID) or fix the citation\n`)
    process.exitCode = 1
  } else process.stdout.write(`every cited rule ID is defined in ${TABLE}\n`)
}
