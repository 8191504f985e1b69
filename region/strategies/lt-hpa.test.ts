import { describe, expect, it } from "vitest";
import { resolveStrategy } from "./strategy-registry.js";
import type { StrategyInput } from "./types.js";

const base: StrategyInput = {
  nowMs: 0, windowStartMs: 0, windowMs: 3_600_000, current: 4, serving: 4, target: 10, floor: 6, utilization: 0.7,
  observedTokensPerS: 0, forecastTokensPerS: 0, minInstances: 1, maxInstances: 100, lastActionMs: undefined,
};

function ltHpa(params: Record<string, number> = {}) {
  const s = resolveStrategy("lt-hpa", params);
  const state = s.newState();
  return { s, at: (nowMs: number, patch: Partial<StrategyInput> = {}) => s.decide({ ...base, nowMs, ...patch }, state) };
}

describe("lt-hpa (HPA above the forecast floor)", () => {
  it("jumps to the floor ahead (not the peak floor, not the target) when below it, past the HPA's rate policies", () => {
    // 0.7 at target 0.7 is within tolerance: plain HPA would hold 4; the floor ahead asks for 9 (> 4 + Pods 4).
    expect(ltHpa().at(0, { floorAhead: 9 })).toEqual({ desired: 9, reason: "forecast-floor" });
    // Without steps the floor is the plan's point-forecast floor (6).
    expect(ltHpa().at(0)).toEqual({ desired: 6, reason: "forecast-floor" });
  });

  it("scales out above the floor by the HPA's proportional rule", () => {
    // 1.05 at target 0.7 is ratio 1.5: ceil(1.5 × 8) = 12 above a floor of 5.
    expect(ltHpa().at(0, { current: 8, serving: 8, utilization: 1.05, floorAhead: 5 })).toEqual({ desired: 12, reason: "hpa-up" });
  });

  it("scales in by the HPA's rule but never below the floor", () => {
    // 0.14 at 0.7 is ratio 0.2: ceil(0.2 × 10) = 2, held up at the floor of 5.
    expect(ltHpa().at(0, { current: 10, serving: 10, utilization: 0.14, floorAhead: 5 }).desired).toBe(5);
    // Plain HPA goes to 2.
    expect(resolveStrategy("reactive-hpa").decide({ ...base, current: 10, serving: 10, utilization: 0.14 }).desired).toBe(2);
  });

  it("is plain HPA before the first plan and with floorFraction 0; floorFraction scales the floor", () => {
    const hpa = resolveStrategy("reactive-hpa");
    const cases: Partial<StrategyInput>[] = [{ target: undefined, floor: undefined, utilization: 0.2 }, { utilization: 0.95 }];
    expect(ltHpa().at(0, cases[0])).toEqual(hpa.decide({ ...base, ...cases[0] }));
    expect(ltHpa({ floorFraction: 0 }).at(0, { floorAhead: 9, ...cases[1] })).toEqual(hpa.decide({ ...base, ...cases[1] }));
    expect(ltHpa({ floorFraction: 0.5 }).at(0, { floorAhead: 9 })).toEqual({ desired: 5, reason: "forecast-floor" });
  });

  it("floorBand places the floor between the point forecast's steps and the upper bound's", () => {
    expect(ltHpa().at(0, { floorAhead: 4, upperAhead: 8 }).desired).toBe(4);
    expect(ltHpa({ floorBand: 0.5 }).at(0, { floorAhead: 4, upperAhead: 8 })).toEqual({ desired: 6, reason: "forecast-floor" });
    expect(ltHpa({ floorBand: 1 }).at(0, { floorAhead: 4, upperAhead: 8 }).desired).toBe(8);
    // No upper steps (an older planner): the point forecast's.
    expect(ltHpa({ floorBand: 1 }).at(0, { floorAhead: 4 }).desired).toBe(4);
  });

  it("a rising floor applies between the HPA's syncs", () => {
    const s = ltHpa();
    expect(s.at(0, { floorAhead: 4 }).desired).toBe(4);
    // 5 s later (no sync: the period is 15 s) the step ahead asks for 7.
    expect(s.at(5000, { floorAhead: 7 }).desired).toBe(7);
  });
});

describe("controller.strategyParams", () => {
  it("configures the strategy the regions run, checked against its schema when the config is parsed", async () => {
    await import("../config-sections.js");
    const { parseConfig, DEFAULT_CONFIG_JSON } = await import("../../core/config.js");
    const base = DEFAULT_CONFIG_JSON as Record<string, unknown>;
    const withParams = (strategyParams: Record<string, unknown>) => ({ ...base, controller: { strategy: "lt-hpa", strategyParams } });
    expect(parseConfig(withParams({ targetUtilization: 0.8, floorBand: 1 })).controller.strategyParams).toEqual({ targetUtilization: 0.8, floorBand: 1 });
    expect(() => parseConfig(withParams({ bogus: 1 }))).toThrow(/controller\.strategyParams: .*bogus|controller\.strategyParams\.bogus/);
    expect(() => parseConfig(withParams({ targetUtilization: 5 }))).toThrow(/controller\.strategyParams\.targetUtilization/);
  });
});
