/**
 * The stateful region selector of the global router (SageServe §6.2, DESIGN "Request path" step 1).
 *
 * It keeps the latest telemetry per region, and between telemetry updates adds its own in-flight estimate: the KV
 * bytes of requests it dispatched to a region since that region's last telemetry `seq`, over the model's KV capacity
 * in the region, so a burst does not herd onto the one region that looked empty at the last report. Telemetry older
 * than `staleMs` (by the router's clock, at receipt) makes the region unavailable.
 *
 * No HTTP, no timers: values, a Clock and the pure `selectRegion` / `preferenceOrder` / `correctedUtilization`.
 * The replay wiring uses the same class with a VirtualClock.
 */
import { routingUtilization } from "../core/utilization.js";
import type { Clock } from "../core/clock.js";
import { engineSettingsLookup, gpusPerInstanceOf, type TidegateConfig } from "../core/config.js";
import { GPU_SPECS, MODEL_SPECS, kvBytesPerToken, kvCapacityBytes, type GpuType, type ModelName, type RegionName } from "../core/models.js";
import type { ModelTelemetry, RegionTelemetry } from "../core/ports.js";
import type { TokenPace } from "./pace.js";
import type { RegionPrefixes } from "./prefix-regions.js";
import { predictTtftMs } from "./spill.js";
import { correctedUtilization, expectedColdTtftMs, expectedWarmTtftMs, preferenceOrder, selectRegion, type RegionCandidate, type RegionDecision } from "./selection.js";

/** What the selector needs to know about one region from configuration. */
export interface SelectorRegion {
  name: RegionName;
  /** Other regions in order of proximity (config regions[].proximity). */
  proximity: readonly RegionName[];
  /** Models the region hosts (config endpoints). */
  models: readonly ModelName[];
}

export interface SelectorOptions {
  clock: Clock;
  /** Regions in configuration order (the tie-break order after the client's preference). */
  regions: readonly SelectorRegion[];
  /** SageServe §6.2 threshold on effective memory utilization (0.70). */
  memoryThreshold: number;
  /** Telemetry received longer ago than this makes the region unavailable. */
  telemetryStaleMs: number;
  /**
   * KV-cache bytes one serving instance of `model` on `gpu` offers (GPU memory × utilization − weights), used to turn
   * in-flight bytes into utilization. Return 0 when unknown (the correction is then skipped).
   */
  instanceKvBytes: (model: ModelName, gpu: GpuType) => number;
  /**
   * A model's prefill and decode-step times (router/pace.ts `tokenPaceFrom`): with them, a request's expected TTFT at
   * a warm region and at a cold one are weighed against each other (selection.ts). Absent or undefined for a model: a
   * warm region always beats a cold start.
   */
  pace?: (model: ModelName) => TokenPace | undefined;
  /**
   * Prefix affinity between regions (issue 34; config routing.regionPrefix): the router's history of which prompt
   * blocks went where (prefix-regions.ts); absent: regions are chosen without regard to prefixes.
   */
  prefixes?: RegionPrefixes;
  /**
   * SLO-aware spill (issue 46 item 5; config router.spill; spill.ts): the TTFT SLO (ms) of each model. With it and
   * `pace`, every warm candidate carries the request's predicted TTFT (`predictTtftMs`, with the router's own
   * requests in flight there from `track`), and a pick predicting beyond the SLO spills (selection.ts). Absent: off.
   */
  spill?: { sloTtftMs: (model: ModelName) => number };
}

/** One request's place in the router's own count of a (region, model)'s requests (RegionSelector.track). */
export interface TrackedRequest {
  /** Its first event came (it no longer waits for one). Idempotent. */
  firstEvent(): void;
  /** It ended, however (done, failed, aborted). Idempotent. */
  end(): void;
  /**
   * It finished with `outputTokens` generated (the region's done event): its decode time per token after the first
   * goes into the (region, model)'s measured pace (spill.ts RegionLoad.measuredMsPerToken); then as `end`.
   */
  done(outputTokens: number): void;
}

/** Weight of a new sample in the measured decode pace and first-event lateness (RegionSelector.track). */
export const MEASURED_EWMA_ALPHA = 0.2;
/**
 * Half-life (ms) of the measured lateness without new samples: a region left for being late gets no requests to show
 * it caught up, so what it was late by fades (halves every this many ms) rather than keeping it out for good.
 */
