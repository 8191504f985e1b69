/**
 * Loads nodes/proto/agent.proto at run time (found by walking up from this module, so it works from source and
 * from dist/) and maps data-plane errors to and from gRPC status metadata.
 */
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { ERROR_CODES, TidegateError, toTidegateError, type ErrorCode } from "../../core/errors.js";
import { DataPlaneError } from "../../native/errors.js";
import type { EngineInfo, EngineState, NodeAnnouncement } from "./handle.js";

/** Wire shapes (keepCase, uint64 as Number). */
export interface WireAgentInfo {
  node_id: string;
  data_host: string;
  data_port: number;
  transport: string;
  fallback: string;
  memory_bytes: number;
  grpc_address: string;
  region: string;
  gpu_type: string;
  gpu_slots: number;
  stores: { model: string; block_count: number; total_bytes: number; present: number; last_used_ms: number }[];
  engines: WireEngineInfo[];
  /** "" / 0 (proto3 defaults, or absent from an older agent): not announced. */
  nvlink_domain?: string;
  link_bytes_per_s?: number;
}
/** EngineInfo on the wire. */
export interface WireEngineInfo {
  instance_id: string;
  model: string;
  gpu: string;
  gpus: number;
  url: string;
  pid: number;
  state: string;
  started_at_ms: number;
  detail: string;
  role?: string;
}
/** StartEngineRequest on the wire ("" and 0 = defaults). */
export interface WireStartEngineRequest {
  instance_id: string;
  model: string;
  gpu: string;
  gpus: number;
  command_template: string;
  time_scale: number;
  start_timeout_ms: number;
  await_blocks: boolean;
  pipeline: string;
  stage?: string;
  /** EngineSettings as JSON (core/engine-settings.ts engineSettingsJson); "" = none. */
  settings?: string;
}
/** AnnounceReply on the wire. */
export interface WireAnnounceReply {
  known: boolean;
  message: string;
}

/** EngineInfo → wire. */
export function engineToWire(e: EngineInfo): WireEngineInfo {
  return { instance_id: e.instanceId, model: e.model, gpu: e.gpu, gpus: e.gpus, url: e.url, pid: e.pid, state: e.state, started_at_ms: e.startedAtMs, detail: e.detail, role: e.role ?? "" };
}

/** Wire → EngineInfo; an unknown state string is reported as "exited" only if it says so, else "starting". */
export function engineFromWire(w: WireEngineInfo): EngineInfo {
  const state: EngineState = w.state === "running" || w.state === "exited" ? w.state : "starting";
  return { instanceId: w.instance_id, model: w.model, gpu: w.gpu, gpus: w.gpus, url: w.url, pid: w.pid, state, startedAtMs: w.started_at_ms, detail: w.detail, ...(w.role === undefined || w.role === "" ? {} : { role: w.role }) };
}

/** NodeAnnouncement → AgentInfo on the wire (Info reply and Announce request). */
export function announcementToWire(a: NodeAnnouncement): WireAgentInfo {
  return {
    node_id: a.nodeId,
    data_host: a.dataHost,
    data_port: a.dataPort,
    transport: a.transport,
    fallback: a.fallback,
    memory_bytes: a.memoryBytes,
    grpc_address: a.grpcAddress,
    region: a.region,
    gpu_type: a.gpuType,
    gpu_slots: a.gpuSlots,
    stores: a.stores.map((s) => ({ model: s.model, block_count: s.blockCount, total_bytes: s.totalBytes, present: s.present, last_used_ms: s.lastUsedMs })),
    engines: a.engines.map(engineToWire),
    nvlink_domain: a.nvlinkDomain ?? "",
    link_bytes_per_s: a.linkBytesPerS ?? 0,
  };
}

