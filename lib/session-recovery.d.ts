/** Input of `deriveSessionPaths` (pi-crew `SessionIdentityInput`). */
export interface SessionIdentityInput {
  sessionId?: string
  sessionDir?: string
  agentId?: string
  artifactsRoot?: string
}

/** A worker's session identity (pi-crew `WorkerSessionContext`). */
export interface WorkerSessionContext {
  sessionId: string
  sessionDir: string
}

/**
 * Working-session identity and directory of a worker, or `null` when no safe identity can be
 * derived (ids are reduced to their part after the last `:` and must be `[A-Za-z0-9_-]+`).
 * An explicit `sessionDir` is returned verbatim; otherwise it is
 * `path.join(artifactsRoot, "sessions", <agent or session id>)`.
 */
export declare function deriveSessionPaths(input: SessionIdentityInput): WorkerSessionContext | null

/**
 * Arm both argument arrays with `--session-id <id> --session-dir <dir>` (only the flags each
 * array lacks), right after `--mode json -p` when present, else at the end. Mutates the arrays
 * in place (`builtArgs` first); returns true iff either array changed.
 */
export declare function appendWorkerSessionArgs(spawnArgs: string[], builtArgs: string[], ctx: WorkerSessionContext): boolean

/**
 * Whether crash recovery is on: `PI_CREW_SESSION_RECOVERY` (1/true/yes or 0/false/no, read
 * from `process.env` at call time) wins in both directions; else `explicit` when it is not
 * null/undefined (returned unchanged); else true.
 */
export declare function resolveSessionRecoveryEnabled(explicit?: boolean): boolean

/**
 * True when a worker's end looks like a crash worth recovering: exit code `null` (signal death)
 * or killed. `result.exitStatus`, when present, overrides `exitCode` and `killed` field by field.
 */
export declare function shouldAttemptSessionRecovery(
  result: { exitCode: number | null; exitStatus?: { exitCode?: number | null; killed?: boolean } },
  killed: boolean,
): boolean

/** What recovery found: property order sessionId, sessionFile, text, timestamp, stopReason. */
export interface SessionRecoveryInfo {
  sessionId: string
  sessionFile: string
  text: string
  timestamp: string
  stopReason?: string
}

/** Limits of one recovery call; the defaults are the original's. */
export interface SessionRecoveryOptions {
  /** Files larger than this are skipped (default 64 MiB = 67108864; exactly the cap is allowed). */
  maxFileBytes?: number
  /** Resolve null when nothing was found this many ms after the call (default 5000). */
  deadlineMs?: number
  /** How many candidate files to try (default 3). */
  maxFiles?: number
}

/**
 * The last complete assistant message a worker left in its pi session files under
 * `sessionDir` (files ending in `_<sessionId>.jsonl` first, newest first, at most 3).
 * Runs off the JS thread, reads each file from its end, and never rejects for I/O or format
 * reasons: it resolves null instead (also at the deadline). Rejects with a TypeError only for an
 * invalid `options` argument.
 */
export declare function recoverLastAssistantFromSession(
  sessionDir: string,
  sessionId?: string,
  options?: SessionRecoveryOptions,
): Promise<SessionRecoveryInfo | null>
