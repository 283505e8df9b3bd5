'use strict'
// Supervision events, shared by both backends: `waitForProcessExit` (its promise,
// AbortSignal, `ref`, and the probing fallback) and `watchEntries` (its async iterable, the
// folders on the way to a matrix folder that does not exist yet, the coalescing per entry, and
// the polling of folders whose notifications miss other machines' changes). A backend supplies:
//   exitWatch   { mode(), start(onExit(id)), add(pid, startTimeMs?) → id > 0 | 0 (ended) |
//                 -1 (cannot watch: probe), cancel(id), ref(on) }, or null (probe every wait)
//   ended(pid, startTimeMs?) → true once that process has ended (the probe)
//   dirWatch    { mode(), start(onEvent(id, name | null)), add(dir, child?) → id (throws as
//                 fs.watch does), cancel(id), ref(on) }: the names of `*.json` files of `dir`
//                 (with `child`: that name only) that changed; null means "look again"
//   scan(dir)   → Promise<Map<name, signature>> of the `*.json` files ([] when `dir` is missing)
//   isRemote(dir) → Promise<boolean>: a network or FUSE file system (then it also polls)
//   readEntry(agentDir, entryId) → what the store's readEntry answers
const fsp = require('node:fs/promises')
const fs = require('node:fs')
const path = require('node:path')
const { isDeepStrictEqual } = require('node:util')
const { processMatrixDir, entryPath } = require('./paths.js')
const { invalidArgType, invalidArgValue } = require('./errors.js')

/** How often a process the kernel cannot watch is probed (the JS backend probes them all). */
const EXIT_PROBE_INTERVAL_MS = 250
/** How often a matrix folder on a network or FUSE file system is listed. */
const ENTRY_POLL_INTERVAL_MS = 1000

const isPositivePid = (x) => Number.isInteger(x) && x >= 1 && x <= 0x7fffffff

/** `target` of waitForProcessExit: `{ pid, startTimeMs? }`, or a TypeError naming it. */
function exitTarget(target) {
  if (typeof target === 'number') {
    if (!isPositivePid(target)) throw invalidArgValue('target', 'must be a positive int32 pid', target)
    return { pid: target, startTimeMs: undefined }
  }
  if (target === null || typeof target !== 'object') {
    throw invalidArgType('target', 'a positive int32 pid or a process identity ({ pid, startTimeMs })', target)
  }
  const { pid, startTimeMs } = target
  if (typeof pid !== 'number' || !isPositivePid(pid)) {
    throw invalidArgValue('target', 'must have a positive int32 "pid"', target)
  }
  if (typeof startTimeMs !== 'number' || !Number.isFinite(startTimeMs)) {
    throw invalidArgValue('target', 'must have a finite numeric "startTimeMs"', target)
  }
  return { pid, startTimeMs }
}

/** Node's `validateAbortSignal`: undefined, or something with `aborted`. */
function abortSignal(signal) {
  if (signal !== undefined && (signal === null || typeof signal !== 'object' || !('aborted' in signal))) {
    throw invalidArgType('options.signal', 'an instance of AbortSignal', signal)
  }
  return signal
}

/** `{ signal, ref }` of waitForProcessExit (`ref` defaults to true). */
function exitOptions(options) {
  if (options === undefined || options === null) return { signal: undefined, ref: true }
  if (typeof options !== 'object') throw invalidArgType('options', 'of type object', options)
  const signal = abortSignal(options.signal)
  const ref = options.ref
  if (ref !== undefined && typeof ref !== 'boolean') throw invalidArgType('options.ref', 'of type boolean', ref)
  return { signal, ref: ref !== false }
}

/** `{ signal }` of watchEntries. */
function watchOptions(options) {
  if (options === undefined || options === null) return { signal: undefined }
  if (typeof options !== 'object') throw invalidArgType('options', 'of type object', options)
  return { signal: abortSignal(options.signal) }
}

/** signal → { fns, listener }: the one 'abort' listener of each signal in use (see onAbort). */
const abortCallbacks = new WeakMap()

/**
 * Call `fn` when `signal` aborts; the returned function stops that. However many waits and
 * watches share a signal (a supervisor often ends all of its own with one), the signal gets one
 * listener: Node warns (MaxListenersExceededWarning) past ten on one AbortSignal.
 */
