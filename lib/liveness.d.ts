/** Owner record of a worktree integration lock (pi-adaptative `IntegrationLockOwner`). */
export interface IntegrationLockOwner {
  pid: number
  hostname: string
  token: string
  sessionId?: string
  laneKey?: string
  acquiredAt: string
}

/** Result of `checkProcessLiveness` (pi-crew `ProcessLiveness`). */
export interface ProcessLiveness {
  pid?: number
  alive: boolean
  detail: string
}

/**
 * Identity of a running process: its pid, its true start time in epoch milliseconds and its
 * state. Stable for the life of the process; a reused pid gets a different `startTimeMs`.
 */
export interface ProcessIdentity {
  pid: number
  startTimeMs: number
  state: 'alive' | 'zombie' | 'eperm'
}

/**
 * True when `pid` is a live process (or one this process may not signal). False for
 * `undefined`, non-numbers, non-finite numbers and pids ≤ 0, and when the probe fails.
 * Same results as pi-adaptative's `isReloadSessionProcessAlive`.
 */
export declare function isReloadSessionProcessAlive(pid: number | undefined): boolean

/**
 * Integration-lock owner liveness: a lock owned by another host counts as alive; otherwise
 * `owner.pid` is probed as `process.kill(pid, 0)` would (EPERM = alive).
 * Same results as pi-adaptative's `defaultIsPidAlive`.
 */
export declare function defaultIsPidAlive(owner: IntegrationLockOwner): boolean

/**
 * `{ pid, alive, detail }` for a recorded pid, with pi-crew's exact `detail` strings:
 * `no pid recorded`, `process is alive`, `process exists but permission is denied`,
 * `process does not exist`, or the probe error's message. `pid` echoes the argument.
 */
export declare function checkProcessLiveness(pid: number | undefined): ProcessLiveness

/**
 * Start time of `pid` in the legacy orphan-registry unit (Linux: `floor(starttime_ticks × 100)`
 * from `/proc/<pid>/stat`, not milliseconds), or `undefined` when the pid cannot be probed or
 * read. Values equal those pi-crew stored, so registry comparisons keep working.
 */
export declare function getProcessStartTime(pid: number): number | undefined

/**
 * Probe a pid: `alive`, `dead`, `zombie` (exited, not yet reaped: dead for supervision),
 * `eperm` (exists, not signalable by this process) or `invalid` (not a positive int32).
 * Throws a TypeError when `pid` is not a number.
 */
export declare function probePid(pid: number): 'alive' | 'dead' | 'zombie' | 'eperm' | 'invalid'

/** `probePid` for many pids at once; one state per element, in order. */
export declare function probePids(pids: readonly number[]): Array<'alive' | 'dead' | 'zombie' | 'eperm' | 'invalid'>

/**
 * The identity of `pid`, or `undefined` when no such process exists (or `pid` is not a
 * positive int32). Throws a TypeError when `pid` is not a number.
 */
export declare function getProcessIdentity(pid: number): ProcessIdentity | undefined

/**
 * True while the process an identity was taken from still runs under that pid; false once it
 * exited, became a zombie, or its pid was reused. Throws a TypeError unless `identity` is an
 * object with numeric `pid` and `startTimeMs`.
 */
export declare function isSameProcess(identity: Pick<ProcessIdentity, 'pid' | 'startTimeMs'>): boolean

/** Options of `waitForProcessExit`. */
export interface WaitForProcessExitOptions {
  /** Aborting rejects the wait with `signal.reason` (an `AbortError` by default) and ends it. */
  signal?: AbortSignal
  /** `false`: the pending wait does not keep the event loop alive (default `true`, like a timer). */
  ref?: boolean
}

/**
 * Resolves `true` once the process `target` names has ended: at once when it already has; a
 * zombie (exited, not yet reaped) counts as ended; for an identity (from `getProcessIdentity`),
 * also once its pid names another process. Never resolves `false`. Rejects with a TypeError
 * naming `target` (or the option) for an invalid argument, and with `options.signal.reason`
 * when the signal aborts first. The kernel tells (see `exitWatchMode`); where it cannot, the
 * process is probed every 250 ms.
 */
export declare function waitForProcessExit(
  target: number | Pick<ProcessIdentity, 'pid' | 'startTimeMs'>,
  options?: WaitForProcessExitOptions,
): Promise<true>

/**
 * How `waitForProcessExit` learns of exits here: `pidfd` (Linux ≥ 5.3: epoll over pidfds),
 * `kqueue` (macOS: `EVFILT_PROC`/`NOTE_EXIT`), `process-handle` (Windows: waits on process
 * handles), or `probe` (no kernel route: the JS backend, a kernel without pidfds; every 250 ms).
 * One waiter thread serves every wait of the process in the kernel modes.
 */
export declare function exitWatchMode(): 'pidfd' | 'kqueue' | 'process-handle' | 'probe'
