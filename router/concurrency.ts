/**
 * Adaptive concurrency limits (issue 32 item 1): shed early and fairly, so that when the fleet is full the router
 * answers 429 with `Retry-After` in milliseconds instead of queueing requests toward a timeout.
 *
 * **One limit per (region, model)** on interactive requests in flight, in the manner of TCP Vegas as Netflix's
 * concurrency-limits applies it to RPCs (`VegasLimit`: grow while the measured delay shows no queue, shrink when it
 * shows one) and of Envoy's adaptive concurrency filter (latency against a reference measured without load, with a
 * buffer in proportion to it). The sample is the time from dispatch to the first event (TTFT at the router):
 * - the part the prompt's prefill explains (`expectedMs`, the fitted performance model's prefill time) is taken off;
 *   what is left is the request's overhead (hops, link, the wait for the engine's next step, and any queue);
 * - the overhead is compared with a reference: the mean overhead of requests sent while the limit was far from
 *   binding (in flight ≤ half of it: nothing queued at the router; the wait for the engine's next step averages in),
 *   kept within [min, min + one decode step] of the minimum overhead over the last one to two `baselineWindowMs` so
 *   that requests queued at an engine cannot raise it; before any such request, the minimum + half a step;
 * - the difference `q`, smoothed, is the queueing delay. Its tolerance comes from the model's TTFT SLO (issue 49 item
 *   4; config `slo.ttftMs`): `toleranceFraction` (0.5) of what the SLO leaves after the request's unloaded TTFT
 *   (reference + its prefill), at least `toleranceMs` — so the limit is cut while admitted requests still meet the SLO
 *   (half of the slack is kept back: the moving average lags and the SLO is held at a percentile), and not before
 *   the queue eats into it. A model whose SLO its unloaded TTFT already misses (or no SLO) falls back to
 *   `toleranceFraction` × the unloaded TTFT, the rule before the SLO was known.
 * A limit starts at `initialLimit` (by default `router.maxInflight`) and, from the region's first telemetry on, at its
 * ceiling: the most its engines can run at once (serving and loading instances × `engines.models.<m>.maxBatch`, vLLM's
 * max_num_seqs, 256 by default); the limit never exceeds the ceiling and moves in proportion when it changes (scaling).
 * So nothing is shed before the engines are full or a queue has been seen. Then:
 * - `q` above the tolerance: the limit is cut by `backoff` (0.9) — unless the region's last report had no request
 *   waiting at its engines (the delay is then the hops' or a busy host's, not a queue the limit can shorten), or the
 *   request was sent with less than half of the limit in flight (the limit is not what let the queue in; Netflix's
 *   VegasLimit makes no delay-based change then, in either direction, and neither does this); the next
 *   cut waits until half of the requests in flight have been followed by requests sent after it (a round trip, in
 *   Vegas's terms);
 * - otherwise, while the limit binds (the request was sent with at least 90% of the limit in flight): it grows by one per sample until the
 *   first cut (slow start); after it, by sqrt(limit) per limit's worth of samples while more than one backoff below
 *   where a queue was last seen, and by `increase` (2) per limit's worth near it (Vegas probes by one a round trip;
 *   CUBIC likewise slows near its last maximum).
 * - The queue is also seen directly: each region's telemetry reports the model's requests running and waiting at its
 *   engines; with two or more waiting in two reports in a row while the limit binds, the engines are full at
 *   `running`, and the limit is brought down to `running` + 1 at once (at most halved).
 * - While the region reports instances of the model loading or provisioning, the limit holds: the queue is expected to
 *   drain onto them (live scaling serves within seconds), and shedding then would hide demand from the autoscaler.
 * It stays within [minLimit, maxLimit]; `router.maxInflight` remains the router-wide ceiling (admission.ts).
 *
 * A region at its limit is passed over by the region walk (relay.ts), so its traffic spills to the next region in
 * SageServe §6.2's preference order; when every region of the model is at its limit the request is shed.
 *
 * **Fair shares** (llm-d flow control's per-tenant fairness and its queues; concurrency-limits' partitioned limits):
 * while a model's interactive requests in flight are at or above `fairAbove` of the sum of its available regions'
 * limits, a tenant holding its weighted share of that sum or more (among the tenants with requests in flight) is shed
 * at once. A tenant within its share that finds every region full (or others already waiting) waits up to `queueMs` for
 * a slot, if fewer are waiting than slots freed in `queueMs` at the last second's rate (else it is shed at once: it
 * would only time out); freed slots go to the waiting tenant with the fewest requests in flight for its weight, so an overloaded
 * fleet serves tenants in proportion to their weights (API key `weight`, 1 by default) without holding slots idle for
 * them. Below `fairAbove` any tenant is admitted (work-conserving).
 *
 * **Batch** is not counted here: the dispatcher sends batch requests only into the room a region reports (router/
 * dispatch, SageServe §6.3), and engines schedule interactive requests ahead of batch (priority 0 first), so the
 * interactive band is what these limits guard.
 *
 * Pure counting on an injected Clock; no timers. The live router uses it (completions.ts → relay.ts); the replays'
 * callback path (`submitWithRetry`) does not.
 */
