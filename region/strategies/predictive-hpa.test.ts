import { describe, expect, it } from "vitest";
import { forecastRise } from "./predictive-hpa.js";
import { resolveStrategy } from "./strategy-registry.js";
import type { ForecastPath, StrategyInput } from "./types.js";

const MIN = 60_000;
// Six 10-minute steps from 0: flat at 100 tokens/s, then a rise to 150 in step 2 and 200 in step 3.
const path: ForecastPath = { startMs: 0, stepMs: 10 * MIN, tokensPerS: [100, 100, 150, 200, 120, 100] };

const base: StrategyInput = {
  nowMs: 0, windowStartMs: 0, windowMs: 3_600_000, current: 4, serving: 4, target: 10, floor: 6, utilization: 0.5,
  observedTokensPerS: 0, forecastTokensPerS: 0, minInstances: 1, maxInstances: 100, lastActionMs: undefined,
};

function predictive(params: Record<string, number> = {}) {
  const s = resolveStrategy("predictive-hpa", { targetUtilization: 0.5, ...params });
  const state = s.newState();
  return (nowMs: number, patch: Partial<StrategyInput> = {}) => s.decide({ ...base, nowMs, forecastPath: path, ...patch }, state);
}

describe("forecastRise", () => {
  it("is the largest step over the lead divided by the current step's, ≥ 1", () => {
    // 5 min into step 0, a 4-min lead stays in step 0: no rise.
    expect(forecastRise(path, 5 * MIN, 4 * MIN)).toBe(1);
    // A 6-min lead reaches step 1 (still 100): no rise. A 16-min lead reaches step 2: 150 / 100.
    expect(forecastRise(path, 5 * MIN, 6 * MIN)).toBe(1);
    expect(forecastRise(path, 5 * MIN, 16 * MIN)).toBeCloseTo(1.5, 12);
    // From step 2 (150) a 15-min lead sees step 3 (200): 4/3. A fall ahead is no rise.
    expect(forecastRise(path, 25 * MIN, 15 * MIN)).toBeCloseTo(200 / 150, 12);
    expect(forecastRise(path, 35 * MIN, 20 * MIN)).toBe(1);
  });

  it("is 1 without a path, with a zero current step, and past the path's end (the last step holds)", () => {
    expect(forecastRise(undefined, 0, 60 * MIN)).toBe(1);
    expect(forecastRise({ ...path, tokensPerS: [0, 100] }, 0, 20 * MIN)).toBe(1);
    expect(forecastRise(path, 70 * MIN, 60 * MIN)).toBe(1);
    // Before the path's first step the first one counts: [−5, 21) min reaches step 2.
    expect(forecastRise(path, -5 * MIN, 26 * MIN)).toBeCloseTo(1.5, 12);
  });
});

describe("predictive-hpa", () => {
  it("is the HPA when the forecast does not rise within the scale-out lead", () => {
    const hpa = resolveStrategy("reactive-hpa", { targetUtilization: 0.5 });
    for (const u of [0.2, 0.5, 0.9]) {
      // 10-s scale-out at minute 1: lead 10 s + the 15-s sync stays in step 0.
      expect(predictive()(MIN, { utilization: u, scaleOutMs: 10_000 })).toEqual(hpa.decide({ ...base, nowMs: MIN, utilization: u }));
    }
  });

  it("scales the utilization by the forecast rise over one scale-out time", () => {
    // Minute 12 (step 1), 10-min scale-out: the lead (10 min + the 15-s sync) reaches step 2 (×1.5): 0.5 × 1.5 = 0.75
    // at target 0.5 → ceil(1.5 × 4) = 6.
    expect(predictive()(12 * MIN, { scaleOutMs: 10 * MIN })).toEqual({ desired: 6, reason: "forecast-rise" });
    // The same minute with a 1-min scale-out: no rise within the lead, within tolerance: hold 4.
    expect(predictive()(12 * MIN, { scaleOutMs: MIN }).desired).toBe(4);
    // leadFactor 0 is the plain HPA whatever the scale-out time.
    expect(predictive({ leadFactor: 0 })(12 * MIN, { scaleOutMs: 10 * MIN }).desired).toBe(4);
    // maxRise caps the factor: ×1.2 → 0.6 / 0.5 = 1.2 → ceil(4.8) = 5.
    expect(predictive({ maxRise: 1.2 })(12 * MIN, { scaleOutMs: 10 * MIN }).desired).toBe(5);
  });

  it("holds capacity a slow scale-out could not bring back: scale-in stabilization covers the scale-out time", () => {
    // The latest sample as the metric (metricWindowMs 0). At 0.9 the HPA wants ceil(1.8 × 4) = 8; at 0.1 it would
    // want ceil(0.2 × 8) = 2.
    const slow = predictive({ metricWindowMs: 0 });
    expect(slow(0, { utilization: 0.9, scaleOutMs: 10 * MIN, forecastPath: undefined }).desired).toBe(8);
    // 6 minutes on (past the HPA's 5-min window, within the 10-min scale-out): still 8.
    expect(slow(6 * MIN, { current: 8, serving: 8, utilization: 0.1, scaleOutMs: 10 * MIN, forecastPath: undefined }).desired).toBe(8);
    // With holdForScaleOut 0 the HPA's own 5-minute window applies: down to 2 (after the 100 % per 15 s policy).
    const hpaWindow = predictive({ holdForScaleOut: 0, metricWindowMs: 0 });
    expect(hpaWindow(0, { utilization: 0.9, scaleOutMs: 10 * MIN, forecastPath: undefined }).desired).toBe(8);
    expect(hpaWindow(6 * MIN, { current: 8, serving: 8, utilization: 0.1, scaleOutMs: 10 * MIN, forecastPath: undefined }).desired).toBe(2);
  });
});
