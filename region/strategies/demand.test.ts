import { describe, expect, it } from "vitest";
import { resolveStrategy } from "./strategy-registry.js";
import type { StrategyInput } from "./types.js";

const demand = resolveStrategy("demand", { instanceTokensPerS: 1000 });
const at = (o: Partial<StrategyInput>): StrategyInput => ({
  nowMs: 0, windowStartMs: 0, windowMs: 3_600_000, current: 1, serving: 1, target: undefined,
  utilization: 0.5, observedTokensPerS: 500, forecastTokensPerS: 0, minInstances: 1, maxInstances: 16, lastActionMs: undefined, ...o,
});

describe("demand (BlitzScale §5.3)", () => {
  it("over the per-instance bound it scales to the whole demand at once: 5,400 tokens/s at 1,000 each → 6 instances", () => {
    const s = demand.newState();
    expect(demand.decide(at({ observedTokensPerS: 5400 }), s)).toEqual({ desired: 6, reason: "demand-above" });
    // while those six load, the same demand is already answered: no second scale-out
    expect(demand.decide(at({ observedTokensPerS: 5400, current: 6, serving: 1, utilization: 1 }), s)).toEqual({ desired: 6, reason: "in-band" });
    // the endpoint's max bounds it
    expect(demand.decide(at({ observedTokensPerS: 40_000 }), s).desired).toBe(16);
  });

  it("a full KV cache under the token bound adds one instance, only when none is loading", () => {
    const s = demand.newState();
    expect(demand.decide(at({ observedTokensPerS: 1800, current: 2, serving: 2, utilization: 0.95 }), s)).toEqual({ desired: 3, reason: "kv-above" });
    expect(demand.decide(at({ observedTokensPerS: 1800, current: 3, serving: 2, utilization: 0.95 }), s)).toEqual({ desired: 3, reason: "in-band" });
  });

  it("scales in to what the load needs once it stayed below half the bound for 2 s, not before", () => {
    const s = demand.newState();
    const low = { current: 6, serving: 6, observedTokensPerS: 1500, utilization: 0.2 };
    expect(demand.decide(at({ ...low, nowMs: 10_000 }), s)).toEqual({ desired: 6, reason: "demand-below-wait" });
    expect(demand.decide(at({ ...low, nowMs: 11_500 }), s)).toEqual({ desired: 6, reason: "demand-below-wait" });
    expect(demand.decide(at({ ...low, nowMs: 12_000 }), s)).toEqual({ desired: 2, reason: "demand-below" });
    // a rise in between restarts the timeout
    const s2 = demand.newState();
    demand.decide(at({ ...low, nowMs: 0 }), s2);
    demand.decide(at({ ...low, nowMs: 1000, observedTokensPerS: 4000 }), s2);
    expect(demand.decide(at({ ...low, nowMs: 2500 }), s2).reason).toBe("demand-below-wait");
  });

  it("rejects a bound out of range with the parameter's path", () => {
    expect(() => resolveStrategy("demand", { instanceTokensPerS: 0 })).toThrow(/strategy\.params\.instanceTokensPerS/);
  });
});