import type { Clock } from "../core/clock.js";
import { engineSettingsLookup, sloFor, type TidegateConfig } from "../core/config.js";
import type { ModelName, RegionName } from "../core/models.js";
import type { RegionTelemetry } from "../core/ports.js";
import { tokenPaceFrom } from "./pace.js";
import { DEFAULT_MAX_BATCH } from "../core/perf/model.js";

/** Which limit shed a request: a region's adaptive limit (all regions full), or the tenant's fair share. */
export type ConcurrencyShed = "concurrency" | "tenant_share";

export interface AdaptiveLimitOptions {
  /** The limit before the region's first telemetry sets its ceiling (setCeiling). */
  initialLimit: number;
  minLimit: number;
  maxLimit: number;
  /**
   * Queueing delay (ms) above which the limit is cut: the larger of `toleranceMs` and `toleranceFraction` × what
   * `sloTtftMs` leaves after the unloaded TTFT the sample would have had (reference + its prefill); without an SLO, or
   * when the unloaded TTFT exceeds it, `toleranceFraction` × that unloaded TTFT — Envoy's gradient controller likewise
   * allows a buffer in proportion to its minimum RTT.
   */
  toleranceMs: number;
  toleranceFraction: number;
  /** The model's TTFT SLO (ms, config `slo`); undefined: none (the tolerance follows the unloaded TTFT). */
  sloTtftMs?: number;
  /** Factor applied on a cut (0 < backoff < 1). */
  backoff: number;
  /** Near where a queue was last seen, the limit grows by `increase` per limit's worth of samples. */
  increase: number;
  /** The engine's decode step (ms): a request sent when a slot is free waits up to one before its prefill. */
  stepMs: number;
  /** The overhead minimum is taken over the last one to two windows of this length (ms). */
  baselineWindowMs: number;
  /** Weight of a new sample in the moving averages (0 < α ≤ 1). */
  smoothing: number;
}

/**
 * The rules' constants. `limiterFromConfig` takes initialLimit (`router.maxInflight` unless set), minLimit, maxLimit,
 * backoff and the tolerance from `router.concurrency`, and stepMs from the model's pace; the rest as here.
 */
export const DEFAULT_ADAPTIVE: AdaptiveLimitOptions = {
  initialLimit: 16,
  minLimit: 2,
  maxLimit: 4096,
  toleranceMs: 10,
  toleranceFraction: 0.5,
  backoff: 0.9,
  increase: 2,
  stepMs: 0,
  baselineWindowMs: 30_000,
  smoothing: 0.1,
};

