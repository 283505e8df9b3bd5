export {
  deriveSessionPaths,
  appendWorkerSessionArgs,
  resolveSessionRecoveryEnabled,
  shouldAttemptSessionRecovery,
} from '../index'
export type { SessionIdentityInput, WorkerSessionContext } from '../index'

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