function onAbort(signal, fn) {
  let entry = abortCallbacks.get(signal)
  if (entry === undefined) {
    const fns = new Set()
    const listener = () => {
      abortCallbacks.delete(signal)
      for (const f of fns) f()
    }
    entry = { fns, listener }
    abortCallbacks.set(signal, entry)
    signal.addEventListener('abort', listener, { once: true })
  }
  const mine = entry
  mine.fns.add(fn)
  return () => {
    if (!mine.fns.delete(fn) || mine.fns.size > 0 || abortCallbacks.get(signal) !== mine) return
    abortCallbacks.delete(signal)
    signal.removeEventListener('abort', mine.listener)
  }
}

// ---- waitForProcessExit ------------------------------------------------------------------------

/**
 * The probe of a backend's public liveness functions: dead or a zombie; with a start time, no
 * longer that process. Where the backend reads no identities (the JS backend off Linux), the
 * pid alone decides.
 */
function probeEnded(liveness) {
  let identities
  return (pid, startTimeMs) => {
    identities ??= liveness.getProcessIdentity(process.pid) !== undefined
    if (startTimeMs !== undefined && identities) return !liveness.isSameProcess({ pid, startTimeMs })
    const state = liveness.probePid(pid)
    return state === 'dead' || state === 'zombie'
  }
}

/** `waitForProcessExit` and `exitWatchMode` over a backend's exit watch and probe. */
function createExitWaits({ exitWatch, ended }) {
  /** Waits the kernel watches, by watch id. */
  const watched = new Map()
  /** Waits that are probed. */
  const probed = new Set()
  let started = false
  let heldByKernel = 0 // kernel waits that keep the event loop alive
  let timer = null

  function onExit(id) {
    const w = watched.get(id)
    if (w !== undefined) done(w, true)
  }

  /** Settle `w` (true: resolve; else reject with the signal's reason) and forget it. */
  function done(w, exited) {
    if (w.id > 0) {
      watched.delete(w.id)
      if (!exited) exitWatch.cancel(w.id)
      if (w.ref && --heldByKernel === 0) exitWatch.ref(false)
    } else {
      probed.delete(w)
      probeTimer()
    }
    w.offAbort?.()
    if (exited) w.resolve(true)
    else w.reject(w.signal.reason)
  }

  /** One probe timer for every probed wait, holding the loop only for those that ask it to. */
  function probeTimer() {
    if (probed.size === 0) {
      if (timer !== null) clearInterval(timer)
      timer = null
      return
    }
    if (timer === null) timer = setInterval(probeAll, EXIT_PROBE_INTERVAL_MS)
    let hold = false
    for (const w of probed) hold ||= w.ref
    if (hold) timer.ref()
    else timer.unref()
  }

  function probeAll() {
    for (const w of [...probed]) if (ended(w.pid, w.startTimeMs)) done(w, true)
  }

  /**
   * Resolves `true` once the process `target` names (a pid, or an identity from
   * getProcessIdentity) has ended; rejects with `options.signal`'s reason when it aborts first.
   */
  function waitForProcessExit(target, options) {
    try {
      const { pid, startTimeMs } = exitTarget(target)
      const { signal, ref } = exitOptions(options)
      if (signal?.aborted) return Promise.reject(signal.reason)
      let id = -1
      if (exitWatch !== null) {
        if (!started) {
          exitWatch.start(onExit)
          started = true
        }
        id = exitWatch.add(pid, startTimeMs)
      }
      if (id === 0 || (id < 0 && ended(pid, startTimeMs))) return Promise.resolve(true)
      const w = { pid, startTimeMs, ref, signal, id, resolve: null, reject: null, offAbort: null }
      const promise = new Promise((resolve, reject) => {
        w.resolve = resolve
        w.reject = reject
      })
      if (id > 0) {
        watched.set(id, w)
        if (ref && heldByKernel++ === 0) exitWatch.ref(true)
      } else {
        probed.add(w)
        probeTimer()
      }
      if (signal) {
        w.offAbort = onAbort(signal, () => done(w, false))
      }
      return promise
    } catch (err) {
      return Promise.reject(err)
    }
  }

  /** How exits are watched: `pidfd`, `kqueue`, `process-handle`, or `probe`. */
  function exitWatchMode() {
    return exitWatch === null ? 'probe' : exitWatch.mode()
  }

  return { waitForProcessExit, exitWatchMode }
}

// ---- watchEntries ------------------------------------------------------------------------------

/** The `*.json` entry file names of a folder's listing, as entry ids. */
const entryIdOf = (name) => name.slice(0, -'.json'.length)

/** The folder's identity (device and inode), or undefined when it is not a folder. */
function folderId(dir) {
  try {
    const st = fs.statSync(dir)
    return st.isDirectory() ? `${st.dev}:${st.ino}` : undefined
  } catch {
    return undefined
  }
}

