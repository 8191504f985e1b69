/**
 * bench:strategies' verdict (test/bench/strategies.ts; issues 31 and 46): cost at the SLO read off each arm's measured
 * frontier, compared across weeks and scale-out regimes. Pure.
 *
 * - A run is one arm at one knob setting on one week's judged days: its instance-hours and its SLO margin, the worst
 *   model's p95 TTFT or TPOT over its target (≤ 1: the SLO is met; +Infinity when the percentile fell on unserved
 *   requests). A run whose batch missed a deadline, or that the replay judged as missing the SLO on other grounds
 *   (sim/week/result.ts `slo.met`), does not meet the SLO whatever its margin (`meets`).
 * - An arm's cost at the SLO on one week (`costAtSlo`): the instance-hours where its frontier crosses margin 1,
 *   linear between its cheapest setting that met the SLO and the next cheaper one it ran, which missed. So no rung of
 *   a ladder decides a comparison: two arms a rung apart in instance-hours read as what they cost at the edge. No
 *   setting met: no cost (NaN, never a pass). No cheaper setting ran: the cheapest that met (an upper bound, flagged).
 * - Across weeks (`compareArms`): the relative cost of an arm to a baseline per week, its mean and its spread (the
 *   sample standard deviation); a mean difference within the spread is a tie. A week where either side has no cost
 *   makes the comparison no number.
 * - `+Infinity` never passes; a NaN never passes (verdicts/common.ts atMost, atLeast).
 */
import { atLeast, atMost, type Check } from "./common.js";

/** One run as the frontier reads it. */
export interface FrontierRun {
  /** The knob's value (the arm's ladder). */
  knob: number;
  instanceHours: number;
  /** max over models of max(p95 TTFT / TTFT target, p95 TPOT / TPOT target); +Infinity on unserved requests. */
  margin: number;
  batchAllWithinDeadline: boolean;
  /** The replay's own verdict on every model's SLO (sim/week/result.ts WeekResult.slo.met). */
  sloMet: boolean;
}

/** Whether a run meets the SLO: the replay says so, margin ≤ 1 and every batch within its deadline. */
export function meets(r: FrontierRun): boolean {
  return r.sloMet && atMost(r.margin, 1) && r.batchAllWithinDeadline;
}

/** An arm's cost at the SLO on one week, and the two runs it was read between. */
export interface CostAtSlo {
  /** Instance-hours at margin 1 (NaN: no setting met the SLO). */
  instanceHours: number;
  /** The cheapest run that met the SLO, and the next cheaper run (which missed it), when there is one. */
  met?: FrontierRun;
  missed?: FrontierRun;
  /** False when no cheaper run missed: `instanceHours` is the cheapest that met, an upper bound. */
  bracketed: boolean;
}

/**
 * The instance-hours at which an arm's frontier crosses the SLO (margin 1): from the cheapest run that met it (A) and
 * the most expensive of the cheaper runs, which all missed it (B): IH_A − (IH_A − IH_B) × (1 − m_A) / (m_B − m_A),
 * never below IH_B nor above IH_A. A missed run with margin +Infinity (unserved requests) or a batch that missed its
 * deadline gives IH_A: nothing is known between them. No run met: NaN.
 */
export function costAtSlo(runs: readonly FrontierRun[]): CostAtSlo {
  const ok = runs.filter(meets);
  if (ok.length === 0) return { instanceHours: Number.NaN, bracketed: false };
  const a = ok.reduce((x, y) => (y.instanceHours < x.instanceHours ? y : x));
  const cheaper = runs.filter((r) => !meets(r) && r.instanceHours < a.instanceHours);
  if (cheaper.length === 0) return { instanceHours: a.instanceHours, met: a, bracketed: false };
  const b = cheaper.reduce((x, y) => (y.instanceHours > x.instanceHours ? y : x));
  const interpolable = Number.isFinite(b.margin) && b.margin > 1 && b.margin > a.margin && b.batchAllWithinDeadline;
  const ih = interpolable ? a.instanceHours - ((a.instanceHours - b.instanceHours) * (1 - a.margin)) / (b.margin - a.margin) : a.instanceHours;
  return { instanceHours: Math.min(a.instanceHours, Math.max(b.instanceHours, ih)), met: a, missed: b, bracketed: true };
}

/** One arm against a baseline over weeks: cost ratio − 1 per week, mean and sample standard deviation. */
export interface Comparison {
  /** armCost / baselineCost − 1 per week (NaN where either has no cost). */
  perWeek: number[];
  /** Mean over weeks (NaN if any week is NaN or there are none). */
  mean: number;
  /** Sample standard deviation over weeks (0 for one week; NaN when the mean is). */
  spread: number;
  /** |mean| ≤ spread with two weeks or more: the difference is within the weeks' spread. */
  tie: boolean;
}

/** Compares `arm` with `baseline`, each one cost per week (same order). */
export function compareArms(arm: readonly number[], baseline: readonly number[]): Comparison {
  const perWeek = arm.map((c, i) => {
    const b = baseline[i];
    return Number.isFinite(c) && b !== undefined && Number.isFinite(b) && b > 0 ? c / b - 1 : Number.NaN;
  });
  const n = perWeek.length;
  if (n === 0 || perWeek.some((x) => !Number.isFinite(x)) || arm.length !== baseline.length) return { perWeek, mean: Number.NaN, spread: Number.NaN, tie: false };
  const mean = perWeek.reduce((s, x) => s + x, 0) / n;
  const spread = n < 2 ? 0 : Math.sqrt(perWeek.reduce((s, x) => s + (x - mean) ** 2, 0) / (n - 1));
  return { perWeek, mean, spread, tie: n >= 2 && Math.abs(mean) <= spread };
}

