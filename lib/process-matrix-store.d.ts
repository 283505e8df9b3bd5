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

/** The valid entry stored under `entryId`, or undefined (missing, unreadable, not JSON, invalid). */
export declare function readEntry(agentDir: string, entryId: string): Promise<ProcessMatrixEntry | undefined>
/** Every valid `*.json` entry of the matrix directory, in file-name order; `[]` when it is missing. */
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
