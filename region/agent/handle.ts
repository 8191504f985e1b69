/**
 * The `AgentHandle` port: what the region's `agents` actuator asks of one node agent — its announcement (GPU slots,
 * host memory for blocks, data-plane address, the stores and engines it holds), block stores, multicast roles, and
 * engine processes. Adapters: gRPC (`AgentClient`, a `tidegate agent` process) and in-process (`tidegate dev`).
 */
import type { BlockArrival, RunResult } from "../../native/index.js";
import type { RunCall } from "./client.js";
import type { AgentInfo, LoadSpec } from "./node.js";

/** An engine the agent should start for an instance. */
export interface EngineSpec {
  instanceId: string;
  model: string;
  gpu: string;
  /** GPU slots it takes (the model's tensor-parallel degree on `gpu`). */
  gpus: number;
  /** A real engine's command, e.g. `vllm serve {model} --port {port}`; absent = engine-sim. */
  commandTemplate?: string;
  /** engine-sim's time scale. */
  timeScale?: number;
  startTimeoutMs?: number;
}

/** An engine an agent runs (or ran: `exited`, with why in `detail`). */
export interface EngineInfo {
  instanceId: string;
  model: string;
  gpu: string;
  gpus: number;
  /** Base URL of its OpenAI-compatible API. */
  url: string;
  pid: number;
  state: "starting" | "running" | "exited";
  startedAtMs: number;
  detail: string;
}

/** One model's block store on the agent. */
export interface StoreInfo {
  model: string;
  blockCount: number;
  totalBytes: number;
  /** Blocks present (verified on arrival). */
  present: number;
  /** Last time the store was filled, read by a run or used by an engine start (epoch ms). */
  lastUsedMs: number;
}

/** What an agent announces about its node. */
export interface NodeAnnouncement extends AgentInfo {
  grpcAddress: string;
  region: string;
  gpuType: string;
  gpuSlots: number;
  stores: StoreInfo[];
  engines: EngineInfo[];
}

/** One node agent as the region sees it. Every method rejects with a TidegateError (DataPlaneError for transfers). */
export interface AgentHandle {
  readonly nodeId: string;
  announcement(): Promise<NodeAnnouncement>;
  load(spec: LoadSpec): Promise<{ blockBytes: number; present: number }>;
  run(call: RunCall, onBlock?: (a: BlockArrival) => void, signal?: AbortSignal): Promise<RunResult>;
  verify(model: string, seed: number): Promise<{ firstMismatch: number; present: number }>;
  drop(model: string): Promise<void>;
  startEngine(spec: EngineSpec): Promise<EngineInfo>;
  stopEngine(instanceId: string, graceMs: number): Promise<EngineInfo | undefined>;
  close(): void;
}
