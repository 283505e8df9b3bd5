'use strict'
// Several JS copies of pi-native in one process (issue 35, case 4): a `delete require.cache`
// reload (jest/vitest resetModules), two installed copies in two folders sharing one platform
// package, and worker threads each holding copies of their own. One native binding serves
// the copies of an environment; each copy must receive exactly its own notices: every wait
// settles, every watch sees the change, no copy's notices go to another.
const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { Worker } = require('node:worker_threads')
const { root, liveChild } = require('./helpers.js')
const { makeEntry, tempAgentDir } = require('./store-fixtures.js')
const { within } = require('./events-helpers.js')

/** Load `file` afresh: every cached JS module of the package is dropped first (not the .node). */
function freshRequire(file, under = root) {
  for (const k of Object.keys(require.cache)) {
    if (k.startsWith(under + path.sep) && k.endsWith('.js') && !k.includes(`${path.sep}node_modules${path.sep}`)) delete require.cache[k]
  }
  return require(file)
}

/**
 * What each copy does, in two rounds that interleave the copies (so each copy also starts
 * watches after the other one started its own): wait for some of the pids and watch the
 * agentDir. Resolves with how many waits each copy saw settle and, per copy, what each of its
 * two watches saw up to `entryId`.
 */
async function exercise(copies, pids, agentDir, trigger, entryId) {
  const ac = new AbortController()
  const settled = copies.map(() => 0)
  const waits = []
  const seen = copies.map(() => [])
  for (const round of [0, 1]) {
    copies.forEach((s, i) => {
      for (const pid of pids.filter((_, j) => j % 2 === round)) {
        waits.push(s.waitForProcessExit(pid, { signal: ac.signal }).then(() => settled[i]++))
      }
      const it = s.watchEntries(agentDir, { signal: ac.signal })
      seen[i].push(
        (async () => {
          const ids = []
          for await (const ev of it) {
            ids.push(ev.entryId)
            if (ev.entryId === entryId) break
          }
          return ids
        })(),
      )
    })
  }
  try {
    await trigger()
    const all = await within(Promise.all([Promise.all(waits), Promise.all(seen.map((w) => Promise.all(w)))]), 5000)
    assert.ok(all, `every copy hears of its own: waits settled ${JSON.stringify(settled)} of ${pids.length}`)
    return { settled, seen: all.value[1] }
  } finally {
    ac.abort()
  }
}

async function children(n) {
  const kids = Array.from({ length: n }, () => liveChild())
  await Promise.all(kids.map((k) => new Promise((r) => k.once('spawn', r))))
  return kids
}

for (const backend of ['native', 'js']) {
  test(`${backend}: two loads of lib/ in one environment (require.cache cleared between) each get their own notices`, async () => {
    const file = path.join(root, 'lib', backend === 'native' ? 'native.js' : '../js/index.js')
    const first = freshRequire(file)
    const second = freshRequire(file)
    assert.notEqual(first, second, 'two copies of the JS layer')
    const kids = await children(3)
    const a = tempAgentDir()
    try {
      // Waits and watches made by both copies are all live when the events happen.
      const out = await exercise([first, second], kids.map((k) => k.pid), a, async () => {
        for (const k of kids) k.kill('SIGKILL')
        await first.writeEntry(a, makeEntry('master', 'both'))
      }, 'master-both')
      assert.deepEqual(out, { settled: [3, 3], seen: [[['master-both'], ['master-both']], [['master-both'], ['master-both']]] })
      // The first copy keeps working after the second was made (and the other way round).
      const [k] = await children(1)
      const w1 = first.waitForProcessExit(k.pid)
      const w2 = second.waitForProcessExit(k.pid)
      k.kill('SIGKILL')
      assert.deepEqual(await within(Promise.all([w1, w2]), 5000), { value: [true, true] })
    } finally {
      for (const k of kids) k.kill('SIGKILL')
      fs.rmSync(a, { recursive: true, force: true })
    }
  })
}

/** The platform package of this machine's binary: `{ file, name, version }`, or undefined. */
function platformPackage() {
  // The package root may hold cross-built binaries of other platforms too.
  const file = fs.readdirSync(root).find((n) => n.startsWith(`pi-native.${process.platform}-${process.arch}`) && n.endsWith('.node'))
  if (!file) return undefined
  for (const dir of fs.readdirSync(path.join(root, 'npm'))) {
    const pkg = JSON.parse(fs.readFileSync(path.join(root, 'npm', dir, 'package.json'), 'utf8'))
    if (pkg.main === file) return { file, name: pkg.name, version: pkg.version }
  }
  return undefined
}