export const LATE_HALF_LIFE_MS = 2000;

/** One decision plus what the selector saw, for logs and tests. */
export interface SelectionResult extends RegionDecision {
  /** The candidates in preference order with their corrected utilizations. */
  candidates: RegionCandidate[];
}

interface LiveCount {
  inflight: number;
  pending: number;
  /** Send times (clock ms) of the pending ones by a serial, oldest first (Map keeps insertion order). */
  pendingSince: Map<number, number>;
  /** First-event times (clock ms) of the others by serial. */
  runningSince: Map<number, number>;
  /** EWMA of the decode time per token after the first of finished requests (ms); undefined until one finished. */
  msPerToken: number | undefined;
  /** EWMA of observed − predicted time to the first event (ms) of requests sent with a prediction; 0 until one. */
  lateMs: number;
  /** When `lateMs` was last updated (clock ms); it halves every LATE_HALF_LIFE_MS after. */
  lateAtMs: number;
}

/** `c.lateMs` faded to `nowMs` (LATE_HALF_LIFE_MS). */
function lateNow(c: LiveCount, nowMs: number): number {
  return c.lateMs * Math.pow(0.5, Math.max(0, nowMs - c.lateAtMs) / LATE_HALF_LIFE_MS);
}

interface RegionState {
  telemetry: RegionTelemetry | undefined;
  receivedAtMs: number;
  /** model → KV bytes dispatched since the last telemetry. */
  inflightKvBytes: Map<ModelName, number>;
  /** model → the router's requests there now: all of them, and those without a first event (track). */
  live: Map<ModelName, LiveCount>;
}

export class RegionSelector {
  private readonly state = new Map<RegionName, RegionState>();
  private readonly proximity: Record<RegionName, readonly RegionName[]> = {};
  private readonly hosting = new Map<ModelName, RegionName[]>();
  /** Serial of the next tracked request. */
  private serial = 0;

  /** Whether the SLO spill is on: only then does `track` measure anything a decision reads (the relay skips its per-event watch otherwise). */
  get spillOn(): boolean {
    return this.opts.spill !== undefined;
  }

  constructor(private readonly opts: SelectorOptions) {
    for (const r of opts.regions) {
      this.state.set(r.name, { telemetry: undefined, receivedAtMs: 0, inflightKvBytes: new Map(), live: new Map() });
      this.proximity[r.name] = r.proximity;
      for (const m of r.models) {
        const list = this.hosting.get(m) ?? [];
        list.push(r.name);
        this.hosting.set(m, list);
      }
    }
  }

  /** Regions that host `model` by configuration, in configuration order (empty for unknown models). */
  hostingRegions(model: ModelName): readonly RegionName[] {
    return this.hosting.get(model) ?? [];
  }

  /**
   * Records a telemetry snapshot. A snapshot with a different `seq` from the last one resets the region's in-flight
   * estimate (the region now reports those requests itself). Unknown regions are ignored (returns false).
   */
  onTelemetry(t: RegionTelemetry): boolean {
    const s = this.state.get(t.region);
    if (s === undefined) return false;
    if (s.telemetry === undefined || s.telemetry.seq !== t.seq) s.inflightKvBytes.clear();
    s.telemetry = t;
    s.receivedAtMs = this.opts.clock.now();
    return true;
  }

  /** Forgets a region's telemetry (its link went down): it is unavailable until the next snapshot. */
  markDown(region: RegionName): void {
    const s = this.state.get(region);
    if (s === undefined) return;
    this.opts.prefixes?.forget(region);
    s.telemetry = undefined;
    s.inflightKvBytes.clear();
  }

  /** Whether regions are chosen with prefix affinity (SelectorOptions.prefixes): the block size prompts are hashed with. */
  get prefixBlockTokens(): number | undefined {
    return this.opts.prefixes?.blockTokens;
  }

