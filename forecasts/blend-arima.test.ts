/**
 * The default forecaster's ARIMA component (blend.ts): the weight λ learned from recent error on small hand-checked
 * cases, the guards that keep a bad ARIMA fit out (weight 0), and the components every forecast carries. The
 * integration cases run on a fake pool (what ARIMA returns is set by the test); one runs the real registry default.
 */
import { describe, expect, it } from "vitest";
import type { ArimaJob, ArimaPool, ArimaResult } from "./arima-pool.js";
import { ARIMA_COMPONENT_ORDER, BlendForecaster, fitLambda, learnArimaWeight } from "./blend.js";
import type { ForecastInput } from "./forecaster.js";
import { DEFAULT_FORECASTER_NAME, createForecaster } from "./registry.js";

/** λ's grid is {0, ¼, ½, ¾, 1}. Blend 100, ARIMA 120, actual 110: the half-and-half mix is exact. */
const halfway = { blend: 100, arima: 120, actual: 110 };

describe("the ARIMA weight is learned from recent error", () => {
  it("picks the λ whose mix had the least MAPE (hand-checked)", () => {
    expect(fitLambda([halfway, halfway, halfway])).toBe(0.5);
    // ARIMA exact, blend 20% low: all ARIMA.
    expect(fitLambda([{ blend: 80, arima: 100, actual: 100 }])).toBe(1);
    // ARIMA 50% high, blend exact: none.
    expect(fitLambda([{ blend: 100, arima: 150, actual: 100 }])).toBe(0);
    // Blend 100, ARIMA 110, actual 102: λ = ¼ gives 102.5 (APE 0.49%) against λ = 0's 1.96%.
    expect(fitLambda([{ blend: 100, arima: 110, actual: 102 }])).toBe(0.25);
    // With a margin of 80%, λ = 0's error counts as 0.39%: ¼ no longer beats it by enough.
    expect(fitLambda([{ blend: 100, arima: 110, actual: 102 }], 0.8)).toBe(0);
    // Equal errors keep the smaller weight: ARIMA equal to the blend gives λ = 0.
    expect(fitLambda([{ blend: 100, arima: 100, actual: 90 }])).toBe(0);
  });

  it("reports ARIMA's own recent MAPE over the origins it was kept on", () => {
    const r = learnArimaWeight([halfway, halfway, halfway, halfway], { arima: 120, blend: 100 });
    expect(r).toMatchObject({ lambda: 0.5, rejected: 0, origins: 4, nowRejected: false });
    expect(r.mapePct).toBeCloseTo((100 * 10) / 110, 9); // |120 − 110| / 110
  });
});

describe("the guards keep a bad ARIMA fit out", () => {
  it("λ = 0 when the current ARIMA forecast is not finite, not > 0, or more than 3× off the blend", () => {
    const past = [halfway, halfway, halfway, halfway]; // alone, these give λ = ½
    for (const arima of [Number.NaN, Number.POSITIVE_INFINITY, 0, -5, 301, 33]) {
      const r = learnArimaWeight(past, { arima, blend: 100 });
      expect([arima, r.lambda, r.nowRejected]).toEqual([arima, 0, true]);
    }
    // 300 and 34 are within 3× of 100: kept.
    expect(learnArimaWeight(past, { arima: 300, blend: 100 }).lambda).toBe(0.5);
    expect(learnArimaWeight(past, { arima: 34, blend: 100 }).lambda).toBe(0.5);
  });

  it("a rejected past forecast counts as the blend's own; more than half rejected sets λ = 0", () => {
    const bad = { blend: 100, arima: Number.NaN, actual: 110 };
    const absurd = { blend: 100, arima: 1e9, actual: 110 };
    // Half rejected: the two kept still make λ = ½ best (the rejected ones are the blend's whatever λ is).
    const half = learnArimaWeight([halfway, bad, halfway, absurd], { arima: 120, blend: 100 });
    expect(half).toMatchObject({ lambda: 0.5, rejected: 2, origins: 2 });
    expect(half.mapePct).toBeCloseTo((100 * 10) / 110, 9);
    // Three of four rejected: ARIMA is unstable here, kept out.
    const most = learnArimaWeight([halfway, bad, absurd, bad], { arima: 120, blend: 100 });
    expect(most).toMatchObject({ lambda: 0, rejected: 3, origins: 1 });
    // None kept: no recent error to show.
    expect(learnArimaWeight([bad, bad], { arima: 120, blend: 100 }).mapePct).toBeNaN();
  });
});

