import { beforeAll, describe, expect, it } from "vitest";
import { HighsSolver } from "../../../core/solver.js";
import { bestEffort, rehearse, uniformEpisode, zigzag, zigzagConfiguration } from "./zigzag.js";

// BlitzScale §5.2, Figure 12's setting: a 7-layer model, loading a layer takes as long as 6 layer computations
// (layer k reaches the new instance at 6·(k − 1), counting from the first layer), six equal request batches queued.
const fig12 = uniformEpisode(7, 6, 6);

describe("live autoscaling of one loading episode (BlitzScale §5.2)", () => {
  let solver: HighsSolver;
  beforeAll(async () => {
    solver = await HighsSolver.create();
  });

  it("best effort: every batch gets a (1, 6) configuration before layer 2 arrives, so batch 6 waits for five others on the old instance", () => {
    // target: layer 1 of batch i at [i − 1, i]; source: 6 layers each, FIFO from t = 1
    const r = bestEffort(fig12);
    expect(r.targetLayers).toEqual([1, 1, 1, 1, 1, 1]);
    expect(r.latency).toEqual([7, 13, 19, 25, 31, 37]);
    expect(r.mean).toBe(22);
  });

  it("Figure 12 (b)'s configuration rehearsed: the target comes back for layer 2 of batches 2–6 once it loads (zigzag); batch 3 finishes at 17 as the text says", () => {
    // target: layer 1 of batches 1–6 at [0, 6], then layer 2 of batches 2–6 at [6, 11]
    // source: batch 1 [1, 7], batch 2 [7, 12], batch 3 [12, 17] (12 for batches 1 and 2, 5 of its own), …
    const r = rehearse(fig12, (i) => [1, 2, 2, 2, 2, 2][i]!);
    expect(r.latency).toEqual([7, 12, 17, 22, 27, 32]);
  });

  it("zigzag: the ILP's configuration takes more layers on the target as they arrive, and no batch misses an SLO of 32 that best effort's batch 6 misses", () => {
    const config = zigzagConfiguration(fig12, solver, 60);
    // Ties: batch 1 finishes at 7 with 0 or 1 layer on the target, batch 6 at 27 with 4 or 5; the ILP may return
    // any of them. Batches 2–5 take 2, 2, 3, 4 layers: one more each time a layer has arrived.
    expect(config.slice(1, 5)).toEqual([2, 2, 3, 4]);
    const z = zigzag(fig12, solver, 60);
    // hand-checked with 1, 2, 2, 3, 4, 5: target layer 1 of every batch at [0, 6]; layer 2 of 2–6 at [6, 11];
    // layer 3 of 4–6 at [12, 15]; layer 4 of 5–6 at [18, 20]; layer 5 of 6 at [24, 25]. Source: 7, 12, 17, 21, 24, 27.
    expect(z.latency).toEqual([7, 12, 17, 21, 24, 27]);
    const be = bestEffort(fig12);
    const slo = 32;
    expect(be.latency.map((l, i) => (l > slo ? i + 1 : 0)).filter((i) => i > 0)).toEqual([6]);
    expect(z.latency.every((l) => l <= slo)).toBe(true);
    for (let i = 0; i < 6; i++) expect(z.latency[i]).toBeLessThanOrEqual(be.latency[i]!);
    expect(z.mean).toBe(18);
  });

  it("the ILP's configuration is as good as the best of all 8^6 configurations rehearsed (mean latency)", () => {
    let best = Infinity;
    const cfg = [0, 0, 0, 0, 0, 0];
    const walk = (i: number): void => {
      if (i === cfg.length) {
        best = Math.min(best, rehearse(fig12, (j) => cfg[j]!).mean);
        return;
      }
      for (let t = 0; t <= 7; t++) {
        cfg[i] = t;
        walk(i + 1);
      }
    };
    walk(0);
    expect(zigzag(fig12, solver, 60).mean).toBe(best);
  });

  it("never worse than best effort on other episodes (fast and slow loading, more batches)", () => {
    // each solved to proven optimality (a generous time limit), so the outcome does not depend on the machine's speed
    for (const e of [uniformEpisode(7, 1, 6), uniformEpisode(7, 3, 8), uniformEpisode(12, 4, 8), uniformEpisode(16, 12, 6)]) {
      const config = zigzagConfiguration(e, solver, 60);
      const z = rehearse(e, (i) => config[i]!);
      const b = bestEffort(e);
      expect(z.mean, JSON.stringify({ e, z, b })).toBeLessThanOrEqual(b.mean + 1e-9);
    }
  });

  it("a fully loaded target needs no pipeline: every layer arrived at 0, so the ILP may run whole batches on it", () => {
    const e = { layers: 4, batches: 2, layerArrival: [0, 0, 0, 0] };
    const z = zigzag(e, solver, 60);
    expect(z.makespan).toBe(4); // one batch on each instance, in parallel
  });

  it("bad input is refused", () => {
    expect(() => rehearse({ layers: 0, batches: 1, layerArrival: [] }, () => 0)).toThrow(/layers must be a positive integer/);
    expect(() => rehearse({ layers: 2, batches: 1, layerArrival: [0] }, () => 0)).toThrow(/layerArrival has 1 entries for 2 layers/);
    expect(() => rehearse({ layers: 2, batches: 1, layerArrival: [3, 1] }, () => 0)).toThrow(/non-decreasing/);
  });

  it("one batch: the ILP's optimum is L layer-times, which best effort reaches (why pairing.ts skips the solve)", () => {
    for (const [layers, load, shift] of [[7, 6, 0], [16, 0.5, 3], [16, 2, 0], [12, 1, 10]] as const) {
      // `shift`: the first layer still `shift` units away, so best effort runs nothing on the target
      const e = { layers, batches: 1, layerArrival: Array.from({ length: layers }, (_, k) => shift + k * load) };
      expect(zigzag(e, solver).mean).toBe(layers);
      expect(bestEffort(e).mean).toBe(layers);
    }
  });
});
