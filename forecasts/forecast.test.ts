import { afterAll, describe, expect, it } from "vitest";
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { ArimaPool } from "./arima-pool.js";
import { ArimaForecaster } from "./arima.js";
import type { ArimaPool as ArimaPoolType } from "./arima-pool.js";
import { backtestPeaks } from "./backtest.js";
import { BlendForecaster } from "./blend.js";
import type { Forecast, ForecastInput, Forecaster } from "./forecaster.js";
import { checkForecast, guarded } from "./guards.js";
import { createForecaster } from "./registry.js";
import { conformalBand } from "./conformal.js";
import { filterLevels, localLevelSnr } from "./kalman.js";
import { cleanOutages, outageAnalog, outageThreshold } from "./outage.js";
import { SeasonalNaiveForecaster } from "./seasonal-naive.js";
import { fillGaps, parseSeriesCsv, readSeriesFile } from "./series.js";
import { shippedDataDir } from "../core/paths.js";
import { SHARED_DATA, needingSharedData, sharedDataMissing } from "../test/helpers/shared-data.js";

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

describe("local-level Kalman filter", () => {
  it("filters one step ahead: a constant stays, a step is followed within a few steps at a high signal-to-noise", () => {
    expect(filterLevels([5, 5, 5], 1)).toEqual([Number.NaN, 5, 5, 5]);
    const step = [...Array(20).fill(0), ...Array(5).fill(1)];
    expect(filterLevels(step, 10)[25]!).toBeGreaterThan(0.99);
    expect(filterLevels(step, 0.001)[25]!).toBeLessThan(0.3);
  });

  it("estimates the signal-to-noise ratio: small for noise around a level, large for a random walk", () => {
    let seed = 7;
    const rand = () => ((seed = (seed * 48271) % 2147483647) / 2147483647) - 0.5;
    const noise = Array.from({ length: 2000 }, () => rand());
    let w = 0;
    const walk = Array.from({ length: 2000 }, () => (w += rand()) + 0.01 * rand());
    expect(localLevelSnr(noise)).toBeLessThan(0.05);
    expect(localLevelSnr(walk)).toBeGreaterThan(10);
  });
});

describe("conformal band", () => {
  // Deterministic scores spread evenly over [1 − w, 1 + w] in a shuffled order.
  const spread = (n: number, w: number) => Array.from({ length: n }, (_, i) => 1 - w + (2 * w * ((i * 37) % n)) / (n - 1));

  it("is the nominal quantile of the scores when they are exchangeable, ±25% without enough of them", () => {
    const steady = spread(96, 0.2);
    const nominal = conformalBand(steady, 0.1, 0.9, 0);
    expect(nominal.upperQuantile).toBe(0.9);
    expect(nominal.upper).toBeCloseTo(1.16, 2);
    expect(conformalBand(steady, 0.1, 0.9).upper).toBeCloseTo(nominal.upper, 1);
    expect(conformalBand([1, 1], 0.1, 0.9)).toEqual({ lower: 0.75, upper: 1.25, upperQuantile: 0.9 });
  });

  it("raises the upper quantile when the recent scores ran wider than the earlier ones (the bound missed them)", () => {
    const widening = [...spread(48, 0.05), ...spread(48, 0.4)];
    const adapted = conformalBand(widening, 0.1, 0.9);
    expect(adapted.upperQuantile).toBeGreaterThan(0.9);
    expect(adapted.upper).toBeGreaterThan(conformalBand(widening, 0.1, 0.9, 0).upper);
    expect(adapted.upper).toBeLessThanOrEqual(2);
  });
});

describe("collection outages", () => {
  // Normal ≈ 110 with outages longer than the horizon, closed by a tiny window (the m-mid pattern): 0 × 13, 1, normal.
  const withOutages = () => {
    const v = daily(7).map((x) => 100 + x / 10);
    for (const start of [300, 500, 700, 820]) for (let i = 0; i < 14; i++) v[start + i] = i === 13 ? 1 : 0;
    return v;
  };

  it("cleans windows below 5% of the median positive value with the last normal one", () => {
    expect(outageThreshold([0, 100, 100, 200])).toBe(5);
    expect(cleanOutages([3, 100, 0, 4, 120], 5)).toEqual([100, 100, 100, 100, 120]);
    expect(cleanOutages([0, 0], 0)).toEqual([0, 0]);
  });

  it("inside an outage, earlier origins in the same state decide: still down after a 0, recovering after the closing window", () => {
    const v = withOutages();
    const thr = outageThreshold(v);
    const down = outageAnalog(v, 822, 6, thr); // two zero windows into the 4th outage
    expect(down.kind).toBe("stays-down");
    if (down.kind === "stays-down") expect(down.point).toBeLessThan(thr);
    expect(outageAnalog(v, 834, 6, thr).kind).toBe("recovers"); // after the closing window: every earlier one recovered
    expect(outageAnalog(v.slice(0, 302), 302, 6, thr).kind).toBe("unknown"); // the first outage: no evidence yet
  });

  it("the blend's point forecast stays down inside an outage while its upper bound covers a recovery; after it, the level", async () => {
    const v = withOutages();
    const b = new BlendForecaster();
    const input = (n: number) => ({ values: v.slice(0, n), stepMs: 600_000, seasonSteps: 144, horizonSteps: 6 });
    const down = await b.forecast(input(822));
    expect(down.detail?.outage).toBe("stays-down");
    expect(down.peak.mean).toBeLessThan(5);
    expect(down.peak.upper).toBeGreaterThan(90);
    const back = await b.forecast(input(834));
    expect(back.detail?.outage).toBe("recovers");
    expect(back.peak.mean).toBeGreaterThan(90);
    const after = await b.forecast(input(1000)); // the outages did not drag the level or the weights down
    const truth = Math.max(...v.slice(1000, 1006));
    expect(Math.abs(after.peak.mean - truth) / truth).toBeLessThan(0.05);
  });
});