/** The state of one limit, for metrics, logs and tests. */
export interface LimitState {
  limit: number;
  inflight: number;
  /** The moving average of the queueing delay (ms); NaN before the first sample. */
  queueMs: number;
  /** The minimum of TTFT less prefill over the window (ms); Infinity before the first sample. */
  baselineMs: number;
  /** What a sample's overhead is compared with (ms; see onSample). */
  referenceMs: number;
  /** The tolerance the last sample was judged against (ms). */
  toleranceMs: number;
  slowStart: boolean;
  samples: number;
  cuts: number;
}

/** One (region, model)'s adaptive limit (see the file comment). */
export class AdaptiveLimit {
  private limitValue: number;
  /** Interactive requests in flight. */
  inflight = 0;
  private queueEwma = Number.NaN;
  /** Sliding minimum of the overhead over two buckets: [current, previous]. */
  private minCurrent = Number.POSITIVE_INFINITY;
  private minPrevious = Number.POSITIVE_INFINITY;
  private bucketStartMs: number | undefined;
  private slowStart = true;
  /** Samples since the last cut. */
  private sinceCut = Number.POSITIVE_INFINITY;
  /** Mean overhead of samples sent far below the limit; NaN before the first. */
  private unqueuedEwma = Number.NaN;
  private unqueuedCount = 0;
  /** The engines' capacity from telemetry (setCeiling); undefined before the first report. */
  private ceiling: number | undefined;
  /** The limit when a queue was last seen (before the cut it caused); Infinity before any. */
  private queuedAt = Number.POSITIVE_INFINITY;
  /** Requests waiting at the engines in the last report; undefined before one. */
  private lastWaiting: number | undefined;
  /** The last report had instances of the model loading or provisioning in the region (see onQueueReport). */
  private scaling = false;
  /** Telemetry reports in a row with requests waiting while the limit binds. */
  private queuedReports = 0;
  private referenceNow = Number.NaN;
  private samples = 0;
  private cuts = 0;
  private toleranceNow = Number.NaN;

  constructor(private readonly o: AdaptiveLimitOptions) {
    if (!(o.minLimit >= 1 && o.maxLimit >= o.minLimit)) throw new RangeError(`adaptive limit: need 1 ≤ minLimit ≤ maxLimit, got ${o.minLimit}, ${o.maxLimit}`);
    if (!(o.backoff > 0 && o.backoff < 1)) throw new RangeError(`adaptive limit: backoff must be in (0, 1), got ${o.backoff}`);
    if (!(o.smoothing > 0 && o.smoothing <= 1)) throw new RangeError(`adaptive limit: smoothing must be in (0, 1], got ${o.smoothing}`);
    if (!(o.toleranceMs > 0)) throw new RangeError(`adaptive limit: toleranceMs must be > 0, got ${o.toleranceMs}`);
    this.limitValue = clamp(o.initialLimit, o.minLimit, o.maxLimit);
  }

  /** The limit on interactive requests in flight (whole requests). */
  get limit(): number {
    return Math.floor(this.limitValue);
  }

  /** Whether an interactive request fits now. */
  hasRoom(): boolean {
    return this.inflight < this.limit;
  }

