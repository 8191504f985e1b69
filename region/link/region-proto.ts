/**
 * Loads region/proto/region.proto at run time (from the source tree or from dist/: the file is found by walking up
 * from this module to the repository root) and converts between the wire messages and the core/ports.ts shapes.
 * The conversions validate what arrives over the wire: a malformed message is an invalid_request, never a crash.
 */
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { TidegateError } from "../../core/errors.js";
import { decodeDispatchEvents, encodeDispatchEvents } from "./codec.js";
import { decodeMuxDown, encodeMuxDown } from "./mux-codec.js";
import type { WireDispatchEvents, WireDispatchRequest, WireDone, WireMuxError, WireMuxEvent, WireMuxUp } from "./wire.js";

export type { WireDispatchEvents, WireDispatchRequest, WireDone, WireMuxError, WireMuxEvent, WireMuxUp } from "./wire.js";
import type { EngineEvent, GenerateRequest, InstanceState, ModelTelemetry, PoolRole, RegionInstances, RegionTargets, RegionTelemetry, TargetsAck } from "../../core/ports.js";
import type { RegionListing } from "../gateway/slo-book.js";

/** Wire shapes (proto-loader with keepCase: snake_case fields; uint64 as Number). */
export interface WireTelemetry {
  region: string;
  seq: number;
  at_ms: number;
  models: {
    model: string;
    effective_memory_utilization: number;
    tokens_per_s: number;
    batch_tokens_per_s?: number;
    demand_tokens_per_s?: number;
    preemptible_memory_utilization?: number;
    preempts?: boolean;
    preemptions_total?: number;
    running: number;
    waiting: number;
    instances: Record<InstanceState, number> | null;
    stale_instances?: number;
    slo?: { requests: number; met: number; finished: number; prompt_tokens: number; output_tokens: number } | null;
    cold?: { held: number; expected_ms: number } | null;
    endpoints: { endpoint_id: string; gpu: string; effective_memory_utilization: number; serving_instances: number; instances?: Record<InstanceState, number> | null; expected_scale_out_ms?: number; preemptible_memory_utilization?: number; preempts?: boolean; pools?: { role: string; instances?: Record<InstanceState, number> | null }[] }[];
  }[];
}

export interface WireTargets {
  decision_id: number;
  region: string;
  made_at_ms: number;
  advisory: boolean;
  endpoints: { model: string; gpu: string; instances: number; forecast_tokens_per_s: number; floor_instances?: number; floor_steps?: number[]; floor_step_ms?: number; upper_steps?: number[]; demand_mean?: number[]; demand_lower?: number[]; demand_upper?: number[]; role?: string }[];
}

export interface WireTargetsAck {
  region: string;
  decision_id: number;
  accepted: boolean;
}

/** Metadata keys carrying the TidegateError code of a failed Dispatch and whether it followed the first event. */
export const CODE_KEY = "tidegate-code";
export const STARTED_KEY = "tidegate-started";

/** The path of region/proto/region.proto, found from this module's location in source or in dist/. */
export function regionProtoPath(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 8; i++) {
    const candidate = join(dir, "region", "proto", "region.proto");
    if (existsSync(candidate)) return candidate;
    const parent = dirname(dir);
    if (parent === dir) break;
    dir = parent;
  }
  throw new TidegateError("internal", "region/proto/region.proto not found above " + fileURLToPath(import.meta.url));
}

let cached: grpc.ServiceClientConstructor | undefined;

/**
 * The `tidegate.region.v1.Region` service (client constructor; `.service` is the server definition). Dispatch's
 * response messages use the hand-written codec (codec.ts, same wire format) and DispatchMux's down-messages
 * (MuxDown, handled as its list of MuxEvents) mux-codec.ts; everything else uses protobufjs.
 */
export function regionService(): grpc.ServiceClientConstructor {
  if (cached !== undefined) return cached;
  const def = protoLoader.loadSync(regionProtoPath(), { keepCase: true, longs: Number, enums: String, defaults: true, arrays: true });
  const service = def["tidegate.region.v1.Region"] as grpc.ServiceDefinition;
  const dispatch = service.Dispatch!;
  const mux = service.DispatchMux!;
  const patched: grpc.ServiceDefinition = {
    ...service,
    Dispatch: {
      ...dispatch,
      responseSerialize: (m: WireDispatchEvents) => encodeDispatchEvents(m),
      responseDeserialize: (b: Buffer) => decodeDispatchEvents(b),
    },
    DispatchMux: {
      ...mux,
      responseSerialize: (m: WireMuxEvent[]) => encodeMuxDown(m),
      responseDeserialize: (b: Buffer) => decodeMuxDown(b),
    },
  };
  cached = grpc.makeClientConstructor(patched, "Region");
  return cached;
}

