/**
 * SLO attainment of one model's interactive requests in one region (issue 31; targets from core/config
 * slo-section.ts). The gateway judges every interactive request as it ends and books it here:
 *
 * - `met`: it finished with TTFT ≤ ttftMs and TPOT ≤ tpotMs (TPOT undefined, ≤ 1 output token, meets it);
 * - `missed`: it finished late on either target, or broke after its first token (the engine failed or went away);
 * - `unserved`: it never got a first token — refused (nothing serving) or failed on every instance tried.
 *
 * Requests the caller cancelled and client errors (4xx for the request itself) are not judged: neither says anything
 * about the region's service. Batch requests are never judged (they keep their deadlines).
 *
 * Three views, each O(1) to update per request with no allocation (the week replay books ~10M requests):
 * - cumulative counts by outcome since the region started (`/metrics` counter, admin listing);
 * - running totals for telemetry (ModelTelemetry.slo): requests, met, finished and their token sums;
 * - a rolling hour in 60 one-minute buckets on the injected Clock (the attainment gauge), and completed clock hours
 *   (hour boundaries of the clock, ms since the epoch / 3 600 000) whose attainment fell below the percentile.
 */
import type { Clock } from "../../core/clock.js";
import { meetsSlo, type ModelSlo } from "../../core/config.js";
import type { ModelName } from "../../core/models.js";
import type { RegionInstances, SloTelemetry } from "../../core/ports.js";

/** How one judged request went. */
export type SloOutcome = "met" | "missed" | "unserved";

/** Every outcome, in the order metrics initialise them. */
export const SLO_OUTCOMES: readonly SloOutcome[] = ["met", "missed", "unserved"];

const MINUTE_MS = 60_000;
const HOUR_MS = 3_600_000;
const BUCKETS = 60;

/** One model's SLO as the region measures it: the admin listing and the metrics gauges read this. */
export interface ModelSloSummary {
  model: ModelName;
  /** The targets the model is held to (config `slo`). */
  ttftMs: number;
  tpotMs: number;
  percentile: number;
  /** Interactive requests judged since the region started, by outcome. */
  met: number;
  missed: number;
  unserved: number;
  /** Judged over the last hour: the current clock minute and the 59 before it. */
  lastHourRequests: number;
  lastHourMet: number;
  /** lastHourMet / lastHourRequests; null when the last hour judged none. */
  lastHourAttainment: number | null;
  /** Completed clock hours since the region started (the first one partly seen) that judged at least one request… */
  judgedHours: number;
  /** …and of those, the ones whose attainment (met / judged) was below `percentile`. */
  violatedHours: number;
}

/**
 * A region's admin listing with each model's SLO (`GET /admin/regions/{region}/instances`, both links). Absent from
 * regions that do not measure it.
 */
export type RegionListing = RegionInstances & { slo?: ModelSloSummary[]; cold?: ColdListing; holding?: HoldingEntry[] };

/**
 * An endpoint whose model misses its SLO while the controller does not scale it out (issue 46, "say why"): what the
 * strategy decided and why, or why it could not act (`blocked`). Listed while it lasts; the region logs it once a
 * minute.
 */
export interface HoldingEntry {
  /** When it was last seen (clock ms), and since when it has lasted. */
  atMs: number;
  sinceMs: number;
  model: string;
  gpu: string;
  /** The model's SLO attainment over the last two minutes, and its target percentile. */
  attainment: number;
  percentile: number;
  /** The strategy's last decision: instances it counts, what it wants, its reason code and the utilization it read. */
  strategy: string;
  current: number;
  desired: number;
  reason: string;
  utilization: number;
  /** Why a wanted scale-out did not happen ("at-max", "no-capacity"); "" when the strategy itself held. */
  blocked: string;
}

/**
 * Scale from zero in the listing (issue 33): each model the region may hold at zero (held requests, in flight, idle
 * time) and the recent cold starts (a model's first instance from zero, with where its parameters came from).
 */
export interface ColdListing {
  models: { model: string; held: number; inFlight: number; idleForMs: number }[];
  starts: { atMs: number; model: string; gpu: string; instanceId: string; source: string; tookMs: number }[];
}

/**
 * TPOT of one request, ms: (time of its last token − time of its first) / (output tokens − 1); undefined when it
 * produced at most one token (there is no inter-token time).
 */
export function tpotOf(firstAtMs: number, lastAtMs: number, outputTokens: number): number | undefined {
  return outputTokens > 1 ? (lastAtMs - firstAtMs) / (outputTokens - 1) : undefined;
}

