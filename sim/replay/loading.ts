/**
 * One bursty trace through the replay wiring (router selection, gateway, simulated engines, region runtime with
 * its controller and the `sim` actuator) with a loading source per run (issue 12): what a capacity planner compares
 * when choosing where new instances' parameters come from. Everything but the loading source is the same across
 * runs: the trace, its rescaling, the fleet, the strategy and its parameters.
 *
 * - Rescaling: arrivals are compressed by `speedup` (the trace's request rate × speedup, lengths unchanged), so
 *   one region's endpoint must scale out several times; `windowMs` keeps the first part of the compressed trace.
 * - Fleet: one region, one endpoint of `model` on H100s starting with `startInstances`, at most `maxInstances`;
 *   GPUs are free (no VM to provision, no spot work to stop: vmProvisionMs = spot moves = 0), so a scale-out costs
 *   exactly its load from the loading source.
 * - SLO (BlitzScale §6 and DistServe's convention, scale 5): TTFT at most 5× the prompt's prefill alone and mean
 *   time between tokens at most 5× one decode iteration at batch 1, both from the performance profile.
 * - GPU time: GPUs × time of every instance in any state but spot (provisioning, loading, serving, draining).
 */
import { VirtualClock } from "../../core/clock.js";
import { gpusPerInstanceOf, instanceGpus, mergeOverDefault, parseConfig, type TidegateConfig } from "../../core/config.js";
import "../../region/config-sections.js"; // region's config sections (keystage, loading), before any config is parsed
import type { ModelName } from "../../core/models.js";
import type { InstanceRecord } from "../../region/actuator/port.js";
import { getProfile } from "../../core/perf/model.js";
import { zeroLoadingCounters, type SimLoadingCounters, type SimLoadingSettings } from "../../region/runtime/sim-loading.js";
import { resolveStrategy } from "../../region/strategies/strategy-registry.js";
import { runReplay } from "./run.js";
import type { RequestRecord } from "./stats.js";
import { percentiles } from "./stats.js";
import type { Trace } from "./traces.js";

export const GPU = "h100-80gb";

export interface LoadingRunOptions {
  trace: Trace;
  model: ModelName;
  /** Arrival-time compression (≥ 1 speeds the trace up). */
  speedup: number;
  /** Keep only arrivals within this span of the compressed trace (ms; default all). */
  windowMs?: number;
  startInstances: number;
  maxInstances: number;
  /** Each instance's KV cache (tokens): small enough that a burst fills it, so the memory signal sees it. */
  kvCapacityTokens: number;
  loading: SimLoadingSettings;
  /** The scaling strategy every run uses (default reactive-hpa with BURST_HPA). */
  strategy?: { name: string; params: Record<string, number> };
  seed?: number;
}

/**
 * Figures of one run over every request of the trace. A failed or unserved request counts as an SLO miss and as
 * +Infinity TTFT (so the mean is +Infinity when any failed, p99 when more than 1% did); TBT is over served requests
 * that decoded. With no request at all every latency figure is NaN (no data), never 0.
 */
export interface LoadingRunResult {
  requests: number;
  /** Requests that ended in an error or never got a first token. */
  failed: number;
  meanTtftMs: number;
  p90TtftMs: number;
  p99TtftMs: number;
  p99TbtMs: number;
  sloAttainment: number;
  gpuHours: number;
  peakInstances: number;
  counters: SimLoadingCounters;
  wallMs: number;
}

/** The HPA on memory utilization with a fast sync: a burst is seen within seconds, scale-in after a minute. */
export const BURST_HPA = { targetUtilization: 0.7, metricWindowMs: 2000, syncPeriodMs: 1000, scaleUpPeriodMs: 1000, scaleDownStabilizationMs: 60_000 };

