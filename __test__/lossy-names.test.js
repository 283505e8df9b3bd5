'use strict'
// File names that are not valid UTF-8 (issue 36 §2; found by the session-folders fuzz
// property). Node's readdir decodes them with U+FFFD replacement (SPEC K2) and the originals
// then stat/read `join(dir, decodedName)`: such a file is never read itself, and when another
// file carries exactly the decoded name, that file is seen once per name that decodes to it.
// Both backends must answer as Node's readdir + readFile/stat do. Linux only: other systems
// refuse or re-encode such names.
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { backends } = require('./helpers.js')
const { makeEntry, tempAgentDir, matrixDir } = require('./store-fixtures.js')
const { loadSdk, recoverOracle } = require('./session-oracle.js')

const skip = process.platform !== 'linux' && 'file names that are not UTF-8 exist as such on Linux only'
const rawName = (dir, bytes, suffix) => Buffer.concat([Buffer.from(dir + path.sep), Buffer.from(bytes), Buffer.from(suffix)])

/** What the original's listEntries resolves: readdir, sort, readFile + JSON.parse per name. */
function listOracle(agentDir) {
  const dir = matrixDir(agentDir)
  const out = []
  for (const name of fs.readdirSync(dir).sort()) {
    if (!name.endsWith('.json')) continue
    try {
      out.push(JSON.parse(fs.readFileSync(path.join(dir, name), 'utf8')))
    } catch {}
  }
  return out
}

test('listEntries reads a non-UTF-8 name under its decoded name, as readdir + readFile do', { skip }, async () => {
  for (const [name, s] of backends()) {
    const a = tempAgentDir()
    const dir = matrixDir(a)
    fs.mkdirSync(dir, { recursive: true })
    // `worker-\uFFFD.json` exists; `worker-\xff.json` and `worker-\xfe.json` decode to it, and
    // `master-\xff.json` decodes to a name nothing carries.
    const decoded = makeEntry('worker', '\ufffd')
    fs.writeFileSync(path.join(dir, 'worker-\ufffd.json'), JSON.stringify(decoded))
    fs.writeFileSync(rawName(dir, [0x77, 0x6f, 0x72, 0x6b, 0x65, 0x72, 0x2d, 0xff], '.json'), JSON.stringify(makeEntry('worker', 'raw-ff')))
    fs.writeFileSync(rawName(dir, [0x77, 0x6f, 0x72, 0x6b, 0x65, 0x72, 0x2d, 0xfe], '.json'), JSON.stringify(makeEntry('worker', 'raw-fe')))
    fs.writeFileSync(rawName(dir, [0x6d, 0x61, 0x73, 0x74, 0x65, 0x72, 0x2d, 0xff], '.json'), JSON.stringify(makeEntry('master', 'raw')))
    fs.writeFileSync(path.join(dir, 'worker-b.json'), JSON.stringify(makeEntry('worker', 'b')))
    const want = listOracle(a)
    assert.deepEqual(
      want.map((e) => e.entryId),
      ['worker-b', 'worker-\ufffd', 'worker-\ufffd', 'worker-\ufffd'],
    )
    assert.deepStrictEqual(await s.listEntries(a), want, name)
  }
})

test('session recovery takes a non-UTF-8 name under its decoded name, as readdir + stat do', { skip }, async () => {
  const sdk = await loadSdk()
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'pi-native-lossy-'))
  try {
    const assistant = (text) =>
      JSON.stringify({ type: 'message', id: 'a', parentId: null, timestamp: 't', message: { role: 'assistant', content: [{ type: 'text', text }], stopReason: 'stop' } }) + '\n'
    const header = JSON.stringify({ type: 'session', version: 3, id: 's', timestamp: 't', cwd: '/' }) + '\n'
    const cases = [
      // The decoded name is an empty file, newest; the one that decodes to it takes a second slot.
      ['collision fills the candidates', { a: '', aRaw: header + assistant('never read'), other: header + assistant('older') }, { maxFiles: 2 }],
      ['collision, room left', { a: '', aRaw: header + assistant('never read'), other: header + assistant('older') }, { maxFiles: 3 }],
      ['no collision: dropped', { aRaw: header + assistant('never read'), other: header + assistant('older') }, undefined],
      ['decoded name holds the answer', { a: header + assistant('decoded'), aRaw: '', other: header + assistant('older') }, { maxFiles: 1 }],
    ]
    const wanted = []
    for (const [label, files, options] of cases) {
      const dir = fs.mkdtempSync(path.join(root, 'd'))
      if (files.a !== undefined) fs.writeFileSync(path.join(dir, 'a\ufffd.jsonl'), files.a)
      const raw = rawName(dir, [0x61, 0xff], '.jsonl')
      fs.writeFileSync(raw, files.aRaw)
      fs.writeFileSync(path.join(dir, 'other.jsonl'), files.other)
      // The two `a` names are the newest: their mtime decides their place (stat follows the decoded name).
      if (files.a !== undefined) fs.utimesSync(path.join(dir, 'a\ufffd.jsonl'), 1_790_000_002, 1_790_000_002)
      fs.utimesSync(raw, 1_790_000_003, 1_790_000_003)
      fs.utimesSync(path.join(dir, 'other.jsonl'), 1_790_000_001, 1_790_000_001)
      const want = recoverOracle(sdk, dir, undefined, options)
      wanted.push(want?.text ?? null)
      for (const [name, s] of backends()) {
        const got = await s.recoverLastAssistantFromSession(dir, undefined, options)
        assert.deepStrictEqual(got, want, `${name}: ${label}`)
      }
    }
    // What Node's readdir + stat make of the cases: the duplicate takes a slot of its own.
    assert.deepEqual(wanted, [null, 'older', 'older', 'decoded'])
  } finally {
    fs.rmSync(root, { recursive: true, force: true })
  }
})
