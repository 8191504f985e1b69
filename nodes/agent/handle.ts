/**
 * The ports around a node agent. `AgentHandle` is what the region's actuator drives (AgentClient implements it over
 * gRPC); `NodeEngineHost` is how a NodeAgent starts and stops engine processes (EngineSupervisor spawns real ones; a dev
 * wiring may give an in-process host). NodeAgent decides (store complete, free slots, idempotency, template);
 * an NodeEngineHost only acts.
 */
import type { EngineSettings } from "../../core/engine-settings.js";
import type { BlockArrival, RunResult } from "../../native/index.js";
import type { MulticastPlan } from "../multicast/schedule.js";

/**
 * What an agent says of itself (its node id, data-plane address and transport, host memory for blocks) and of its
 * links, which the region's multicast planner uses (region/pool/transfer.ts planTransfer; BlitzScale §5.1,
 * Algorithm 1): `nvlinkDomain`, the NVLink domain its GPUs share with other nodes' (targets in one domain are
 * grouped: one loads over the network, the rest get the blocks from it over NVLink; line 1), and `linkBytesPerS`,
 * its network link's rate (targets are taken fastest first, sources by remaining outbound rate; lines 4–12).
 * Absent: no NVLink domain shared with another node, link rate unknown (the region's configured rate is used).
 */
export interface AgentInfo {
  nodeId: string;
  dataHost: string;
  dataPort: number;
  transport: string;
  fallback: string;
  memoryBytes: number;
  nvlinkDomain?: string;
  linkBytesPerS?: number;
}

/** How to fill a model's store: "empty" (a target), "file" (a packed model, exactly totalBytes) or "pattern" (seed). */
export interface LoadSpec {
  model: string;
  totalBytes: number;
  blockCount: number;
  fill: "empty" | "file" | "pattern";
  filePath?: string;
  seed?: number;
}

/** One Run call: the plan, its run id (same on every node) and every node's data address. */
export interface RunCall {
  model: string;
  plan: MulticastPlan;
  runId: number;
  addresses: Record<string, { host: string; port: number }>;
  stallMs?: number;
  connectMs?: number;
}

/**
 * An engine to start. `gpus` ≥ 1 GPU slots of this node (also the engine's tensor parallelism, `{tp}`).
 * `commandTemplate` unset or "" = `tidegate engine-sim`; otherwise argv with placeholders, e.g.
 * `vllm serve {model} --port {port}` (see template.ts). `timeScale` and `startTimeoutMs` (wait for engine-sim's URL,
 * default 20000) apply to engine-sim only.
 */
export interface EngineSpec {
  instanceId: string;
  model: string;
  gpu: string;
  gpus: number;
  commandTemplate?: string;
  timeScale?: number;
  startTimeoutMs?: number;
  /**
   * Start while the model's blocks still arrive (the engine process overlaps the transfer): the store need not be
   * complete; engine-sim's /health answers 503 until it is (within startTimeoutMs), then 200.
   */
  awaitBlocks?: boolean;
  /**
   * engine-sim only: serve the model as a pipeline of stages with key-stage scaling, this JSON being engine-sim's
   * `--pipeline` (region/keystage/pipeline-engine.ts PipelineSpec). Absent = a whole-model instance.
   */
  pipeline?: string;
  /**
   * engine-sim only, not with `pipeline`: run one stage replica of a pipelined model as this process, this JSON being
   * engine-sim's `--stage` (region/keystage/stage-server.ts StageProcessSpec). Absent = not a stage process.
   */
  stage?: string;
  /**
   * engine-sim only, not with `pipeline` or `stage`: its settings (core/engine-settings.ts; the region's
   * config engines section and routing.blockTokens, build-sim-engine.ts engineSettingsOf). Absent = its defaults.
   */
  settings?: EngineSettings;
}

/** The states of an engine process; health (serving or not) is the region's to check, not the agent's. */
export type EngineState = "starting" | "running" | "exited";

/**
 * One engine process on a node. `url` is its base URL (http://host:port); `pid` its process id; `state` "starting"
 * (spawned, a template engine), "running" (engine-sim printed its URL) or "exited" (`detail` holds the exit code or
 * signal and its last stderr lines); `startedAtMs` epoch ms.
 */
export interface EngineInfo {
  instanceId: string;
  model: string;
  gpu: string;
  gpus: number;
  url: string;
  pid: number;
  state: EngineState;
  startedAtMs: number;
  detail: string;
  /** The prefill/decode role it was started with (StartEngine settings' `role`); absent = none. */
  role?: string;
}

/** One model's block store on a node; complete when present == blockCount. `lastUsedMs`: epoch ms of the last load, run or engine start. */
export interface StoreInfo {
  model: string;
  blockCount: number;
  totalBytes: number;
  present: number;
  lastUsedMs: number;
}

/** Everything a node tells its region (Info, and Announce every interval). `grpcAddress` is how to dial the agent. */
export interface NodeAnnouncement extends AgentInfo {
  grpcAddress: string;
  region: string;
  gpuType: string;
  gpuSlots: number;
  stores: StoreInfo[];
  engines: EngineInfo[];
}

/** The region's handle on one node agent. Failed calls reject with TidegateError (DataPlaneError for transfers). */
export interface AgentHandle {
  readonly nodeId: string;
  announcement(): Promise<NodeAnnouncement>;
  load(spec: LoadSpec): Promise<{ blockBytes: number; present: number }>;
  run(call: RunCall, onBlock?: (a: BlockArrival) => void, signal?: AbortSignal): Promise<RunResult>;
  verify(model: string, seed: number): Promise<{ firstMismatch: number; present: number }>;
  drop(model: string): Promise<void>;
  /** Rejects with `conflict` (store missing or incomplete), `resource_exhausted` (too few free slots), `invalid_request`. */
  startEngine(spec: EngineSpec): Promise<EngineInfo>;
  /** SIGTERM, SIGKILL after `graceMs`; resolves once it exited. undefined when the node has no such engine. */
  stopEngine(instanceId: string, graceMs: number): Promise<EngineInfo | undefined>;
  close(): void;
}

/**
 * Starts and stops engine processes for a NodeAgent, which has already checked the spec. `start` resolves once
 * the engine is spawned (engine-sim: once it printed its URL), with state "exited" when it died first; it lists
 * the engine (state "starting") before its first await. `stop` resolves once it exited (undefined when unknown).
 * `list` includes recently exited engines. `close` stops every engine.
 */
export interface NodeEngineHost {
  start(spec: EngineSpec): Promise<EngineInfo>;
  stop(instanceId: string, graceMs: number): Promise<EngineInfo | undefined>;
  list(): EngineInfo[];
  close(): Promise<void>;
}