  /**
   * One interactive request's first event: `ttftMs` from dispatch, `expectedMs` the part its prefill explains, and
   * the interactive requests that were in flight when it was dispatched (before it).
   */
  onSample(nowMs: number, ttftMs: number, expectedMs: number, inflightAtDispatch: number): void {
    if (!(ttftMs >= 0) || !Number.isFinite(ttftMs)) return;
    this.samples++;
    this.sinceCut++;
    const expected = Number.isFinite(expectedMs) && expectedMs > 0 ? expectedMs : 0;
    const overhead = Math.max(0, ttftMs - expected);
    this.rotate(nowMs);
    if (overhead < this.minCurrent) this.minCurrent = overhead;
    const min = Math.min(this.minCurrent, this.minPrevious);
    // The reference: the mean overhead of requests sent while the limit was far from binding (the router queued
    // nothing; the wait for the engine's next step averages in), bounded to [min, min + one step] so that requests
    // queued at the engine cannot raise it; before any such request, min + half a step.
    if (inflightAtDispatch + 1 <= this.limit / 2) {
      // A plain mean over the first ones (so it settles at once), a moving average after.
      this.unqueuedCount++;
      const w = Math.max(REFERENCE_SMOOTHING, 1 / this.unqueuedCount);
      this.unqueuedEwma = Number.isNaN(this.unqueuedEwma) ? overhead : this.unqueuedEwma + w * (overhead - this.unqueuedEwma);
    }
    const span = Math.max(this.o.stepMs, 2 * this.o.toleranceMs);
    const reference = clamp(Number.isNaN(this.unqueuedEwma) ? min + this.o.stepMs / 2 : this.unqueuedEwma, min, min + span);
    const q = overhead - reference;
    const a = this.o.smoothing;
    this.queueEwma = Number.isNaN(this.queueEwma) ? q : this.queueEwma + a * (q - this.queueEwma);
    const unloadedMs = reference + expected;
    const slackMs = this.o.sloTtftMs === undefined ? 0 : this.o.sloTtftMs - unloadedMs;
    const tolerance = Math.max(this.o.toleranceMs, this.o.toleranceFraction * (slackMs > 0 ? slackMs : unloadedMs));
    this.referenceNow = reference;
    this.toleranceNow = tolerance;
    if (this.queueEwma > tolerance) {
      // While the region brings up instances of the model its queue is expected to drain: hold. When its last report
      // had nothing waiting at the engines, the delay is not theirs (hops, a busy host): hold too. And when the
      // request was sent with less than half of the limit in flight, the limit did not let the queue in: a cut would
      // only chip at headroom nobody uses until it sheds a load that never grew (Netflix's VegasLimit returns before
      // any delay-based change while `inflight * 2 < limit`).
      if (this.scaling || this.lastWaiting === 0 || (inflightAtDispatch + 1) * 2 < this.limitValue) return;
      // The requests in flight at a cut were admitted before it: the next cut waits until half of them have been
      // followed by requests sent after it (a round trip, in Vegas's terms).
      if (this.sinceCut >= Math.max(MIN_SAMPLES_BETWEEN_CUTS, Math.min(this.limitValue, this.inflight) / 2)) {
        this.queuedAt = this.limitValue;
        this.limitValue = clamp(this.limitValue * this.o.backoff, this.o.minLimit, this.o.maxLimit);
        this.sinceCut = 0;
        this.slowStart = false;
        this.cuts++;
      }
      return;
    }
    // The limit binds when the request was sent with it (nearly) full: within BINDING of it, where tenants' shares
    // start to shed (an application-limited flow does not grow its window: Netflix's `inflight * 2 < limit` rule).
    const binding = inflightAtDispatch + 1 >= BINDING * this.limit;
    if (binding) {
      // Slow start: +1 a sample (doubling a round trip). After it, +sqrt(limit) a round trip while more than one
      // backoff below where a queue was last seen (back quickly after a deep cut), else +`increase` a round trip
      // (Vegas: probe slowly where the queue begins; CUBIC likewise slows near its last maximum).
      const far = this.limitValue < this.queuedAt * this.o.backoff;
      const step = this.slowStart ? 1 : far ? Math.sqrt(this.limitValue) / this.limitValue : this.o.increase / this.limitValue;
      this.limitValue = clamp(this.limitValue + step, this.o.minLimit, this.ceiling ?? this.o.maxLimit);
    }
  }

