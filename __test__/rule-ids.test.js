'use strict'
// The rule-ID lint (scripts/check-rule-ids.js; npm test runs it on the repository as a lint
// step): the L10 items are defined, and the check finds a planted undefined ID in each kind of
// file while ignoring IDs that are not in comments.
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { spawnSync } = require('node:child_process')
const { root } = require('./helpers.js')

const SCRIPT = path.join(root, 'scripts', 'check-rule-ids.js')
const check = (dir) => spawnSync(process.execPath, [SCRIPT, '--root', dir], { encoding: 'utf8' })

test('the SPEC §3.4 L10 items (a)–(h) and (e\') each have a row of their own', () => {
  const { definedIds } = require('../scripts/check-rule-ids.js')
  const ids = definedIds(root)
  for (const item of ['a', 'b', 'c', 'd', 'e', "e'", 'f', 'g', 'h']) assert.ok(ids.has(`L10${item}`), `L10${item}`)
})

test('a planted undefined ID fails the check with its file and line, in Rust, JS, TS, shell and Markdown; strings, regexes, templates and char literals are not comments', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pi-native-rule-ids-'))
  try {
    const put = (rel, text) => {
      fs.mkdirSync(path.dirname(path.join(dir, rel)), { recursive: true })
      fs.writeFileSync(path.join(dir, rel), text)
    }
    put('docs/ARCHITECTURE.md', '# A\n\n## Rule IDs\n\n| ID | rule |\n|---|---|\n| B17a | x |\n| V8 | x |\n| L10e\' | x |\n| W-B6 | x |\n\n## After\n\n| K1 | not in the table |\n')
    put(
      'src/a.rs',
      [
        'let s = "// V99 in a string"; let q = \'"\'; // cites L10z',
        'fn f<\'a>(x: &\'a str) -> char { \'\\\'\' } /* outer /* nested */ still a comment: K99 */',
        'let r = r#"// T99 in a raw string"#; let b = b\'/\'; // B17a and W-B6 are defined',
        '',
      ].join('\n'),
    )
    put('lib/b.js', "const re = /\\/\\/ G99/g; const t = `// A99 ${re}`; // W-B99\n/* V8's engine, L10e' and B17a's item */\n")
    put('__test__/c.ts', "const x: string = '/* C98 */' // T98\n")
    put('scripts/d.sh', '#!/usr/bin/env bash\necho "# G98 not a comment" \'# G97 neither\' # C99\n')
    put('README.md', 'Text citing K98 and K1.\n')
    put('bench/e.json', '{ "V97": "not a code file" }\n')
    const r = check(dir)
    assert.equal(r.status, 1, r.stdout + r.stderr)
    const cited = r.stderr.split('\n').filter((l) => l.includes(': rule ')).map((l) => l.replace(/ is not defined.*/, ''))
    assert.deepEqual(cited.sort(), [
      'README.md:1: rule K1',
      'README.md:1: rule K98',
      '__test__/c.ts:1: rule T98',
      'docs/ARCHITECTURE.md:14: rule K1',
      'lib/b.js:1: rule W-B99',
      'scripts/d.sh:2: rule C99',
      'src/a.rs:1: rule L10z',
      'src/a.rs:2: rule K99',
    ])
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
})