  /**
   * Adds a dispatched request's KV bytes (≥ 0) to the region's in-flight estimate for `model`, and with prefix
   * affinity its prompt's `blocks` to what the router remembers of the region (up to the KV its serving instances hold).
   */
  noteDispatch(region: RegionName, model: ModelName, kvBytes: number, blocks?: readonly number[]): void {
    const s = this.state.get(region);
    if (blocks !== undefined && blocks.length > 0 && this.opts.prefixes !== undefined && s?.telemetry !== undefined) {
      const mt = s.telemetry.models.find((m) => m.model === model);
      const spec = MODEL_SPECS[model];
      const bytes = mt === undefined ? 0 : mt.endpoints.reduce((sum, e) => sum + e.servingInstances * this.opts.instanceKvBytes(model, e.gpu), 0);
      const tokens = spec === undefined ? 0 : bytes / kvBytesPerToken(spec);
      this.opts.prefixes.sent(region, model, blocks, tokens / this.opts.prefixes.blockTokens);
    }
    if (s === undefined || !(kvBytes > 0)) return;
    s.inflightKvBytes.set(model, (s.inflightKvBytes.get(model) ?? 0) + kvBytes);
  }

  /**
   * Counts a request the router sent to (region, model) in its own live count until `end` (spill.ts reads it between
   * telemetry reports): pending until `firstEvent`. With `predictedTtftMs` (its region's prediction when it was chosen),
   * how much later its first event came goes into the (region, model)'s lateness; `done` measures its decode pace
   * (spill.ts RegionLoad.lateMs, measuredMsPerToken). Unknown regions: a no-op handle.
   */
  track(region: RegionName, model: ModelName, predictedTtftMs?: number): TrackedRequest {
    const s = this.state.get(region);
    if (s === undefined) return { firstEvent: () => undefined, end: () => undefined, done: () => undefined };
    let c = s.live.get(model);
    if (c === undefined) s.live.set(model, (c = { inflight: 0, pending: 0, pendingSince: new Map(), runningSince: new Map(), msPerToken: undefined, lateMs: 0, lateAtMs: 0 }));
    const count = c;
    const serial = this.serial++;
    const sentAt = this.opts.clock.now();
    count.inflight++;
    count.pending++;
    count.pendingSince.set(serial, sentAt);
    let pending = true;
    let ended = false;
    let firstAt: number | undefined;
    const firstEvent = () => {
      if (!pending) return;
      pending = false;
      count.pending--;
      count.pendingSince.delete(serial);
      firstAt = this.opts.clock.now();
      count.runningSince.set(serial, firstAt);
      if (predictedTtftMs !== undefined && Number.isFinite(predictedTtftMs)) {
        const late = lateNow(count, firstAt);
        count.lateMs = late + MEASURED_EWMA_ALPHA * (firstAt - sentAt - predictedTtftMs - late);
        count.lateAtMs = firstAt;
      }
    };
    const end = () => {
      if (ended) return;
      ended = true;
      firstEvent();
      count.inflight--;
      count.runningSince.delete(serial);
    };
    return {
      firstEvent,
      end,
      done: (outputTokens) => {
        if (ended) return;
        firstEvent();
        if (outputTokens > 1 && firstAt !== undefined) {
          const sample = (this.opts.clock.now() - firstAt) / (outputTokens - 1);
          count.msPerToken = count.msPerToken === undefined ? sample : count.msPerToken + MEASURED_EWMA_ALPHA * (sample - count.msPerToken);
        }
        end();
      },
    };
  }

  /** The measured decode pace and first-event lateness (faded to now) at (region, model) (track; spill.ts RegionLoad). */
  measured(region: RegionName, model: ModelName): { msPerToken: number | undefined; lateMs: number } {
    const c = this.state.get(region)?.live.get(model);
    return { msPerToken: c?.msPerToken, lateMs: c === undefined ? 0 : lateNow(c, this.opts.clock.now()) };
  }

  /**
   * The router's own requests at (region, model) now (track): all in flight, those without a first event, and how
   * long the oldest of those has waited (ms; 0 with none).
   */
  liveCount(region: RegionName, model: ModelName): { inflight: number; pending: number; oldestPendingMs: number; runningElapsedMs: number[] } {
    const c = this.state.get(region)?.live.get(model);
    const now = this.opts.clock.now();
    const oldest = c?.pendingSince.values().next();
    const oldestPendingMs = oldest === undefined || oldest.done === true ? 0 : Math.max(0, now - oldest.value);
    const runningElapsedMs = c === undefined ? [] : [...c.runningSince.values()].map((t) => Math.max(0, now - t));
    return { inflight: c?.inflight ?? 0, pending: c?.pending ?? 0, oldestPendingMs, runningElapsedMs };
  }

  /** The router's in-flight KV bytes for (region, model) since that region's last telemetry. */
  inflightKvBytes(region: RegionName, model: ModelName): number {
    return this.state.get(region)?.inflightKvBytes.get(model) ?? 0;
  }