  /**
   * The region's own report of the model's engines (telemetry). Requests waiting at the engines while the router holds
   * the region at its limit mean the engines are full at `running`; seen in two reports in a row, at least
   * MIN_WAITING each time (a request that arrived since the engine's last step waits for its next one and reads as
   * waiting), the limit is brought down to `running` + 1 at once (at most halved), without waiting for the queued
   * requests' first tokens. Ends slow start. With `scaling` (instances of the model loading or provisioning in the region) the limit holds until
   * a report without: the queue is expected to drain onto them (live scaling serves within seconds).
   */
  onQueueReport(running: number, waiting: number, scaling = false): void {
    this.scaling = scaling;
    this.lastWaiting = waiting;
    const binding = this.inflight + 1 >= this.limit;
    if (!(waiting >= MIN_WAITING) || !(running >= 0) || !binding || scaling) {
      this.queuedReports = 0;
      return;
    }
    if (++this.queuedReports < 2) return;
    this.slowStart = false;
    const cap = clamp(Math.max(running + 1, this.limitValue * MAX_CUT), this.o.minLimit, this.o.maxLimit);
    if (cap < this.limitValue) {
      this.queuedAt = this.limitValue;
      this.limitValue = cap;
      this.sinceCut = 0;
      this.cuts++;
    }
  }

  /**
   * The most the region's engines can run at once (serving and loading instances × max_num_seqs, from its telemetry).
   * The first one sets the limit (before it, `initialLimit`); a change moves the limit in proportion (new instances
   * serve the queue) and the limit never exceeds it.
   */
  setCeiling(ceiling: number): void {
    if (!(ceiling >= 1) || ceiling === this.ceiling) return;
    const c = clamp(ceiling, this.o.minLimit, this.o.maxLimit);
    const prev = this.ceiling;
    this.ceiling = c;
    if (prev === undefined) this.limitValue = c;
    else {
      this.limitValue = clamp((this.limitValue * c) / prev, this.o.minLimit, c);
      if (Number.isFinite(this.queuedAt)) this.queuedAt = (this.queuedAt * c) / prev;
    }
  }

  state(): LimitState {
    return {
      limit: this.limit,
      inflight: this.inflight,
      queueMs: this.queueEwma,
      baselineMs: Math.min(this.minCurrent, this.minPrevious),
      referenceMs: this.referenceNow,
      toleranceMs: this.toleranceNow,
      slowStart: this.slowStart,
      samples: this.samples,
      cuts: this.cuts,
    };
  }

  private rotate(nowMs: number): void {
    if (this.bucketStartMs === undefined) {
      this.bucketStartMs = nowMs;
      return;
    }
    if (nowMs - this.bucketStartMs < this.o.baselineWindowMs) return;
    // A whole window (or more) without rotation: the previous bucket is the current one, or nothing when two passed.
    this.minPrevious = nowMs - this.bucketStartMs < 2 * this.o.baselineWindowMs ? this.minCurrent : Number.POSITIVE_INFINITY;
    this.minCurrent = Number.POSITIVE_INFINITY;
    this.bucketStartMs = nowMs;
  }
}

export interface ConcurrencyLimiterOptions {
  clock: Clock;
  /** Per model: the limit's settings (its tolerance follows the model's pace; see limiterFromConfig). */
  limitFor: (model: ModelName) => AdaptiveLimitOptions;
  /** The part of a request's TTFT its prefill explains (ms); 0 when unknown. */
  expectedMs: (model: ModelName, promptTokens: number) => number;
  /** Above this fraction of a model's summed limits, tenants are held to their weighted shares. */
  fairAbove: number;
  /** A model's max_num_seqs per instance (the ceiling's unit); absent: no ceiling from telemetry. */
  maxBatchOf?: (model: ModelName) => number;
  /** A tenant's weight (API key `weight`; 1 by default). */
  weightOf?: (tenant: string) => number;
}

/** A request waiting for a slot (ConcurrencyLimiter.waitForRoom). */
interface Waiter {
  tenant: string;
  regions: readonly RegionName[];
  /** Ends the wait (idempotent in effect: removes itself, cancels its timer). */
  done(ok: boolean): void;
}

/** A slot a request holds in one (region, model) limit; `release` is idempotent. */
export interface ConcurrencySlot {
  /** The first event arrived now (its time since `acquire` is the limit's sample). */
  firstEvent(): void;
  release(): void;
}

