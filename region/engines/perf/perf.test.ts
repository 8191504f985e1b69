import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { readAllMeasured } from "./data.js";
import { fitAll } from "./evaluate.js";
import { decodeFromFit, prefillFromKnots, type ProfileFit } from "./fit.js";
import { defaultDataDir, renderFitted, repoRoot } from "./generate.js";
import { getProfile, throughputAtSlo } from "./model.js";

describe("performance model: fit against measured rows", () => {
  const rows = readAllMeasured(defaultDataDir());
  const report = fitAll(rows);

  it("reads every measured row with the units fixed (Llama-3 seconds → ms, whole decode → per token)", () => {
    expect(rows.filter((r) => r.model === "llama2-70b" || r.model === "bloom-176b").length).toBe(105 * 8) // 6 llama2-70b + 2 bloom-176b (GPU, TP) groups; power-capped rows skipped;
    const l3 = rows.find((r) => r.model === "llama3.1-8b" && r.tp === 2 && r.promptTokens === 128 && r.repeat === 0)!;
    // Llama-3.1-8B-tp-2.csv first row: prompt_time 0.026356 s, token_time 1.091423 s for 128 tokens
    expect(l3.prefillMs).toBeCloseTo(26.356, 2);
    expect(l3.decodeIterMs).toBeCloseTo(1091.4228 / 128, 3);
  });

  it("held-out MAPE ≤ 5% for TTFT and for time per output token", () => {
    expect(report.heldOutRows).toBeGreaterThan(200);
    expect(report.ttftMape).toBeLessThanOrEqual(0.05);
    expect(report.tpotMape).toBeLessThanOrEqual(0.05);
    for (const p of report.perProfile) {
      expect(p.ttftMape, p.key).toBeLessThan(0.08);
      expect(p.tpotMape, p.key).toBeLessThan(0.08);
    }
  });

  it("the committed fitted.ts is exactly what the fit produces from the data", () => {
    const committed = readFileSync(join(repoRoot(), "region/engines/perf/fitted.ts"), "utf8");
    expect(committed).toBe(renderFitted(report));
  });

  it("derives H100 profiles for the A100-only Llama-3 models, faster than A100", () => {
    for (const model of ["llama3.1-8b", "llama3.2-3b"]) {
      for (const tp of [2, 4]) {
        const a = getProfile(model, "a100-80gb", tp);
        const h = getProfile(model, "h100-80gb", tp);
        expect(h.fit.source).toMatch(/^derived/);
        expect(h.prefillMs(2048)).toBeLessThan(a.prefillMs(2048));
        expect(h.decodeIterMs(8, 8000)).toBeLessThan(a.decodeIterMs(8, 8000));
      }
    }
  });
});

describe("performance model: hand-checked pieces", () => {
  const fit: ProfileFit = {
    model: "llama2-70b",
    gpu: "a100-80gb",
    tp: 4,
    prefillKnots: [
      [100, 10],
      [400, 40],
      [1600, 320],
    ],
    prefillBatchedKnots: [
      [100, 10],
      [400, 80],
    ],
    decode: { c0: 20, cB: 0.5, cB2: 0.01, cCtx: 0.0001 },
    maxMeasuredBatch: 32,
    source: "test",
  };

  it("prefill interpolates in log-log between knots, floors below, scales proportionally above", () => {
    expect(prefillFromKnots(fit.prefillKnots, 50)).toBe(10);
    expect(prefillFromKnots(fit.prefillKnots, 200)).toBeCloseTo(20, 9); // slope 1 in log-log between 100 and 400
    expect(prefillFromKnots(fit.prefillKnots, 800)).toBeCloseTo(40 * 2 ** 1.5, 9); // slope 1.5 between 400 and 1600
    expect(prefillFromKnots(fit.prefillKnots, 3200)).toBeCloseTo(640, 9);
  });

  it("decode iteration = c0 + cB·B + cB2·B² + cCtx·C, linear beyond the largest measured batch", () => {
    expect(decodeFromFit(fit, 4, 10_000)).toBeCloseTo(20 + 2 + 0.16 + 1, 9);
    const at32 = 20 + 16 + 10.24;
    const at16 = 20 + 8 + 2.56;
    expect(decodeFromFit(fit, 64, 0)).toBeCloseTo(at32 + ((at32 - at16) / 16) * 32, 9);
  });

  it("KV bytes per token and weights per GPU follow the architecture", () => {
    const p = getProfile("llama2-70b", "a100-80gb", 4);
    expect(p.kvBytesPerToken).toBe(2 * 80 * 8 * 128 * 2); // 327,680 B
    expect(p.weightBytesPerGpu).toBe(35e9);
    expect(p.kvCapacityBytes).toBe(4 * 80 * 1024 ** 3 * 0.9 - 140e9);
    expect(getProfile("bloom-176b", "h100-80gb", 8).kvBytesPerToken).toBe(2 * 70 * 112 * 128 * 2);
  });

  it("refuses a (model, GPU, TP) it has no profile for instead of substituting one", () => {
    expect(() => getProfile("bloom-176b", "a100-80gb", 4)).toThrow(/no performance profile/);
  });

  it("throughputAtSlo grows with a looser time-between-tokens and is 0 when TTFT cannot be met", () => {
    const tight = throughputAtSlo("llama3.1-8b", "h100-80gb", 2, { ttftMs: 2000, tbtMs: 8 });
    const loose = throughputAtSlo("llama3.1-8b", "h100-80gb", 2, { ttftMs: 2000, tbtMs: 30 });
    expect(loose.batch).toBeGreaterThan(tight.batch);
    expect(loose.outputTokensPerS).toBeGreaterThan(tight.outputTokensPerS);
    expect(loose.totalTokensPerS).toBeCloseTo((loose.outputTokensPerS * (1155 + 211)) / 211, 6);
    expect(throughputAtSlo("llama2-70b", "a100-80gb", 4, { ttftMs: 1, tbtMs: 100 }).outputTokensPerS).toBe(0);
  });
});