/** AgentInfo on the wire → NodeAnnouncement. */
export function announcementFromWire(i: WireAgentInfo): NodeAnnouncement {
  return {
    nodeId: i.node_id,
    dataHost: i.data_host,
    dataPort: i.data_port,
    transport: i.transport,
    fallback: i.fallback,
    memoryBytes: i.memory_bytes,
    grpcAddress: i.grpc_address,
    region: i.region,
    gpuType: i.gpu_type,
    gpuSlots: i.gpu_slots,
    stores: i.stores.map((s) => ({ model: s.model, blockCount: s.block_count, totalBytes: s.total_bytes, present: s.present, lastUsedMs: s.last_used_ms })),
    engines: i.engines.map(engineFromWire),
    ...(i.nvlink_domain === undefined || i.nvlink_domain === "" ? {} : { nvlinkDomain: i.nvlink_domain }),
    ...(i.link_bytes_per_s === undefined || !(i.link_bytes_per_s > 0) ? {} : { linkBytesPerS: i.link_bytes_per_s }),
  };
}
/** LoadRequest on the wire. */
export interface WireLoadRequest {
  model: string;
  total_bytes: number;
  block_count: number;
  fill: string;
  file_path: string;
  seed: number;
}
/** LoadReply on the wire. */
export interface WireLoadReply {
  model: string;
  block_count: number;
  block_bytes: number;
  total_bytes: number;
  present: number;
}
/** RunRequest on the wire; plan_json is a MulticastPlan. */
export interface WireRunRequest {
  model: string;
  plan_json: string;
  run_id: number;
  addresses: { node_id: string; host: string; port: number }[];
  stall_ms: number;
  connect_ms: number;
}
/** One Run stream message: a block arrival or the final Done. */
export interface WireRunEvent {
  block: { block: number; from: string; at_ms: number; bytes: number } | null;
  done: { bytes_sent: number; bytes_received: number; elapsed_ms: number; profile: WireRunProfile | null } | null;
}
/** RunProfile on the wire (native RunProfile in snake case). */
export interface WireRunProfile {
  start_mono_ms: number;
  dial_ms: number;
  first_byte_ms: number;
  last_byte_ms: number;
  checksum_ms: number;
  recv_calls: number;
  send_calls: number;
  waits: number;
}
/** VerifyReply on the wire; first_mismatch is −1 when every byte matches. */
export interface WireVerifyReply {
  first_mismatch: number;
  present: number;
}

/** Status metadata keys: the TidegateError code, and the DataPlaneError reason, peer and block. */
export const CODE_KEY = "tidegate-code";
export const REASON_KEY = "dataplane-reason";
export const PEER_KEY = "dataplane-peer";
export const BLOCK_KEY = "dataplane-block";

/** The path of nodes/proto/agent.proto. */
export function agentProtoPath(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 8; i++) {
    const candidate = join(dir, "nodes", "proto", "agent.proto");
    if (existsSync(candidate)) return candidate;
    const parent = dirname(dir);
    if (parent === dir) break;
    dir = parent;
  }
  throw new TidegateError("internal", "nodes/proto/agent.proto not found above " + fileURLToPath(import.meta.url));
}

type Services = { NodeAgent: grpc.ServiceClientConstructor; AgentRegistry: grpc.ServiceClientConstructor };
let cached: Services | undefined;

function services(): Services {
  if (cached !== undefined) return cached;
  const def = protoLoader.loadSync(agentProtoPath(), { keepCase: true, longs: Number, enums: String, defaults: true, arrays: true });
  const pkg = grpc.loadPackageDefinition(def) as unknown as { tidegate: { agent: { v1: Services } } };
  cached = pkg.tidegate.agent.v1;
  return cached;
}

/** The `tidegate.agent.v1.NodeAgent` service (client constructor; `.service` is the server definition). */
export function agentService(): grpc.ServiceClientConstructor {
  return services().NodeAgent;
}

/** The `tidegate.agent.v1.AgentRegistry` service, served by the region, called by agents. */
export function registryService(): grpc.ServiceClientConstructor {
  return services().AgentRegistry;
}

/** A gRPC status for `err`, carrying the data-plane reason, peer and block in metadata. */
export function statusOf(err: unknown): Partial<grpc.StatusObject> {
  const te = toTidegateError(err);
  const metadata = new grpc.Metadata();
  metadata.set(CODE_KEY, te.code);
  if (te instanceof DataPlaneError) {
    metadata.set(REASON_KEY, te.reason);
    if (te.peer !== undefined) metadata.set(PEER_KEY, te.peer);
    if (te.block !== undefined) metadata.set(BLOCK_KEY, String(te.block));
  }
  return { code: te.grpcCode, details: te.message, metadata };
}

/** Rebuilds the agent's error from a failed call: a DataPlaneError when the status carries a reason. */
export function errorFromStatus(e: grpc.ServiceError): Error {
  const reason = e.metadata?.get(REASON_KEY)[0];
  if (typeof reason === "string") {
    const peer = e.metadata.get(PEER_KEY)[0];
    const block = e.metadata.get(BLOCK_KEY)[0];
    return new DataPlaneError(reason, e.details, { peer: typeof peer === "string" ? peer : undefined, block: typeof block === "string" ? Number(block) : undefined });
  }
  const code = e.metadata?.get(CODE_KEY)[0];
  if (typeof code === "string" && code in ERROR_CODES) return new TidegateError(code as ErrorCode, e.details, { cause: e });
  return new TidegateError("upstream_error", `agent call failed: ${e.message}`, { cause: e });
}
