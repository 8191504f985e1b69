/**
 * Batch work for a model at zero (issue 33, "batch requests for a cold model wait for warm capacity or trigger a
 * scale-up when their deadline requires it"). The dispatcher sends batch only into room a region reports (§6.3's
 * capacity signals), and a region with no serving instance of a model reports none, so a model scaled to zero
 * whose only demand is batch would wait until its batches expire. This file decides when that wait is no longer
 * acceptable, and where to bring an instance up:
 *
 * - `coldWakeDue` (pure): a model no region serves, with queued batch requests, is due a cold start once waiting
 *   for warm capacity would miss its earliest batch deadline — the time left is less than the cold start + the
 *   queued requests' work at one instance's throughput + a margin — or once its oldest queued request has waited
 *   `maxWaitMs` (0 = never for waiting alone).
 * - `ColdWaker`: the books — each region's last report per model (serving or not, `cold` telemetry: requests held,
 *   expected time to a first instance) and the wakes in flight — and `due(...)`, the (model, region) pairs to wake
 *   at one maintenance pass: the region whose cold start is expected soonest (the first to report on a tie; unknown
 *   counts as the longest) among those the model's queued batches may run in (their `allowedRegions`, data
 *   residency: the union over the model's in-progress batches; any region when one of them has no restriction).
 *
 * The wake itself uses the interactive path (dispatcher.ts `wakeCold`): one queued request of the model is claimed
 * and sent to the first region of the wake's ranking that its own batch allows (released back to the queue when
 * none does); the region's gateway holds it (region/gateway/cold-hold.ts) and its first held request
 * runs a controller pass at once, which brings an instance up (region/controller/zero.ts "cold-start"). Once the
 * instance serves, the region reports room and the rest of the queue flows through the usual capacity signals; the
 * batch keeps the model busy, so it does not drain back to zero until its idle window after the last request. At
 * most one wake per model is in flight; none while a region serves the model or already holds its requests.
 */
import type { ModelName, RegionName } from "../../core/models.js";
import type { RegionTelemetry } from "../../core/ports.js";
import type { BatchRecord, QueueStats } from "../queue/types.js";
import { servingInstances } from "../selector.js";

/** What the rule reads about one model at one maintenance pass. */
export interface ColdWakeInput {
  nowMs: number;
  /** Requests of the model waiting in the queue (not leased). */
  queued: number;
  /** Enqueue time of the oldest waiting request (null: none waits). */
  oldestEnqueuedAtMs: number | null;
  /** The earliest completion deadline among the model's batches with work left (+Infinity: none). */
  deadlineMs: number;
  /** Expected ms from the wake to a first serving instance (+Infinity: unknown). */
  coldStartMs: number;
  /** One instance's time per request at its full batch (ms): the inverse of one instance's throughput. */
  perRequestMs: number;
}

export interface ColdWakeSettings {
  /** Slack kept before a deadline (ms, ≥ 0). */
  marginMs: number;
  /** A request waiting this long wakes the model whatever its deadline (ms; 0 = never). */
  maxWaitMs: number;
}

/** Why a model is woken: its deadline needs it, or its oldest request waited `maxWaitMs`. */
export type ColdWakeReason = "deadline" | "waited";

/** The rule (file comment). An unknown cold start counts as 0 ms: the wake then comes `marginMs` + the work before the deadline. */
export function coldWakeDue(i: ColdWakeInput, s: ColdWakeSettings): ColdWakeReason | undefined {
  if (!(i.queued > 0)) return undefined;
  const coldMs = Number.isFinite(i.coldStartMs) ? i.coldStartMs : 0;
  const needMs = coldMs + i.queued * Math.max(0, i.perRequestMs) + s.marginMs;
  if (i.deadlineMs - i.nowMs < needMs) return "deadline";
  if (s.maxWaitMs > 0 && i.oldestEnqueuedAtMs !== null && i.nowMs - i.oldestEnqueuedAtMs >= s.maxWaitMs) return "waited";
  return undefined;
}

/** One region's last word on a model. */
interface RegionView {
  atMs: number;
  serving: boolean;
  /** Present when the region scales the model from zero. */
  cold?: { held: number; expectedMs: number };
}

/** A wake to send: `model`'s oldest request to `region`. */
export interface ColdWake {
  model: ModelName;
  region: RegionName;
  /** Every region that may take the wake, soonest cold start first (`region` heads it). */
  regions: RegionName[];
  reason: ColdWakeReason;
  coldStartMs: number;
}

/** Per model, what the queue holds (maintenance's stats and active batches). */
export interface QueuedWork {
  queued: number;
  oldestEnqueuedAtMs: number | null;
  deadlineMs: number;
  /** The regions the model's in-progress batches may run in (the union of their `allowedRegions`); null = any. */
  regions: ReadonlySet<RegionName> | null;
}

export interface ColdWakerOptions extends ColdWakeSettings {
  /** One instance's time per request (ms) for `model`; undefined = unknown, counted as 0 (then the margin alone keeps the slack). */
  perRequestMs(model: ModelName): number | undefined;
  /** A region whose last report is older than this is not woken (ms; default 10 000). */
  staleMs?: number;
}