/** `watchEntries` over a backend's folder watch, listing, and readEntry. */
function createEntryWatches({ dirWatch, scan, isRemote, readEntry }) {
  /** Open watches of this environment by folder-watch id. */
  const byWatch = new Map()
  let started = false
  let open = 0 // iterators that keep the event loop alive

  function onEvent(id, name) {
    const it = byWatch.get(id)
    if (it !== undefined) it.notice(name)
  }

  /** One watchEntries iteration: what changed, coalesced per entry until the consumer asks. */
  class EntryEvents {
    #agentDir
    #dir
    #offAbort = null
    /** Entry ids to look at, in the order they were first noticed. */
    #pending = new Set()
    /** entryId → { exists, entry } last yielded. */
    #yielded = new Map()
    /** name → signature of the last listing (polled folders only). */
    #known = null
    #watch = null // { id, dir, folder, child }
    #poll = null
    #wake = null
    #closed = false
    #error = null
    #chain = Promise.resolve()

    constructor(agentDir, signal) {
      this.#agentDir = agentDir
      this.#dir = path.resolve(processMatrixDir(agentDir))
      if (!started) {
        dirWatch.start(onEvent)
        started = true
      }
      if (open++ === 0) dirWatch.ref(true)
      if (signal) {
        this.#offAbort = onAbort(signal, () => this.#close(signal.reason))
      }
      this.#attach(false, true)
      if (!this.#closed) this.#checkRemote()
    }

    /** A name from the folder watch (null: look again). */
    notice(name) {
      if (this.#closed) return
      const w = this.#watch
      if (name === null || w === null || w.child !== null) {
        this.#attach(name === null)
        return
      }
      this.#note(entryIdOf(name))
    }

    #note(entryId) {
      this.#pending.add(entryId)
      const wake = this.#wake
      this.#wake = null
      wake?.()
    }

    /**
     * Watch the matrix folder, or, while it does not exist, the nearest folder on the way to
     * it for the next name down. `force` re-watches even an unchanged folder (its watch may be
     * dead, or notices were lost). At the call (`initial`) what the folder holds is no news.
     */
    #attach(force, initial = false) {
      try {
        // What was watched before this call (the comparisons below are against it).
        let was = this.#watch
        for (let tries = 0; ; tries++) {
          let target = this.#dir
          let child = null
          let folder = folderId(target)
          while (folder === undefined && path.dirname(target) !== target) {
            child = path.basename(target)
            target = path.dirname(target)
            folder = folderId(target)
          }
          const cur = this.#watch
          if (!force && cur !== null && cur.dir === target && cur.folder === folder) return
          if (cur !== null) {
            byWatch.delete(cur.id)
            dirWatch.cancel(cur.id)
            this.#watch = null
          }
          if (folder === undefined) {
            throw Object.assign(new Error(`ENOENT: no folder to watch on the way to '${this.#dir}'`), { code: 'ENOENT' })
          }
          let id
          try {
            id = dirWatch.add(target, child)
          } catch (err) {
            // Gone between the look and the watch: look again (a few times at most).
            if ((err?.code === 'ENOENT' || err?.code === 'ENOTDIR') && tries < 8) continue
            throw err
          }
          this.#watch = { id, dir: target, folder, child }
          byWatch.set(id, this)
          const atMatrix = child === null
          const wasAtMatrix = was !== null && was.child === null
          if (atMatrix && !initial && (!wasAtMatrix || was.folder !== folder || force)) {
            // The folder appeared, was replaced, or notices were lost: all of it is news.
            this.#rescan(true)
          } else if (!atMatrix && wasAtMatrix) {
            // The folder went away: every entry seen in it is gone (or comes back in a new one).
            for (const [id, s] of this.#yielded) if (s.exists) this.#note(id)
            if (this.#known !== null) for (const name of this.#known.keys()) this.#note(entryIdOf(name))
            if (this.#known !== null) this.#known = new Map()
          }
          // The next folder down may have appeared before its watch was in place.
          if (atMatrix || folderId(path.join(target, child)) === undefined) return
          was = this.#watch
          force = false
          initial = false // it did not exist at the call: what it holds is news
        }
      } catch (err) {
        this.#close(err)
      }
    }

    /** List the matrix folder: every entry in it (`all`), or those that changed since the last listing. */
    #rescan(all) {
      scan(this.#dir).then(
        (now) => {
          if (this.#closed) return
          const before = this.#known
          for (const [name, sig] of now) {
            if (all || before === null || before.get(name) !== sig) this.#note(entryIdOf(name))
          }
          if (before !== null) for (const name of before.keys()) if (!now.has(name)) this.#note(entryIdOf(name))
          if (all) for (const [id, s] of this.#yielded) if (s.exists && !now.has(`${id}.json`)) this.#note(id)
          if (before !== null || this.#poll !== null) this.#known = now
        },
        () => {}, // unreadable this time (a network hiccup): the next look decides
      )
    }

    /** On a network or FUSE file system, also list the folder every ENTRY_POLL_INTERVAL_MS. */
    #checkRemote() {
      let on = this.#dir
      while (folderId(on) === undefined && path.dirname(on) !== on) on = path.dirname(on)
      isRemote(on).then(
        (remote) => {
          if (!remote || this.#closed) return
          // The first listing is the baseline: only later changes are news.
          scan(this.#dir).then(
            (now) => {
              if (this.#closed) return
              this.#known = now
              this.#poll = setInterval(() => this.#rescan(false), ENTRY_POLL_INTERVAL_MS)
            },
            () => {},
          )
        },
        () => {},
      )
    }

    /** What readEntry answers for the entry now, and whether its file exists. */
    async #read(entryId) {
      const entry = await readEntry(this.#agentDir, entryId)
      if (entry !== undefined) return { exists: true, entry }
      try {
        await fsp.lstat(entryPath(this.#agentDir, entryId))
        return { exists: true, entry: undefined }
      } catch {
        return { exists: false, entry: undefined }
      }
    }

    /** End: free the watch and the timer; `error` (if any) is what the next `next()` rejects with. */
    #close(error) {
      if (this.#closed) return
      this.#closed = true
      if (error !== undefined) this.#error = { error }
      if (this.#watch !== null) {
        byWatch.delete(this.#watch.id)
        dirWatch.cancel(this.#watch.id)
        this.#watch = null
      }
      if (this.#poll !== null) clearInterval(this.#poll)
      this.#poll = null
      this.#offAbort?.()
      if (--open === 0) dirWatch.ref(false)
      this.#pending.clear()
      const wake = this.#wake
      this.#wake = null
      wake?.()
    }

    async #next() {
      for (;;) {
        if (this.#closed) {
          const failed = this.#error
          this.#error = null
          if (failed !== null) throw failed.error
          return { value: undefined, done: true }
        }
        const [entryId] = this.#pending
        if (entryId === undefined) {
          await new Promise((resolve) => (this.#wake = resolve))
          continue
        }
        this.#pending.delete(entryId)
        const now = await this.#read(entryId)
        if (this.#closed) continue
        const last = this.#yielded.get(entryId)
        if (last !== undefined && last.exists === now.exists && isDeepStrictEqual(last.entry, now.entry)) continue
        this.#yielded.set(entryId, now)
        return { value: { type: now.exists ? 'change' : 'remove', entryId, entry: now.entry }, done: false }
      }
    }

    /** The next event (calls are answered one after another, in order). */
    next() {
      const result = this.#chain.then(() => this.#next())
      this.#chain = result.catch(() => {})
      return result
    }

    /** Stop watching (a `break` out of `for await` calls this). */
    return() {
      this.#close()
      return Promise.resolve({ value: undefined, done: true })
    }

    [Symbol.asyncIterator]() {
      return this
    }
  }

  /** A closed iteration that rejects its first `next()` with `error`. */
  function failed(error) {
    let given = false
    return {
      next: () => (given ? Promise.resolve({ value: undefined, done: true }) : ((given = true), Promise.reject(error))),
      return: () => ((given = true), Promise.resolve({ value: undefined, done: true })),
      [Symbol.asyncIterator]() {
        return this
      },
    }
  }

  /**
   * The changes of the process-matrix entries of `agentDir` from now on, by any process, as an
   * async iterable of `{ type: 'change' | 'remove', entryId, entry }`.
   */
  function watchEntries(agentDir, options) {
    let signal
    try {
      processMatrixDir(agentDir) // path.join's TypeError for a non-string agentDir
      signal = watchOptions(options).signal
    } catch (err) {
      return failed(err)
    }
    if (signal?.aborted) return failed(signal.reason)
    return new EntryEvents(agentDir, signal)
  }

  /** How folders are watched: `inotify`, `kqueue`, `ReadDirectoryChangesW` or `fs.watch`. */
  function entryWatchMode() {
    return dirWatch.mode()
  }

  return { watchEntries, entryWatchMode }
}

module.exports = {
  probeEnded,
  createExitWaits,
  createEntryWatches,
  exitTarget,
  exitOptions,
  EXIT_PROBE_INTERVAL_MS,
  ENTRY_POLL_INTERVAL_MS,
}