/** The router's adaptive limits, tenants' shares and priority bands (see the file comment). */
export class ConcurrencyLimiter {
  private readonly limits = new Map<string, AdaptiveLimit>();
  /** model → tenant → interactive requests in flight over all regions. */
  private readonly tenants = new Map<ModelName, Map<string, number>>();
  /** model → interactive requests in flight over all regions. */
  private readonly modelInflight = new Map<ModelName, number>();
  /** model → slots released in the current second (from `startMs`) and in the last whole one. */
  private readonly releases = new Map<ModelName, { startMs: number; count: number; lastCount: number }>();
  /** model → requests waiting for a slot (waitForRoom), in arrival order. */
  private readonly waiters = new Map<ModelName, Waiter[]>();

  constructor(private readonly o: ConcurrencyLimiterOptions) {
    if (!(o.fairAbove > 0 && o.fairAbove <= 1)) throw new RangeError(`fairAbove must be in (0, 1], got ${o.fairAbove}`);
  }

  /** The limit of (region, model), created on first use. */
  limit(region: RegionName, model: ModelName): AdaptiveLimit {
    const key = `${region}\u0000${model}`;
    let l = this.limits.get(key);
    if (l === undefined) {
      l = new AdaptiveLimit(this.o.limitFor(model));
      this.limits.set(key, l);
    }
    return l;
  }

  /** Every limit created so far, for metrics. */
  *entries(): IterableIterator<{ region: RegionName; model: ModelName; limit: AdaptiveLimit }> {
    for (const [key, limit] of this.limits) {
      const [region, model] = key.split("\u0000") as [string, string];
      yield { region, model, limit };
    }
  }

  /**
   * Whether `tenant` may send one more interactive request for `model`, given the regions that may serve it: undefined
   * when it may now; "tenant_share" when the tenant is beyond its weighted share while the model is near its limits
   * (shed at once); "concurrency" when every region is at its limit, or requests wait for a slot already (it may wait
   * for one: `waitForRoom`).
   */
  refusal(model: ModelName, tenant: string, regions: readonly RegionName[]): ConcurrencyShed | undefined {
    let sum = 0;
    let room = false;
    for (const r of regions) {
      const l = this.limit(r, model);
      sum += l.limit;
      if (l.hasRoom()) room = true;
    }
    const full = !room || this.waiting(model) > 0;
    const total = this.modelInflight.get(model) ?? 0;
    let why: ConcurrencyShed | undefined;
    if (total < this.o.fairAbove * sum) why = full ? "concurrency" : undefined;
    else {
      // Shares matter only between tenants: alone, a tenant's share is the whole.
      const perTenant = this.tenants.get(model);
      let others = false;
    if (perTenant !== undefined) for (const t of perTenant.keys()) if (t !== tenant) others = true;
      // A tenant with nothing in flight is never beyond its share (it may wait for a slot).
      const mine = perTenant?.get(tenant) ?? 0;
      const beyond = others && mine > 0 && mine >= this.shareOf(model, tenant, sum);
      why = beyond ? "tenant_share" : full ? "concurrency" : undefined;
    }
    return why;
  }

  /**
   * Waits up to `maxWaitMs` for a slot in one of `regions` (a tenant within its share when the model is full): slots
   * are handed, as they free, to the waiting tenant with the fewest requests in flight for its weight (fair queuing,
   * as llm-d's flow control orders tenants). Resolves true when one is free for this request, false on the deadline or
   * when `signal` aborts.
   */
  waitForRoom(model: ModelName, tenant: string, regions: readonly RegionName[], maxWaitMs: number, signal?: AbortSignal): Promise<boolean> {
    return new Promise((resolve) => {
      let list = this.waiters.get(model);
      if (list === undefined) this.waiters.set(model, (list = []));
      const w: Waiter = {
        tenant,
        regions,
        done: (ok) => {
          timer.cancel();
          signal?.removeEventListener("abort", onAbort);
          const l = this.waiters.get(model);
          const i = l?.indexOf(w) ?? -1;
          if (i >= 0) l!.splice(i, 1);
          resolve(ok);
        },
      };
      const onAbort = () => w.done(false);
      const timer = this.o.clock.after(maxWaitMs, () => w.done(false));
      signal?.addEventListener("abort", onAbort, { once: true });
      list.push(w);
    });
  }

