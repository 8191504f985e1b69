/**
 * Adaptive concurrency limits (issue 32 item 1): shed early and fairly, so that when the fleet is full the router
 * answers 429 with `Retry-After` in milliseconds instead of queueing requests toward a timeout.
 *
 * **One limit per (region, model)**, in the manner of TCP Vegas as Netflix's concurrency-limits applies it to RPCs
 * (`VegasLimit`: the limit grows while the measured delay shows no queue and shrinks when it shows one) and of Envoy's
 * adaptive concurrency filter (a gradient on latency against a minimum measured without load). The sample is the time
 * from dispatch to the first event (TTFT at the router). Prompt length moves TTFT by itself, so the part the model's
 * prefill explains (`expectedMs`, the fitted performance model's prefill time for the prompt) is taken off, and the
 * rest is compared with its own minimum over the last one to two `baselineWindowMs` (the hop, the link and the wait for
 * the engine's next step when nothing is queued: Netflix's `minRtt`, Envoy's `minRTT` re-measured periodically). What
 * is left is the queueing delay `q`; its moving average decides:
 * - `q` above `toleranceMs` (the engine's queue holds requests): the limit is cut by `backoff` (0.9), at most once per
 *   smoothed TTFT (the samples in flight were admitted before the cut);
 * - `q` below half of it and the limit binding (in flight within one of it): the limit grows, by one per sample until
 *   the first cut (slow start) and by `increase / limit` per sample after it (about `increase` per limit's worth of
 *   requests: additive increase).
 * - Between the two, the limit holds. It stays within [minLimit, maxLimit]; `router.maxInflight` remains the
 *   router-wide ceiling (admission.ts).
 *
 * A region at its limit is passed over by the region walk (relay.ts), so its traffic spills to the next region in
 * SageServe §6.2's preference order; when every region of the model is at its limit the request is shed.
 *
 * **Fair shares** (llm-d flow control's per-tenant fairness; Envoy's and concurrency-limits' partitioned limits):
 * while a model's in-flight interactive requests are above `fairAbove` of the sum of its regions' limits, a tenant is
 * admitted only below its weighted share of that sum among the tenants with requests in flight, so a tenant beyond its
 * share is shed first and an overloaded fleet serves tenants in proportion to their weights (API key `weight`, 1 by
 * default). Below `fairAbove` any tenant is admitted (work-conserving).
 *
 * **Priority bands:** batch requests (the dispatcher's) count toward a region's in-flight requests, but may take only
 * `batchShare` of its limit; interactive requests are held to the limit over interactive requests alone — the engines
 * schedule interactive work ahead of batch (priority 0 first), so batch never makes an interactive request wait here.
 *
 * Pure counting on an injected Clock; no timers.
 */
import type { Clock } from "../core/clock.js";
import type { TidegateConfig } from "../core/config.js";
import type { ModelName, RegionName } from "../core/models.js";
import { tokenPaceFrom } from "./pace.js";

/** Which limit shed a request: a region's adaptive limit (all regions full), or the tenant's fair share. */
export type ConcurrencyShed = "concurrency" | "tenant_share";

export interface AdaptiveLimitOptions {
  /** The limit before any sample (≥ 1). */
  initialLimit: number;
  minLimit: number;
  maxLimit: number;
  /** Queueing delay (ms) above which the limit is cut. */
  toleranceMs: number;
  /** Factor applied on a cut (0 < backoff < 1). */
  backoff: number;
  /** Additive increase per limit's worth of samples after slow start. */
  increase: number;
  /** The overhead minimum is taken over the last one to two windows of this length (ms). */
  baselineWindowMs: number;
  /** Weight of a new sample in the moving averages (0 < α ≤ 1). */
  smoothing: number;
}

export const DEFAULT_ADAPTIVE: AdaptiveLimitOptions = {
  initialLimit: 16,
  minLimit: 2,
  maxLimit: 4096,
  toleranceMs: 50,
  backoff: 0.9,
  increase: 2,
  baselineWindowMs: 30_000,
  smoothing: 0.2,
};