export function requestToWire(req: GenerateRequest): WireDispatchRequest {
  return { id: req.id, model: req.model, kind: req.kind, prompt_tokens: req.promptTokens, max_tokens: req.maxTokens, priority: req.priority, body_json: JSON.stringify(req.body), batch: req.batch === true };
}

/** Validates a DispatchRequest from the wire; throws invalid_request naming the field at fault. */
export function requestFromWire(w: WireDispatchRequest): GenerateRequest {
  const bad = (param: string, msg: string) => new TidegateError("invalid_request", `DispatchRequest.${param}: ${msg}`, { param });
  if (w.id.length === 0) throw bad("id", "must not be empty");
  if (w.model.length === 0) throw bad("model", "must not be empty");
  if (w.kind !== "chat" && w.kind !== "completion") throw bad("kind", `must be "chat" or "completion", got ${JSON.stringify(w.kind)}`);
  if (w.prompt_tokens < 1) throw bad("prompt_tokens", "must be ≥ 1");
  if (w.max_tokens < 1) throw bad("max_tokens", "must be ≥ 1");
  if (w.priority !== 0 && w.priority !== 1) throw bad("priority", `must be 0 or 1, got ${w.priority}`);
  let body: unknown = {};
  if (w.body_json.length > 0) {
    try {
      body = JSON.parse(w.body_json);
    } catch (err) {
      throw new TidegateError("invalid_json", `DispatchRequest.body_json: ${(err as Error).message}`, { param: "body_json", cause: err });
    }
  }
  if (typeof body !== "object" || body === null || Array.isArray(body)) throw bad("body_json", "must be a JSON object");
  return { id: w.id, model: w.model, kind: w.kind, promptTokens: w.prompt_tokens, maxTokens: w.max_tokens, priority: w.priority, body: body as Record<string, unknown>, ...(w.batch === true ? { batch: true } : {}) };
}

export function doneToWire(ev: Extract<EngineEvent, { type: "done" }>): WireDone {
  return { finish_reason: ev.finishReason, prompt_tokens: ev.usage.prompt_tokens, completion_tokens: ev.usage.completion_tokens, total_tokens: ev.usage.total_tokens };
}

export function doneFromWire(d: WireDone): Extract<EngineEvent, { type: "done" }> {
  if (d.finish_reason !== "stop" && d.finish_reason !== "length") {
    throw new TidegateError("upstream_error", `region sent finish_reason ${JSON.stringify(d.finish_reason)}`);
  }
  return { type: "done", finishReason: d.finish_reason, usage: { prompt_tokens: d.prompt_tokens, completion_tokens: d.completion_tokens, total_tokens: d.total_tokens } };
}

/** The preemptible part of a telemetry figure on the wire: the share and whether it is reported at all. */
function preemptibleToWire(t: { preemptibleMemoryUtilization?: number }): { preemptible_memory_utilization: number; preempts: boolean } {
  return { preemptible_memory_utilization: t.preemptibleMemoryUtilization ?? 0, preempts: t.preemptibleMemoryUtilization !== undefined };
}

function preemptibleFromWire(w: { preemptible_memory_utilization?: number; preempts?: boolean }): { preemptibleMemoryUtilization?: number } {
  return w.preempts === true ? { preemptibleMemoryUtilization: w.preemptible_memory_utilization ?? 0 } : {};
}

export function telemetryToWire(t: RegionTelemetry): WireTelemetry {
  return {
    region: t.region,
    seq: t.seq,
    at_ms: t.atMs,
    models: t.models.map((m) => ({
      model: m.model,
      effective_memory_utilization: m.effectiveMemoryUtilization,
      tokens_per_s: m.tokensPerS,
      batch_tokens_per_s: m.batchTokensPerS ?? 0,
      demand_tokens_per_s: m.demandTokensPerS ?? 0,
      ...preemptibleToWire(m),
      preemptions_total: m.preemptionsTotal ?? 0,
      running: m.running,
      waiting: m.waiting,
      instances: m.instances,
      stale_instances: m.staleInstances ?? 0,
      slo: m.slo === undefined ? null : { requests: m.slo.requests, met: m.slo.met, finished: m.slo.finished, prompt_tokens: m.slo.promptTokens, output_tokens: m.slo.outputTokens },
      cold: m.cold === undefined ? null : { held: m.cold.held, expected_ms: m.cold.expectedMs ?? 0 },
      endpoints: m.endpoints.map((e) => ({ endpoint_id: e.endpointId, gpu: e.gpu, effective_memory_utilization: e.effectiveMemoryUtilization, serving_instances: e.servingInstances, instances: e.instances ?? null, expected_scale_out_ms: e.expectedScaleOutMs ?? 0, ...preemptibleToWire(e), pools: Object.entries(e.pools ?? {}).map(([role, c]) => ({ role, instances: c })) })),
    })),
  };
}