/** Arms that are bounds, not strategies a user can run: never the winner. */
export const BOUND_ARMS: readonly string[] = ["oracle"];

/**
 * The winners at the SLO: the cheapest arm (the lowest mean cost over weeks among arms with a cost every week, bounds
 * left out) and every arm whose difference from it is within the weeks' spread (a tie, `compareArms`). Empty when no
 * arm has a cost every week.
 */
export function winnersOf(costs: Readonly<Record<string, readonly number[]>>): string[] {
  const best = cheapestArm(costs);
  if (best === undefined) return [];
  const tied = Object.keys(costs).filter((a) => a !== best && !BOUND_ARMS.includes(a) && compareArms(costs[a]!, costs[best]!).tie);
  return [best, ...tied];
}

/**
 * The cheapest arm at the SLO: the lowest mean cost over weeks among arms with a cost every week, bounds (the
 * oracle) left out; undefined when none has. `costs[arm]` is one cost per week.
 */
export function cheapestArm(costs: Readonly<Record<string, readonly number[]>>): string | undefined {
  let best: { arm: string; mean: number } | undefined;
  for (const [arm, c] of Object.entries(costs)) {
    if (BOUND_ARMS.includes(arm) || c.length === 0 || c.some((x) => !Number.isFinite(x))) continue;
    const mean = c.reduce((s, x) => s + x, 0) / c.length;
    if (best === undefined || mean < best.mean) best = { arm, mean };
  }
  return best?.arm;
}

/**
 * Issue 46's targets. The default strategy: in the network-loading regime (the main run), at most 1% dearer than
 * tuned `reactive-hpa` (mean of the weeks); with SageServe's provisioning delays, ≥ 10% cheaper than `reactive-hpa`
 * and ≥ 25% cheaper than `reactive` (SageServe §7.2's rule); and among the main run's winners (`winnersOf`). Three
 * weeks, each judged on days 3–5.
 */
export const COST_AT_SLO_TARGET = {
  defaultVsHpaNetworkAtMost: 0.01,
  defaultVsHpaSageServeAtMost: -0.1,
  defaultVsReactiveSageServeAtMost: -0.25,
  weeks: 3,
  /** The judged window of each week: days 3–5 (after two days the planner's history has filled). */
  judgeFromDay: 2,
  judgeDays: 3,
};

/** What the checks read: per regime, per arm, one cost at the SLO per week. */
export interface CostTable {
  /** The regime of the ≤ +1% check and of the winner (network loading). */
  main: string;
  /** The regime of SageServe's provisioning delays. */
  sageserve: string;
  costs: Readonly<Record<string, Readonly<Record<string, readonly number[]>>>>;
}

/** The checks of bench:strategies' headline; `defaultArm` is the configured default strategy's arm. */
export function costAtSloChecks(t: CostTable, defaultArm: string): Check[] {
  const T = COST_AT_SLO_TARGET;
  const checks: Check[] = [];
  const vs = (regime: string, baseline: string, limit: number) => {
    const c = t.costs[regime];
    const arm = c?.[defaultArm];
    const base = c?.[baseline];
    if (arm === undefined || base === undefined) {
      checks.push({ check: `${regime}: ${defaultArm} / ${baseline} − 1 (not run)`, value: Number.NaN, limit, ok: false });
      return;
    }
    const cmp = compareArms(arm, base);
    const missing = arm.map((x, i) => (Number.isFinite(x) ? "" : `week ${i + 1}: ${defaultArm} met the SLO at no setting`)).concat(base.map((x, i) => (Number.isFinite(x) ? "" : `week ${i + 1}: ${baseline} met the SLO at no setting`))).filter((s) => s !== "");
    checks.push({ check: `${regime}: ${defaultArm} cost at the SLO / ${baseline}'s − 1, mean of ${arm.length} weeks (spread ${Number.isFinite(cmp.spread) ? cmp.spread.toFixed(3) : "n/a"})${missing.length > 0 ? ` (${missing.join("; ")})` : ""}`, value: cmp.mean, limit, ok: atMost(cmp.mean, limit) });
  };
  vs(t.main, "reactive-hpa", T.defaultVsHpaNetworkAtMost);
  vs(t.sageserve, "reactive-hpa", T.defaultVsHpaSageServeAtMost);
  vs(t.sageserve, "reactive", T.defaultVsReactiveSageServeAtMost);
  const winners = winnersOf(t.costs[t.main] ?? {});
  const won = winners.includes(defaultArm);
  checks.push({ check: `${t.main}: the default strategy (${defaultArm}) is the cheapest arm at the SLO or tied with it within the weeks' spread (${winners.length === 0 ? "no arm met the SLO every week" : `cheapest ${winners[0]}${winners.length > 1 ? `, tied ${winners.slice(1).join(", ")}` : ""}`})`, value: won ? 1 : 0, limit: 1, ok: won });
  const weeks = Math.min(...Object.values(t.costs[t.main] ?? {}).map((c) => c.length));
  checks.push({ check: `${t.main}: weeks judged`, value: Number.isFinite(weeks) ? weeks : 0, limit: T.weeks, ok: atLeast(Number.isFinite(weeks) ? weeks : 0, T.weeks) });
  return checks;
}

/** Minutes `a` recovers no later than `b`: only when `a` recovers at all (finite). */
export function recoversNoLater(aMin: number, bMin: number): boolean {
  return Number.isFinite(aMin) && !Number.isNaN(bMin) && aMin <= bMin;
}