/** The state of one limit, for metrics, logs and tests. */
export interface LimitState {
  limit: number;
  inflight: number;
  batchInflight: number;
  /** The moving average of the queueing delay (ms); NaN before the first sample. */
  queueMs: number;
  /** The overhead baseline (ms): the minimum of TTFT less prefill over the window; NaN before the first sample. */
  baselineMs: number;
  slowStart: boolean;
  samples: number;
  cuts: number;
}

/** One (region, model)'s adaptive limit (see the file comment). */
export class AdaptiveLimit {
  private limitValue: number;
  /** Interactive requests in flight. */
  inflight = 0;
  batchInflight = 0;
  private queueEwma = Number.NaN;
  private ttftEwma = Number.NaN;
  /** Sliding minimum of the overhead over two buckets: [current, previous]. */
  private minCurrent = Number.POSITIVE_INFINITY;
  private minPrevious = Number.POSITIVE_INFINITY;
  private bucketStartMs: number | undefined;
  private slowStart = true;
  private lastCutAtMs = Number.NEGATIVE_INFINITY;
  private samples = 0;
  private cuts = 0;

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

  /** Whether a batch request fits now: all requests in flight below `share` of the limit. */
  hasBatchRoom(share: number): boolean {
    return this.inflight + this.batchInflight < Math.max(1, Math.floor(this.limit * share));
  }

  /**
   * One interactive request's first event: `ttftMs` from dispatch, `expectedMs` the part its prefill explains, and
   * the interactive requests that were in flight when it was dispatched (before it).
   */
  onSample(nowMs: number, ttftMs: number, expectedMs: number, inflightAtDispatch: number): void {
    if (!(ttftMs >= 0) || !Number.isFinite(ttftMs)) return;
    this.samples++;
    const overhead = Math.max(0, ttftMs - (Number.isFinite(expectedMs) && expectedMs > 0 ? expectedMs : 0));
    this.rotate(nowMs);
    if (overhead < this.minCurrent) this.minCurrent = overhead;
    const baseline = Math.min(this.minCurrent, this.minPrevious);
    const q = Math.max(0, overhead - baseline);
    const a = this.o.smoothing;
    this.queueEwma = Number.isNaN(this.queueEwma) ? q : this.queueEwma + a * (q - this.queueEwma);
    this.ttftEwma = Number.isNaN(this.ttftEwma) ? ttftMs : this.ttftEwma + a * (ttftMs - this.ttftEwma);
    if (this.queueEwma > this.o.toleranceMs) {
      // Samples admitted before a cut still show its queue; one cut per smoothed TTFT.
      if (nowMs - this.lastCutAtMs >= Math.max(this.ttftEwma, this.o.toleranceMs)) {
        this.limitValue = clamp(this.limitValue * this.o.backoff, this.o.minLimit, this.o.maxLimit);
        this.lastCutAtMs = nowMs;
        this.slowStart = false;
        this.cuts++;
      }
      return;
    }
    const binding = inflightAtDispatch + 1 >= this.limit;
    if (this.queueEwma < this.o.toleranceMs / 2 && binding) {
      const step = this.slowStart ? 1 : this.o.increase / this.limitValue;
      this.limitValue = clamp(this.limitValue + step, this.o.minLimit, this.o.maxLimit);
    }
  }

