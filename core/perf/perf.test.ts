import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { readAllMeasured, type MeasuredRow } from "./data.js";
import { checkDerivation, configKey, fitAll, leaveConfigOut } from "./evaluate.js";
import { DEFAULT_FIT, decodeFromFit, imputeKnots, prefillCurves, prefillFromFit, prefillFromKnots, rawPrefillCurves, type ProfileFit } from "./fit.js";
import { repoRoot } from "../paths.js";
import { SHARED_DATA, needingSharedData, sharedDataMissing } from "../../test/helpers/shared-data.js";
import { renderFitted } from "./generate.js";
import { getProfile, throughputAtSlo } from "./model.js";
import { chooseFit } from "./nested.js";

// The measured rows are the full data folder's (SageServe's and Splitwise's profiles); tidegate ships the fit (generate.ts).
describe.skipIf(sharedDataMissing !== undefined)(needingSharedData("performance model: fit against measured rows"), () => {
  const rows = sharedDataMissing === undefined ? readAllMeasured(SHARED_DATA) : [];
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

  // Plain LOCO scores the shipped sibling weight on the data it was chosen on (optimistic); the figure held to 5% in
  // bench:replay is nested LOCO (nested.ts: 5.01%, missed), too slow for this suite (25–50 s).
  it("plain leave-one-configuration-out MAPE ≤ 5% for TTFT (4.92%) and TPOT (issue 11)", () => {
    const lco = leaveConfigOut(rows);
    // (prompt, batch) points: Splitwise 7 prompt lengths + 6 batch sizes, SageServe 7 + 5.
    expect(lco.configurations).toBe(8 * 13 + 4 * 12);
    expect(lco.tpotMape).toBeLessThanOrEqual(0.05);
    expect(lco.ttftMape).toBeLessThanOrEqual(0.05);
  });

  it("the shipped fit's choice is what nested CV's selection step picks on all the data (issue 36)", () => {
    expect(chooseFit(rows).options).toEqual(DEFAULT_FIT);
  });

  it("the committed fitted.ts is exactly what the fit produces from the data", () => {
    const committed = readFileSync(join(repoRoot(), "core/perf/fitted.ts"), "utf8");
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

  it("prefill of two or more prompts follows the batched curve, of one prompt the single-sequence curve", () => {
    expect(prefillFromFit(fit, 400)).toBe(40);
    expect(prefillFromFit(fit, 400, 1)).toBe(40);
    expect(prefillFromFit(fit, 400, 2)).toBe(80);
    expect(prefillFromFit(fit, 800, 4)).toBeCloseTo(160, 9); // proportional beyond the batched curve's last knot
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

describe("performance model: prefill knot imputation and leave-one-configuration-out, hand-checked", () => {
  it("imputes a missing knot by the peers' regression of log(t(T)/t(K1)) on log(t(K2)/t(K1)), K1/K2 = own's neighbours", () => {
    const own: [number, number][] = [
      [100, 10],
      [400, 40],
    ];
    // Three peers on y = ln 1.5 + 0.25·x (x = ln(q400/q100), y = ln(q200/q100)): q200 = q100 · 1.5 · (q400/q100)^0.25.
    const peers: [number, number][][] = [
      [[100, 10], [200, 10 * 1.5 * 2 ** 0.25], [400, 20]],
      [[100, 10], [200, 10 * 1.5 * 8 ** 0.25], [400, 80]],
      [[100, 1], [200, 1.5 * 16 ** 0.25], [400, 16]],
    ];
    // own: x = ln 4, so t(200) = 10 · 1.5 · 4^0.25 = 15·√2.
    expect(imputeKnots(own, peers)).toEqual([
      [100, 10],
      [200, expect.closeTo(15 * Math.SQRT2, 9)],
      [400, 40],
    ]);
    // One peer: the slope is the straight log–log line through own's two nearest knots (here 200 then 100, so
    // b = ln(400/200)/ln(100/200) = −1) and the peer's deviation from it (straight: 40 at 400, measured 100: ×2.5).
    // own's straight line gives 90 at 400; × 2.5 = 225.
    const two: [number, number][] = [
      [100, 10],
      [200, 30],
    ];
    expect(imputeKnots(two, [[[100, 10], [200, 20], [400, 100]]])).toEqual([
      [100, 10],
      [200, 30],
      [400, expect.closeTo(225, 9)],
    ]);
    // One own knot: × the peers' median ratio t(T)/t(K1), taken in logs: median(ln 3, ln 2) = ln √6.
    expect(imputeKnots([[100, 10]], [[[100, 5], [200, 15]], [[100, 1], [200, 2]]])).toEqual([
      [100, 10],
      [200, expect.closeTo(10 * Math.sqrt(6), 9)],
    ]);
    // A peer without both anchors says nothing.
    expect(imputeKnots(own, [[[100, 20], [200, 60]]])).toEqual(own);
  });

  it("imputeKnots: with the profile's other sweep (sibling), the knot is the log-space mean of the two estimates", () => {
    const own: [number, number][] = [
      [100, 10],
      [800, 80],
    ];
    const peers: [number, number][][] = [0, 1, 2].map(() => [[100, 1], [400, 4], [800, 8]]);
    // Anchors K1 = 100, K2 = 800. Peers alone: t(400)/t(100) = 4 in every peer (b = 0, a = ln 4), so 40. The own sibling goes ×6 from 100 to
    // 400 where every peer's sibling goes ×4 like the peer itself (median offset 0), so 60. Mean in logs: √2400.
    const sibling = { own: [[100, 10], [400, 60]] as [number, number][], peers: peers.map(() => [[100, 1], [400, 4]] as [number, number][]) };
    expect(imputeKnots(own, peers, sibling)).toEqual([
      [100, 10],
      [400, expect.closeTo(Math.sqrt(2400), 9)],
      [800, 80],
    ]);
    // Fewer than 3 peers with both sweeps there: the peers' estimate alone.
    const two = { own: sibling.own, peers: [sibling.peers[0], sibling.peers[1], undefined] };
    expect(imputeKnots(own, peers, two)).toEqual([
      [100, 10],
      [400, expect.closeTo(40, 9)],
      [800, 80],
    ]);
  });

  it("splits runs into the single-sequence and batched sweeps and falls back to the single curve without batched runs", () => {
    const row = (promptTokens: number, batch: number, prefillMs: number, outlier?: string): MeasuredRow => ({
      model: "m",
      gpu: "g",
      tp: 1,
      source: "s",
      promptTokens,
      batch,
      outputTokens: 128,
      prefillMs,
      decodeIterMs: 10,
      repeat: 0,
      ...(outlier === undefined ? {} : { prefillOutlier: outlier }),
    });
    const raw = rawPrefillCurves([row(128, 1, 5), row(512, 1, 10), row(512, 1, 12), row(512, 1, 20), row(1024, 1, 20), row(512, 2, 30), row(512, 4, 99, "bad")]);
    expect(raw).toEqual({ source: "s", single: [[128, 5], [512, 12], [1024, 20]], batched: [[512, 12], [1024, 30]] });
    expect(prefillCurves(raw, []).prefillBatchedKnots).toEqual([[128, 5], [512, 12], [1024, 30]]);
    const noBatched = rawPrefillCurves([row(128, 1, 5), row(512, 1, 10), row(512, 2, 30, "bad")]);
    expect(prefillCurves(noBatched, []).prefillBatchedKnots).toEqual([[128, 5], [512, 10]]);
  });

  /** Two profiles of one profiler, the second 3× slower everywhere; prefill with kinks, decode exactly linear. */
  function synthetic(): MeasuredRow[] {
    const single: Record<number, number> = { 128: 10, 256: 10, 512: 12, 1024: 20, 2048: 50, 4096: 100 };
    const batched: Record<number, number> = { 2: 30, 4: 70, 8: 140 };
    const rows: MeasuredRow[] = [];
    for (const [gpu, k] of [["g1", 1], ["g2", 3]] as const) {
      const base = { model: "m", gpu, tp: 1, source: "s", outputTokens: 128, repeat: 0 };
      const decode = (b: number, p: number) => k * (5 + 0.5 * b + 0.0001 * b * (p + 64));
      for (const [p, ms] of Object.entries(single)) rows.push({ ...base, promptTokens: Number(p), batch: 1, prefillMs: k * ms, decodeIterMs: decode(1, Number(p)) });
      for (const [b, ms] of Object.entries(batched)) rows.push({ ...base, promptTokens: 512, batch: Number(b), prefillMs: k * ms, decodeIterMs: decode(Number(b), 512) });
    }
    return rows;
  }

  it("predicts every left-out point exactly when the profiles share their shape", () => {
    const lco = leaveConfigOut(synthetic());
    expect(lco.configurations).toBe(18); // 2 profiles × (6 prompt lengths + 3 batch sizes)
    expect(lco.ttftMape).toBeCloseTo(0, 9);
    expect(lco.tpotMape).toBeCloseTo(0, 9);
  });

  it("uses nothing of the left-out configuration: ×100 on its runs leaves its prediction unchanged", () => {
    const rows = synthetic();
    const target = rows.find((r) => r.gpu === "g1" && r.batch === 4)!;
    target.prefillMs *= 100;
    target.decodeIterMs *= 100;
    const e = leaveConfigOut(rows).perConfig.find((c) => c.key === configKey(target))!;
    expect(e.ttftMape).toBeCloseTo(0.99, 9); // predicted the unscaled value: |y − 100y| / 100y
    expect(e.tpotMape).toBeCloseTo(0.99, 9);
  });

  it("checkDerivation scores a profile derived from a reference model's GPU ratios: exact when the ratios carry over", () => {
    const rows: MeasuredRow[] = [];
    for (const [model, k] of [["a", 1], ["b", 2]] as const) {
      for (const [gpu, g] of [["g1", 1], ["g2", 0.5]] as const) {
        const base = { model, gpu, tp: 8, source: "s", outputTokens: 128, repeat: 0 };
        for (const p of [128, 512, 2048]) rows.push({ ...base, promptTokens: p, batch: 1, prefillMs: k * g * (10 + p / 100), decodeIterMs: k * g * 20 });
        for (const b of [2, 8]) rows.push({ ...base, promptTokens: 512, batch: b, prefillMs: k * g * (10 + (512 * b) / 80), decodeIterMs: k * g * (20 + b) });
      }
    }
    const checks = checkDerivation(rows);
    expect(checks.map((c) => `${c.key}<${c.reference}`)).toEqual(["a/g1/tp8<b", "a/g2/tp8<b", "b/g1/tp8<a", "b/g2/tp8<a"]);
    for (const c of checks) {
      expect(c.ttftMape).toBeCloseTo(0, 9);
      expect(c.tpotMape).toBeCloseTo(0, 9);
    }
  });
});
