'use strict'
// watchEntries watches a path, not an inode (issue 35, cases 1, 2, 5, 6): folders on the way
// renamed, removed, made again or moved back; a consumer slower than the changes; a relative
// agentDir and process.chdir; the `initial` option. Oracles: listEntries of the watched path
// (the view the events build must equal it once things are quiet) and the test's own moves
// (an entry written only into a folder that is not at the path is never reported; a remove
// comes only for an entry the consumer holds).
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const util = require('node:util')
const { spawn } = require('node:child_process')
const { root, backends, rmTree } = require('./helpers.js')
const { makeEntry, matrixDir } = require('./store-fixtures.js')
const { sleep, consume, converges, within } = require('./events-helpers.js')

// Wine keeps a removed folder that is watched until its watch closes and tells no watch of it
// meanwhile (Node's fs.watch alike): a removal on the path cannot be followed there.
const wineKeepsRemoved = process.env.PI_NATIVE_EMULATED === 'wine' && 'Wine: a watched folder removed is not announced until its watch closes'
// Windows itself refuses to rename a folder while a handle below it is open (every watch of the
// path holds one); Wine allows it, and the renames are followed there.
const windowsRefusesRenames = process.platform === 'win32' && process.env.PI_NATIVE_EMULATED !== 'wine' && 'Windows refuses to rename a folder above a watched one'

// Windows (and Wine, EBUSY) refuses to rename a folder while a file in it is open, so there the
// folder of an entry being read cannot leave the path under the read.
const windowsKeepsReadFolder = process.platform === 'win32' && 'Windows refuses to rename a folder while a file in it is open: a read cannot see its folder leave the path'

/** A fresh folder holding `agent/` (the agentDir): `{ top, a }`. */
function tree() {
  const top = fs.mkdtempSync(path.join(os.tmpdir(), 'pi-native-path-'))
  return { top, a: path.join(top, 'agent') }
}


/** An entry file written straight into `dir` (a matrix folder that may not be at the path). */
function writeInto(dir, entry) {
  fs.mkdirSync(dir, { recursive: true })
  fs.writeFileSync(path.join(dir, `${entry.entryId}.json`), `${JSON.stringify(entry, null, '\t')}\n`)
}

/**
 * Events about `ids` (entries written into a folder that is not at the watched path) from event
 * number `from` on: none may ever come. Checked after a later step at the path was seen (its
 * notices come after these files' in the kernel's order), never after a sleep; events about
 * other entries (a late `remove` of an entry the consumer may know of) are not counted.
 */
const about = (c, from, ids) => c.events.slice(from).filter((e) => ids.includes(e.entryId)).map((e) => [e.type, e.entryId])

