import { describe, expect, it } from "vitest";
import { ValidationError } from "../../core/validate.js";
import { resolveStrategy } from "./strategy-registry.js";
import type { StrategyInput } from "./types.js";

const S = 1000;
const base: StrategyInput = {
  nowMs: 0, windowStartMs: 0, windowMs: 3_600_000, current: 4, serving: 4, target: undefined, utilization: 0.5,
  observedTokensPerS: 0, forecastTokensPerS: 0, minInstances: 1, maxInstances: 100, lastActionMs: undefined,
};

/** A bound reactive-hpa and one endpoint's state; `at(t, patch)` decides at t ms on that state. */
function hpa(params: Record<string, number> = {}) {
  const s = resolveStrategy("reactive-hpa", params);
  const state = s.newState();
  return { s, at: (nowMs: number, patch: Partial<StrategyInput> = {}) => s.decide({ ...base, nowMs, ...patch }, state) };
}

describe("reactive-hpa (Kubernetes HPA semantics)", () => {
  it("scales to ceil(ratio × ready): 0.91 at target 0.7 on 4 ready is ratio 1.3, so 6", () => {
    expect(hpa().at(0, { utilization: 0.91 })).toEqual({ desired: 6, reason: "hpa-up" });
    // And down: 0.35 is ratio 0.5, ceil(0.5 × 4) = 2 (a first sync has no stabilization history).
    expect(hpa().at(0, { utilization: 0.35 })).toEqual({ desired: 2, reason: "hpa-down" });
  });

  it("holds within the tolerance: 0.75 at target 0.7 is ratio 1.07", () => {
    expect(hpa().at(0, { utilization: 0.75 })).toEqual({ desired: 4, reason: "hpa-tolerance" });
    expect(hpa({ tolerance: 0.05 }).at(0, { utilization: 0.75 })).toEqual({ desired: 5, reason: "hpa-up" });
  });

  it("counts unready (provisioning, loading) instances at 0 utilization on a scale-up", () => {
    // current 6, serving 4, 0.8: ratio 1.14, newRatio = 1.14 × 4 / 6 = 0.76 flips direction: hold.
    expect(hpa().at(0, { current: 6, serving: 4, utilization: 0.8 })).toEqual({ desired: 6, reason: "hpa-unready" });
    // current 5, serving 4, 0.95: ratio 1.36 (ready alone would ask for 6), newRatio 1.09 is within tolerance.
    expect(hpa().at(0, { current: 5, serving: 4, utilization: 0.95 })).toEqual({ desired: 5, reason: "hpa-tolerance" });
    // Nothing serving yet: no metrics, keep the count.
    expect(hpa().at(0, { current: 3, serving: 0, utilization: 2 })).toEqual({ desired: 3, reason: "hpa-no-ready" });
  });

  it("keeps no sample while nothing serves: its first ready instance is judged on what it serves, not on 'full'", () => {
    // A region reads an endpoint with no serving instance as full (utilization 1). Five seconds of that, then one
    // instance ready at 0.05: the 5 s window holds only the ready sample, so no scale-up (with the earlier samples it
    // would average 1, ratio 2 at target 0.5: 2 instances).
    const h = hpa({ targetUtilization: 0.5, metricWindowMs: 5 * S, syncPeriodMs: S });
    for (let t = 0; t < 5 * S; t += S / 4) expect(h.at(t, { current: 1, serving: 0, utilization: 1 }).desired).toBe(1);
    for (let t = 5 * S; t <= 9 * S; t += S / 4) expect(h.at(t, { current: 1, serving: 1, utilization: 0.05, minInstances: 1 }).desired).toBe(1);
  });

  it("rate-limits a scale-up to max(Percent 100, Pods 4) per 15 s period, counting its own recent scale-ups", () => {
    const h = hpa({ syncPeriodMs: 5 * S });
    // ratio 5 on 2 ready wants 10; the limit is max(2 × 2, 2 + 4) = 6.
    expect(h.at(0, { current: 2, serving: 2, utilization: 3.5 })).toEqual({ desired: 6, reason: "hpa-rate-limited" });
    // 5 s later the controller has started the 4: the period began at 6 − 4 = 2, so still at most 6.
    expect(h.at(5 * S, { current: 6, serving: 2, utilization: 3.5 })).toEqual({ desired: 6, reason: "hpa-rate-limited" });
    // Once the +4 is older than the period: newRatio 5 × 2 / 6 wants ceil(1.67 × 6) = 10 ≤ max(12, 10).
    expect(h.at(15 * S, { current: 6, serving: 2, utilization: 3.5 })).toEqual({ desired: 10, reason: "hpa-up" });
  });

  it("holds a scale-down for the 5-minute stabilization window of higher recommendations", () => {
    const h = hpa({ metricWindowMs: 0 });
    expect(h.at(0, { utilization: 0.91 }).desired).toBe(6);
    expect(h.at(15 * S, { current: 6, serving: 6, utilization: 0.7 })).toEqual({ desired: 6, reason: "hpa-tolerance" });
    // 0.35 on 6 wants 3, but the recommendation of 6 at 15 s (4 min ago) is within the window.
    expect(h.at(255 * S, { current: 6, serving: 6, utilization: 0.35 })).toEqual({ desired: 6, reason: "hpa-stabilized" });
    // Past 5 minutes after it, the highest recommendation in the window is 3.
    expect(h.at(316 * S, { current: 6, serving: 6, utilization: 0.35 })).toEqual({ desired: 3, reason: "hpa-down" });
  });

  it("averages utilization over the metric window: a 1-second spike does not scale, a sustained rise does", () => {
    const run = (params: Record<string, number>) => {
      const h = hpa(params);
      const out: number[] = [];
      for (let t = 0; t <= 60; t++) out.push(h.at(t * S, { utilization: t === 45 ? 1.0 : 0.65 }).desired);
      return { h, out };
    };
    // 60 s window: at the 45 s sync the spike has not lasted yet; at 60 s it is 1 s of 60 (mean 0.656, ratio 0.94).
    const windowed = run({});
    expect(windowed.out.every((d) => d === 4)).toBe(true);
    // The latest sample alone (window 0) acts on the spike at the 45 s sync: ratio 1.43, ceil(5.71) = 6.
    expect(run({ metricWindowMs: 0 }).out[45]).toBe(6);
    // Sustained 1.0 from 60 s: at 75 s the mean is (45 × 0.65 + 15 × 1.0) / 60 = 0.74 (tolerance); at 90 s it is
    // 0.825, ratio 1.18, ceil(4.71) = 5.
    const h = windowed.h;
    const d: Record<number, number> = {};
    for (let t = 61; t <= 90; t++) d[t] = h.at(t * S, { utilization: 1.0 }).desired;
    expect(d[75]).toBe(4);
    expect(d[89]).toBe(4);
    expect(d[90]).toBe(5);
  });

  it("evaluates once per sync period and holds its answer between syncs", () => {
    const h = hpa();
    expect(h.at(0, { utilization: 0.91 })).toEqual({ desired: 6, reason: "hpa-up" });
    expect(h.at(1 * S, { current: 5, utilization: 0.1 })).toEqual({ desired: 6, reason: "hpa-hold" });
    expect(h.at(14_999, { current: 6, utilization: 0.1 })).toEqual({ desired: 6, reason: "hpa-hold" });
    // At 15 s it evaluates again (low utilization, but the scale-down window still holds 6).
    expect(h.at(15 * S, { current: 6, serving: 6, utilization: 0.1 })).toEqual({ desired: 6, reason: "hpa-stabilized" });
  });

  it("clamps to the endpoint's bounds, and without a state decides as after a restart", () => {
    expect(hpa().at(0, { utilization: 0.91, maxInstances: 5 })).toEqual({ desired: 5, reason: "bounds" });
    expect(hpa().at(0, { current: 0, serving: 0 })).toEqual({ desired: 1, reason: "bounds" });
    const s = resolveStrategy("reactive-hpa");
    expect(s.decide({ ...base, utilization: 0.91 }).desired).toBe(6);
    expect(s.decide({ ...base, nowMs: 1000, utilization: 0.35 })).toEqual({ desired: 2, reason: "hpa-down" });
  });

  it("has Kubernetes' default behavior as parameter defaults, validated by the registry", () => {
    expect(resolveStrategy("reactive-hpa").params).toEqual({
      targetUtilization: 0.7, tolerance: 0.1, metricWindowMs: 60_000, syncPeriodMs: 15_000, scaleUpStabilizationMs: 0,
      scaleDownStabilizationMs: 300_000, scaleUpPercent: 100, scaleUpPods: 4, scaleUpPeriodMs: 15_000, scaleDownPercent: 100,
      scaleDownPeriodMs: 15_000,
    });
    expect(resolveStrategy("reactive-hpa").usesForecast).toBe(false);
    expect(() => resolveStrategy("reactive-hpa", { targetUtilization: 0 })).toThrow(ValidationError);
    expect(() => resolveStrategy("reactive-hpa", { scaleDownPercent: 150 })).toThrow(/strategy\.params\.scaleDownPercent/);
  });

  it("leaves the stateless strategies as they were: reactive ignores any state", () => {
    const r = resolveStrategy("reactive");
    expect(r.newState()).toBeUndefined();
    const input = { ...base, nowMs: 20_000, utilization: 0.9, lastActionMs: 0 };
    expect(r.decide(input, { anything: 1 })).toEqual(r.decide(input));
    expect(r.decide(input)).toEqual({ desired: 5, reason: "util-above" });
  });
});