  /** Requests waiting for a slot of `model` now. */
  waiting(model: ModelName): number {
    return this.waiters.get(model)?.length ?? 0;
  }

  /**
   * Whether one more request may wait up to `maxWaitMs` for a slot of `model`: only while the slots expected to free
   * in that time (the releases of the last whole second × the wait) cover it and everyone already waiting. A request
   * that would only time out — a slot that will not come in time, or none measured to come at all — is shed at once
   * (issue 49 item 4: its 429 is answered without the wait).
   */
  mayWait(model: ModelName, maxWaitMs: number): boolean {
    const r = this.releases.get(model);
    const now = this.o.clock.now();
    const perS = r === undefined ? 0 : now - r.startMs < 2000 ? r.lastCount : 0;
    return this.waiting(model) + 1 <= (perS * maxWaitMs) / 1000;
  }

  /** `tenant`'s weighted share of `sum` among the tenants with requests of `model` in flight (and itself). */
  private shareOf(model: ModelName, tenant: string, sum: number): number {
    const perTenant = this.tenants.get(model);
    const weightOf = this.o.weightOf ?? (() => 1);
    let weights = weightOf(tenant);
    if (perTenant !== undefined) for (const [t, n] of perTenant) if (t !== tenant && n > 0) weights += weightOf(t);
    return (sum * weightOf(tenant)) / weights;
  }

  private countRelease(model: ModelName): void {
    const now = this.o.clock.now();
    let r = this.releases.get(model);
    if (r === undefined) this.releases.set(model, (r = { startMs: now, count: 0, lastCount: 0 }));
    if (now - r.startMs >= 1000) {
      r.lastCount = now - r.startMs < 2000 ? r.count : 0;
      r.count = 0;
      r.startMs = now;
    }
    r.count++;
  }

  /** A slot of (region, model) freed: hands it to the waiter whose tenant has the fewest in flight for its weight. */
  private wake(region: RegionName, model: ModelName): void {
    const list = this.waiters.get(model);
    if (list === undefined || list.length === 0 || !this.limit(region, model).hasRoom()) return;
    const perTenant = this.tenants.get(model);
    const weightOf = this.o.weightOf ?? (() => 1);
    let best: Waiter | undefined;
    let bestLoad = Number.POSITIVE_INFINITY;
    for (const w of list) {
      if (!w.regions.includes(region)) continue;
      const load = (perTenant?.get(w.tenant) ?? 0) / weightOf(w.tenant);
      if (load < bestLoad) {
        best = w;
        bestLoad = load;
      }
    }
    best?.done(true);
  }

  /** A region's telemetry: each model's engines' capacity (`setCeiling`) and queue (`onQueueReport`). */
  onTelemetry(t: RegionTelemetry): void {
    for (const m of t.models) {
      const l = this.limit(t.region, m.model);
      const serving = m.endpoints.reduce((sum, e) => sum + e.servingInstances, 0);
      const loading = m.instances.loading + m.instances.provisioning;
      if (this.o.maxBatchOf !== undefined) l.setCeiling((serving + loading) * this.o.maxBatchOf(m.model));
      l.onQueueReport(m.running, m.waiting, loading > 0);
    }
  }

  /** Whether (region, model) has room for one more interactive request. */
  hasRoom(region: RegionName, model: ModelName): boolean {
    return this.limit(region, model).hasRoom();
  }

