/**
 * bench:strategies' and bench:strategies-frontier's verdicts (test/bench/strategies*.ts). A p95 TTFT that fell on
 * unserved requests is +Infinity; two of them are not equal (common.ts `ratio`: NaN, a miss). A burst that is never
 * recovered from (sim/week/burst.ts recoveryMinutes: +Infinity) is not "no later" than another that is not either.
 */
import { atLeast, atMost, ratio } from "./common.js";

/** One strategy's week, as the checks read it. */
export interface WeekFigures {
  instanceHours: number;
  provisioningGpuHours: number;
  /** Interactive p95 TTFT (ms; +Infinity when it falls on unserved requests). */
  p95TtftMs: number;
  unserved: number;
  batchAllWithinDeadline: boolean;
}

/** One strategy against a baseline: what LT-UA's targets compare. */
export interface Versus {
  instanceHoursReduction: number;
  /** NaN when either p95 is not measured (common.ts `ratio`). */
  p95TtftRatio: number;
  provisioningReduction: number;
  unserved: number;
  baselineUnserved: number;
}

/** `r` against baseline `b`. */
export function versus(r: WeekFigures, b: WeekFigures): Versus {
  return {
    instanceHoursReduction: b.instanceHours > 0 ? 1 - r.instanceHours / b.instanceHours : Number.NaN,
    p95TtftRatio: ratio(r.p95TtftMs, b.p95TtftMs),
    provisioningReduction: b.provisioningGpuHours > 0 ? 1 - r.provisioningGpuHours / b.provisioningGpuHours : Number.NaN,
    unserved: r.unserved,
    baselineUnserved: b.unserved,
  };
}

/** Issue 11's targets (issue 12's loading aim with `--loading`). */
export const STRATEGIES_TARGET = {
  vsReactive: { instanceHoursReduction: 0.2, p95TtftRatioAtMost: 1.05, unservedAtMostBaseline: true, provisioningReduction: 0.6 },
  vsReactiveHpa: { instanceHoursReduction: 0.1, p95TtftRatioAtMost: 1.05, unservedAtMostBaseline: true },
  batchAllWithinDeadline: true,
  burstLtUaRecoversNoLaterThanReactiveHpa: true,
  fullWeekDays: 7,
};
export const LOADING_AIM = { instanceHoursReduction: 0.3, p95TtftRatioAtMost: 1.05 };

/** Minutes `a` recovers no later than `b`: only when `a` recovers at all (finite). */
export function recoversNoLater(aMin: number, bMin: number): boolean {
  return Number.isFinite(aMin) && !Number.isNaN(bMin) && aMin <= bMin;
}

/** Whether `v` meets a target of (instance-hours reduction, p95 ratio, unserved ≤ baseline[, provisioning]). */
function meets(v: Versus, t: { instanceHoursReduction: number; p95TtftRatioAtMost: number; provisioningReduction?: number }): boolean {
  return (
    atLeast(v.instanceHoursReduction, t.instanceHoursReduction) &&
    atMost(v.p95TtftRatio, t.p95TtftRatioAtMost) &&
    v.unserved <= v.baselineUnserved &&
    (t.provisioningReduction === undefined || atLeast(v.provisioningReduction, t.provisioningReduction))
  );
}

/** bench:strategies' named checks. `loading`: LT-UA vs reactive with the loading source in the loop, if run. */
export function strategiesChecks(f: {
  days: number;
  vsReactive: Versus;
  vsReactiveHpa: Versus;
  ltUaBatchAllWithinDeadline: boolean;
  burstRecoveryMin: { ltUa: number; reactiveHpa: number };
  loading?: Versus;
}): Record<string, boolean> {
  return {
    vsReactive: meets(f.vsReactive, STRATEGIES_TARGET.vsReactive),
    vsReactiveHpa: meets(f.vsReactiveHpa, STRATEGIES_TARGET.vsReactiveHpa),
    batchAllWithinDeadline: f.ltUaBatchAllWithinDeadline,
    burst: recoversNoLater(f.burstRecoveryMin.ltUa, f.burstRecoveryMin.reactiveHpa),
    fullWeek: f.days === STRATEGIES_TARGET.fullWeekDays,
    ...(f.loading === undefined ? {} : { loadingAim: meets(f.loading, LOADING_AIM) }),
  };
}

/** One point of the frontier bench: a strategy at one setting. */
export interface FrontierPoint extends WeekFigures {
  label: string;
  strategy: string;
}

/**
 * How an LT-UA point fares against the whole reactive-hpa frontier, not one HPA setting it was tuned to beat: the
 * HPA frontier's instance-hours at the latency LT-UA must be within 5% of (p = LT-UA's p95 / 1.05), linear between
 * the two HPA settings around p (sorted by p95). Faster than every HPA setting: the fastest one's (the most
 * expensive HPA reaches; reaching p would cost it more, so this is the stricter figure). Slower than every HPA
 * setting, or a p95 on unserved requests: nothing to compare with, no pass. It meets the target with ≥ 10% fewer
 * instance-hours than that, no more unserved requests than the HPA settings used, and every batch within deadline.
 */
export function frontierJudgement(lt: FrontierPoint, hpa: readonly FrontierPoint[], t = STRATEGIES_TARGET.vsReactiveHpa): { meets: boolean; against: string[]; hpaInstanceHours: number } {
  const none = { meets: false, against: [], hpaInstanceHours: Number.NaN };
  const pts = hpa.filter((h) => Number.isFinite(h.p95TtftMs)).sort((a, b) => a.p95TtftMs - b.p95TtftMs);
  if (!Number.isFinite(lt.p95TtftMs) || pts.length === 0) return none;
  const p = lt.p95TtftMs / t.p95TtftRatioAtMost;
  const i = pts.findIndex((h) => h.p95TtftMs >= p);
  if (i === -1) return none;
  const lo = pts[Math.max(0, i - 1)]!;
  const hi = pts[i]!;
  const used = i === 0 ? [hi] : [lo, hi];
  const hpaInstanceHours = i === 0 || hi.p95TtftMs === lo.p95TtftMs ? hi.instanceHours : lo.instanceHours + ((hi.instanceHours - lo.instanceHours) * (p - lo.p95TtftMs)) / (hi.p95TtftMs - lo.p95TtftMs);
  const meets = lt.batchAllWithinDeadline && used.every((h) => lt.unserved <= h.unserved) && hpaInstanceHours > 0 && atLeast(1 - lt.instanceHours / hpaInstanceHours, t.instanceHoursReduction);
  return { meets, against: used.map((h) => h.label), hpaInstanceHours };
}