export class ColdWaker {
  private readonly views = new Map<ModelName, Map<RegionName, RegionView>>();
  private readonly waking = new Set<ModelName>();

  constructor(private readonly o: ColdWakerOptions) {
    if (!(o.marginMs >= 0)) throw new RangeError(`marginMs must be ≥ 0, got ${o.marginMs}`);
    if (!(o.maxWaitMs >= 0)) throw new RangeError(`maxWaitMs must be ≥ 0, got ${o.maxWaitMs}`);
  }

  /** Every region report (dispatcher onTelemetry). */
  note(region: RegionName, report: RegionTelemetry, nowMs: number): void {
    for (const m of report.models) {
      let byRegion = this.views.get(m.model);
      if (byRegion === undefined) this.views.set(m.model, (byRegion = new Map()));
      const v: RegionView = { atMs: nowMs, serving: servingInstances(m) > 0 };
      if (m.cold !== undefined) v.cold = { held: m.cold.held, expectedMs: m.cold.expectedMs ?? Number.POSITIVE_INFINITY };
      byRegion.set(region, v);
    }
  }

  /** Whether some fresh report shows a model scaled from zero that no region serves (only then is `due` worth asking). */
  watching(nowMs: number): boolean {
    const staleMs = this.o.staleMs ?? 10_000;
    for (const byRegion of this.views.values()) {
      let cold = false;
      let serving = false;
      for (const v of byRegion.values()) {
        if (nowMs - v.atMs > staleMs) continue;
        serving ||= v.serving;
        cold ||= v.cold !== undefined;
      }
      if (cold && !serving) return true;
    }
    return false;
  }

  /** The wakes due now for `work` (per model), each marked in flight until `ended(model)`. */
  due(work: ReadonlyMap<ModelName, QueuedWork>, nowMs: number): ColdWake[] {
    const out: ColdWake[] = [];
    const staleMs = this.o.staleMs ?? 10_000;
    for (const [model, w] of work) {
      if (this.waking.has(model) || !(w.queued > 0)) continue;
      const fresh = [...(this.views.get(model) ?? new Map<RegionName, RegionView>())].filter(([, v]) => nowMs - v.atMs <= staleMs);
      // A region serving the model takes batch through the capacity signals; one holding requests is coming up.
      if (fresh.some(([, v]) => v.serving || (v.cold?.held ?? 0) > 0)) continue;
      // Regions the batches may run in that scale the model from zero, soonest cold start first (stable: report order on a tie).
      const ranked = fresh.filter(([r, v]) => v.cold !== undefined && (w.regions === null || w.regions.has(r))).sort((a, b) => a[1].cold!.expectedMs - b[1].cold!.expectedMs);
      const best = ranked[0];
      if (best === undefined) continue;
      const coldStartMs = best[1].cold!.expectedMs;
      const reason = coldWakeDue({ nowMs, queued: w.queued, oldestEnqueuedAtMs: w.oldestEnqueuedAtMs, deadlineMs: w.deadlineMs, coldStartMs, perRequestMs: this.o.perRequestMs(model) ?? 0 }, this.o);
      if (reason === undefined) continue;
      this.waking.add(model);
      out.push({ model, region: best[0], regions: ranked.map(([r]) => r), reason, coldStartMs });
    }
    return out;
  }

  /** The wake of `model` ended (its request was served, failed, or never sent): another may follow. */
  ended(model: ModelName): void {
    this.waking.delete(model);
  }
}

/**
 * One instance's time per request (ms) at its full batch: `outputTokens` decode steps of `stepMs` shared by `maxBatch`
 * requests (router/pace.ts's `stepMs`). Prefill is left out: at a full batch the decode steps dominate.
 */
export function perRequestMsOf(stepMs: number, maxBatch: number, outputTokens: number): number {
  return (outputTokens * stepMs) / Math.max(1, maxBatch);
}

/**
 * Per model, the queued work a maintenance pass saw: waiting requests and the oldest one's age from the queue's
 * stats, the earliest deadline (`expiresAtMs`) among its in-progress batches with requests left, and the union of
 * those batches' `allowedRegions` (null when one of them has none, or when no such batch is known).
 */
export function queuedWork(batches: readonly BatchRecord[], stats: QueueStats): Map<ModelName, QueuedWork> {
  const out = new Map<ModelName, QueuedWork>();
  for (const [model, d] of Object.entries(stats.depth)) {
    out.set(model, { queued: d.p0 + d.p1, oldestEnqueuedAtMs: stats.oldestEnqueuedAtMs[model] ?? null, deadlineMs: Number.POSITIVE_INFINITY, regions: null });
  }
  const regions = new Map<ModelName, Set<RegionName> | "any">();
  for (const b of batches) {
    if (b.status !== "in_progress" || b.model === null || b.completed + b.failed >= b.total) continue;
    const w = out.get(b.model);
    if (w === undefined) continue;
    w.deadlineMs = Math.min(w.deadlineMs, b.expiresAtMs);
    const r = regions.get(b.model);
    if (b.allowedRegions === undefined) regions.set(b.model, "any");
    else if (r !== "any") regions.set(b.model, new Set([...(r ?? []), ...b.allowedRegions]));
  }
  for (const [model, r] of regions) if (r !== "any") out.get(model)!.regions = r;
  return out;
}