/** A pool whose every fit returns `next(job)` as the one-step forecast (of the seasonally differenced log peaks). */
function fakePool(next: (job: ArimaJob) => number): ArimaPool & { jobs: ArimaJob[] } {
  const jobs: ArimaJob[] = [];
  const fake = {
    jobs,
    async run(job: ArimaJob): Promise<ArimaResult> {
      jobs.push(job);
      const m = next(job);
      return { mean: [m], variance: [0.01] };
    },
    async close() {},
  };
  return fake as unknown as ArimaPool & { jobs: ArimaJob[] };
}

/** 8 days of 10-minute windows: a daily sine with a deterministic wobble, so no predictor is exact. */
const values = Array.from({ length: 8 * 144 }, (_, i) => 1000 * (1 + 0.5 * Math.sin((2 * Math.PI * i) / 144) + 0.08 * Math.sin(i / 5.3) + 0.05 * Math.cos(i / 2.1)));
const input: ForecastInput = { values, stepMs: 600_000, seasonSteps: 144, horizonSteps: 6 };

describe("the blend with its ARIMA component", () => {
  it("a fit that returns absurd values or throws gets weight 0, and the forecast is the blend's", async () => {
    const plain = await new BlendForecaster().forecast(input);
    const absurd = fakePool(() => 50); // exp(50) × yesterday's peak: far past 3× the blend
    const throwing = fakePool(() => {
      throw new Error("arima: memory access out of bounds");
    });
    for (const pool of [absurd, throwing]) {
      const f = await new BlendForecaster({ arima: pool }).forecast(input);
      expect(f.peak).toEqual(plain.peak);
      const arima = f.components!.find((c) => c.name === "arima")!;
      expect(arima).toMatchObject({ weight: 0, origins: 0 });
      expect(arima.recentMapePct).toBeNaN();
      expect(f.detail).toMatchObject({ arimaWeight: 0, arimaNowRejected: 1, arimaRejected: 24 });
      // The blend's own weights are unchanged.
      expect(f.components!.filter((c) => c.name !== "arima")).toEqual(plain.components);
    }
  });

  it("fits the seasonal model on the last 3 days of log hourly peaks, each window once", async () => {
    // ŷ = 0 on the seasonally differenced series: ARIMA forecasts yesterday's peak of the same hour.
    const pool = fakePool(() => 0);
    const blend = new BlendForecaster({ arima: pool });
    const f = await blend.forecast(input);
    expect(pool.jobs).toHaveLength(25); // the current origin and the last 24
    for (const j of pool.jobs) expect([j.values.length, j.order, j.horizonSteps]).toEqual([72 - 24, ARIMA_COMPONENT_ORDER, 1]);
    const parts = f.components!;
    expect(parts.map((c) => c.name)).toEqual(["persistence", "seasonalRatio", "seasonalNaive", "kalmanWindow", "kalmanPeak", "arima"]);
    expect(parts.reduce((s, c) => s + c.weight, 0)).toBeCloseTo(1, 12);
    const arima = parts.at(-1)!;
    expect(arima.weight).toBe(f.detail!.arimaWeight);
    expect(arima.origins).toBe(24);
    expect(arima.recentMapePct).toBeGreaterThan(0);
    // The same history again: every window is memoised, no new fit.
    await blend.forecast(input);
    expect(pool.jobs).toHaveLength(25);
  });

  it("the registry's default carries ARIMA's weight and recent error from real fits", async () => {
    expect(DEFAULT_FORECASTER_NAME).toBe("blend-arima");
    const f = createForecaster({ name: DEFAULT_FORECASTER_NAME });
    try {
      const r = await f.forecast(input);
      expect(r.method).toBe("blend-arima");
      const arima = r.components!.find((c) => c.name === "arima")!;
      expect([0, 0.25, 0.5, 0.75, 1]).toContain(arima.weight);
      expect(Number.isFinite(arima.recentMapePct)).toBe(true);
    } finally {
      await f.close();
    }
  });
});
