import { describe, expect, it } from "vitest";
import { verdictOf } from "./common.js";
import { FORECAST_TARGET, bestNaive, forecastChecks, type SeriesFigures } from "./forecast.js";

// bench:forecast's verdict (issue 31 item 5): each way a forecaster can miss must make `met` false.

const figures = (mapePct: number, upperCoverage: number, invalid = 0): SeriesFigures => ({ mapePct, upperCoverage, invalid, naiveMapePct: { persistence: 15, "seasonal-naive": 40 } });
const all = (f: SeriesFigures) => ({ "m-large": figures(12, 0.9), "m-mid": f, "m-small": figures(12, 0.9) });
const fast = { ms: 3000, invalid: 0 };

describe("bench:forecast verdict", () => {
  it("passes when every series is ≤ 0.9× its best naive MAPE and its coverage is within 85–95%", () => {
    const checks = forecastChecks(all(figures(13.5, 0.85)), fast);
    expect(checks).toHaveLength(10);
    expect(checks.every((c) => c.ok)).toBe(true);
    expect(verdictOf(checks).met).toBe(true);
  });

  it("one series above 0.9× the best naive fails, whatever the others do", () => {
    const v = verdictOf(forecastChecks(all(figures(13.6, 0.9)), fast));
    expect(v.met).toBe(false);
    expect(v.missed).toEqual(["m-mid: MAPE / best naive (persistence)"]);
  });

  it("coverage below 85% or above 95% fails (a bound that covers everything over-provisions)", () => {
    expect(verdictOf(forecastChecks(all(figures(10, 0.84)), fast)).missed).toEqual(["m-mid: upper-bound coverage ≥"]);
    expect(verdictOf(forecastChecks(all(figures(10, 0.96)), fast)).missed).toEqual(["m-mid: upper-bound coverage ≤"]);
  });

  it("the baseline is the best naive method measured: a worse naive one does not loosen the target", () => {
    expect(bestNaive({ persistence: 15, "seasonal-naive": 40 })).toEqual({ method: "persistence", mapePct: 15 });
    expect(bestNaive({ persistence: Number.NaN, "seasonal-naive": 40 })).toEqual({ method: "seasonal-naive", mapePct: 40 });
    // 30% against persistence's 15% is 2×, though it is 0.75× seasonal-naive's.
    expect(verdictOf(forecastChecks(all(figures(30, 0.9)), fast)).met).toBe(false);
  });

  it("no figures, no naive baseline, a missing series or invalid forecasts never pass", () => {
    expect(verdictOf(forecastChecks(all(figures(Number.NaN, Number.NaN)), fast)).missed).toHaveLength(3);
    const noBaseline = { ...figures(10, 0.9), naiveMapePct: { persistence: Number.NaN } };
    expect(verdictOf(forecastChecks(all(noBaseline), fast)).met).toBe(false);
    const { "m-mid": _, ...two } = all(figures(10, 0.9));
    expect(verdictOf(forecastChecks(two, fast)).missed).toEqual(["m-mid: not run"]);
    expect(verdictOf(forecastChecks(all(figures(10, 0.9, 2)), fast)).missed).toHaveLength(3);
  });

  it("throughput over 60 s, or with invalid forecasts, fails", () => {
    expect(verdictOf(forecastChecks(all(figures(10, 0.9)), { ms: 60_001, invalid: 0 })).missed).toEqual(["1,000 series ms"]);
    expect(verdictOf(forecastChecks(all(figures(10, 0.9)), { ms: 100, invalid: 1 })).met).toBe(false);
  });

  it("issue 45: a naive baseline with no finite figure, a NaN or +Infinity, and a figure just past each limit fail", () => {
    const inf = Number.POSITIVE_INFINITY;
    const JUST = 1e-6;
    const met = (f: SeriesFigures, t = fast) => verdictOf(forecastChecks(all(f), t)).met;
    expect(met({ ...figures(10, 0.9), naiveMapePct: { persistence: inf, "seasonal-naive": inf } })).toBe(false);
    expect(met({ ...figures(10, 0.9), naiveMapePct: { persistence: Number.NaN } })).toBe(false);
    // persistence failed: seasonal-naive's 40% is a looser bar than the 15% persistence would have set.
    const looser = verdictOf(forecastChecks(all({ ...figures(30, 0.9), naiveMapePct: { persistence: inf, "seasonal-naive": 40 } }), fast)).missed;
    expect(looser).toEqual(["m-mid: MAPE / best naive (seasonal-naive) (persistence: no MAPE)"]);
    for (const x of [Number.NaN, inf]) {
      expect(met(figures(x, 0.9)), `MAPE ${x}`).toBe(false);
      expect(met(figures(10, x)), `coverage ${x}`).toBe(false);
      expect(met(figures(10, 0.9), { ms: x, invalid: 0 }), `throughput ${x}`).toBe(false);
    }
    const t = FORECAST_TARGET;
    expect(met(figures(15 * t.mapeRatioToBestNaive * (1 + JUST), 0.9))).toBe(false);
    expect(met(figures(15 * t.mapeRatioToBestNaive * (1 - JUST), 0.9))).toBe(true);
    expect(met(figures(10, t.upperCoverage[0] * (1 - JUST)))).toBe(false);
    expect(met(figures(10, t.upperCoverage[1] * (1 + JUST)))).toBe(false);
    expect(met(figures(10, 0.9), { ms: t.thousandSeriesMs * (1 + JUST), invalid: 0 })).toBe(false);
    expect(met(figures(10, 0.9), { ms: t.thousandSeriesMs * (1 - JUST), invalid: 0 })).toBe(true);
  });
});
