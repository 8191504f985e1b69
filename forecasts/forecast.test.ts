import { afterAll, describe, expect, it } from "vitest";
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { ArimaPool } from "./arima-pool.js";
import { ArimaForecaster } from "./arima.js";
import { BlendForecaster } from "./blend.js";
import type { Forecast, ForecastInput, Forecaster } from "./forecaster.js";
import { checkForecast, guarded } from "./guards.js";
import { createForecaster } from "./registry.js";
import { SeasonalNaiveForecaster } from "./seasonal-naive.js";
import { fillGaps, parseSeriesCsv, readSeriesFile } from "./series.js";

const pool = new ArimaPool({ workers: 2, jobTimeoutMs: 20_000 });
afterAll(() => pool.close());

const daily = (days: number, step = 6) => Array.from({ length: days * 24 * step }, (_, i) => 100 + 50 * Math.sin((2 * Math.PI * i) / (24 * step)));

describe("guards", () => {
  it("rejects non-finite, negative and absurd forecasts", () => {
    const ok: Forecast = { steps: [{ mean: 1, lower: 0.5, upper: 2 }], peak: { mean: 1, lower: 0.5, upper: 2 }, method: "x" };
    expect(checkForecast([1, 2], ok, 1)).toBeUndefined();
    expect(checkForecast([1, 2], { ...ok, peak: { mean: Number.NaN, lower: 0, upper: 1 } }, 1)).toMatch(/not finite/);
    expect(checkForecast([1, 2], { ...ok, steps: [{ mean: -1, lower: -1, upper: 0 }] }, 1)).toMatch(/negative/);
    expect(checkForecast([1, 2], { ...ok, steps: [{ mean: 1e9, lower: 0, upper: 1e9 }] }, 1)).toMatch(/exceeds 3×/);
  });

  it("falls back to seasonal-naive with the reason when the primary blows up or throws", async () => {
    const exploding: Forecaster = { name: "boom", forecast: async (i: ForecastInput) => ({ steps: Array.from({ length: i.horizonSteps }, () => ({ mean: 1e30, lower: 0, upper: 1e31 })), peak: { mean: 1e30, lower: 0, upper: 1e31 }, method: "boom" }), close: async () => {} };
    const throwing: Forecaster = { name: "throws", forecast: async () => { throw new Error("kaput"); }, close: async () => {} };
    const input = { values: daily(3), stepMs: 600_000, seasonSteps: 144, horizonSteps: 6 };
    const a = await guarded(exploding, new SeasonalNaiveForecaster()).forecast(input);
    expect(a.method).toBe("seasonal-naive");
    expect(a.fallbackReason).toMatch(/^boom: .*exceeds/);
    const b = await guarded(throwing, new SeasonalNaiveForecaster()).forecast(input);
    expect(b.fallbackReason).toBe("throws failed: kaput");
    await expect(guarded(throwing, new SeasonalNaiveForecaster()).forecast({ ...input, values: [1, Number.NaN] })).rejects.toThrow(/not finite/);
  });

  it("a series that makes ARIMA blow up falls back (SARIMA on an exploding series)", async () => {
    // Exponential growth with a seasonal sawtooth: the SARIMA fit extrapolates far past 3× the history.
    const values = Array.from({ length: 24 * 7 }, (_, i) => Math.exp(i / 8) * (1 + (i % 24) / 4));
    const f = await guarded(new ArimaForecaster({ pool }), new SeasonalNaiveForecaster()).forecast({ values, stepMs: 3_600_000, seasonSteps: 24, horizonSteps: 24 });
    expect(f.method).toBe("seasonal-naive");
    expect(f.fallbackReason).toMatch(/^arima/);
  });
});