function countsFromWire(c: Partial<Record<InstanceState, number>>): Record<InstanceState, number> {
  return { provisioning: c.provisioning ?? 0, loading: c.loading ?? 0, serving: c.serving ?? 0, draining: c.draining ?? 0, spot: c.spot ?? 0 };
}

/** An endpoint's pool counts from the wire: the prefill and decode entries (another role is not a pool; skipped). */
function poolsFromWire(w: { role: string; instances?: Record<InstanceState, number> | null }[] | undefined): { pools?: Partial<Record<PoolRole, Record<InstanceState, number>>> } {
  const pools: Partial<Record<PoolRole, Record<InstanceState, number>>> = {};
  for (const p of w ?? []) if ((p.role === "prefill" || p.role === "decode") && p.instances) pools[p.role] = countsFromWire(p.instances);
  return Object.keys(pools).length === 0 ? {} : { pools };
}

export function telemetryFromWire(w: WireTelemetry): RegionTelemetry {
  const models: ModelTelemetry[] = w.models.map((m) => {
    const c = m.instances ?? { provisioning: 0, loading: 0, serving: 0, draining: 0, spot: 0 };
    return {
      model: m.model,
      effectiveMemoryUtilization: m.effective_memory_utilization,
      tokensPerS: m.tokens_per_s,
      ...((m.batch_tokens_per_s ?? 0) > 0 ? { batchTokensPerS: m.batch_tokens_per_s! } : {}),
      ...((m.demand_tokens_per_s ?? 0) > 0 ? { demandTokensPerS: m.demand_tokens_per_s! } : {}),
      ...preemptibleFromWire(m),
      ...((m.preemptions_total ?? 0) > 0 ? { preemptionsTotal: m.preemptions_total! } : {}),
      running: m.running,
      waiting: m.waiting,
      instances: { provisioning: c.provisioning, loading: c.loading, serving: c.serving, draining: c.draining, spot: c.spot },
      endpoints: m.endpoints.map((e) => ({
        endpointId: e.endpoint_id,
        gpu: e.gpu,
        effectiveMemoryUtilization: e.effective_memory_utilization,
        servingInstances: e.serving_instances,
        ...(e.instances ? { instances: countsFromWire(e.instances) } : {}),
        ...((e.expected_scale_out_ms ?? 0) > 0 ? { expectedScaleOutMs: e.expected_scale_out_ms! } : {}),
        ...preemptibleFromWire(e),
        ...poolsFromWire(e.pools),
      })),
      ...((m.stale_instances ?? 0) > 0 ? { staleInstances: m.stale_instances! } : {}),
      ...(m.slo ? { slo: { requests: m.slo.requests, met: m.slo.met, finished: m.slo.finished, promptTokens: m.slo.prompt_tokens, outputTokens: m.slo.output_tokens } } : {}),
      ...(m.cold ? { cold: { held: m.cold.held, ...(m.cold.expected_ms > 0 ? { expectedMs: m.cold.expected_ms } : {}) } } : {}),
    };
  });
  return { region: w.region, seq: w.seq, atMs: w.at_ms, models };
}

export function targetsToWire(t: RegionTargets): WireTargets {
  return {
    decision_id: t.decisionId,
    region: t.region,
    made_at_ms: t.madeAtMs,
    advisory: t.advisory,
    endpoints: t.endpoints.map((e) => ({ model: e.model, gpu: e.gpu, instances: e.instances, forecast_tokens_per_s: e.forecastTokensPerS, floor_instances: e.floorInstances ?? 0, floor_steps: e.floorSteps ?? [], floor_step_ms: e.floorStepMs ?? 0, upper_steps: e.upperSteps ?? [], demand_mean: (e.demandSteps ?? []).map((d) => d.mean), demand_lower: (e.demandSteps ?? []).map((d) => d.lower), demand_upper: (e.demandSteps ?? []).map((d) => d.upper), role: e.role ?? "" })),
  };
}

