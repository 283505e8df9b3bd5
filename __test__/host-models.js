'use strict'
// Models of the host files docs/SWAPPING.md's swap blocks go into (pi-crew 0.11.7, pi-adaptative
// 0.81.41; SPEC.md "Sources examined"), for __test__/package.test.js. Each model keeps what the
// real file keeps around the swapped definitions: its own imports (a type taken from a sibling
// types module among them), private helpers and exported functions that call the swapped names;
// siblings are the modules that import from it (or that it imports from), with their real
// relative paths. `/*IMPORTS*/` marks where the file's imports end (the block's `import` lines go
// there), `/*SWAP*/` where the replaced definitions were (the rest of the block goes there).
// Written without Node's own modules: the consumer has no @types/node.

const ADAPTATIVE = 'pi-adaptative packages/coding-agent/src/core'

/** pi-adaptative's JSON types (autonomy/contracts.ts) and agent identity (orchestration/contracts.ts). */
const adaptativeContracts = {
  [`${ADAPTATIVE}/autonomy/contracts.ts`]: `
export type JsonPrimitive = string | number | boolean | null;
export type JsonValue = JsonPrimitive | JsonValue[] | { [key: string]: JsonValue };
export interface JsonObject {
	[key: string]: JsonValue;
}
`,
  [`${ADAPTATIVE}/orchestration/contracts.ts`]: `
import type { JsonObject } from "../autonomy/contracts.ts";

export type ResourcePointerKind = "repository" | "worktree" | "artifact" | "evidence" | "memory-query" | "skill" | "prompt" | "service";
export interface ResourcePointer {
	id: string;
	kind: ResourcePointerKind;
	uri: string;
	readOnly: boolean;
	digest?: string;
	metadata?: JsonObject;
}
export interface AgentResumeContext {
	provider: "pi" | "external";
	sessionId: string;
	sessionDir?: string;
	sessionFile?: string;
	cwd: string;
	worktreeLaneKey?: string;
	orchestrationProfileId?: string;
	resourceProfileNames: readonly string[];
	modelRef?: string;
	contextPointers: readonly ResourcePointer[];
	latestCheckpointId?: string;
}
export interface AgentIdentityContract {
	agentId: string;
	resumeContext: AgentResumeContext;
}
`,
}

