/**
 * Demand history (DESIGN "Planner — History"): per (model, region) and minute, interactive (IW) tokens/s and batch
 * (NIW) arrivals in tokens/s, kept for at least 8 days (a week of hourly seasonality plus the hour being planned).
 * `add` accumulates into a minute (several router replicas may each record their share); `series` reads a range back
 * with NaN for minutes nobody recorded (a gap is not a zero). Adapters: in memory (this file) and Redis
 * (history-redis.ts), held to the same behaviour by one test suite.
 */
import type { ModelName, RegionName } from "../core/models.js";

/** Interactive (iw) tokens/s served, or batch (niw) tokens/s arriving. */
export type DemandKind = "iw" | "niw";

/** One minute of demand. `minuteMs` is any time within the minute (it is floored). */
export interface DemandSample {
  kind: DemandKind;
  model: ModelName;
  region: RegionName;
  minuteMs: number;
  /** Tokens/s averaged over the minute; finite and ≥ 0. */
  tokensPerS: number;
}

/** Identifies one demand series. */
export interface SeriesKey {
  kind: DemandKind;
  model: ModelName;
  region: RegionName;
}

/** The history port; adapters: MemoryHistory, RedisHistory. */
export interface DemandHistory {
  /** How long minutes are kept (≥ 8 days). */
  readonly retentionMs: number;
  /** Adds samples; rejects (RangeError) a non-finite or negative value without storing any of the batch. */
  add(samples: readonly DemandSample[]): Promise<void>;
  /** Per-minute values for minutes in [fromMs, toMs) (floored to minutes), NaN where nothing was recorded. */
  series(key: SeriesKey, fromMs: number, toMs: number): Promise<number[]>;
  /** Every series that has been recorded. */
  keys(): Promise<SeriesKey[]>;
  close(): Promise<void>;
}

/** One minute and one day in ms. */
export const MINUTE_MS = 60_000;
/** One day in ms. */
export const DAY_MS = 86_400_000;
/** Default retention: 8 days. */
export const DEFAULT_RETENTION_MS = 8 * DAY_MS;

/** Throws RangeError when a sample is unusable (names the sample). */
export function checkSamples(samples: readonly DemandSample[]): void {
  samples.forEach((s, i) => {
    if (!Number.isFinite(s.tokensPerS) || s.tokensPerS < 0) throw new RangeError(`sample ${i} (${s.kind} ${s.model}@${s.region}): tokensPerS must be finite and ≥ 0, got ${s.tokensPerS}`);
    if (!Number.isFinite(s.minuteMs) || s.minuteMs < 0) throw new RangeError(`sample ${i}: minuteMs must be a finite time ≥ 0, got ${s.minuteMs}`);
    if (s.kind !== "iw" && s.kind !== "niw") throw new RangeError(`sample ${i}: kind must be iw or niw`);
  });
}

/** Throws RangeError when retention is under 8 days. */
export function checkRetention(retentionMs: number): void {
  if (!(retentionMs >= DEFAULT_RETENTION_MS)) throw new RangeError(`retentionMs must be ≥ 8 days (${DEFAULT_RETENTION_MS}), got ${retentionMs}`);
}

const keyOf = (k: SeriesKey) => `${k.kind}\t${k.model}\t${k.region}`;

/**
 * In-memory history for `tidegate dev`, replay and tests. Minutes older than retention (from the newest) are dropped,
 * checked once per hour of advance (so up to retention + 1 h is held).
 */
export class MemoryHistory implements DemandHistory {
  private readonly data = new Map<string, Map<number, number>>();
  private newestMinute = -Infinity;
  private lastTrimMinute = -Infinity;

  constructor(readonly retentionMs: number = DEFAULT_RETENTION_MS) {
    checkRetention(retentionMs);
  }

  async add(samples: readonly DemandSample[]): Promise<void> {
    checkSamples(samples);
    for (const s of samples) {
      const minute = Math.floor(s.minuteMs / MINUTE_MS);
      const k = keyOf(s);
      let m = this.data.get(k);
      if (m === undefined) this.data.set(k, (m = new Map()));
      m.set(minute, (m.get(minute) ?? 0) + s.tokensPerS);
      if (minute > this.newestMinute) this.newestMinute = minute;
    }
    // Trim at most once per hour of advance (a per-minute recorder must not scan 8 days on every add).
    if (this.newestMinute - this.lastTrimMinute >= 60) {
      this.lastTrimMinute = this.newestMinute;
      const oldest = this.newestMinute - this.retentionMs / MINUTE_MS;
      for (const m of this.data.values()) for (const minute of m.keys()) if (minute < oldest) m.delete(minute);
    }
  }

  async series(key: SeriesKey, fromMs: number, toMs: number): Promise<number[]> {
    const m = this.data.get(keyOf(key));
    const from = Math.floor(fromMs / MINUTE_MS);
    const to = Math.floor(toMs / MINUTE_MS);
    const out: number[] = [];
    for (let i = from; i < to; i++) out.push(m?.get(i) ?? Number.NaN);
    return out;
  }

  async keys(): Promise<SeriesKey[]> {
    return [...this.data.keys()].map((k) => {
      const [kind, model, region] = k.split("\t") as [DemandKind, string, string];
      return { kind, model, region };
    });
  }

  async close(): Promise<void> {}
}
