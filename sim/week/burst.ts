/**
 * The burst experiment (SageServe §7.3.4): the same seeded workload with one model's load multiplied 8× for 20
 * minutes in the last third of an hour, replayed per strategy. Recovery time: minutes from the burst's start until
 * the model's per-minute p95 TTFT is back within the latency target for 5 minutes in a row. The latency target is
 * the same for every strategy: `targetFactor` × the reactive run's median per-minute p95 TTFT over the hour
 * before the burst (at least `floorMs`).
 */
import type { WeekResult } from "./result.js";

/** Per-minute p95 TTFT series of one model (ms, NaN where no request). */
export type MinuteP95 = Float64Array;

/** A result's per-minute series of `model` as numbers (NaN for empty minutes). */
export function minuteP95(r: WeekResult, model: string): MinuteP95 {
  const xs = r.minuteP95TtftMs?.[model];
  if (xs === undefined) throw new Error(`run ${r.strategy} has no per-minute series for ${model} (minuteSeries option)`);
  return Float64Array.from(xs, (v) => (v === null ? Number.NaN : v));
}

/** Median of the finite values. */
function median(xs: number[]): number {
  const s = xs.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  return s.length === 0 ? Number.NaN : s[Math.floor(s.length / 2)]!;
}

/** The latency target from a baseline run's per-minute p95 over [startMin − 60, startMin). */
export function latencyTarget(baseline: MinuteP95, burstStartMin: number, targetFactor = 1.5, floorMs = 1000): number {
  const before = Array.from(baseline.subarray(Math.max(0, burstStartMin - 60), burstStartMin));
  return Math.max(floorMs, targetFactor * median(before));
}

/**
 * Minutes from `burstStartMin` until `series` stays ≤ `targetMs` for `holdMin` consecutive minutes (minutes with
 * no request count as within target; a minute whose p95 falls on unserved requests, +Infinity, does not). Returns Infinity if it never does:
 * no recovery, which is never "no later" than another run's, not even another Infinity (compare with
 * test/bench/verdicts/strategies.ts `recoversNoLater`, not `<=`).
 */
export function recoveryMinutes(series: MinuteP95, burstStartMin: number, targetMs: number, holdMin = 5): number {
  let run = 0;
  for (let m = burstStartMin; m < series.length; m++) {
    const v = series[m]!;
    if (Number.isNaN(v) || v <= targetMs) {
      run++;
      if (run >= holdMin) return m - holdMin + 1 - burstStartMin;
    } else run = 0;
  }
  return Number.POSITIVE_INFINITY;
}

/** The result fields the burst report shows per strategy. */
export interface BurstOutcome {
  strategy: string;
  recoveryMin: number;
  peakP95Ms: number;
  instancesAtBurstEnd: number;
  result: WeekResult;
}
