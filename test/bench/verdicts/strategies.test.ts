import { describe, expect, it } from "vitest";
import { verdictOf } from "./common.js";
import { COST_AT_SLO_TARGET, costAtSloChecks, frontierJudgement, savedAtSlo, type ArmFigures, type FrontierPoint } from "./strategies.js";

// Issue 45: bench:strategies' checks fail on a failed baseline (an arm that missed its SLO, or a figure that is not
// finite), a NaN, an Infinity and a figure just past each limit; and so does bench:strategies-frontier's judgement.

const arm = (instanceHours: number, sloMet = true): ArmFigures => ({ instanceHours, sloMet, batchAllWithinDeadline: true });
/** 12% under HPA, 30% under reactive, 4% over an oracle 15% under HPA: met. */
const GOOD = { winner: arm(88), reactiveHpa: arm(100), reactive: arm(126), oracle: arm(84.6), fullWindows: true };
type Arms = typeof GOOD;
const missed = (over: Partial<Arms>) => verdictOf(costAtSloChecks({ ...GOOD, ...over }).checks).missed;
const JUST = 1e-6;

describe("bench:strategies verdict, issue 45", () => {
  it("meets with every figure in bounds", () => {
    expect(missed({})).toEqual([]);
  });

  it("a baseline that missed its SLO or has no finite figure is no bar (a +Infinity baseline used to be a 100% saving)", () => {
    expect(savedAtSlo(arm(88), arm(Number.POSITIVE_INFINITY))).toBeNaN();
    expect(savedAtSlo(arm(88), arm(Number.NaN))).toBeNaN();
    expect(savedAtSlo(arm(88), arm(100, false))).toBeNaN();
    expect(missed({ reactive: arm(Number.POSITIVE_INFINITY) })).toEqual(["instance-hours saved vs tuned reactive"]);
    expect(missed({ reactive: arm(126, false) })).toEqual(["instance-hours saved vs tuned reactive"]);
    expect(missed({ reactiveHpa: arm(Number.POSITIVE_INFINITY) })).toEqual(["instance-hours saved vs tuned reactive-hpa"]);
    expect(missed({ oracle: arm(Number.POSITIVE_INFINITY) })).toEqual(["over the oracle"]);
    expect(missed({ oracle: arm(84.6, false) })).toEqual(["over the oracle"]);
  });

  it("NaN or +Infinity in the winner's figure fails", () => {
    for (const x of [Number.NaN, Number.POSITIVE_INFINITY]) expect(missed({ winner: arm(x) }), String(x)).toEqual(["instance-hours saved vs tuned reactive", "instance-hours saved vs tuned reactive-hpa", "over the oracle"]);
  });

  it("a figure just past each limit fails, one just inside passes", () => {
    const t = COST_AT_SLO_TARGET;
    // Saved vs reactive: winner = 126 × (1 − 0.25) × (1 ± ε); the others keep it well inside.
    const vsReactive = (f: number) => missed({ winner: arm(126 * (1 - t.vsReactiveInstanceHoursReduction) * f), reactiveHpa: arm(200), oracle: arm(92) });
    expect(vsReactive(1 + JUST)).toEqual(["instance-hours saved vs tuned reactive"]);
    expect(vsReactive(1 - JUST)).toEqual([]);
    const vsHpa = (f: number) => missed({ winner: arm(100 * (1 - t.vsReactiveHpaInstanceHoursReduction) * f), oracle: arm(87) });
    expect(vsHpa(1 + JUST)).toEqual(["instance-hours saved vs tuned reactive-hpa"]);
    expect(vsHpa(1 - JUST)).toEqual([]);
    const overOracle = (f: number) => missed({ winner: arm(84.6 * (1 + t.withinOracle) * f) });
    expect(overOracle(1 + JUST)).toEqual(["over the oracle"]);
    expect(overOracle(1 - JUST)).toEqual([]);
    // The oracle < 10% under HPA: within 3% of it instead.
    const short = (f: number) => missed({ winner: arm(92 * (1 + t.withinOracleWhenOracleShort) * f), oracle: arm(92), reactive: arm(140) });
    expect(short(1 + JUST)).toEqual(["over the oracle (the oracle is < 10% below reactive-hpa)"]);
    expect(short(1 - JUST)).toEqual([]);
  });

  it("frontier: an HPA setting whose instance-hours are not finite is no bar", () => {
    const point = (label: string, strategy: string, p95TtftMs: number, instanceHours: number): FrontierPoint => ({ label, strategy, instanceHours, provisioningGpuHours: 1, p95TtftMs, unserved: 0, batchAllWithinDeadline: true });
    const hpa = (ih: number) => [point("hpa 0.6", "reactive-hpa", 400, 120), point("hpa 0.7", "reactive-hpa", 500, ih)];
    expect(frontierJudgement(point("lt-ua", "lt-ua", 500, 88), hpa(100)).meets).toBe(true);
    expect(frontierJudgement(point("lt-ua", "lt-ua", 500, 88), hpa(Number.POSITIVE_INFINITY)).meets).toBe(false);
    expect(frontierJudgement(point("lt-ua", "lt-ua", 500, 88), hpa(Number.NaN)).meets).toBe(false);
    expect(frontierJudgement(point("lt-ua", "lt-ua", 500, Number.NaN), hpa(100)).meets).toBe(false);
    // At p = 500 / 1.05 ≈ 476.2 the frontier's instance-hours interpolate to ≈ 104.76; 10% under it, ± ε.
    const bar = 120 + ((100 - 120) * (500 / 1.05 - 400)) / 100;
    expect(frontierJudgement(point("lt-ua", "lt-ua", 500, bar * 0.9 * (1 + JUST)), hpa(100)).meets).toBe(false);
    expect(frontierJudgement(point("lt-ua", "lt-ua", 500, bar * 0.9 * (1 - JUST)), hpa(100)).meets).toBe(true);
  });
});
