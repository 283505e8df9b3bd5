'use strict'
// Supervision events, shared by both backends: `waitForProcessExit` (its promise,
// AbortSignal, `ref`, and the probing fallback) and `watchEntries` (its async iterable, the
// path it follows folder by folder, the coalescing per entry, the bounded queue, and the
// polling of folders whose notifications miss other machines' changes). A backend supplies:
//   exitWatch   { mode(), open(onExit(id)) → channel }, or null (probe every wait), where
//               channel = { add(pid, startTimeMs?) → id > 0 | 0 (ended) | -1 (cannot watch:
//               probe), cancel(id), ref(on) }
//   ended(pid, startTimeMs?) → true once that process has ended (the probe)
//   dirWatch    { mode(), open(onEvent(id, names | null, error?)) → channel }, where channel =
//               { add(dir, child | null) → id (throws as fs.watch does), cancel(id), ref(on) }:
//               the names of `*.json` files of the folder `dir` names now (with `child`: that
//               name, when it is created, removed or renamed) that changed; null means "look
//               again"; an error means the watch failed and reports nothing more
//   scan(dir)   → Promise<Map<name, signature>> of the `*.json` files ([] when `dir` is missing);
//               a signature is compared only where isRemote(dir) (a backend may leave it empty
//               on a folder it knows is local)
//   isRemote(dir) → Promise<boolean>: a network or FUSE file system (then it also polls)
//   readEntry(agentDir, entryId) → what the store's readEntry answers
const fsp = require('node:fs/promises')
const fs = require('node:fs')
const path = require('node:path')
const { parsedEqual } = require('./parsed-equal.js')
const { Slices, sortInSlices } = require('./slices.js')
const { processMatrixDir, entryPath } = require('./paths.js')
const { invalidArgType, invalidArgValue } = require('./errors.js')

/** How often a process the kernel cannot watch is probed (the JS backend probes them all). */
const EXIT_PROBE_INTERVAL_MS = 250
/** How often a matrix folder on a network or FUSE file system is listed. */
const ENTRY_POLL_INTERVAL_MS = 1000
/**
 * Entry ids noticed and not yet read, per iteration, at most: past it, notices are dropped and
 * one listing of the folder (plus the entries the consumer holds) replaces them once the
 * consumer has read the rest, so a consumer that stops reading keeps memory bounded.
 */
const PENDING_CAP = 4096
// Reads of one entry that saw its file change under them (see `#read`) before the entry is put
// back in the queue, to be read after the others.
const READ_TRIES = 3

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