describe("ArimaPool", () => {
  it("runs fits in worker threads and survives a crashing job", async () => {
    const long = Array.from({ length: 9000 }, (_, i) => i + Math.sin(i));
    await expect(pool.run({ order: { p: 1, d: 1, q: 1, P: 0, D: 0, Q: 0, s: 0 }, values: long, horizonSteps: 3 })).rejects.toThrow(/arima/);
    const r = await pool.run({ order: { p: 1, d: 1, q: 1, P: 0, D: 0, Q: 0, s: 0 }, values: daily(2).map((v) => Math.log(v)), horizonSteps: 3 });
    expect(r.mean).toHaveLength(3);
    expect(r.mean.every(Number.isFinite)).toBe(true);
    expect(pool.restarts).toBeGreaterThanOrEqual(1);
  });

  it("the ARIMA forecaster caps the series length", async () => {
    const f = await new ArimaForecaster({ pool, maxPoints: 500 }).forecast({ values: daily(10), stepMs: 600_000, seasonSteps: 144, horizonSteps: 6 });
    expect(f.detail?.points).toBe(500);
  });
});

describe("blend and seasonal-naive", () => {
  it("seasonal-naive repeats yesterday", async () => {
    const v = daily(2);
    const f = await new SeasonalNaiveForecaster().forecast({ values: v, stepMs: 600_000, seasonSteps: 144, horizonSteps: 6 });
    expect(f.steps.map((s) => s.mean)).toEqual(v.slice(v.length - 144, v.length - 138));
  });

  it("the blend tracks a level shift that seasonal-naive misses", async () => {
    const v = daily(8).map((x, i) => (i >= 8 * 144 - 36 ? 2 * x : x));
    const input = { values: v, stepMs: 600_000, seasonSteps: 144, horizonSteps: 6 };
    const b = await new BlendForecaster().forecast(input);
    const truth = Math.max(...daily(9).slice(8 * 144, 8 * 144 + 6)) * 2;
    const sn = await new SeasonalNaiveForecaster().forecast(input);
    expect(Math.abs(b.peak.mean - truth) / truth).toBeLessThan(0.15);
    expect(Math.abs(sn.peak.mean - truth) / truth).toBeGreaterThan(0.3);
  });
});

describe("series files", () => {
  it("fills gaps and rejects NaN and negative values naming the line", () => {
    const s = parseSeriesCsv("t,v\n0,1\n600,2\n1800,4\n", "x.csv");
    expect(s.gaps).toEqual([2]);
    expect(fillGaps(s.values, 144)).toEqual([1, 2, 3, 4]);
    expect(() => parseSeriesCsv("0,1\n600,NaN\n", "x.csv")).toThrow(/x.csv:2: value "NaN" is not a finite number/);
    expect(() => parseSeriesCsv("0,1\n600,-3\n", "x.csv")).toThrow(/x.csv:2: value -3 is negative/);
  });
});

describe("every ServeGen per-client series", () => {
  const root = "../shared/data/servegen/data";
  const files: string[] = [];
  for (const cat of readdirSync(root)) for (const model of readdirSync(join(root, cat))) for (const f of readdirSync(join(root, cat, model))) if (f.endsWith("-trace.csv")) files.push(join(root, cat, model, f));

  it(`gives finite, non-negative, bounded forecasts (blend and arima, guarded) on all ${files.length} series`, async () => {
    expect(files.length).toBeGreaterThan(400);
    const blend = createForecaster({ name: "blend" });
    const arima = createForecaster({ name: "arima", pool });
    const fallbacks = { blend: 0, arima: 0 };
    for (const file of files) {
      const s = readSeriesFile(file);
      const values = fillGaps(s.values, 144).slice(-7 * 144);
      const input = { values, stepMs: s.stepMs, seasonSteps: 144, horizonSteps: 6 };
      const [b, a] = await Promise.all([blend.forecast(input), arima.forecast(input)]);
      for (const [name, f] of [["blend", b!], ["arima", a!]] as const) {
        if (f.fallbackReason !== undefined) fallbacks[name]++;
        expect(checkForecast(values, f, 6), `${file} ${f.method}`).toBeUndefined();
      }
    }
    // The guard is a safety net, not the forecaster: measured on these 422 series, blend fell back on 1 and ARIMA on
    // 46 (its upper bound past 10× the history maximum on most). Bounds with headroom over those counts; a forecaster
    // that mostly falls back (the guard doing its work) fails here.
    expect(fallbacks.blend, "blend fallbacks").toBeLessThanOrEqual(Math.ceil(0.01 * files.length));
    expect(fallbacks.arima, "arima fallbacks").toBeLessThanOrEqual(Math.ceil(0.15 * files.length));
  }, 300_000);
});