  /** Takes an interactive slot in (region, model) for `tenant` with a `promptTokens` prompt. */
  acquire(region: RegionName, model: ModelName, tenant: string, promptTokens: number): ConcurrencySlot {
    const l = this.limit(region, model);
    const before = l.inflight;
    const dispatchedAtMs = this.o.clock.now();
    l.inflight++;
    this.modelInflight.set(model, (this.modelInflight.get(model) ?? 0) + 1);
    let perTenant = this.tenants.get(model);
    if (perTenant === undefined) this.tenants.set(model, (perTenant = new Map()));
    perTenant.set(tenant, (perTenant.get(tenant) ?? 0) + 1);
    let released = false;
    let sampled = false;
    return {
      firstEvent: () => {
        if (sampled || released) return;
        sampled = true;
        const now = this.o.clock.now();
        l.onSample(now, now - dispatchedAtMs, this.o.expectedMs(model, promptTokens), before);
      },
      release: () => {
        if (released) return;
        released = true;
        l.inflight--;
        this.modelInflight.set(model, (this.modelInflight.get(model) ?? 1) - 1);
        const n = (perTenant.get(tenant) ?? 1) - 1;
        if (n <= 0) perTenant.delete(tenant);
        else perTenant.set(tenant, n);
        this.countRelease(model);
        this.wake(region, model);
      },
    };
  }
}

/** The least tolerance (ms) a limit gets when the configuration names no absolute one. */
export const MIN_TOLERANCE_MS = 10;

/**
 * The limiter `config.router.concurrency` describes, or undefined when `adaptive` is false. A limit's tolerance is
 * `toleranceMs` when set, else `toleranceFraction` of what the model's TTFT SLO (`slo`, sloFor) leaves after the
 * unloaded TTFT (at least MIN_TOLERANCE_MS; see AdaptiveLimitOptions); the prefill term comes from the performance
 * model (router/pace.ts; none for a model without a profile); `maxLimit` is `router.maxInflight`.
 */
export function limiterFromConfig(config: TidegateConfig, clock: Clock): ConcurrencyLimiter | undefined {
  const c = config.router.concurrency;
  const settingsOf = engineSettingsLookup(config.engines);
  if (!c.adaptive) return undefined;
  const pace = tokenPaceFrom(config);
  const weights = new Map<string, number>();
  for (const k of config.router.apiKeys) if (k.weight !== undefined) weights.set(k.tenant, Math.max(weights.get(k.tenant) ?? 0, k.weight));
  return new ConcurrencyLimiter({
    clock,
    limitFor: (model) => ({
      ...DEFAULT_ADAPTIVE,
      initialLimit: c.initialLimit ?? config.router.maxInflight,
      minLimit: c.minLimit,
      maxLimit: Math.max(c.initialLimit ?? 1, config.router.maxInflight),
      backoff: c.backoff,
      stepMs: pace(model)?.stepMs ?? 0,
      ...(c.toleranceMs === undefined ? { toleranceMs: MIN_TOLERANCE_MS, toleranceFraction: c.toleranceFraction, sloTtftMs: sloFor(config.slo, model).ttftMs } : { toleranceMs: c.toleranceMs, toleranceFraction: 0 }),
    }),
    expectedMs: (model, promptTokens) => pace(model)?.prefillMs(promptTokens) ?? 0,
    fairAbove: c.fairAbove,
    weightOf: (tenant) => weights.get(tenant) ?? 1,
    maxBatchOf: (model) => settingsOf(model).maxBatch ?? DEFAULT_MAX_BATCH,
  });
}

/** Weight of a new sample in the unqueued reference. */
const REFERENCE_SMOOTHING = 0.05;
/** A limit binds when the requests in flight are at least this fraction of it. */
const BINDING = 0.9;
/**
 * Requests waiting at a region's engines that a report must show to count as a queue: one is often a request that
 * arrived since the engine's last step and joins at its next one.
 */
const MIN_WAITING = 2;
/** The deepest cut one report can make. */
const MAX_CUT = 0.5;
/** A cut waits for at least this many samples after the previous one. */
const MIN_SAMPLES_BETWEEN_CUTS = 4;

function clamp(x: number, lo: number, hi: number): number {
  return Math.min(hi, Math.max(lo, x));
}
