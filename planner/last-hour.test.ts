/** Last hour's forecast error: judged only once the hour an earlier plan covered has ended, on recorded load only. */
import { describe, expect, it } from "vitest";
import { MINUTE_MS, MemoryHistory } from "../forecasts/history.js";
import { lastHourError } from "./last-hour.js";
import type { PlanReport, SeriesForecast } from "./report.js";

const T0 = Date.UTC(2026, 10, 23, 14, 0);
const HOUR = 3_600_000;

/** A report made at `madeAtMs` that forecast a peak of `peak` for m@r over the next six 10-minute windows. */
function plan(id: string, madeAtMs: number, peak: number): PlanReport {
  const f: SeriesForecast = {
    model: "m", region: "r", method: "blend", peak: { mean: peak, lower: peak, upper: peak }, niwLastHourTokensPerS: 0, bufferTokensPerS: 0, demandTokensPerS: peak, pointDemandTokensPerS: peak,
    historyWindows: [], stepMs: 600_000, forecastSteps: Array.from({ length: 6 }, () => ({ mean: peak, lower: peak, upper: peak })), lastHour: null, gapWindowsFilled: 0,
  };
  return { id, decisionId: 1, madeAtMs, intervalMs: HOUR, advisory: false, alpha: 0.8, beta: 0.2, forecasts: [f], solver: { path: "mip", status: "optimal", objective: 0, bound: 0, gap: 0, solveMs: 0, endpoints: 0 }, actions: [], spot: [], cost: { holdPerInterval: 0, starts: 0, total: 0 }, unmet: [], warnings: [], acks: [] };
}

/** History with `tokensPerS(minute)` recorded for the minutes [fromMs, toMs). */
async function history(fromMs: number, toMs: number, tokensPerS: (minute: number) => number): Promise<MemoryHistory> {
  const h = new MemoryHistory();
  const samples = [];
  for (let t = fromMs; t < toMs; t += MINUTE_MS) samples.push({ kind: "iw" as const, model: "m", region: "r", minuteMs: t, tokensPerS: tokensPerS((t - fromMs) / MINUTE_MS) });
  await h.add(samples);
  return h;
}

const ask = (nowMs: number, earlier: PlanReport[], h: MemoryHistory) => lastHourError({ model: "m", region: "r", nowMs, intervalMs: HOUR, earlier, history: h });

describe("last hour's forecast error", () => {
  it("is 'not yet' while the hour the previous plan covered is still running — never a made-up 0", async () => {
    const h = await history(T0 - HOUR, T0 + 20 * MINUTE_MS, () => 100);
    const r = await ask(T0 + 20 * MINUTE_MS, [plan("plan-1", T0 + 2 * MINUTE_MS, 100)], h); // "plan now" in the same hour
    expect(r.lastHour).toBeNull();
    expect(r.note?.state).toBe("not-yet");
    expect(r.note?.why).toBe("plan-1's hour (2026-11-23 14:00 UTC – 15:00) is still running: its error is computed once it ends at 15:00");
  });

  it("once that hour has ended, compares its forecast with the peak recorded in that hour", async () => {
    // 14:00–15:00 peaks at 150 in its third window; 13:00–14:00 (not the hour judged) is higher still.
    const h = await history(T0 - HOUR, T0 + HOUR, (m) => (m < 60 ? 500 : m >= 80 && m < 90 ? 150 : 90));
    const r = await ask(T0 + HOUR + 5000, [plan("plan-1", T0 + 1000, 120)], h);
    expect(r.lastHour).toEqual({ forecastPeak: 120, actualPeak: 150, errorPct: -20, planId: "plan-1", hourStartMs: T0, hourEndMs: T0 + HOUR, recordedWindows: 6, windows: 6 });
    expect(r.note).toBeUndefined();
  });

  it("judges the newest plan whose hour has ended when a newer one (plan now) is still running", async () => {
    const h = await history(T0, T0 + HOUR + 30 * MINUTE_MS, () => 80);
    const r = await ask(T0 + HOUR + 30 * MINUTE_MS, [plan("plan-3", T0 + HOUR + 20 * MINUTE_MS, 999), plan("plan-2", T0 + HOUR, 999), plan("plan-1", T0, 100)], h);
    expect(r.lastHour).toMatchObject({ planId: "plan-1", forecastPeak: 100, actualPeak: 80, errorPct: 25 });
  });

  it("counts only recorded windows, and says when nothing was recorded or no plan covered the last hour", async () => {
    const partial = await history(T0 + 20 * MINUTE_MS, T0 + HOUR, () => 50); // a restart 20 minutes into the hour
    expect((await ask(T0 + HOUR, [plan("plan-1", T0, 50)], partial)).lastHour).toMatchObject({ errorPct: 0, recordedWindows: 4, windows: 6 });
    const none = await history(T0 - 3 * HOUR, T0 - 2 * HOUR, () => 50);
    expect((await ask(T0 + HOUR, [plan("plan-1", T0, 50)], none)).note).toEqual({ state: "none", why: "no load was recorded in plan-1's hour (2026-11-23 14:00 UTC – 15:00)" });
    expect((await ask(T0 + 5 * HOUR, [plan("plan-1", T0, 50)], partial)).note?.state).toBe("none"); // ended hours ago
    expect((await ask(T0 + HOUR, [], partial)).note).toEqual({ state: "none", why: "no earlier plan forecast this series" });
  });
});