const HOSTS = {
  'pi-crew src/runtime/child-pi/session-recovery.ts': {
    file: '/*IMPORTS*/\n/*SWAP*/\n',
    siblings: {
      // child-pi.ts imports the functions, the result type, and one function as a type only.
      'pi-crew src/runtime/child-pi/child-pi.ts': `
import {
	appendWorkerSessionArgs,
	type deriveSessionPaths,
	deriveSessionPaths as derive,
	recoverLastAssistantFromSession,
	resolveSessionRecoveryEnabled,
	type SessionIdentityInput,
	type SessionRecoveryInfo,
	shouldAttemptSessionRecovery,
	type WorkerSessionContext,
} from "./session-recovery.ts";

export interface ChildPiRunResult {
	exitCode: number | null;
	recoveredFromSession?: SessionRecoveryInfo;
}

export async function runChild(input: SessionIdentityInput & { sessionRecovery?: boolean }, killed: boolean) {
	const ctx: ReturnType<typeof deriveSessionPaths> = derive(input);
	const builtArgs = ["--mode", "json", "-p", "task.md"];
	const spawnArgs = ["cli.js", ...builtArgs];
	const changed = ctx ? appendWorkerSessionArgs(spawnArgs, builtArgs, ctx satisfies WorkerSessionContext) : false;
	const result: ChildPiRunResult = { exitCode: null };
	if (ctx && resolveSessionRecoveryEnabled(input.sessionRecovery) && shouldAttemptSessionRecovery(result, killed)) {
		const info = await recoverLastAssistantFromSession(ctx.sessionDir, ctx.sessionId);
		if (info) result.recoveredFromSession = info;
	}
	return { ctx, changed, builtArgs, spawnArgs, result };
}
`,
    },
  },

  [`${ADAPTATIVE}/process-matrix/store.ts`]: {
    file: '/*IMPORTS*/\n/*SWAP*/\n',
    siblings: {
      ...adaptativeContracts,
      // The entry types live here, not in store.ts.
      [`${ADAPTATIVE}/process-matrix/codes.ts`]: `
import type { AgentIdentityContract } from "../orchestration/contracts.ts";

export type ProcessRole = "master" | "worker";
export type ProcessStatus = "running" | "winding_down" | "resumable" | "adopted" | "closed";
export type WindDownReason = "parent_lost" | "parent_shutdown" | "user_cleanup";
export interface ResumablePayload {
	agent: AgentIdentityContract;
	taskRef?: string;
	taskSummary?: string;
	lastCode: ProcessStatus;
}
export interface ProcessTerminalHandoff {
	code: number | null;
	signal: string | null;
	observedAt: string;
	notificationDeliveredAt?: string;
}
export interface ProcessMatrixEntry {
	entryId: string;
	role: ProcessRole;
	agent: AgentIdentityContract;
	pid: number;
	hostname: string;
	startedAt: string;
	heartbeatAt: string;
	status: ProcessStatus;
	parentPid?: number;
	parentSessionId?: string;
	tmuxSession?: string;
	tmuxPanePid?: number;
	taskRef?: string;
	taskSummary?: string;
	windDownReason?: WindDownReason;
	resumable?: ResumablePayload;
	terminal?: ProcessTerminalHandoff;
}
`,
      // runtime.ts: named imports of the store, a port typed from them, host-typed entries both ways.
      [`${ADAPTATIVE}/process-matrix/runtime.ts`]: `
import type { AgentIdentityContract } from "../orchestration/contracts.ts";
import type { ProcessMatrixEntry, ResumablePayload } from "./codes.ts";
import {
	buildEntryId,
	listEntries,
	readEntry,
	removeEntryIfUnchanged,
	writeEntry,
	writeEntryIfUnchanged,
	writeEntryIfUnchangedSync,
} from "./store.ts";

export interface ProcessMatrixStorePort {
	listEntries: typeof listEntries;
	readEntry: typeof readEntry;
	removeEntryIfUnchanged: typeof removeEntryIfUnchanged;
	writeEntry: typeof writeEntry;
	writeEntryIfUnchanged: typeof writeEntryIfUnchanged;
	writeEntryIfUnchangedSync: typeof writeEntryIfUnchangedSync;
}

export const localProcessMatrixStore: ProcessMatrixStorePort = Object.freeze({
	listEntries,
	readEntry,
	removeEntryIfUnchanged,
	writeEntry,
	writeEntryIfUnchanged,
	writeEntryIfUnchangedSync,
});

function buildMasterEntry(agent: AgentIdentityContract, pid: number, now: string): ProcessMatrixEntry {
	return { entryId: buildEntryId("master", agent.resumeContext.sessionId), role: "master", agent, pid, hostname: "h", startedAt: now, heartbeatAt: now, status: "running" };
}

export async function registerAndBeat(agentDir: string, agent: AgentIdentityContract, pid: number): Promise<ProcessMatrixEntry | undefined> {
	const entry = buildMasterEntry(agent, pid, "2026-07-19T12:00:00.000Z");
	await writeEntry(agentDir, entry);
	const next: ProcessMatrixEntry = { ...entry, heartbeatAt: "2026-07-19T12:00:30.000Z" };
	if (!(await writeEntryIfUnchanged(agentDir, entry.entryId, entry, next))) return undefined;
	const stored: ProcessMatrixEntry | undefined = await readEntry(agentDir, entry.entryId);
	return stored;
}

export function closeOnExit(agentDir: string, entry: ProcessMatrixEntry): boolean {
	const resumable: ResumablePayload = { agent: entry.agent, lastCode: "closed" };
	return writeEntryIfUnchangedSync(agentDir, entry, { ...entry, status: "closed", resumable, terminal: { code: 0, signal: null, observedAt: entry.heartbeatAt } });
}

export async function pruneClosed(agentDir: string): Promise<string[]> {
	const pruned: string[] = [];
	for (const entry of await listEntries(agentDir)) {
		if (entry.status === "closed" && (await removeEntryIfUnchanged(agentDir, entry))) pruned.push(entry.entryId);
	}
	return pruned;
}
`,
    },
  },

  [`${ADAPTATIVE}/util/atomic-file.ts`]: {
    file: '/*IMPORTS*/\n/*SWAP*/\n',
    siblings: {
      // Another store built on the helpers, with the option types.
      [`${ADAPTATIVE}/util/json-store.ts`]: `
import { type AtomicFileLockOptions, type AtomicFileWriteOptions, withFileLockSync, writeFileAtomicSync } from "./atomic-file.ts";

const LOCK: AtomicFileLockOptions = { retries: 3, realpath: false };
const WRITE: AtomicFileWriteOptions = { mode: 0o600 };

export function updateJsonSync(file: string, value: string): number {
	return withFileLockSync(file, () => {
		writeFileAtomicSync(file, value, WRITE);
		return value.length;
	}, LOCK);
}
`,
    },
  },

  [`${ADAPTATIVE}/reload-blockers.ts`]: {
    file: `import { getAgentDir } from "./config.ts";
/*IMPORTS*/

export interface ReloadSessionRecord {
	key: string;
	pid?: number;
}

export interface ReloadBlockerOptions {
	agentDir?: string;
	ownPid?: number;
	isProcessAlive?: (pid: number | undefined) => boolean;
}

/*SWAP*/

function activeTurnBlockers(sessions: readonly ReloadSessionRecord[], options: ReloadBlockerOptions): ReloadSessionRecord[] {
	const isAlive = options.isProcessAlive ?? isReloadSessionProcessAlive;
	return sessions.filter((session) => session.pid !== options.ownPid && isAlive(session.pid));
}

export function getPendingReloadBlockers(sessions: readonly ReloadSessionRecord[], options: ReloadBlockerOptions = {}): { agentDir: string; blockers: string[] } {
	return { agentDir: options.agentDir ?? getAgentDir(), blockers: activeTurnBlockers(sessions, options).map((s) => s.key) };
}
`,
    siblings: {
      [`${ADAPTATIVE}/config.ts`]: `
export function getAgentDir(): string {
	return "~/.pi/agent";
}
`,
      // The package index re-exports it (public API).
      'pi-adaptative packages/coding-agent/src/index.ts': `
export { getPendingReloadBlockers, isReloadSessionProcessAlive } from "./core/reload-blockers.ts";
`,
    },
  },

  [`${ADAPTATIVE}/worktree-sync/store.ts`]: {
    file: `import { withFileLock, writeFileAtomic } from "../util/atomic-file.ts";
/*IMPORTS*/
import type {
	IntegrationLockAcquisition,
	IntegrationLockOwner,
	LaneRegistration,
} from "./codes.ts";

export interface IntegrationLockDeps {
	/** Injectable liveness probe (deterministic tests). */
	isPidAlive?: (owner: IntegrationLockOwner) => boolean;
	now?: () => string;
}

/*SWAP*/

function laneFile(root: string, lane: LaneRegistration): string {
	return \`\${root}/lanes/\${lane.laneKey}.json\`;
}

export async function writeLane(root: string, lane: LaneRegistration): Promise<void> {
	await writeFileAtomic(laneFile(root, lane), \`\${JSON.stringify(lane, null, "\\t")}\\n\`);
}

export async function acquireIntegrationLock(
	root: string,
	holder: IntegrationLockOwner | undefined,
	owner: Omit<IntegrationLockOwner, "acquiredAt" | "token">,
	deps: IntegrationLockDeps = {},
): Promise<IntegrationLockAcquisition> {
	return withFileLock(\`\${root}/locks/integration-metadata\`, async () => {
		const isPidAlive = deps.isPidAlive ?? defaultIsPidAlive;
		if (holder && isPidAlive(holder)) return { acquired: false, holder, holderAlive: true };
		const manifest: IntegrationLockOwner = { ...owner, token: "token-1", acquiredAt: (deps.now ?? (() => "2026-07-19T12:00:00.000Z"))() };
		await writeFileAtomic(\`\${root}/locks/integration/owner.json\`, \`\${JSON.stringify(manifest)}\\n\`);
		return { acquired: true, takeover: holder !== undefined, token: manifest.token };
	});
}
`,
    siblings: {
      [`${ADAPTATIVE}/worktree-sync/codes.ts`]: `
export interface LaneRegistration {
	laneKey: string;
	branch: string;
	worktreePath: string;
	status: "active" | "released" | "orphaned";
	createdAt: string;
	updatedAt: string;
}

export interface IntegrationLockOwner {
	pid: number;
	hostname: string;
	token: string;
	sessionId?: string;
	laneKey?: string;
	acquiredAt: string;
}

export type IntegrationLockAcquisition =
	| { acquired: true; takeover: boolean; token: string }
	| { acquired: false; holder?: IntegrationLockOwner; holderAlive: boolean };
`,
    },
  },

  'pi-crew src/runtime/process-status.ts': {
    file: `import type { TeamRunManifest } from "../state/types.ts";
/*IMPORTS*/
export { hasAsyncStartMarker } from "./async-marker.ts";

/*SWAP*/

export function isActiveRunStatus(status: string): boolean {
	return status === "queued" || status === "planning" || status === "running" || status === "waiting";
}

export function hasStaleAsyncProcess(run: TeamRunManifest): boolean {
	if (!isActiveRunStatus(run.status) || !run.async) return false;
	return !checkProcessLiveness(run.async.pid).alive;
}
`,
    siblings: {
      'pi-crew src/state/types.ts': `
export interface TeamRunManifest {
	status: string;
	updatedAt: string;
	async?: { pid?: number };
}
`,
      'pi-crew src/runtime/async-marker.ts': `
export function hasAsyncStartMarker(text: string): boolean {
	return text.startsWith("async:");
}
`,
      // A caller that takes both the function and its result type from process-status.ts.
      'pi-crew src/runtime/status-view.ts': `
import { checkProcessLiveness, hasStaleAsyncProcess, type ProcessLiveness } from "./process-status.ts";

export function describePid(pid: number | undefined): string {
	const liveness: ProcessLiveness = checkProcessLiveness(pid);
	return \`\${liveness.alive ? "alive" : "dead"}: \${liveness.detail}\`;
}

export function stale(pid: number): boolean {
	return hasStaleAsyncProcess({ status: "running", updatedAt: "2026-07-19T12:00:00.000Z", async: { pid } });
}
`,
    },
  },

  'pi-crew src/runtime/orphan-worker-registry.ts': {
    file: `import { userPiRoot } from "../utils/paths.ts";
/*IMPORTS*/

export interface OrphanWorkerEntry {
	pid: number;
	parentPid: number;
	parentPidStartTime: number;
	startTime: number;
	registry: string;
}

/*SWAP*/

export function registerWorker(pid: number, parentPid: number): OrphanWorkerEntry | undefined {
	if (!Number.isFinite(pid) || pid <= 0) return undefined;
	const startTime = getProcessStartTime(pid) ?? 0;
	const parentPidStartTime = Number.isFinite(parentPid) && parentPid > 0 ? (getProcessStartTime(parentPid) ?? 0) : 0;
	return { pid, parentPid, parentPidStartTime, startTime, registry: \`\${userPiRoot()}/state/orphan-workers.json\` };
}
`,
    siblings: {
      'pi-crew src/utils/paths.ts': `
export function userPiRoot(): string {
	return "~/.pi";
}
`,
    },
  },
}

/** The swap blocks (```ts swap) of docs/SWAPPING.md's text: `{ key: '<host> <path>', body }`. */
function swapBlocks(text) {
  return [...text.matchAll(/```ts swap\n\/\/ ((?:pi-crew|pi-adaptative) \S+)[^\n]*\n([\s\S]*?)```/g)].map((m) => ({ key: m[1], body: m[2] }))
}

/** The model file with a block in it: `import` lines among the file's imports, the rest where the definitions were. */
function compose(template, body) {
  const lines = body.trimEnd().split('\n')
  const imports = lines.filter((l) => l.startsWith('import '))
  const rest = lines.filter((l) => !l.startsWith('import '))
  return template.replace('/*IMPORTS*/', imports.join('\n')).replace('/*SWAP*/', rest.join('\n'))
}

/** Where a model file goes: `<host>/<path>`. */
const fileOf = (key) => key.replace(' ', '/')

module.exports = { HOSTS, swapBlocks, compose, fileOf }
