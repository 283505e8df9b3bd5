// `watchEntries` returns an async iterator: its types come with ES2018's lib, which a consumer's
// default target (ES5 up to TypeScript 5.x) does not load; this brings in only that part.
/// <reference lib="es2018.asynciterable" />

/** `path.join(agentDir, "state", "process-matrix")`. */
export declare function processMatrixDir(agentDir: string): string

/**
 * `path.join(processMatrixDir(agentDir), String(entryId) + ".json")` — an id with `/` or `..`
 * addresses another path, exactly as in the original.
 */
export declare function entryPath(agentDir: string, entryId: string): string

/** `String(role) + "-" + String(sessionId)`, without validation. */
export declare function buildEntryId(role: 'master' | 'worker', sessionId: string): string

export type JsonValue = string | number | boolean | null | JsonValue[] | { [key: string]: JsonValue }
export type JsonObject = { [key: string]: JsonValue }

export type ProcessRole = 'master' | 'worker'
export type ProcessStatus = 'running' | 'winding_down' | 'resumable' | 'adopted' | 'closed'
export type WindDownReason = 'parent_lost' | 'parent_shutdown' | 'user_cleanup'
export type ResourcePointerKind =
  | 'repository'
  | 'worktree'
  | 'artifact'
  | 'evidence'
  | 'memory-query'
  | 'skill'
  | 'prompt'
  | 'service'

export interface ResourcePointer {
  id: string
  kind: ResourcePointerKind
  uri: string
  readOnly: boolean
  digest?: string
  metadata?: JsonObject
}

export interface AgentResumeContext {
  provider: 'pi' | 'external'
  sessionId: string
  sessionDir?: string
  sessionFile?: string
  cwd: string
  worktreeLaneKey?: string
  orchestrationProfileId?: string
  resourceProfileNames: readonly string[]
  modelRef?: string
  contextPointers: readonly ResourcePointer[]
  latestCheckpointId?: string
}

export interface AgentIdentityContract {
  agentId: string
  resumeContext: AgentResumeContext
}

export interface ResumablePayload {
  agent: AgentIdentityContract
  taskRef?: string
  taskSummary?: string
  lastCode: ProcessStatus
}

export interface ProcessTerminalHandoff {
  code: number | null
  signal: string | null
  observedAt: string
  notificationDeliveredAt?: string
}

export interface ProcessMatrixEntry {
  entryId: string
  role: ProcessRole
  agent: AgentIdentityContract
  pid: number
  hostname: string
  startedAt: string
  heartbeatAt: string
  status: ProcessStatus
  parentPid?: number
  parentSessionId?: string
  tmuxSession?: string
  tmuxPanePid?: number
  taskRef?: string
  taskSummary?: string
  windDownReason?: WindDownReason
  resumable?: ResumablePayload
  terminal?: ProcessTerminalHandoff
}

/**
 * The valid entry stored under `entryId`, or undefined (missing, unreadable, not a regular file,
 * over 64 MiB, not JSON, invalid). With `PI_NATIVE_HARDENED=1`, also for an unsafe id, an entry
 * of another id, or a refused folder (SECURITY.md).
 */
export declare function readEntry(agentDir: string, entryId: string): Promise<ProcessMatrixEntry | undefined>
/**
 * Every valid `*.json` entry of the matrix directory, in file-name order; `[]` when it is missing.
 * Reads as `readEntry` does, handing the event loop back every few ms on a large folder.
 */
export declare function listEntries(agentDir: string): Promise<ProcessMatrixEntry[]>
/** Write `entry` (no validation) under its per-entry lock, atomically. */
export declare function writeEntry(agentDir: string, entry: ProcessMatrixEntry): Promise<void>
/**
 * Compare-and-swap: under the entry's lock, replace the file with `next` only if its current
 * valid content deep-strictly equals `expected` (`undefined` matches an absent or invalid file).
 */
export declare function writeEntryIfUnchanged(
  agentDir: string,
  entryId: string,
  expected: ProcessMatrixEntry | undefined,
  next: ProcessMatrixEntry,
): Promise<boolean>
/** Synchronous CAS for exit hooks (`process.on("exit")`); throws ELOCKED after its bounded retries. */
export declare function writeEntryIfUnchangedSync(
  agentDir: string,
  expected: ProcessMatrixEntry,
  next: ProcessMatrixEntry,
): boolean
/** Remove the entry's file under its lock (missing is fine). */
export declare function removeEntry(agentDir: string, entryId: string): Promise<void>
/** Remove the entry's file only if it still deep-strictly equals `expected`. */
export declare function removeEntryIfUnchanged(agentDir: string, expected: ProcessMatrixEntry): Promise<boolean>
/**
 * Maintenance (new): delete `<entry>.json.<pid>.<uuid>.tmp` files left by writers that died
 * (dead pid) and are at least `minAgeMs` old (default 5 minutes). Resolves the removed paths.
 */
export declare function sweepOrphanTempFiles(agentDir: string, minAgeMs?: number): Promise<string[]>

/** One change of the process matrix, as `watchEntries` yields it. */
export interface EntryEvent {
  /**
   * `change` while the entry's file is at the watched path (valid or not); `remove` once it is
   * gone from there (deleted, renamed away, or a folder on the path moved or deleted).
   */
  type: 'change' | 'remove'
  entryId: string
  /** What `readEntry` answers now: `undefined` for a removed or invalid file. */
  entry: ProcessMatrixEntry | undefined
}

/** Options of `watchEntries`. */
export interface WatchEntriesOptions {
  /** Aborting ends the iteration: the pending (or next) `next()` rejects with `signal.reason`. */
  signal?: AbortSignal
  /**
   * `true`: first a `change` for every entry file present at the call (in `listEntries`
   * order), then the changes after it, with nothing missed in between. Default `false`: only
   * changes after the call.
   */
  initial?: boolean
}

/**
 * The changes of the entries of `agentDir`'s process matrix made after this call, by any
 * process (with `initial: true`, the entries present first). `agentDir` is resolved once, at
 * the call. The watch means the path, not the folders there at the call: when a folder on it
 * is moved or deleted, every entry that was there gets a `remove`; when the path exists again,
 * its entries are reported as they appear. Events for one entry are coalesced (a burst of
 * writes yields its latest state), and none is lost: an entry whose latest state differs from
 * the one last yielded is yielded again. The folder may not exist yet. Temp files and lock
 * directories of writes in progress yield nothing. Leaving the loop (`break`, `return()`) or
 * aborting `options.signal` ends the watch and frees it; while open it keeps the event loop
 * alive. Invalid arguments reject the first `next()`; a watch the OS stops serving rejects
 * `next()` with its error. On network and FUSE file systems the folder is also listed every
 * second.
 */
export declare function watchEntries(agentDir: string, options?: WatchEntriesOptions): AsyncIterableIterator<EntryEvent>

/**
 * How `watchEntries` is notified: `inotify` (Linux), `kqueue` (macOS), `ReadDirectoryChangesW`
 * (Windows) or `fs.watch` (the JS backend); network and FUSE file systems are polled as well.
 */
export declare function entryWatchMode(): 'inotify' | 'kqueue' | 'ReadDirectoryChangesW' | 'fs.watch' | 'none'
