/**
 * Telemetry math for one model in one region (SageServe §6.2, "Global routing for IW requests"): effective memory
 * utilization = Σ KV bytes in use / Σ KV bytes available (GPU memory − weights) over the model's serving
 * instances; tokens/s served over a window; queue lengths; instance counts by state. Pure functions of values.
 */
import type { GpuType, ModelName } from "../../core/models.js";
import type { EndpointTelemetry, EngineStats, InstanceState, ModelTelemetry } from "../../core/ports.js";

/** What the telemetry needs to know about one instance. */
export interface InstanceSample {
  endpointId: string;
  state: InstanceState;
  stats: EngineStats;
}

/** What the telemetry needs to know about one endpoint (deployment). */
export interface EndpointSample {
  endpointId: string;
  gpu: GpuType;
}

/**
 * Effective memory utilization of a set of instances: Σ kvBytesUsed / Σ kvBytesCapacity over the serving ones.
 * With no serving capacity it is 1 (nothing can be admitted), never NaN; it may exceed 1 when engines overcommit.
 */
export function effectiveMemoryUtilization(instances: readonly InstanceSample[], extraKvBytes = 0): number {
  let used = extraKvBytes;
  let capacity = 0;
  for (const i of instances) {
    if (i.state !== "serving") continue;
    // Stale signals are not zero: an instance whose usage cannot be read counts as full.
    used += i.stats.stale === true ? i.stats.kvBytesCapacity : i.stats.kvBytesUsed;
    capacity += i.stats.kvBytesCapacity;
  }
  return capacity > 0 ? used / capacity : 1;
}

/**
 * The preemptible part of `effectiveMemoryUtilization` over the same instances: Σ preemptibleKvBytes / Σ
 * kvBytesCapacity over the serving ones; undefined unless every serving instance reports it (a stale one does not).
 */
export function preemptibleMemoryUtilization(instances: readonly InstanceSample[]): number | undefined {
  let preemptible = 0;
  let capacity = 0;
  for (const i of instances) {
    if (i.state !== "serving") continue;
    if (i.stats.preemptibleKvBytes === undefined || i.stats.stale === true) return undefined;
    preemptible += i.stats.preemptibleKvBytes;
    capacity += i.stats.kvBytesCapacity;
  }
  return capacity > 0 ? preemptible / capacity : undefined;
}

/** A zeroed count per instance state. */
export function emptyStateCounts(): Record<InstanceState, number> {
  return { provisioning: 0, loading: 0, serving: 0, draining: 0, spot: 0 };
}

/**
 * The ModelTelemetry of one model: utilization over serving instances (per endpoint and overall), running and
 * waiting summed over every instance that still holds requests (serving and draining), instances by state.
 */
export function modelTelemetry(
  model: ModelName,
  endpoints: readonly EndpointSample[],
  instances: readonly InstanceSample[],
  tokensPerS: number,
  batchTokensPerS = 0,
  demandTokensPerS = 0,
): ModelTelemetry {
  let running = 0;
  let waiting = 0;
  let stale = 0;
  let preemptions: number | undefined;
  const counts = emptyStateCounts();
  for (const i of instances) {
    counts[i.state]++;
    // Draining counts too: an engine whose scrapes fail is also taken out of service (region/process/engine-health.ts).
    if ((i.state === "serving" || i.state === "draining") && i.stats.stale === true) stale++;
    running += i.stats.running;
    waiting += i.stats.waiting;
    if ((i.state === "serving" || i.state === "draining") && i.stats.preemptionsTotal !== undefined) preemptions = (preemptions ?? 0) + i.stats.preemptionsTotal;
  }
  const perEndpoint: EndpointTelemetry[] = endpoints.map((e) => {
    const own = instances.filter((i) => i.endpointId === e.endpointId);
    const preemptible = preemptibleMemoryUtilization(own);
    return {
      endpointId: e.endpointId,
      gpu: e.gpu,
      effectiveMemoryUtilization: effectiveMemoryUtilization(own),
      ...(preemptible === undefined ? {} : { preemptibleMemoryUtilization: preemptible }),
      servingInstances: own.filter((i) => i.state === "serving").length,
    };
  });
  const preemptible = preemptibleMemoryUtilization(instances);
  return {
    model,
    effectiveMemoryUtilization: effectiveMemoryUtilization(instances),
    ...(preemptible === undefined ? {} : { preemptibleMemoryUtilization: preemptible }),
    ...(preemptions === undefined ? {} : { preemptionsTotal: preemptions }),
    tokensPerS,
    ...(batchTokensPerS > 0 ? { batchTokensPerS } : {}),
    ...(demandTokensPerS > 0 ? { demandTokensPerS } : {}),
    running,
    waiting,
    instances: counts,
    endpoints: perEndpoint,
    ...(stale > 0 ? { staleInstances: stale } : {}),
  };
}

/**
 * Tokens/s over a sliding window from a cumulative counter sampled at snapshot times. `rate(now, total)` records
 * the sample and returns (total − total at the baseline) / (now − baseline time) in tokens per second, where the
 * baseline is the oldest kept sample; samples are dropped while the next one is still at least `windowMs` old, so
 * the rate covers between `windowMs` and `windowMs` + one sampling period once history is that long.
 */
export class WindowedRate {
  private readonly atMs: number[] = [];
  private readonly totals: number[] = [];

  constructor(
    readonly windowMs: number,
    startMs: number,
  ) {
    if (!(windowMs > 0)) throw new RangeError(`windowMs must be > 0, got ${windowMs}`);
    this.atMs.push(startMs);
    this.totals.push(0);
  }

  /** Records (nowMs, cumulative total) and returns the rate per second; 0 when no time has passed. */
  rate(nowMs: number, total: number): number {
    this.atMs.push(nowMs);
    this.totals.push(total);
    while (this.atMs.length > 2 && this.atMs[1]! <= nowMs - this.windowMs) {
      this.atMs.shift();
      this.totals.shift();
    }
    const elapsedMs = nowMs - this.atMs[0]!;
    return elapsedMs > 0 ? ((total - this.totals[0]!) * 1000) / elapsedMs : 0;
  }
}