/** The one-region, one-endpoint fleet of a loading comparison. */
export function burstConfig(model: ModelName, startInstances: number, maxInstances: number, kvCapacityTokens: number): TidegateConfig {
  const gpus = gpusPerInstanceOf(parseConfig(mergeOverDefault({})), model, GPU);
  if (gpus === undefined) throw new RangeError(`model ${model} has no ${GPU} configuration`);
  return parseConfig(mergeOverDefault({
    models: [{ name: model, gpusPerInstance: { [GPU]: gpus } }],
    regions: [{ name: "burst", utcOffsetH: 0, proximity: ["burst"], gpus: [{ type: GPU, count: gpus * maxInstances }], endpoints: [{ model, gpu: GPU, instances: startInstances, minInstances: startInstances, maxInstances }] }],
    controller: { strategy: "reactive-hpa", actuator: "sim" },
    engines: { models: { [model]: { kvCapacityTokens } } },
  }));
}

/** The trace compressed by `speedup` and cut to `windowMs`. */
export function rescale(trace: Trace, speedup: number, windowMs = Infinity): Trace {
  if (!(speedup > 0)) throw new RangeError(`speedup must be > 0, got ${speedup}`);
  const requests = trace.requests.map((r) => ({ ...r, arrivalMs: r.arrivalMs / speedup })).filter((r) => r.arrivalMs <= windowMs);
  return { name: `${trace.name}×${speedup}`, requests, spanMs: requests.length === 0 ? 0 : requests[requests.length - 1]!.arrivalMs };
}

export async function runLoading(o: LoadingRunOptions): Promise<LoadingRunResult> {
  const config = burstConfig(o.model, o.startInstances, o.maxInstances, o.kvCapacityTokens);
  const trace = rescale(o.trace, o.speedup, o.windowMs);
  const r = await replayFleet({ config, trace, strategy: o.strategy ?? { name: "reactive-hpa", params: BURST_HPA }, loading: o.loading, seed: o.seed ?? 1 });
  const profile = getProfile(o.model, GPU, instanceGpus(config, o.model, GPU));
  return {
    ...latencyFigures(r.records, sloOf(profile)),
    gpuHours: r.gpuHours,
    peakInstances: r.peakInstances,
    counters: r.counters,
    wallMs: r.wallMs,
  };
}

/** The SLO a loading comparison judges by (file comment): from the model's performance profile. */
export function sloOf(profile: ReturnType<typeof getProfile>): { prefillMs(promptTokens: number): number; decodeIterMs: number } {
  return { prefillMs: (promptTokens) => profile.prefillMs(promptTokens, 1), decodeIterMs: profile.decodeIterMs(1, 0) };
}

/** One instance state change of a fleet replay (the actuator's), for figures over time. */
export interface FleetChange {
  atMs: number;
  id: string;
  model: ModelName;
  state: InstanceRecord["state"];
  /** When the step that led here was decided (the actuator's actionAtMs). */
  actionAtMs: number | undefined;
}

/** What `replayFleet` measured: the records, GPU time, the loading's counters and every instance state change. */
export interface FleetReplay {
  records: RequestRecord[];
  gpuHours: number;
  peakInstances: number;
  counters: SimLoadingCounters;
  changes: FleetChange[];
  virtualEndMs: number;
  wallMs: number;
}

/**
 * A trace through the replay wiring on a one-region fleet with the `sim` actuator, free GPUs (no VM to provision,
 * no spot work to stop: a scale-out costs its load from `loading` only), `strategy` and `loading`; GPU time over
 * every instance in any state but spot.
 */