describe("the blend's ARIMA challenger", () => {
  const fakePool = (peak: (values: number[]) => number) => ({ run: async (job: { values: number[] }) => ({ mean: [Math.log(peak(job.values))], variance: [0.01] }) }) as unknown as ArimaPoolType;
  const input = { values: daily(8).map((x, i) => x * (1 + 0.1 * Math.sin(i / 7))), stepMs: 600_000, seasonSteps: 144, horizonSteps: 6 };

  it("is not followed where it is unstable: an ARIMA 1000× off changes nothing", async () => {
    const plain = await new BlendForecaster().forecast(input);
    const unstable = await new BlendForecaster({ arima: fakePool(() => 1e6) }).forecast(input);
    expect(unstable.detail?.arimaWeight).toBe(0);
    expect(unstable.detail?.arimaRejected).toBe(24); // the 24 origins it was scored on
    expect(unstable.detail?.arimaNowRejected).toBe(1); // and the current one
    expect(unstable.peak).toEqual(plain.peak);
    const crashing = await new BlendForecaster({ arima: { run: async () => { throw new Error("memory access out of bounds"); } } as unknown as ArimaPoolType }).forecast(input);
    expect(crashing.peak).toEqual(plain.peak);
  });

  it("gets weight where it was right on the past origins", async () => {
    // A daily shape on a slow level wave the seasonal predictors lag behind, and an oracle for ARIMA: the true next
    // peak. Without the seasonal difference and with an unbounded window, the fit sees z = log(peak + c) of every
    // hour before the origin (so its length names the origin), c = 1% of those peaks' mean = 0.01·mean(e^z) / 1.01;
    // it returns log(truth + c).
    const truth = daily(9).map((x, i) => x * (1 + 0.4 * Math.sin(i / 100)));
    const values = truth.slice(0, 8 * 144);
    const oracle = fakePool((z) => {
      const c = (0.01 * (z.reduce((s, v) => s + Math.exp(v), 0) / z.length)) / 1.01;
      return Math.max(...truth.slice(z.length * 6, z.length * 6 + 6)) + c;
    });
    const f = await new BlendForecaster({ arima: oracle, arimaModel: { seasonalLag: 0, maxPeaks: 1000 } }).forecast({ ...input, values });
    expect(f.detail?.arimaWeight).toBeGreaterThan(0);
    const next = Math.max(...truth.slice(8 * 144, 8 * 144 + 6));
    const plain = await new BlendForecaster().forecast({ ...input, values });
    expect(Math.abs(f.peak.mean - next)).toBeLessThan(Math.abs(plain.peak.mean - next));
  });
});

describe("on the ServeGen language aggregates (issue 31 item 5)", () => {
  it("the blend's next-hour peak MAPE is ≤ 0.9× the best naive's and its upper bound covers 85–95% of hours", async () => {
    for (const name of ["m-large", "m-mid", "m-small"]) {
      const s = readSeriesFile(join(shippedDataDir(), `servegen/aggregate/language_${name}_total_rate_600s.csv`));
      const methods = (["blend", "persistence", "seasonal-naive"] as const).map((n) => createForecaster({ name: n }));
      const r = await backtestPeaks(fillGaps(s.values, 144), methods, { stepMs: s.stepMs, heldOutFromDay: 10 });
      const [blend, persistence, seasonalNaive] = r.scores;
      expect(blend!.mapePct / Math.min(persistence!.mapePct, seasonalNaive!.mapePct), name).toBeLessThanOrEqual(0.9);
      expect(blend!.upperCoverage, name).toBeGreaterThanOrEqual(0.85);
      expect(blend!.upperCoverage, name).toBeLessThanOrEqual(0.95);
      expect(blend!.invalid).toBe(0);
    }
  }, 60_000);
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

describe.skipIf(sharedDataMissing !== undefined)(needingSharedData("every ServeGen per-client series (the full data folder's CSVs)"), () => {
  const root = join(SHARED_DATA, "servegen/data");
  const files: string[] = [];
  if (sharedDataMissing === undefined) for (const cat of readdirSync(root)) for (const model of readdirSync(join(root, cat))) for (const f of readdirSync(join(root, cat, model))) if (f.endsWith("-trace.csv")) files.push(join(root, cat, model, f));

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
