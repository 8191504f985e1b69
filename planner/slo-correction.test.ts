/** The correction factor's rule (slo-correction.ts), on hand-checked cases. */
import { describe, expect, it } from "vitest";
import { changedMuch, nextCorrection } from "./slo-correction.js";

const base = { previous: 1, percentile: 0.95, requests: 1000, predictedTokensPerSPerInstance: 1000 };

describe("nextCorrection", () => {
  it("moves down halfway toward observed / predicted when the SLO was missed below the planned capacity", () => {
    const c = nextCorrection({ ...base, met: 900, observedTokensPerSPerInstance: 800 });
    expect(c.rule).toBe("down");
    expect(c.factor).toBeCloseTo(0.9, 12); // 1 + ½ (0.8 − 1)
    expect(c.why).toContain("90.0% met (target 95.0%) at 800 tokens/s per instance, below the 1,000 planned");
    expect(changedMuch(c)).toBe(true);
  });

  it("moves up when the SLO was met above the planned capacity, from the previous factor", () => {
    const c = nextCorrection({ ...base, previous: 0.8, met: 990, observedTokensPerSPerInstance: 1000 });
    expect(c.rule).toBe("up"); // planned 0.8 × 1000 = 800 < 1000 observed
    expect(c.factor).toBeCloseTo(0.9, 12); // 0.8 + ½ (1.0 − 0.8)
  });

  it("stays when met within capacity, when missed above it, and with too few requests or no load", () => {
    expect(nextCorrection({ ...base, met: 990, observedTokensPerSPerInstance: 700 })).toMatchObject({ rule: "held", factor: 1 });
    const over = nextCorrection({ ...base, met: 500, observedTokensPerSPerInstance: 1400 });
    expect(over).toMatchObject({ rule: "held", factor: 1 });
    expect(over.why).toContain("more instances were needed");
    expect(nextCorrection({ ...base, requests: 10, met: 0, observedTokensPerSPerInstance: 10 }).why).toContain("too few to judge");
    expect(nextCorrection({ ...base, met: 0 }).why).toBe("no load per serving instance was measured");
  });

  it("is bounded to [0.5, 1.5] and says so", () => {
    const low = nextCorrection({ ...base, previous: 0.6, met: 0, observedTokensPerSPerInstance: 10 });
    expect(low.factor).toBe(0.5); // 0.6 + ½ (0.01 − 0.6) = 0.305 → 0.5
    expect(low.why).toContain("bounded to [0.5, 1.5]");
    expect(nextCorrection({ ...base, previous: 1.4, met: 1000, observedTokensPerSPerInstance: 5000 }).factor).toBe(1.5);
  });

  it("a change of 5% or less is not worth a log line", () => {
    const c = nextCorrection({ ...base, met: 900, observedTokensPerSPerInstance: 920 });
    expect(c.factor).toBeCloseTo(0.96, 12);
    expect(changedMuch(c)).toBe(false);
  });
});
