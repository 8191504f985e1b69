import { describe, expect, it } from "vitest";
import { recoveryMinutes } from "./burst.js";
import { Histogram, HistogramSeries } from "./histogram.js";

describe("replay histograms count unserved requests as SLO misses", () => {
  it("a percentile that falls on unserved requests is +Infinity; below it, the served latencies", () => {
    const h = new Histogram();
    for (let i = 0; i < 94; i++) h.add(100);
    for (let i = 0; i < 6; i++) h.addUnserved();
    expect(h.count).toBe(100);
    expect(h.unserved).toBe(6);
    // 6% unserved: p95 is a miss, p50 within 1% of 100 ms.
    expect(h.quantile(0.95)).toBe(Number.POSITIVE_INFINITY);
    expect(h.quantile(0.5)).toBeGreaterThanOrEqual(100);
    expect(h.quantile(0.5)).toBeLessThan(101);
    expect(h.sumMs).toBe(9400);
  });

  it("per-slot series keep unserved in their slot", () => {
    const s = new HistogramSeries(3, 60_000);
    s.add(1_000, 50);
    s.addUnserved(61_000);
    expect(s.quantile(0, 0.95)).toBeLessThan(51);
    expect(s.quantile(1, 0.95)).toBe(Number.POSITIVE_INFINITY);
    expect(s.count(1)).toBe(1);
    expect(Number.isNaN(s.quantile(2, 0.95))).toBe(true);
  });

  it("a burst has not recovered while its minutes are unserved (empty minutes count as within target)", () => {
    const inf = Number.POSITIVE_INFINITY;
    const series = Float64Array.from([100, inf, inf, 100, Number.NaN, 100, 100, 100, 100]);
    expect(recoveryMinutes(series, 0, 500, 5)).toBe(3);
    expect(recoveryMinutes(Float64Array.from([inf, inf, inf, inf, inf, inf]), 0, 500, 5)).toBe(inf);
  });
});