export function targetsFromWire(w: WireTargets): RegionTargets {
  return {
    decisionId: w.decision_id,
    region: w.region,
    madeAtMs: w.made_at_ms,
    advisory: w.advisory,
    endpoints: w.endpoints.map((e) => ({ model: e.model, gpu: e.gpu, ...(e.role === "prefill" || e.role === "decode" ? { role: e.role } : {}), instances: e.instances, forecastTokensPerS: e.forecast_tokens_per_s, ...(e.floor_instances ? { floorInstances: Math.min(e.floor_instances, e.instances) } : {}), ...(e.floor_steps !== undefined && e.floor_steps.length > 0 && (e.floor_step_ms ?? 0) > 0 ? { floorSteps: e.floor_steps.map((n) => Math.min(n, e.instances)), floorStepMs: e.floor_step_ms!, ...(e.upper_steps !== undefined && e.upper_steps.length === e.floor_steps.length ? { upperSteps: e.upper_steps.map((n) => Math.min(n, e.instances)) } : {}), ...(e.demand_mean !== undefined && e.demand_mean.length === e.floor_steps.length && e.demand_lower?.length === e.floor_steps.length && e.demand_upper?.length === e.floor_steps.length ? { demandSteps: e.demand_mean.map((mean, i) => ({ mean, lower: e.demand_lower![i]!, upper: e.demand_upper![i]! })) } : {}) } : {}) })),
  };
}

export function ackFromWire(w: WireTargetsAck): TargetsAck {
  return { region: w.region, decisionId: w.decision_id, accepted: w.accepted };
}

/** The Instances reply as proto-loader sees it (keepCase). */
export interface WireInstances {
  region: string;
  actuator: string;
  instances: { id: string; model: string; gpu: string; gpus: number; state: string; node: string; entered_at_ms: number; for_ms: number; detail: string; url: string; role?: string }[];
  nodes: { node_id: string; lost: boolean; last_seen_at_ms: number; gpu_type: string; gpu_slots: number; free_slots: number; memory_bytes: number; data: string; transport: string; models: string[]; complete_models: string[] }[];
  failures: { at_ms: number; model: string; gpu: string; node: string; instance_id: string; message: string }[];
  actions: { at_ms: number; model: string; gpu: string; kind: string; instance_id: string; reason: string; from: number; desired: number; role?: string }[];
  slo?: { model: string; ttft_ms: number; tpot_ms: number; percentile: number; met: number; missed: number; unserved: number; last_hour_requests: number; last_hour_met: number; judged_hours: number; violated_hours: number }[];
  cold_models?: { model: string; held: number; in_flight: number; idle_for_ms: number }[];
  cold_starts?: { at_ms: number; model: string; gpu: string; instance_id: string; source: string; took_ms: number }[];
  holding?: { at_ms: number; since_ms: number; model: string; gpu: string; attainment: number; percentile: number; strategy: string; current: number; desired: number; reason: string; utilization: number; blocked: string }[];
}

/** The listing to the wire; the SLO entries of a RegionListing go along (a plain RegionInstances has none). */
export function instancesToWire(l: RegionListing): WireInstances {
  return {
    region: l.region,
    actuator: l.actuator,
    instances: l.instances.map((i) => ({ id: i.id, model: i.model, gpu: i.gpu, gpus: i.gpus, state: i.state, node: i.node, entered_at_ms: i.enteredAtMs, for_ms: i.forMs, detail: i.detail, url: i.url, role: i.role })),
    nodes: l.nodes.map((n) => ({ node_id: n.nodeId, lost: n.lost, last_seen_at_ms: n.lastSeenAtMs, gpu_type: n.gpuType, gpu_slots: n.gpuSlots, free_slots: Math.max(0, n.freeSlots), memory_bytes: n.memoryBytes, data: n.data, transport: n.transport, models: n.models, complete_models: n.completeModels })),
    failures: l.failures.map((f) => ({ at_ms: f.atMs, model: f.model, gpu: f.gpu, node: f.node, instance_id: f.instanceId, message: f.message })),
    actions: l.actions.map((a) => ({ at_ms: a.atMs, model: a.model, gpu: a.gpu, kind: a.kind, instance_id: a.instanceId, reason: a.reason, from: a.from, desired: a.desired, role: a.role ?? "" })),
    slo: (l.slo ?? []).map((s) => ({ model: s.model, ttft_ms: s.ttftMs, tpot_ms: s.tpotMs, percentile: s.percentile, met: s.met, missed: s.missed, unserved: s.unserved, last_hour_requests: s.lastHourRequests, last_hour_met: s.lastHourMet, judged_hours: s.judgedHours, violated_hours: s.violatedHours })),
    cold_models: (l.cold?.models ?? []).map((m) => ({ model: m.model, held: m.held, in_flight: m.inFlight, idle_for_ms: m.idleForMs })),
    cold_starts: (l.cold?.starts ?? []).map((c) => ({ at_ms: c.atMs, model: c.model, gpu: c.gpu, instance_id: c.instanceId, source: c.source, took_ms: c.tookMs })),
    holding: (l.holding ?? []).map((h) => ({ at_ms: h.atMs, since_ms: h.sinceMs, model: h.model, gpu: h.gpu, attainment: h.attainment, percentile: h.percentile, strategy: h.strategy, current: h.current, desired: h.desired, reason: h.reason, utilization: h.utilization, blocked: h.blocked })),
  };
}

