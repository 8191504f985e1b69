import { describe, expect, it } from "vitest";
import { bandQuantile, floorQuantile, normalQuantile } from "./predictive-hpa.js";
import { resolveStrategy } from "./strategy-registry.js";
import type { StrategyInput } from "./types.js";

const MIN = 60_000;
// The plan's forecast band: 10-minute steps, 1,000 tokens/s (600–1,400) for two steps, then 2,000 (1,200–2,800).
const band = { startMs: 0, stepMs: 10 * MIN, steps: [1000, 1000, 2000, 2000, 2000, 2000].map((m) => ({ mean: m, lower: m * 0.6, upper: m * 1.4 })) };
// 4 serving at the target utilization: the HPA needs 4 instances for the forecast's 1,000 tokens/s.
const base: StrategyInput = {
  nowMs: 0, windowStartMs: 0, windowMs: 3_600_000, current: 4, serving: 4, target: 14, floor: 10, forecastBand: band,
  utilization: 0.5, observedTokensPerS: 0, forecastTokensPerS: 0, minInstances: 1, maxInstances: 100, lastActionMs: undefined,
};

/** The HPA reads the latest sample (metricWindowMs 0) so a pass's utilization is its metric. */
const HPA = { targetUtilization: 0.5, metricWindowMs: 0 };

/** A strategy and one decision function over its state. */
function predictive(params: Record<string, number> = {}) {
  const s = resolveStrategy("predictive-hpa", { ...HPA, ...params });
  const state = s.newState();
  return (nowMs: number, patch: Partial<StrategyInput> = {}) => s.decide({ ...base, nowMs, ...patch }, state);
}
/**
 * One pass a minute from 0 to `untilMin` at the base's 4 serving and 0.5 (the calibration), with `patch`'s plan,
 * band and scale-out time; the decision at `untilMin` with all of `patch`.
 */
function after(untilMin: number, patch: Partial<StrategyInput>, params: Record<string, number> = {}) {
  const at = predictive(params);
  const plan = { scaleOutMs: patch.scaleOutMs, ..."target" in patch ? { target: patch.target } : {}, ..."forecastBand" in patch ? { forecastBand: patch.forecastBand } : {} };
  for (let m = 0; m < untilMin; m++) at(m * MIN, plan);
  return at(untilMin * MIN, patch);
}

/** The same passes fed to a plain HPA. */
function hpaAfter(untilMin: number, patch: Partial<StrategyInput>) {
  const h = resolveStrategy("reactive-hpa", HPA);
  const st = h.newState();
  for (let m = 0; m < untilMin; m++) h.decide({ ...base, nowMs: m * MIN }, st);
  return h.decide({ ...base, nowMs: untilMin * MIN, ...patch }, st);
}

describe("the floor's quantile", () => {
  it("Φ⁻¹ matches known points", () => {
    expect(normalQuantile(0.5)).toBeCloseTo(0, 9);
    expect(normalQuantile(0.9)).toBeCloseTo(1.2815515655, 8);
    expect(normalQuantile(0.1)).toBeCloseTo(-1.2815515655, 8);
    expect(normalQuantile(0.975)).toBeCloseTo(1.959963985, 8);
    expect(normalQuantile(0.001)).toBeCloseTo(-3.090232306, 7);
    expect(normalQuantile(0)).toBe(Number.NEGATIVE_INFINITY);
  });

  it("is the newsvendor ratio S / (S + T): a few per cent for seconds, a half for a 10-minute redeploy", () => {
    expect(floorQuantile(undefined, 10 * MIN)).toBe(0);
    expect(floorQuantile(0, 10 * MIN)).toBe(0);
    expect(floorQuantile(30_000, 10 * MIN)).toBeCloseTo(1 / 21, 12);
    expect(floorQuantile(10 * MIN, 10 * MIN)).toBe(0.5);
    expect(floorQuantile(30 * MIN, 10 * MIN)).toBe(0.75);
  });

  it("reads the band as a normal on each side of the point", () => {
    expect(bandQuantile(0.5, 6, 10, 14)).toBeCloseTo(10, 9);
    expect(bandQuantile(0.9, 6, 10, 14)).toBeCloseTo(14, 6);
    expect(bandQuantile(0.1, 6, 10, 14)).toBeCloseTo(6, 6);
    // z(0.75) = 0.6745: 10 + 0.6745 / 1.2816 × 4 = 12.105.
    expect(bandQuantile(0.75, 6, 10, 14)).toBeCloseTo(10 + (0.6744897502 / 1.2815515655) * 4, 6);
    // Far below the lower bound it stops at 0; q = 0 is no floor.
    expect(bandQuantile(1e-6, 6, 10, 14)).toBe(0);
    expect(bandQuantile(0, 6, 10, 14)).toBe(0);
  });
});

