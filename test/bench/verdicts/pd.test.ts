import { describe, expect, it } from "vitest";
import { verdictOf } from "./common.js";
import { attainment, maxPassingRate, meetsPdSlo, pdCheck, winningThreshold } from "./pd.js";

// bench:pd's verdict (issue 48), on hand-checked figures.

describe("bench:pd verdict", () => {
  it("a request meets the SLO with TTFT under max(1 s, 2 × unloaded) and TPOT under 100 ms; unserved never does", () => {
    expect(meetsPdSlo({ unloadedTtftMs: 300, ttftMs: 1000, tpotMs: 100 })).toBe(true);
    expect(meetsPdSlo({ unloadedTtftMs: 300, ttftMs: 1001, tpotMs: 50 })).toBe(false);
    expect(meetsPdSlo({ unloadedTtftMs: 800, ttftMs: 1600, tpotMs: 50 })).toBe(true); // 2 × 800 > 1 s
    expect(meetsPdSlo({ unloadedTtftMs: 800, ttftMs: 1601, tpotMs: 50 })).toBe(false);
    expect(meetsPdSlo({ unloadedTtftMs: 300, ttftMs: 200, tpotMs: 100.5 })).toBe(false);
    expect(meetsPdSlo({ unloadedTtftMs: 300, ttftMs: 200 })).toBe(false); // never ended
    expect(meetsPdSlo({ unloadedTtftMs: 300 })).toBe(false);
    expect(attainment([{ unloadedTtftMs: 1, ttftMs: 10, tpotMs: 10 }, { unloadedTtftMs: 1 }])).toBe(0.5);
    expect(attainment([])).toBe(0);
  });

  it("the rate search doubles, bisects and finds the edge; 0 when nothing passes", async () => {
    const edge = (limit: number) => async (m: number) => m <= limit;
    expect(await maxPassingRate(edge(3), 1, 5)).toBe(3); // [2, 4] bisected: 3 passes, 3.5, 3.25, 3.125, 3.0625 fail
    expect(await maxPassingRate(edge(0.3), 1, 5)).toBeCloseTo(0.296875, 6); // [0.25, 0.5]
    expect(await maxPassingRate(edge(0), 1, 5)).toBe(0);
    const tried: number[] = [];
    await maxPassingRate(async (m) => (tried.push(m), m <= 1.5), 1, 2);
    expect(tried).toEqual([1, 2, 1.5, 1.75]);
  });

  it("judges the ratio of goodputs per trace; a colocated arm at 0 is no baseline", () => {
    expect(pdCheck("azure-code", 2, 2.6)).toMatchObject({ value: 1.3, limit: 1.3, ok: true });
    expect(pdCheck("azure-code", 2, 2.58).ok).toBe(false);
    expect(pdCheck("azure-conv", 10, 9.5).ok).toBe(true);
    expect(pdCheck("azure-conv", 0, 9.5).ok).toBe(false);
    expect(pdCheck("other", 1, 5).ok).toBe(false); // no target for it
    expect(verdictOf([pdCheck("azure-code", 2, 3), pdCheck("azure-conv", 10, 9)]).missed).toEqual(["azure-conv: disaggregated goodput ÷ colocated (chunked prefill) at the same GPUs"]);
  });

  it("the winning split threshold has the highest geometric mean of its ratios over the traces; a NaN scores 0", () => {
    // 0: √(1.4 × 0.9) = 1.122; 512: √(1.2 × 1.2) = 1.2; 1024: √(2 × NaN) → 0.
    const w = winningThreshold({ code: { 0: 1.4, 512: 1.2, 1024: 2 }, conv: { 0: 0.9, 512: 1.2, 1024: Number.NaN } });
    expect(w.threshold).toBe(512);
    expect(w.score[0]).toBeCloseTo(Math.sqrt(1.26), 9);
    expect(w.score[1024]).toBe(0);
  });
});