const STATES: readonly InstanceState[] = ["provisioning", "loading", "serving", "draining", "spot"];

/** The listing from the wire; `slo` only when the region sent SLO entries (older regions send none). */
export function instancesFromWire(w: WireInstances): RegionListing {
  return {
    region: w.region,
    actuator: w.actuator === "agents" ? "agents" : "static",
    instances: w.instances.map((i) => {
      if (!STATES.includes(i.state as InstanceState)) throw new TidegateError("upstream_error", `region sent instance state ${JSON.stringify(i.state)}`);
      return { id: i.id, model: i.model, gpu: i.gpu, gpus: i.gpus, state: i.state as InstanceState, node: i.node, enteredAtMs: i.entered_at_ms, forMs: i.for_ms, detail: i.detail, url: i.url, role: i.role === "prefill" || i.role === "decode" ? i.role : "both" };
    }),
    nodes: w.nodes.map((n) => ({ nodeId: n.node_id, lost: n.lost, lastSeenAtMs: n.last_seen_at_ms, gpuType: n.gpu_type, gpuSlots: n.gpu_slots, freeSlots: n.free_slots, memoryBytes: n.memory_bytes, data: n.data, transport: n.transport, models: n.models, completeModels: n.complete_models })),
    failures: w.failures.map((f) => ({ atMs: f.at_ms, model: f.model, gpu: f.gpu, node: f.node, instanceId: f.instance_id, message: f.message })),
    actions: w.actions.map((a) => ({ atMs: a.at_ms, model: a.model, gpu: a.gpu, kind: a.kind, instanceId: a.instance_id, reason: a.reason, from: a.from, desired: a.desired, ...(a.role === "prefill" || a.role === "decode" ? { role: a.role } : {}) })),
    ...((w.slo ?? []).length > 0
      ? {
          slo: w.slo!.map((s) => ({
            model: s.model,
            ttftMs: s.ttft_ms,
            tpotMs: s.tpot_ms,
            percentile: s.percentile,
            met: s.met,
            missed: s.missed,
            unserved: s.unserved,
            lastHourRequests: s.last_hour_requests,
            lastHourMet: s.last_hour_met,
            lastHourAttainment: s.last_hour_requests > 0 ? s.last_hour_met / s.last_hour_requests : null,
            judgedHours: s.judged_hours,
            violatedHours: s.violated_hours,
          })),
        }
      : {}),
    ...((w.cold_models ?? []).length > 0 || (w.cold_starts ?? []).length > 0
      ? {
          cold: {
            models: (w.cold_models ?? []).map((m) => ({ model: m.model, held: m.held, inFlight: m.in_flight, idleForMs: m.idle_for_ms })),
            starts: (w.cold_starts ?? []).map((c) => ({ atMs: c.at_ms, model: c.model, gpu: c.gpu, instanceId: c.instance_id, source: c.source, tookMs: c.took_ms })),
          },
        }
      : {}),
    ...((w.holding ?? []).length > 0 ? { holding: w.holding!.map((h) => ({ atMs: h.at_ms, sinceMs: h.since_ms, model: h.model, gpu: h.gpu, attainment: h.attainment, percentile: h.percentile, strategy: h.strategy, current: h.current, desired: h.desired, reason: h.reason, utilization: h.utilization, blocked: h.blocked })) } : {}),
  };
}