export async function replayFleet(o: { config: TidegateConfig; trace: Trace; strategy: { name: string; params: Record<string, number> }; loading: SimLoadingSettings; seed: number }): Promise<FleetReplay> {
  const gpuMs = new Map<string, { since: number; gpus: number; on: boolean }>();
  let totalGpuMs = 0;
  let live = 0;
  let peak = 0;
  let clockNow = () => 0;
  let counters: SimLoadingCounters | undefined;
  const changes: FleetChange[] = [];
  const onChange = (_region: string, inst: Readonly<InstanceRecord>) => {
    const now = clockNow();
    changes.push({ atMs: now, id: inst.id, model: inst.model, state: inst.state, actionAtMs: inst.actionAtMs });
    const g = gpuMs.get(inst.id);
    if (g?.on === true) totalGpuMs += (now - g.since) * g.gpus;
    const on = inst.state !== "spot";
    if ((g?.on ?? false) !== on) live += on ? 1 : -1;
    peak = Math.max(peak, live);
    gpuMs.set(inst.id, { since: now, gpus: inst.gpus, on });
  };
  const r = await runReplay({
    trace: o.trace,
    config: o.config,
    seed: o.seed,
    wiring: {
      strategy: resolveStrategy(o.strategy.name, o.strategy.params),
      delays: { spotMedianMs: 0, spotMaxMs: 0, spotSigma: 0, redeployLocalMs: 0, redeployRemoteMs: 0, vmProvisionMs: 0 },
      loading: o.loading,
      onChange,
    },
    onWiring: (w) => {
      clockNow = () => w.clock.now();
      counters = [...w.regions.values()][0]!.loading?.counters;
    },
  });
  for (const g of gpuMs.values()) if (g.on) totalGpuMs += (r.virtualEndMs - g.since) * g.gpus;
  return { records: r.records, gpuHours: totalGpuMs / 3_600_000, peakInstances: peak, counters: counters ?? zeroLoadingCounters(), changes, virtualEndMs: r.virtualEndMs, wallMs: r.wallMs };
}

/** What a run's latency figures need of a record. `firstTokenMs` < 0: no first token. */
export interface LatencyRecord {
  arrivalMs: number;
  firstTokenMs: number;
  doneMs: number;
  promptTokens: number;
  outputTokens: number;
  error?: unknown;
}

/**
 * The latency figures of a run over every record (LoadingRunResult says how failures count), at SLO scale 5:
 * TTFT ≤ 5 × `slo.prefillMs(prompt)`, mean time between tokens ≤ 5 × `slo.decodeIterMs`.
 */
export function latencyFigures(
  records: readonly LatencyRecord[],
  slo: { prefillMs(promptTokens: number): number; decodeIterMs: number },
): Pick<LoadingRunResult, "requests" | "failed" | "meanTtftMs" | "p90TtftMs" | "p99TtftMs" | "p99TbtMs" | "sloAttainment"> {
  const served = records.filter((x) => x.error === undefined && x.firstTokenMs >= 0);
  const failed = records.length - served.length;
  const ttft = Float64Array.from(records, (x) => (x.error === undefined && x.firstTokenMs >= 0 ? x.firstTokenMs - x.arrivalMs : Number.POSITIVE_INFINITY));
  const tbts = served.filter((x) => x.outputTokens >= 2).map((x) => (x.doneMs - x.firstTokenMs) / (x.outputTokens - 1));
  const tbtSlo = 5 * slo.decodeIterMs;
  let met = 0;
  for (const x of served) {
    const okTtft = x.firstTokenMs - x.arrivalMs <= 5 * slo.prefillMs(x.promptTokens);
    const okTbt = x.outputTokens < 2 || (x.doneMs - x.firstTokenMs) / (x.outputTokens - 1) <= tbtSlo;
    if (okTtft && okTbt) met++;
  }
  const t = percentiles(ttft);
  return {
    requests: records.length,
    failed,
    meanTtftMs: records.length === 0 ? Number.NaN : t.mean,
    p90TtftMs: records.length === 0 ? Number.NaN : t.p90,
    p99TtftMs: records.length === 0 ? Number.NaN : t.p99,
    p99TbtMs: tbts.length === 0 ? Number.NaN : percentiles(Float64Array.from(tbts)).p99,
    sloAttainment: records.length === 0 ? Number.NaN : met / records.length,
  };
}