for (const [name, s] of backends()) {
  test(`${name}: watchEntries follows the path when a folder on it is renamed away and back`, { skip: windowsRefusesRenames }, async () => {
    const { top, a } = tree()
    const ac = new AbortController()
    await s.writeEntry(a, makeEntry('master', 'before')) // present at the call: not news
    const c = consume(s.watchEntries(a, { signal: ac.signal }))
    try {
      await s.writeEntry(a, makeEntry('worker', 'w1'))
      await c.until((x) => x.view.has('worker-w1'), 15_000, 'the first write')
      // The parent of the matrix folder moves away: what the consumer holds is gone.
      fs.renameSync(path.join(a, 'state'), path.join(a, 'state.old'))
      await c.until((x) => !x.view.has('worker-w1'), 15_000, 'a remove for the entry the consumer holds')
      assert.deepEqual(c.valid(), {})
      // A write into the folder that moved away is not at the watched path: nothing.
      const away = c.events.length
      writeInto(path.join(a, 'state.old', 'process-matrix'), makeEntry('worker', 'away'))
      // A new folder made at the path is watched as on a first start.
      await s.writeEntry(a, makeEntry('worker', 'fresh'))
      await converges(s, c, a, 15_000, 'the entry of the new folder')
      assert.deepEqual(Object.keys(c.valid()), ['worker-fresh'])
      assert.deepEqual(about(c, away, ['worker-away']), [], 'nothing from the folder that moved away')
      // The new one moves out and the old one back: the view follows what is at the path.
      fs.renameSync(path.join(a, 'state'), path.join(a, 'state.new'))
      fs.renameSync(path.join(a, 'state.old'), path.join(a, 'state'))
      await converges(s, c, a, 15_000, 'the folder moved back')
      assert.deepEqual(Object.keys(c.valid()), ['master-before', 'worker-away', 'worker-w1'])
      // And the watch still hears writes at the path, and nothing from the folder moved out.
      const stray = c.events.length
      writeInto(path.join(a, 'state.new', 'process-matrix'), makeEntry('worker', 'stray'))
      await s.writeEntry(a, { ...makeEntry('worker', 'w1'), status: 'closed' })
      await c.until((x) => x.view.get('worker-w1')?.status === 'closed', 15_000, 'a write after the move back')
      assert.deepEqual(about(c, stray, ['worker-stray']), [])
      assert.deepEqual(c.faults, [])
    } finally {
      ac.abort()
      await c.done
      await rmTree(top)
    }
  })

  test(`${name}: watchEntries follows the path when the agentDir, or a folder above it, is renamed or removed`, { skip: windowsRefusesRenames }, async (t) => {
    const { top, a } = tree()
    const ac = new AbortController()
    const c = consume(s.watchEntries(a, { signal: ac.signal }))
    try {
      await s.writeEntry(a, makeEntry('master', 'm'))
      await s.writeEntry(a, makeEntry('worker', 'w'))
      await converges(s, c, a)
      assert.equal(c.view.size, 2)
      // The agentDir itself renamed.
      fs.renameSync(a, `${a}.moved`)
      await c.until((x) => x.view.size === 0, 15_000, 'removes when the agentDir moved')
      const moved = c.events.length
      writeInto(matrixDir(`${a}.moved`), makeEntry('worker', 'in-moved'))
      // Made again at the path.
      await s.writeEntry(a, makeEntry('worker', 'again'))
      await converges(s, c, a, 15_000, 'the agentDir made again')
      assert.deepEqual(about(c, moved, ['worker-in-moved']), [])
      // A folder above the agentDir renamed: top/agent → top2/agent.
      const top2 = `${top}-2`
      fs.renameSync(top, top2)
      await c.until((x) => x.view.size === 0, 15_000, 'removes when a folder above moved')
      // Written while its folder is not at the path: told only once the folder is back, as the
      // entry that is there then (one change, and no remove before it).
      const above = c.events.length
      writeInto(matrixDir(path.join(top2, 'agent')), makeEntry('worker', 'above'))
      fs.renameSync(top2, top) // back: its entries are at the path again
      await converges(s, c, a, 15_000, 'the folder above moved back')
      assert.deepEqual(Object.keys(c.valid()), ['worker-above', 'worker-again'])
      assert.deepEqual(about(c, above, ['worker-above']), [['change', 'worker-above']])
      // Removed outright, then made again.
      if (wineKeepsRemoved) {
        t.diagnostic(`the removal step skipped: ${wineKeepsRemoved}`)
      } else {
        await rmTree(path.join(a, 'state'))
        await c.until((x) => x.view.size === 0, 15_000, 'removes when the state folder was deleted')
        await s.writeEntry(a, makeEntry('master', 'reborn'))
        await converges(s, c, a, 15_000, 'the state folder made again')
        assert.deepEqual(Object.keys(c.valid()), ['master-reborn'])
      }
    } finally {
      ac.abort()
      await c.done
      await rmTree(top)
      await rmTree(`${top}-2`)
      await rmTree(`${a}.moved`)
    }
  })

  test(`${name}: a slow consumer: the folder moved away before it read what was noticed (a remove for all it may know of, nothing from the moved folder)`, async () => {
    const { top, a } = tree()
    const ac = new AbortController()
    const it = s.watchEntries(a, { signal: ac.signal })
    try {
      for (const id of ['a', 'b', 'c', 'd']) await s.writeEntry(a, makeEntry('worker', id))
      // The consumer takes one event, then the folder goes before it asks for more.
      const first = (await within(it.next(), 5000)).value.value
      assert.equal(first.type, 'change')
      fs.renameSync(matrixDir(a), `${matrixDir(a)}.old`)
      writeInto(`${matrixDir(a)}.old`, makeEntry('worker', 'e'))
      // The consumer comes back later (the notices of the move have had time to arrive; whether
      // they have or not, the answer below is the same: reads happen when it asks).
      await sleep(300)
      const c = consume(it)
      c.view.set(first.entryId, first.entry) // what the consumer held before
      // Each entry it was told of, or was noticed (the consumer may have listed it itself), is
      // gone once; `worker-e` was never at the path.
      await c.until((x) => x.events.length >= 4, 15_000, 'a remove for each entry it may know of')
      // A folder made at the path again: only its own entries, and nothing more of the old one.
      await s.writeEntry(a, makeEntry('master', 'new'))
      await converges(s, c, a, 15_000)
      assert.deepEqual(Object.keys(c.valid()), ['master-new'])
      const before = c.events.filter((e) => e.entryId !== 'master-new').map((e) => [e.type, e.entryId])
      assert.deepEqual(before.sort(), ['a', 'b', 'c', 'd'].map((id) => ['remove', `worker-${id}`]))
      assert.deepEqual(c.faults, [])
    } finally {
      ac.abort()
      await rmTree(top)
    }
  })

  test(`${name}: watchEntries with a relative agentDir resolves it once: a later process.chdir changes nothing`, async () => {
    const { top, a } = tree()
    const elsewhere = fs.mkdtempSync(path.join(os.tmpdir(), 'pi-native-cwd-'))
    const cwd = process.cwd()
    const ac = new AbortController()
    let c
    try {
      process.chdir(top)
      c = consume(s.watchEntries('agent', { signal: ac.signal }))
      await s.writeEntry(a, makeEntry('worker', 'w1'))
      await c.until((x) => x.view.has('worker-w1'), 5000, 'the first write')
      process.chdir(elsewhere) // 'agent' now names nothing
      await s.writeEntry(a, { ...makeEntry('worker', 'w1'), status: 'closed' })
      await s.writeEntry(a, makeEntry('worker', 'w2'))
      await c.until((x) => x.view.has('worker-w2'), 5000, 'a write after the chdir')
      await converges(s, c, a)
      assert.deepEqual(c.events.map((e) => [e.type, e.entryId]), [
        ['change', 'worker-w1'],
        ['change', 'worker-w1'],
        ['change', 'worker-w2'],
      ])
      assert.equal(c.view.get('worker-w1').status, 'closed')
    } finally {
      process.chdir(cwd)
      ac.abort()
      await c?.done
      await rmTree(top)
      await rmTree(elsewhere)
    }
  })

  test(`${name}: watchEntries(agentDir, { initial: true }) yields every entry present first, then the changes`, async () => {
    const { top, a } = tree()
    const ac = new AbortController()
    try {
      const present = ['c', 'a', 'b'].map((id) => makeEntry('worker', id))
      for (const e of present) await s.writeEntry(a, e)
      fs.writeFileSync(path.join(matrixDir(a), 'broken.json'), '{ not json')
      const it = s.watchEntries(a, { signal: ac.signal, initial: true })
      await s.writeEntry(a, makeEntry('master', 'later'))
      const got = []
      for (let i = 0; i < 5; i++) {
        const next = await within(it.next(), 15_000)
        assert.ok(next, `event ${i + 1} of 5 came (got ${JSON.stringify(got.map((e) => e.entryId))})`)
        got.push(next.value.value)
      }
      // The entries present at the call, in listing order (an invalid file as readEntry has it),
      // then the change made after it. The listing is made off the JS thread after the call: a
      // write that lands before it is listed with the others (in its listing place), once.
      const later = ['change', 'master-later', 'master-later']
      const listed = [
        ['change', 'broken', undefined],
        ['change', 'worker-a', 'worker-a'],
        ['change', 'worker-b', 'worker-b'],
        ['change', 'worker-c', 'worker-c'],
      ]
      const events = got.map((e) => [e.type, e.entryId, e.entry?.entryId])
      const afterListing = [...listed, later]
      const inListing = [listed[0], later, ...listed.slice(1)]
      assert.ok(
        util.isDeepStrictEqual(events, afterListing) || util.isDeepStrictEqual(events, inListing),
        `the entries present first, in listing order, then the later one: ${JSON.stringify(events)}`,
      )
      // A folder that does not exist yet: nothing to begin with, then its entries.
      const b = path.join(top, 'other')
      const c = consume(s.watchEntries(b, { signal: ac.signal, initial: true }))
      await s.writeEntry(b, makeEntry('worker', 'x'))
      await converges(s, c, b, 15_000)
      assert.deepEqual(c.events.map((e) => [e.type, e.entryId]), [['change', 'worker-x']], 'nothing to begin with, then its entry')
    } finally {
      ac.abort()
      await rmTree(top)
    }
  })

  test(`${name}: initial: true while another process writes: nothing missed between the listing and the watch`, async () => {
    const { top, a } = tree()
    const ac = new AbortController()
    const WRITER = `
      const s = require(process.argv[1])
      const agentDir = process.argv[2]
      ;(async () => {
        for (let i = 0; i < 150; i++) {
          const id = 'w' + (i % 25)
          if (i % 7 === 3) await s.removeEntry(agentDir, 'worker-' + id)
          else await s.writeEntry(agentDir, { ...JSON.parse(process.argv[3]), entryId: 'worker-' + id, taskRef: String(i) })
          if (i === 20) console.log('go')
        }
      })()`
    const writer = spawn(process.execPath, ['-e', WRITER, path.join(root, 'lib', 'index.js'), a, JSON.stringify(makeEntry('worker', 'w'))], {
      stdio: ['ignore', 'pipe', 'inherit'],
      env: { ...process.env, PI_NATIVE_BACKEND: name },
    })
    try {
      await new Promise((r) => writer.stdout.once('data', r)) // in the middle of its writes
      const c = consume(s.watchEntries(a, { signal: ac.signal, initial: true }), { delayMs: 2 })
      assert.equal(await new Promise((r) => writer.once('exit', r)), 0)
      await converges(s, c, a, 10000)
    } finally {
      writer.kill()
      ac.abort()
      await rmTree(top)
    }
  })

  // An event carries what the path held. A read that opened the entry's file at the path, then
  // saw its folder moved away and the file rewritten in place there (a writer that does not
  // rename, into a folder no longer at the path), must not report that content: the torture
  // test met it once on the JS backend (arm64, CI), as "never at the path". Here: 2000 rounds of
  // a write at the path, a pause of 0-3 ms for the watch to start reading, then the folder moved
  // away, its file rewritten in place with a token that was never at the path, a new folder made.
  test(`${name}: a file rewritten in place after its folder left the path is never reported (2000 rounds)`, { skip: windowsKeepsReadFolder, timeout: 120_000 }, async () => {
    const { top, a } = tree()
    const matrix = matrixDir(a)
    fs.mkdirSync(matrix, { recursive: true })
    const legit = new Set()
    const ac = new AbortController()
    const c = consume(s.watchEntries(a, { signal: ac.signal }), {
      check: (ev) => (ev.type === 'change' && ev.entry && !legit.has(ev.entry.taskRef) ? `${ev.entryId} with ${ev.entry.taskRef}, never at the path` : undefined),
    })
    try {
      for (let i = 0; i < 2000; i++) {
        legit.add(`at-${i}`)
        await s.writeEntry(a, makeEntry('worker', 'x', { taskRef: `at-${i}` }))
        await sleep(Math.random() * 3)
        const away = path.join(top, `away-${i}`)
        fs.renameSync(matrix, away)
        writeInto(away, makeEntry('worker', 'x', { taskRef: `away-${i}` }))
        fs.mkdirSync(matrix)
      }
      await converges(s, c, a, 10000)
      assert.deepEqual(c.faults, [])
    } finally {
      ac.abort()
      await rmTree(top)
    }
  })
}