  /** Milliseconds since the region's last telemetry snapshot; undefined before the first one or after markDown. */
  telemetryAgeMs(region: RegionName): number | undefined {
    const s = this.state.get(region);
    if (s === undefined || s.telemetry === undefined) return undefined;
    return this.opts.clock.now() - s.receivedAtMs;
  }

  /**
   * The candidate for (region, model) as selection sees it now: corrected utilization and availability, and with
   * `promptTokens` and the model's pace, the request's expected TTFT there (selection.ts); with spill on and
   * `maxTokens` too, at a warm region its predicted TTFT (spill.ts `predictTtftMs`).
   */
  candidate(region: RegionName, model: ModelName, promptTokens?: number, maxTokens?: number): RegionCandidate {
    const s = this.state.get(region);
    const t = s?.telemetry;
    if (s === undefined || t === undefined || this.opts.clock.now() - s.receivedAtMs > this.opts.telemetryStaleMs) {
      return { region, utilization: Number.POSITIVE_INFINITY, available: false };
    }
    const mt = t.models.find((m) => m.model === model);
    const pace = promptTokens === undefined ? undefined : this.opts.pace?.(model);
    const prefillMs = pace?.prefillMs(promptTokens!);
    if (mt !== undefined && mt.cold !== undefined && servingInstances(mt) === 0) {
      // Scale from zero (issue 33): the region holds the request while it brings an instance up.
      const coldStartMs = mt.cold.expectedMs ?? Number.POSITIVE_INFINITY;
      return { region, utilization: Number.POSITIVE_INFINITY, available: true, coldStartMs, ...(prefillMs === undefined ? {} : { ttftMs: expectedColdTtftMs(coldStartMs, mt.cold.held, prefillMs) }) };
    }
    if (mt === undefined || servingInstances(mt) === 0) return { region, utilization: Number.POSITIVE_INFINITY, available: false };
    const capacityBytes = mt.endpoints.reduce((sum, e) => sum + e.servingInstances * this.opts.instanceKvBytes(model, e.gpu), 0);
    // Batch KV the region's engines would preempt for this request does not count (core/utilization.ts).
    const u = routingUtilization(mt);
    const reported = Number.isFinite(u) ? Math.max(0, u) : Number.POSITIVE_INFINITY;
    const utilization = correctedUtilization(reported, s.inflightKvBytes.get(model) ?? 0, capacityBytes);
    if (pace === undefined || prefillMs === undefined) return { region, utilization, available: true };
    if (this.opts.spill !== undefined && maxTokens !== undefined) {
      const serving = servingInstances(mt);
      const spec = MODEL_SPECS[model];
      const kvTokens = spec === undefined ? 0 : capacityBytes / kvBytesPerToken(spec);
      const live = this.liveCount(region, model);
      const measured = this.measured(region, model);
      const slo = mt.slo;
      const load = {
        serving,
        waiting: mt.waiting,
        running: mt.running,
        routerInflight: live.inflight,
        routerPending: live.pending,
        oldestPendingMs: live.oldestPendingMs,
        runningElapsedMs: live.runningElapsedMs,
        kvTokensPerInstance: kvTokens / Math.max(1, serving),
        ...(slo !== undefined && slo.finished > 0 ? { meanOutputTokens: slo.outputTokens / slo.finished } : {}),
        ...(measured.msPerToken === undefined ? {} : { measuredMsPerToken: measured.msPerToken }),
        lateMs: measured.lateMs,
      };
      return { region, utilization, available: true, ttftMs: predictTtftMs(load, { promptTokens: promptTokens!, maxTokens }, pace) };
    }
    return { region, utilization, available: true, ttftMs: expectedWarmTtftMs({ waiting: mt.waiting, serving: servingInstances(mt), prefillMs, stepMs: pace.stepMs }) };
  }

  /**
   * Why `candidate(region, model)` is unavailable, in words, for an error message: no telemetry, stale telemetry, or
   * no serving instance in a region that does not start the model from zero; "available" when it is not unavailable.
   */
  unavailableWhy(region: RegionName, model: ModelName): string {
    const s = this.state.get(region);
    if (s === undefined) return "not a configured region";
    if (s.telemetry === undefined) return "no telemetry from it yet, or its link is down";
    const ageMs = this.opts.clock.now() - s.receivedAtMs;
    if (ageMs > this.opts.telemetryStaleMs) return `its last telemetry is ${Math.round(ageMs)} ms old (router.telemetryStaleMs ${this.opts.telemetryStaleMs})`;
    const mt = s.telemetry.models.find((m) => m.model === model);
    if (mt === undefined) return "it reports no endpoint of the model";
    if (mt.cold === undefined && servingInstances(mt) === 0) return "no instance of the model serves there, and it does not start the model from zero (an endpoint with minInstances > 0, or fixed engines)";
    return "available";
  }

