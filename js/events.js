'use strict'
// Pure-JavaScript supervision primitives, for lib/contract/events.js: no process-exit watch
// (every wait is probed), folders watched with `fs.watch`, listed with `opendir` (and `lstat`
// where polled), and network file systems told apart by `fs.statfs` (Linux; elsewhere every
// folder counts as local).
const fs = require('node:fs')
const fsp = require('node:fs/promises')
const path = require('node:path')

// statfs magics of network and FUSE file systems (js/remote.js, the one table of the JS side).
const { REMOTE_MAGIC } = require('./remote.js')
const { Slices } = require('../lib/contract/slices.js')

/** Folder watches over `fs.watch`, in the shape the contract layer asks for. */
function createDirWatch() {
  return {
    mode: () => 'fs.watch',
    /** A channel of its own for each copy of the contract layer that opens one. */
    open(onEvent) {
      let held = true
      let next = 1
      const watchers = new Map()
      return {
        add(dir, child) {
          const id = next++
          const self = path.basename(dir)
          const watcher = fs.watch(dir, { persistent: held }, (type, name) => {
            if (typeof name !== 'string') onEvent(id, null)
            else if (child === null ? name.endsWith('.json') : name === child && type === 'rename') onEvent(id, [name])
            // Linux reports the watched folder's own removal or move under its own name.
            else if (name === self && type === 'rename') onEvent(id, null)
          })
          // An error (Windows: the folder deleted) means: look again.
          watcher.on('error', () => onEvent(id, null))
          watchers.set(id, watcher)
          return id
        },
        cancel(id) {
          watchers.get(id)?.close()
          watchers.delete(id)
        },
        ref(on) {
          held = on
          for (const w of watchers.values()) on ? w.ref() : w.unref()
        },
      }
    },
  }
}

/**
 * name → signature of the `*.json` files of `dir` (empty when it is missing). Listed with
 * `opendir`, a batch of names at a time: `readdir` hands a large folder's names to the JS thread
 * at once (~100 ms for 200,000). The signatures are left empty on a folder `isRemote` finds
 * local, as the native backend's are: only a polled folder compares them (lib/contract/events.js),
 * and 200,000 `lstat`s took 10 s there, their strings kept as long as the watch.
 */
async function scan(dir) {
  const names = []
  try {
    for await (const d of await fsp.opendir(dir, { bufferSize: 256 })) if (d.name.endsWith('.json')) names.push(d.name)
  } catch (err) {
    if (err.code === 'ENOENT' || err.code === 'ENOTDIR') return new Map()
    // The error readdir gives (syscall 'scandir', as the native backend reports it).
    throw await fsp.readdir(dir).then(
      () => err,
      (e) => e,
    )
  }
  const out = new Map()
  if (!(await isRemote(dir))) {
    const slices = new Slices()
    for (let i = 0; i < names.length; i++) {
      out.set(names[i], '')
      if ((i & 1023) === 1023 && slices.due()) await slices.pause()
    }
    return out
  }
  for (const name of names) {
    try {
      const st = await fsp.lstat(path.join(dir, name), { bigint: true })
      out.set(name, `${st.ino}:${st.size}:${st.mtimeNs}:${st.ctimeNs}`)
    } catch {} // gone since the listing
  }
  return out
}

async function isRemote(dir) {
  if (process.platform !== 'linux') return false
  try {
    return REMOTE_MAGIC.has(Number((await fsp.statfs(dir)).type) >>> 0)
  } catch {
    return false
  }
}

module.exports = { createDirWatch, scan, isRemote, REMOTE_MAGIC }