describe("predictive-hpa", () => {

  it("with a 10-minute scale-out it holds the forecast ahead, in the HPA's units, at once", () => {
    // k = 4 instances / 1,000 tokens/s. At 16 min the lead (10 min + the 15-s sync) reaches step 2's 2,000 (q = 0.5:
    // the point): ⌈0.004 × 2,000⌉ = 8, past the HPA's rate policies.
    expect(after(16, { scaleOutMs: 10 * MIN })).toEqual({ desired: 8, reason: "forecast-floor" });
    // 30 minutes of scale-out: q = 0.75 → 2,000 + 0.6745 / 1.2816 × 800 = 2,421 → ⌈9.68⌉ = 10.
    expect(after(16, { scaleOutMs: 30 * MIN })).toEqual({ desired: 10, reason: "forecast-floor" });
    // Demand above the floor: the HPA's proportional rule (0.9 at 0.5 on 12 serving → ⌈1.8 × 12⌉ = 22).
    expect(after(16, { scaleOutMs: 10 * MIN, current: 12, serving: 12, utilization: 0.9 })).toEqual({ desired: 22, reason: "hpa-up" });
  });

  it("with scale-out in seconds the floor sits under the forecast's lower bound: the HPA decides", () => {
    // 30 s: q = 1/21, z = −1.67; the lead stays in step 1: 1,000 − 1.67 / 1.28 × 400 = 479 → ⌈1.9⌉ = 2, under the
    // HPA's 4. At 16 min, and a step before the rise (19 min 30 s: the lead reaches 20 min → step 2: 958 → 4).
    for (const u of [0.1, 0.5, 0.9]) expect(after(16, { scaleOutMs: 30_000, utilization: u })).toEqual(hpaAfter(16, { utilization: u }));
  });

  it("has no floor before the first plan, without forecast steps, or before half a calibration window", () => {
    for (const patch of [{ target: undefined }, { forecastBand: undefined }]) {
      expect(after(16, { scaleOutMs: 10 * MIN, utilization: 0.9, ...patch })).toEqual(hpaAfter(16, { utilization: 0.9 }));
    }
    // 14 minutes seen of a 30-minute calibration: the HPA alone; with a 20-minute one, half is seen: the floor (8).
    expect(after(14, { scaleOutMs: 10 * MIN })).toEqual(hpaAfter(14, {}));
    expect(after(14, { scaleOutMs: 10 * MIN }, { calibrationMs: 20 * MIN })).toEqual({ desired: 8, reason: "forecast-floor" });
  });

  it("corrects a forecast biased in level by what the endpoint needs", () => {
    // The same endpoint, the forecast three times too high: k is a third, the floor the same 8.
    const high = { ...band, steps: band.steps.map((b) => ({ mean: 3 * b.mean, lower: 3 * b.lower, upper: 3 * b.upper })) };
    expect(after(16, { scaleOutMs: 10 * MIN, forecastBand: high })).toEqual({ desired: 8, reason: "forecast-floor" });
  });

  it("holds capacity a slow scale-out could not bring back: scale-in stabilization covers the scale-out time", () => {
    // No plan (the HPA alone). At 0.9 the HPA wants ⌈1.8 × 4⌉ = 8; at 0.1 it would
    // want ⌈0.2 × 8⌉ = 2.
    const slow = predictive();
    expect(slow(0, { target: undefined, utilization: 0.9, scaleOutMs: 10 * MIN }).desired).toBe(8);
    // 6 minutes on (past the HPA's 5-min window, within the 10-min scale-out): still 8.
    expect(slow(6 * MIN, { target: undefined, current: 8, serving: 8, utilization: 0.1, scaleOutMs: 10 * MIN }).desired).toBe(8);
    // With holdForScaleOut 0 the HPA's own 5-minute window applies: down to 2.
    const hpaWindow = predictive({ holdForScaleOut: 0 });
    expect(hpaWindow(0, { target: undefined, utilization: 0.9, scaleOutMs: 10 * MIN }).desired).toBe(8);
    expect(hpaWindow(6 * MIN, { target: undefined, current: 8, serving: 8, utilization: 0.1, scaleOutMs: 10 * MIN }).desired).toBe(2);
  });
});