test('native: two installed copies in two folders sharing one platform package each get their own notices', async (t) => {
  const plat = platformPackage()
  if (!plat) return t.skip('no binary of a known platform package at the package root')
  // tmp/node_modules/<platform package>  (hoisted: both copies load this one binary)
  // tmp/host-{a,b}/node_modules/pi-native  (package.json, loader, lib, js; no binary of their own)
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'pi-native-copies-'))
  // The JS backend's dependencies (unused while the binary loads) beside the shared binary.
  for (const dep of ['proper-lockfile', 'graceful-fs', 'retry', 'signal-exit']) {
    const from = path.join(root, 'node_modules', dep)
    if (fs.existsSync(from)) fs.cpSync(from, path.join(tmp, 'node_modules', dep), { recursive: true })
  }
  const shared = path.join(tmp, 'node_modules', plat.name)
  fs.mkdirSync(shared, { recursive: true })
  fs.writeFileSync(path.join(shared, 'package.json'), JSON.stringify({ name: plat.name, version: plat.version, main: plat.file }))
  fs.copyFileSync(path.join(root, plat.file), path.join(shared, plat.file))
  const copies = ['host-a', 'host-b'].map((host) => {
    const dir = path.join(tmp, host, 'node_modules', 'pi-native')
    fs.mkdirSync(dir, { recursive: true })
    for (const n of ['package.json', 'index.js', 'lib', 'js']) fs.cpSync(path.join(root, n), path.join(dir, n), { recursive: true })
    return dir
  })
  const kids = await children(2)
  const a = tempAgentDir()
  try {
    const env = { ...process.env }
    delete process.env.PI_NATIVE_BACKEND
    const [one, two] = copies.map((dir) => require(path.join(dir, 'lib', 'index.js')))
    Object.assign(process.env, env)
    assert.equal(one.backend, 'native')
    assert.equal(two.backend, 'native')
    assert.notEqual(one.waitForProcessExit, two.waitForProcessExit)
    const out = await exercise([one, two], kids.map((k) => k.pid), a, async () => {
      for (const k of kids) k.kill('SIGKILL')
      await one.writeEntry(a, makeEntry('worker', 'two-hosts'))
    }, 'worker-two-hosts')
    assert.deepEqual(out, { settled: [2, 2], seen: [[['worker-two-hosts'], ['worker-two-hosts']], [['worker-two-hosts'], ['worker-two-hosts']]] })
  } finally {
    for (const k of kids) k.kill('SIGKILL')
    fs.rmSync(a, { recursive: true, force: true })
    try {
      fs.rmSync(tmp, { recursive: true, force: true })
    } catch (err) {
      // Windows cannot delete a binary loaded in this process: it goes with the temp folder.
      if (process.platform !== 'win32' || err.code !== 'EPERM') throw err
    }
  }
})

const WORKER = `
const { workerData, parentPort } = require('node:worker_threads')
const path = require('node:path')
const load = () => {
  for (const k of Object.keys(require.cache)) if (k.startsWith(workerData.root + path.sep) && k.endsWith('.js')) delete require.cache[k]
  return require(workerData.file)
}
const copies = [load(), load()]
const settled = [0, 0]
const seen = [[], []]
const waits = copies.flatMap((s, i) => workerData.pids.map((pid) => s.waitForProcessExit(pid).then(() => settled[i]++)))
const watched = copies.map(async (s, i) => {
  for await (const ev of s.watchEntries(workerData.agentDir)) {
    seen[i].push(ev.entryId)
    if (ev.entryId === workerData.entryId) break
  }
})
parentPort.postMessage('ready')
Promise.all([...waits, ...watched]).then(() => parentPort.postMessage({ settled, seen }))
`

for (const backend of ['native', 'js']) {
  test(`${backend}: workers and the main thread, two copies each, each get exactly their own notices`, async () => {
    const file = path.join(root, backend === 'native' ? 'lib/native.js' : 'js/index.js')
    const kids = await children(4)
    const pids = kids.map((k) => k.pid)
    const a = tempAgentDir()
    const workers = [0, 1].map(() => new Worker(WORKER, { eval: true, workerData: { root, file, pids, agentDir: a, entryId: 'master-threads' } }))
    try {
      const results = workers.map((w) => new Promise((resolve, reject) => {
        w.on('message', (m) => m !== 'ready' && resolve(m))
        w.once('error', reject)
      }))
      await Promise.all(workers.map((w) => new Promise((r) => w.once('message', r))))
      const mine = [freshRequire(file), freshRequire(file)]
      const out = await exercise(mine, pids, a, async () => {
        for (const k of kids) k.kill('SIGKILL')
        await mine[0].writeEntry(a, makeEntry('master', 'threads'))
      }, 'master-threads')
      assert.deepEqual(out, { settled: [4, 4], seen: [[['master-threads'], ['master-threads']], [['master-threads'], ['master-threads']]] })
      const theirs = await within(Promise.all(results), 5000)
      const expected = { settled: [4, 4], seen: [['master-threads'], ['master-threads']] }
      assert.deepEqual(theirs, { value: [expected, expected] })
    } finally {
      for (const k of kids) k.kill('SIGKILL')
      await Promise.all(workers.map((w) => w.terminate()))
      fs.rmSync(a, { recursive: true, force: true })
    }
  })
}
