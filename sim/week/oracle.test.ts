import { describe, expect, it } from "vitest";
import { OracleForecaster } from "./oracle.js";

describe("OracleForecaster", () => {
  it("forecasts each coming 10-minute step as the true mean, the peak as the largest step, with no interval", async () => {
    // 30 minutes of truth from minute 60: 100 tokens/s, then 400, then 250 (per-minute values).
    const truth = new Float64Array(200);
    for (let k = 60; k < 70; k++) truth[k] = 100;
    for (let k = 70; k < 80; k++) truth[k] = k < 75 ? 300 : 500;
    for (let k = 80; k < 90; k++) truth[k] = 250;
    const o = new OracleForecaster(new Map([["m\tr", truth]]));
    const f = await o.forecast({ values: [1, 2, 3], stepMs: 600_000, seasonSteps: 144, horizonSteps: 3, series: { model: "m", region: "r", fromMs: 60 * 60_000 } });
    expect(f.steps.map((s) => s.mean)).toEqual([100, 400, 250]);
    expect(f.steps.every((s) => s.lower === s.mean && s.upper === s.mean)).toBe(true);
    expect(f.peak).toEqual({ mean: 400, lower: 400, upper: 400 });
    // It does not read the history it is given: only the future.
    const other = await o.forecast({ values: [9_999], stepMs: 600_000, seasonSteps: 144, horizonSteps: 3, series: { model: "m", region: "r", fromMs: 60 * 60_000 } });
    expect(other.peak.mean).toBe(400);
  });

  it("refuses a series it has no truth for (the planner then plans on the last hour's peak and says so)", async () => {
    const o = new OracleForecaster(new Map());
    await expect(o.forecast({ values: [1], stepMs: 600_000, seasonSteps: 144, horizonSteps: 6 })).rejects.toThrow(/oracle/);
    await expect(o.forecast({ values: [1], stepMs: 600_000, seasonSteps: 144, horizonSteps: 6, series: { model: "x", region: "y", fromMs: 0 } })).rejects.toThrow(/oracle/);
  });
});