/** `{ signal, initial }` of watchEntries (`initial` defaults to false). */
function watchOptions(options) {
  if (options === undefined || options === null) return { signal: undefined, initial: false }
  if (typeof options !== 'object') throw invalidArgType('options', 'of type object', options)
  const signal = abortSignal(options.signal)
  const initial = options.initial
  if (initial !== undefined && typeof initial !== 'boolean') throw invalidArgType('options.initial', 'of type boolean', initial)
  return { signal, initial: initial === true }
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
  /** This copy's channel of the kernel watch (its own notices only), made on first use. */
  let channel = null
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
      if (!exited) channel.cancel(w.id)
      if (w.ref && --heldByKernel === 0) channel.ref(false)
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
        channel ??= exitWatch.open(onExit)
        id = channel.add(pid, startTimeMs)
      }
      if (id === 0 || (id < 0 && ended(pid, startTimeMs))) return Promise.resolve(true)
      const w = { pid, startTimeMs, ref, signal, id, resolve: null, reject: null, offAbort: null }
      const promise = new Promise((resolve, reject) => {
        w.resolve = resolve
        w.reject = reject
      })
      if (id > 0) {
        watched.set(id, w)
        if (ref && heldByKernel++ === 0) channel.ref(true)
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

/** Errors of a watch call that mean "this folder is not there now". */
function absent(err) {
  const code = err?.code
  if (code === 'ENOENT' || code === 'ENOTDIR') return true
  // Windows refuses to open a folder that is being deleted (delete pending) with access denied.
  return process.platform === 'win32' && (code === 'EPERM' || code === 'EACCES')
}

/** Errors of a watch call that mean "this folder may not be watched" (it may still be crossed). */
const refused = (err) => err?.code === 'EACCES' || err?.code === 'EPERM'

/**
 * The file at `file` as `lstat` sees it: a string that changes with any write or rename of it
 * (device, inode, size, mtime, ctime); null when it cannot be looked at (counted as not there).
 */
async function fileState(file) {
  try {
    const st = await fsp.lstat(file, { bigint: true })
    return `${st.dev}:${st.ino}:${st.size}:${st.mtimeNs}:${st.ctimeNs}`
  } catch {
    return null
  }
}

/** `watchEntries` over a backend's folder watch, listing, and readEntry. */
function createEntryWatches({ dirWatch, scan, isRemote, readEntry }) {
  /** Open iterations of this copy by folder-watch id. */
  const byWatch = new Map()
  /** This copy's channel of the folder watch (its own notices only), made on first use. */
  let channel = null
  let open = 0 // iterations that keep the event loop alive

  function onEvent(id, names, error) {
    const it = byWatch.get(id)
    if (it !== undefined) it.notice(id, names, error)
  }

  /**
   * One watchEntries iteration. It means the path, not the folders that are there at the call:
   * every folder from the root down to the matrix folder is watched for the next name down (the
   * matrix folder for its entries), as far as the path exists; when one of them changes, the
   * watches are made again down the path as it is now, the folder at the path is listed, and
   * every entry in it and every entry the consumer may know of is read again. Entries are read
   * at the path when the consumer asks: so every event is what the path holds at that moment,
   * and the consumer's view converges to the folder's content.
   *
   * "May know of": an entry yielded, present at the call (a consumer may have listed it
   * itself), or noticed since. Once such an entry is gone, a `remove` is yielded for it, once.
   */
  class EntryEvents {
    #agentDir
    #dir
    /** The folders of the path, from the root down to the matrix folder. */
    #path
    #offAbort = null
    /** Entry ids to read, in the order they were first noticed (bounded: PENDING_CAP). */
    #pending = new Set()
    /** Notices were dropped (the queue was full): a listing is due once it is drained. */
    #overflowed = false
    /** entryId → entry (undefined for an invalid file) last yielded and not removed since. */
    #view = new Map()
    /**
     * Entry ids the consumer may know of and has not been told are gone (a superset of the
     * view's): bounded by the folder's entries plus those noticed and not yet read.
     */
    #known = new Set()
    /** name → signature of the last listing (polled folders only). */
    #polled = null
    /** The watches now, from the root down: { id, dir, child }. */
    #watches = []
    /** The initial listing (option `initial`): nothing is yielded before it is in. */
    #initial = null
    #listings = 0 // the latest listing asked for wins
    #resolving = null
    #poll = null
    #wake = null
    #closed = false
    #error = null
    #queue = Promise.resolve()

    constructor(agentDir, signal, initial) {
      // Resolved once: a later process.chdir changes nothing.
      this.#agentDir = path.resolve(agentDir)
      this.#dir = processMatrixDir(this.#agentDir)
      this.#path = [this.#dir]
      while (path.dirname(this.#path[0]) !== this.#path[0]) this.#path.unshift(path.dirname(this.#path[0]))
      channel ??= dirWatch.open(onEvent)
      if (open++ === 0) channel.ref(true)
      if (signal) {
        this.#offAbort = onAbort(signal, () => this.#close(signal.reason))
      }
      this.#attach()
      // With `initial`, the entries present come first; without, they are only known (a later
      // removal is told).
      if (!this.#closed) {
        const listed = this.#reconcile(initial ? 'initial' : 'baseline')
        if (initial) this.#initial = listed
        this.#checkRemote(listed)
      }
    }

    /** What a watch of this iteration saw: changed names, null (look again), or its failure. */
    notice(id, names, error) {
      if (this.#closed) return
      if (error !== undefined) {
        this.#close(error)
        return
      }
      const w = this.#watches.find((x) => x.id === id)
      if (w === undefined) return // a watch already replaced
      if (names === null || w.child !== null) {
        this.#resolveSoon()
        return
      }
      // Once the path is known to have changed, the old watches' names are not news (their
      // folder may be elsewhere now): the listing after the watches are made again is.
      if (this.#resolving !== null) return
      for (const name of names) if (name.endsWith('.json')) this.#note(entryIdOf(name))
    }

    #note(entryId) {
      if (!this.#pending.has(entryId)) {
        if (this.#pending.size >= PENDING_CAP) {
          this.#overflowed = true // the listing after the drain covers it
          return
        }
        this.#pending.add(entryId)
      }
      this.#known.add(entryId)
      this.#wakeUp()
    }

    #wakeUp() {
      const wake = this.#wake
      this.#wake = null
      wake?.()
    }

    /**
     * Watch the folders of the path as it is now, from the root down, each for the next name
     * (the matrix folder for its entries), stopping at the first that does not exist: its
     * parent's watch tells when it does. Parents are watched before their children, so a folder
     * replaced during the walk is told by the watch above it. The previous watches go after
     * the new ones are in place (a folder watched again keeps its kernel watch).
     */
    #attach() {
      const before = this.#watches
      const now = []
      try {
        for (let i = 0; i < this.#path.length; i++) {
          const dir = this.#path[i]
          const child = i + 1 < this.#path.length ? path.basename(this.#path[i + 1]) : null
          let id
          try {
            id = channel.add(dir, child)
          } catch (err) {
            if (i > 0 && absent(err)) break
            // A folder above that may be crossed but not read: its renames cannot be seen.
            if (child !== null && refused(err)) continue
            throw err
          }
          now.push({ id, dir, child })
          byWatch.set(id, this)
        }
      } catch (err) {
        this.#watches = [...before, ...now]
        this.#close(err)
        return
      }
      this.#watches = now
      for (const w of before) {
        byWatch.delete(w.id)
        channel.cancel(w.id)
      }
    }

    /** A folder of the path changed: watch the path again and look at all of it (once per burst). */
    #resolveSoon() {
      if (this.#resolving !== null) return
      this.#resolving = setImmediate(() => {
        this.#resolving = null
        if (this.#closed) return
        this.#attach()
        if (!this.#closed) this.#reconcile('again')
      })
    }

    /**
     * List the folder at the path. `baseline` (the call, without `initial`): its entries are
     * known, not news. `initial`: they come first, in listing order (UTF-16 order, as
     * listEntries has them). `again`: every entry in it and every entry known is read again.
     * Resolves with the listing once the ids are queued (undefined once closed).
     */
    #reconcile(how) {
      const listing = ++this.#listings
      this.#overflowed = false
      return scan(this.#dir).then(
        (now) => this.#take(now, how, listing),
        (err) => this.#close(err), // the folder is there but cannot be listed
      )
    }

    /**
     * #reconcile's listing taken in: sorted and queued in slices (slices.js), so a folder of
     * 200,000 entries never holds the event loop at once; what changes meanwhile is noticed as
     * usual, and the queue is replaced only at the end.
     */
    async #take(now, how, listing) {
      const slices = new Slices()
      const ids = await sortInSlices([...now.keys()], slices)
      const queued = how === 'initial' ? new Set() : null
      for (let i = 0; i < ids.length; i++) {
        if (this.#closed) return
        ids[i] = entryIdOf(ids[i])
        this.#known.add(ids[i])
        queued?.add(ids[i])
        if ((i & 1023) === 1023 && slices.due()) await slices.pause()
      }
      if (this.#closed) return
      // A listing overtaken by a later one (the path changed meanwhile) is still what was
      // there: its entries are known and read again.
      const latest = listing === this.#listings
      if (how === 'initial' && latest) {
        const noticed = this.#pending
        this.#pending = queued
        for (const id of noticed) this.#pending.add(id)
      } else if (how === 'again' || !latest) {
        for (let i = 0; i < ids.length; i++) {
          this.#pending.add(ids[i])
          if ((i & 1023) === 1023 && slices.due()) await slices.pause()
        }
        if (latest) {
          let i = 0
          for (const id of this.#known) {
            this.#pending.add(id)
            if ((++i & 1023) === 0 && slices.due()) await slices.pause()
          }
        }
      }
      if (this.#polled !== null && latest) this.#polled = now
      this.#wakeUp()
      return now
    }

    /**
     * On a network or FUSE file system, also list the folder every ENTRY_POLL_INTERVAL_MS. The
     * first poll compares with the call's own listing (`listed`), so an entry that came after
     * it is news however long the remote check took (a listing of its own, taken later, would
     * have counted such an entry as already known: issue 41).
     */
    #checkRemote(listed) {
      // The nearest folder that exists, looked for asynchronously: a look on a network mount
      // that stopped answering must not hold the JS thread (issue 41).
      const nearest = async (on) => {
        while (path.dirname(on) !== on) {
          try {
            await fs.promises.access(on)
            return on
          } catch {
            on = path.dirname(on)
          }
        }
        return on
      }
      nearest(this.#dir).then((on) => Promise.all([isRemote(on), listed])).then(
        ([remote, now]) => {
          if (!remote || this.#closed) return
          this.#polled ??= now
          this.#poll = setInterval(() => this.#pollOnce(), ENTRY_POLL_INTERVAL_MS)
        },
        () => {},
      )
    }

    /** One polled listing: the names whose file changed, went or came, and known entries gone. */
    #pollOnce() {
      scan(this.#dir).then(
        (now) => {
          if (this.#closed) return
          const before = this.#polled ?? new Map()
          for (const [name, sig] of now) if (before.get(name) !== sig) this.#note(entryIdOf(name))
          for (const name of before.keys()) if (!now.has(name)) this.#note(entryIdOf(name))
          for (const id of this.#known) if (!now.has(`${id}.json`) && !this.#pending.has(id)) this.#note(id)
          this.#polled = now
        },
        () => {}, // unreadable this time (a network hiccup): the next look decides
      )
    }

    /**
     * What readEntry answers for the entry at the path now, and whether its file exists; null
     * when the file at the path changed under every try. A read opens the file at the path, but
     * reads it a moment later: meanwhile its folder may have left the path and the file been
     * rewritten in place there, content that was never at the path. So the file at the path is
     * looked at before and after the read (device, inode, size, mtime, ctime: a write or a rename
     * changes one of them), and the read counts only if it stayed the same file, unchanged.
     */
    async #read(entryId) {
      const file = entryPath(this.#agentDir, entryId)
      for (let i = 0; i < READ_TRIES; i++) {
        const before = await fileState(file)
        // A read never fails for what a file holds (B3); should one fail all the same, the file
        // is what the original's readEntry makes of an unreadable one, and the loop goes on.
        const entry = await readEntry(this.#agentDir, entryId).catch(() => undefined)
        if ((await fileState(file)) !== before) continue
        // Absent before and after: whatever came and went meanwhile is not news.
        return before === null ? { exists: false, entry: undefined } : { exists: true, entry }
      }
      return null
    }

    /** End: free the watches and the timers; `error` (if any) is what the next `next()` rejects with. */
    #close(error) {
      if (this.#closed) return
      this.#closed = true
      if (error !== undefined) this.#error = { error }
      for (const w of this.#watches) {
        byWatch.delete(w.id)
        channel.cancel(w.id)
      }
      this.#watches = []
      if (this.#poll !== null) clearInterval(this.#poll)
      this.#poll = null
      if (this.#resolving !== null) clearImmediate(this.#resolving)
      this.#resolving = null
      this.#offAbort?.()
      if (--open === 0) channel.ref(false)
      this.#pending.clear()
      this.#view.clear()
      this.#known.clear()
      this.#wakeUp()
    }

    async #next() {
      for (;;) {
        if (this.#closed) {
          const failed = this.#error
          this.#error = null
          if (failed !== null) throw failed.error
          return { value: undefined, done: true }
        }
        if (this.#initial !== null) {
          await this.#initial
          this.#initial = null
          continue
        }
        const [entryId] = this.#pending
        if (entryId === undefined) {
          if (this.#overflowed) await this.#reconcile('again')
          else await new Promise((resolve) => (this.#wake = resolve))
          continue
        }
        this.#pending.delete(entryId)
        const now = await this.#read(entryId)
        if (this.#closed) continue
        if (now === null) {
          // Changing under every read: read again after the others (its writer is not done).
          this.#pending.add(entryId)
          continue
        }
        if (!now.exists) {
          // Gone: news for an entry the consumer may know of, once.
          if (!this.#known.delete(entryId)) continue
          this.#view.delete(entryId)
          return { value: { type: 'remove', entryId, entry: undefined }, done: false }
        }
        this.#known.add(entryId)
        // Both parsed by readEntry: compared as util.isDeepStrictEqual compares them, also where
        // its recursion would run out of stack (a deep entry must not end the loop).
        if (this.#view.has(entryId) && parsedEqual(this.#view.get(entryId), now.entry)) continue
        this.#view.set(entryId, now.entry)
        return { value: { type: 'change', entryId, entry: now.entry }, done: false }
      }
    }

    /** The next event (calls are answered one after another, in order). */
    next() {
      const result = this.#queue.then(() => this.#next())
      this.#queue = result.catch(() => {})
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
   * The changes of the process-matrix entries of `agentDir` (resolved once, now) by any process,
   * as an async iterable of `{ type: 'change' | 'remove', entryId, entry }`; with
   * `{ initial: true }` every entry present at the call comes first.
   */
  function watchEntries(agentDir, options) {
    let signal
    let initial
    try {
      processMatrixDir(agentDir) // path.join's TypeError for a non-string agentDir
      ;({ signal, initial } = watchOptions(options))
    } catch (err) {
      return failed(err)
    }
    if (signal?.aborted) return failed(signal.reason)
    return new EntryEvents(agentDir, signal, initial)
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
  PENDING_CAP,
}