/** One model's books. Not thread-safe (one event loop). */
export class SloBook {
  /** Cumulative counts by outcome. */
  met = 0;
  missed = 0;
  unserved = 0;
  // The telemetry totals.
  private tRequests = 0;
  private tMet = 0;
  private tFinished = 0;
  private tPromptTokens = 0;
  private tOutputTokens = 0;
  // The rolling hour: bucket i holds clock minute minuteOf[i] (≡ i mod 60); NaN = never used.
  private readonly minuteOf = new Float64Array(BUCKETS).fill(Number.NaN);
  private readonly bucketAll = new Float64Array(BUCKETS);
  private readonly bucketMet = new Float64Array(BUCKETS);
  // The current clock hour and the completed ones.
  private hour: number;
  private hourAll = 0;
  private hourMet = 0;
  private judgedHours = 0;
  private violatedHours = 0;

  constructor(
    readonly model: ModelName,
    readonly slo: ModelSlo,
    private readonly clock: Clock,
    private readonly onOutcome?: (model: ModelName, outcome: SloOutcome) => void,
  ) {
    this.hour = Math.floor(clock.now() / HOUR_MS);
  }

  /** Judges a request that finished: its TTFT (ms from entering the gateway), TPOT and token counts. */
  finished(ttftMs: number, tpotMs: number | undefined, promptTokens: number, outputTokens: number): SloOutcome {
    const ok = meetsSlo(this.slo, ttftMs, tpotMs);
    this.tFinished++;
    this.tPromptTokens += promptTokens;
    this.tOutputTokens += outputTokens;
    return this.book(ok ? "met" : "missed");
  }

  /** A request that broke after its first token: a miss, outside the finished requests' token sums. */
  broken(): SloOutcome {
    return this.book("missed");
  }

  /** A request refused or failed before its first token. */
  refused(): SloOutcome {
    return this.book("unserved");
  }

  /** The running totals for telemetry (SloTelemetry): reading them changes nothing. */
  totals(): SloTelemetry {
    return { requests: this.tRequests, met: this.tMet, finished: this.tFinished, promptTokens: this.tPromptTokens, outputTokens: this.tOutputTokens };
  }

  /** The cumulative counts, the rolling hour and the hours in violation, as of the clock now. */
  summary(): ModelSloSummary {
    const now = this.clock.now();
    this.rollHour(now);
    const minute = Math.floor(now / MINUTE_MS);
    let all = 0;
    let met = 0;
    for (let i = 0; i < BUCKETS; i++) {
      const m = this.minuteOf[i]!;
      if (m > minute - BUCKETS && m <= minute) {
        all += this.bucketAll[i]!;
        met += this.bucketMet[i]!;
      }
    }
    return {
      model: this.model,
      ttftMs: this.slo.ttftMs,
      tpotMs: this.slo.tpotMs,
      percentile: this.slo.percentile,
      met: this.met,
      missed: this.missed,
      unserved: this.unserved,
      lastHourRequests: all,
      lastHourMet: met,
      lastHourAttainment: all > 0 ? met / all : null,
      judgedHours: this.judgedHours,
      violatedHours: this.violatedHours,
    };
  }

  /** Requests judged over the current clock minute and the `minutes` − 1 before it (1 ≤ minutes ≤ 60), and those met. */
  recent(minutes: number): { requests: number; met: number } {
    const minute = Math.floor(this.clock.now() / MINUTE_MS);
    const span = Math.max(1, Math.min(BUCKETS, Math.floor(minutes)));
    let requests = 0;
    let met = 0;
    for (let i = 0; i < BUCKETS; i++) {
      const m = this.minuteOf[i]!;
      if (m > minute - span && m <= minute) {
        requests += this.bucketAll[i]!;
        met += this.bucketMet[i]!;
      }
    }
    return { requests, met };
  }

  private book(outcome: SloOutcome): SloOutcome {
    const isMet = outcome === "met" ? 1 : 0;
    if (outcome === "met") this.met++;
    else if (outcome === "missed") this.missed++;
    else this.unserved++;
    this.tRequests++;
    this.tMet += isMet;
    const now = this.clock.now();
    this.rollHour(now);
    this.hourAll++;
    this.hourMet += isMet;
    const minute = Math.floor(now / MINUTE_MS);
    const slot = ((minute % BUCKETS) + BUCKETS) % BUCKETS;
    if (this.minuteOf[slot] !== minute) {
      this.minuteOf[slot] = minute;
      this.bucketAll[slot] = 0;
      this.bucketMet[slot] = 0;
    }
    this.bucketAll[slot] = this.bucketAll[slot]! + 1;
    this.bucketMet[slot] = this.bucketMet[slot]! + isMet;
    this.onOutcome?.(this.model, outcome);
    return outcome;
  }

  /** Closes the current clock hour if `now` is past it (hours that judged nothing are neither judged nor violated). */
  private rollHour(now: number): void {
    const hour = Math.floor(now / HOUR_MS);
    if (hour <= this.hour) return;
    if (this.hourAll > 0) {
      this.judgedHours++;
      if (this.hourMet / this.hourAll < this.slo.percentile) this.violatedHours++;
    }
    this.hour = hour;
    this.hourAll = 0;
    this.hourMet = 0;
  }
}