  state(): LimitState {
    return {
      limit: this.limit,
      inflight: this.inflight,
      batchInflight: this.batchInflight,
      queueMs: this.queueEwma,
      baselineMs: Math.min(this.minCurrent, this.minPrevious),
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
  /** The share of a region's limit batch requests may fill. */
  batchShare: number;
  /** A tenant's weight (API key `weight`; 1 by default). */
  weightOf?: (tenant: string) => number;
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

  constructor(private readonly o: ConcurrencyLimiterOptions) {
    if (!(o.fairAbove > 0 && o.fairAbove <= 1)) throw new RangeError(`fairAbove must be in (0, 1], got ${o.fairAbove}`);
    if (!(o.batchShare > 0 && o.batchShare <= 1)) throw new RangeError(`batchShare must be in (0, 1], got ${o.batchShare}`);
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
   * when it may, else why not ("concurrency": every region at its limit; "tenant_share": the tenant is beyond its share
   * while the model is near its limits).
   */
  refusal(model: ModelName, tenant: string, regions: readonly RegionName[]): ConcurrencyShed | undefined {
    let sum = 0;
    let room = false;
    for (const r of regions) {
      const l = this.limit(r, model);
      sum += l.limit;
      if (l.hasRoom()) room = true;
    }
    if (!room) return "concurrency";
    const total = this.modelInflight.get(model) ?? 0;
    if (total < this.o.fairAbove * sum) return undefined;
    const perTenant = this.tenants.get(model);
    const weightOf = this.o.weightOf ?? (() => 1);
    const mine = perTenant?.get(tenant) ?? 0;
    let weights = weightOf(tenant);
    if (perTenant !== undefined) for (const [t, n] of perTenant) if (t !== tenant && n > 0) weights += weightOf(t);
    const share = (sum * weightOf(tenant)) / weights;
    return mine < share ? undefined : "tenant_share";
  }

  /** Whether (region, model) has room for one more interactive request. */
  hasRoom(region: RegionName, model: ModelName): boolean {
    return this.limit(region, model).hasRoom();
  }

  /** Whether (region, model) has room for one more batch request (its band: batchShare of the limit). */
  hasBatchRoom(region: RegionName, model: ModelName): boolean {
    return this.limit(region, model).hasBatchRoom(this.o.batchShare);
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
      },
    };
  }

  /** Takes a batch slot in (region, model); batch requests do not feed the limit. */
  acquireBatch(region: RegionName, model: ModelName): () => void {
    const l = this.limit(region, model);
    l.batchInflight++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      l.batchInflight--;
    };
  }
}

/** The least tolerance (ms) a model's limit gets when the configuration names none. */
export const MIN_TOLERANCE_MS = 25;

/**
 * The limiter `config.router.concurrency` describes, or undefined when `adaptive` is false. Each model's tolerance is
 * `toleranceMs` when set, else its expected inter-token time (router/pace.ts: a decode step at the engine's full
 * batch; a request that arrives when a slot is free waits up to one step before its prefill), at least
 * MIN_TOLERANCE_MS; `maxLimit` is `router.maxInflight`. A model without a performance profile gets 100 ms and no
 * prefill term.
 */
export function limiterFromConfig(config: TidegateConfig, clock: Clock): ConcurrencyLimiter | undefined {
  const c = config.router.concurrency;
  if (!c.adaptive) return undefined;
  const pace = tokenPaceFrom(config);
  const weights = new Map<string, number>();
  for (const k of config.router.apiKeys) if (k.weight !== undefined) weights.set(k.tenant, Math.max(weights.get(k.tenant) ?? 0, k.weight));
  return new ConcurrencyLimiter({
    clock,
    limitFor: (model) => ({
      ...DEFAULT_ADAPTIVE,
      initialLimit: c.initialLimit,
      minLimit: c.minLimit,
      maxLimit: Math.max(c.initialLimit, config.router.maxInflight),
      backoff: c.backoff,
      toleranceMs: c.toleranceMs ?? Math.max(MIN_TOLERANCE_MS, pace(model)?.tbtMs ?? 100),
    }),
    expectedMs: (model, promptTokens) => pace(model)?.prefillMs(promptTokens) ?? 0,
    fairAbove: c.fairAbove,
    batchShare: c.batchShare,
    weightOf: (tenant) => weights.get(tenant) ?? 1,
  });
}

function clamp(x: number, lo: number, hi: number): number {
  return Math.min(hi, Math.max(lo, x));
}
