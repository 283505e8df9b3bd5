'use strict'
// The docs match the code: the README stays short (at most 400 lines), names every error code,
// warning, setting and state the code has (read from the sources and the published types, not
// from a list kept here), and no page cites a Markdown file the repository does not have (such
// as the contract's SPEC.md, which lives outside it).
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { root } = require('./helpers.js')

const read = (f) => fs.readFileSync(path.join(root, f), 'utf8')
const README = read('README.md')

/** Every file under `dir` (relative to the root) whose name passes `keep`, skipping dependencies and caches. */
function files(dir, keep) {
  const out = []
  const walk = (d) => {
    for (const e of fs.readdirSync(path.join(root, d), { withFileTypes: true })) {
      if (['node_modules', '.cache', 'target', 'fixtures', 'oracle', '.git'].includes(e.name)) continue
      const rel = path.join(d, e.name)
      if (e.isDirectory()) walk(rel)
      else if (keep(e.name)) out.push(rel)
    }
  }
  walk(dir)
  return out
}

const SOURCES = ['lib', 'js', 'bin', 'src'].flatMap((d) => files(d, (n) => /\.(js|rs)$/.test(n)))
const sourceText = SOURCES.map(read).join('\n')

test('the README is at most 400 lines', () => {
  const lines = README.split('\n').length - (README.endsWith('\n') ? 1 : 0)
  assert.ok(lines <= 400, `README.md has ${lines} lines`)
})

test('the README names every ERR_PI_NATIVE_* code and PI_NATIVE_* setting or warning the code has', () => {
  const codes = new Set(sourceText.match(/\bERR_PI_NATIVE_[A-Z_]+\b/g))
  assert.ok(codes.size >= 4, [...codes].join(' '))
  // PI_NATIVE_TEST_* are the tests' own hooks, not settings.
  const settings = new Set([...sourceText.matchAll(/\b(PI_NATIVE_[A-Z_]+)\b/g)].map((m) => m[1]).filter((v) => !v.startsWith('PI_NATIVE_TEST_')))
  assert.ok(settings.has('PI_NATIVE_BACKEND') && settings.has('PI_NATIVE_JS_FALLBACK'))
  const missing = [...codes, ...settings].filter((name) => !README.includes(`\`${name}`))
  assert.deepEqual(missing, [], 'named in the README')
})

test('the README names every state and mode the published types can answer', () => {
  const dts = ['lib/liveness.d.ts', 'lib/process-matrix-store.d.ts'].map(read).join('\n')
  const answers = {}
  for (const fn of ['probePid', 'exitWatchMode', 'entryWatchMode']) {
    const m = new RegExp(`export declare function ${fn}\\([^)]*\\): ([^\\n]+)`).exec(dts)
    assert.ok(m, fn)
    answers[fn] = [...m[1].matchAll(/'([^']+)'/g)].map((x) => x[1])
  }
  const identity = /export interface ProcessIdentity \{[\s\S]*?state: ([^\n]+)/.exec(dts)
  answers.identityState = [...identity[1].matchAll(/'([^']+)'/g)].map((x) => x[1])
  assert.ok(answers.entryWatchMode.includes('none'))
  // The CLI's liveness column: every value it can print.
  answers.cliLiveness = [...read('bin/pi-native.js').matchAll(/return '(alive|dead|zombie|recycled|foreign-host)'/g)].map((m) => m[1])
  assert.deepEqual([...new Set(answers.cliLiveness)].sort(), ['alive', 'dead', 'foreign-host', 'recycled', 'zombie'])
  const missing = Object.entries(answers).flatMap(([fn, values]) => values.filter((v) => !README.includes(`\`${v}\``) && !README.includes(`\`'${v}'\``)).map((v) => `${fn}: ${v}`))
  assert.deepEqual(missing, [], 'named in the README')
})

test('no page cites a Markdown file that is not in the repository', () => {
  const pages = ['README.md', 'COMPATIBILITY.md', 'CHANGELOG.md', ...files('docs', (n) => n.endsWith('.md'))]
  const have = new Set(files('.', (n) => n.endsWith('.md')).map((f) => path.basename(f)))
  const cited = []
  for (const page of pages) {
    for (const m of read(page).matchAll(/[\w./-]*\b[\w-]+\.md(?![\w-])/g)) {
      const name = m[0]
      const rel = name.includes('/') ? [path.join(path.dirname(page), name), name] : []
      const found = rel.length ? rel.some((r) => fs.existsSync(path.join(root, r))) : have.has(name)
      if (!found) cited.push(`${page}: ${name}`)
    }
  }
  assert.deepEqual(cited, [])
})

test("the README's swap checklist: what changes for a host, the dependency line, how to check the swap, how to roll it back", () => {
  const start = README.indexOf('\n## Swapping it into a host\n')
  const section = README.slice(start, README.indexOf('\n## ', start + 1))
  for (const row of ['answers', 'errors', 'files and locks', 'timing']) assert.match(section, new RegExp(`^\\| ${row} \\|`, 'm'), `the table says what changes for ${row}`)
  assert.match(section, /\*\*Dependency\*\*: `npm install \.\/pi-native-\d+\.\d+\.\d+\.tgz`/)
  assert.match(section, /\*\*Check\*\*[^\n]*`npx pi-native --version`/)
  assert.match(section, /`node -p "require\('pi-native'\)\.backend"`/)
  assert.match(section, /\*\*Roll back\*\* in one step/)
  assert.match(section, /`PI_NATIVE_BACKEND=js`/)
  assert.match(section, /\[docs\/SWAPPING\.md\]\(docs\/SWAPPING\.md\)/)
})