  /**
   * Picks a region for `model`: hosting regions in preference order (client region, its proximity list, the
   * rest), the first under the threshold, else the least utilized; a cold region instead when its expected TTFT for
   * a `promptTokens` prompt is lower (selection.ts). `exclude` skips regions already tried. With spill on and
   * `promptTokens` and `maxTokens`, a pick predicting a TTFT beyond the model's SLO spills (spill.ts).
   * Returns undefined when no region is available (unknown model, all stale, all excluded).
   */
  select(model: ModelName, clientRegion?: RegionName, exclude: ReadonlySet<RegionName> = new Set(), promptTokens?: number, blocks?: readonly number[], maxTokens?: number): SelectionResult | undefined {
    const order = preferenceOrder(this.hostingRegions(model), clientRegion, this.proximity);
    let candidates = order.map((r) => this.candidate(r, model));
    const sloTtftMs = this.opts.spill !== undefined && promptTokens !== undefined && maxTokens !== undefined && this.opts.pace?.(model) !== undefined ? this.opts.spill.sloTtftMs(model) : undefined;
    if (sloTtftMs !== undefined) {
      // Spill on: every candidate's predicted TTFT (spill.ts).
      candidates = order.map((r) => this.candidate(r, model, promptTokens, maxTokens));
    } else if (promptTokens !== undefined && candidates.some((c) => c.available && c.coldStartMs !== undefined) && candidates.some((c) => c.available && c.coldStartMs === undefined)) {
      // TTFT estimates only where a warm region and a cold one compete (the common path stays as cheap as before).
      candidates = order.map((r) => this.candidate(r, model, promptTokens));
    }
    const prefixes = this.opts.prefixes;
    if (prefixes !== undefined && blocks !== undefined && blocks.length > 0) {
      for (const c of candidates) if (c.available) c.prefixBlocks = prefixes.prefixBlocks(c.region, model, blocks);
    }
    const decision = selectRegion(candidates, this.opts.memoryThreshold, exclude, sloTtftMs);
    return decision === undefined ? undefined : { ...decision, candidates };
  }
}

/** Instances of the model serving in the region's report. */
export function servingInstances(mt: ModelTelemetry): number {
  const fromEndpoints = mt.endpoints.reduce((s, e) => s + e.servingInstances, 0);
  return Math.max(fromEndpoints, mt.instances.serving ?? 0);
}

/**
 * The KV bytes a request adds to its region's in-flight estimate (`noteDispatch`): prompt + max output tokens, the
 * most it can hold — one rule for the live router and the replay. 0 for an unknown model.
 */
export function requestKvBytes(model: ModelName, promptTokens: number, maxTokens: number): number {
  const spec = MODEL_SPECS[model];
  return spec === undefined ? 0 : (promptTokens + maxTokens) * kvBytesPerToken(spec);
}

/**
 * The KV bytes one instance of `model` on `gpu` offers (0 if unknown): with simulated engines, the KV cache they are
 * given (engines.models[model].kvCapacityTokens, else engines.kvCapacityTokens) when the config sets one; otherwise
 * from config gpusPerInstance and core/models (GPU memory less weights).
 */
export function instanceKvBytesFrom(config: TidegateConfig): (model: ModelName, gpu: GpuType) => number {
  const settingsOf = engineSettingsLookup(config.engines);
  return (model, gpu) => {
    const spec = MODEL_SPECS[model];
    const gpuSpec = GPU_SPECS[gpu];
    const gpus = gpusPerInstanceOf(config, model, gpu);
    if (spec === undefined || gpuSpec === undefined || gpus === undefined) return 0;
    const simTokens = config.engines.kind === "sim" ? settingsOf(model).kvCapacityTokens : undefined;
    if (simTokens !== undefined) return simTokens * kvBytesPerToken(spec);
    return Math.max(0, kvCapacityBytes(spec, gpuSpec, gpus));
  };
}
