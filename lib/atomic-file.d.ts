export interface AtomicFileLockOptions {
  /** Retries after the first attempt (default 10; the sync form makes at least 2 attempts). */
  retries?: number
  /** Resolve the target with realpath (default false: `path.resolve`). */
  realpath?: boolean
  /** Stale threshold in ms (floored at 2000, proper-lockfile's minimum). */
  stale?: number
  /**
   * Native backend, network and FUSE file systems only: how long the machine's file-system
   * client may cache attributes. Such a lock is judged stale only after it was seen unchanged
   * for `stale` plus this long. Default: `PI_NATIVE_ATTRIBUTE_CACHE_MS`, else 60000.
   */
  attributeCacheMs?: number
}
export interface AtomicFileWriteOptions {
  /** File mode for a new file (default 0o666, umask applies). */
  mode?: number
}
/** Run `fn` while holding the proper-lockfile lock of `filePath` (synchronously). */
export declare function withFileLockSync<T>(filePath: string, fn: () => T, options?: AtomicFileLockOptions): T
/** Run `fn` while holding the proper-lockfile lock of `filePath`. */
export declare function withFileLock<T>(filePath: string, fn: () => Promise<T> | T, options?: AtomicFileLockOptions): Promise<T>
/** Replace `filePath` atomically (temp file + rename). */
export declare function writeFileAtomicSync(filePath: string, content: string, options?: AtomicFileWriteOptions): void
/** Replace `filePath` atomically (temp file + rename), off the JS thread. */
export declare function writeFileAtomic(filePath: string, content: string, options?: AtomicFileWriteOptions): Promise<void>
