import { describe, expect, it } from "vitest";
import { arrivalTimes } from "../../region/liveload/lambda.js";
import { planBinaryTree, planRingBroadcast } from "./baselines.js";
import { planChains } from "./blitzscale.js";
import { idealSeconds } from "./ideal.js";
import { planBinomial } from "./lambdascale.js";
import { linkArrivalTimes } from "./timing.js";

const model = { totalBytes: 16 * 1024, blockCount: 16 };
const targets = (n: number) => Array.from({ length: n }, (_, i) => `t${i}`);
const last = (at: Map<string, number[]>) => Math.max(...[...at.values()].flat());

describe("linkArrivalTimes (one block at a time per link each way)", () => {
  it("is the synchronous step model on λScale's binomial pipeline (1 → 8, k = 1 and k = 2) and on chains", () => {
    for (const sources of [["s0"], ["s0", "s1"]]) {
      const plan = planBinomial({ model, sources, targets: targets(7 + sources.length - 1) });
      expect(linkArrivalTimes(plan, 10)).toEqual(arrivalTimes(plan, 10));
    }
    const chain = planChains({ model, sources: [{ id: "s0", outBytesPerS: 1 }], targets: targets(4).map((id) => ({ id, inBytesPerS: 1 })) });
    expect(linkArrivalTimes(chain, 10)).toEqual(arrivalTimes(chain, 10));
  });

  it("charges a binary tree's internal uplinks for both children: ≈ ideal.ts's 2·M/B + …, where the step model says ≈ M/B", () => {
    for (const n of [4, 8, 9]) {
      const plan = planBinaryTree({ model, source: "s0", targets: targets(n - 1) });
      const ideal = idealSeconds("tree", { totalBytes: model.totalBytes, blockCount: model.blockCount, nodes: n, linkBytesPerS: model.totalBytes / model.blockCount / 0.01 }) * 1000;
      const t = last(linkArrivalTimes(plan, 10));
      expect(t).toBeGreaterThan(0.9 * ideal);
      expect(t).toBeLessThanOrEqual(1.1 * ideal);
      expect(last(arrivalTimes(plan, 10))).toBeLessThan(0.7 * t);
    }
  });

  it("a ring broadcast takes the chain's M/B + (N − 2)·(M/b)/B", () => {
    const plan = planRingBroadcast({ model, source: "s0", targets: targets(8) });
    expect(last(linkArrivalTimes(plan, 10))).toBeCloseTo(idealSeconds("ring", { totalBytes: model.totalBytes, blockCount: 16, nodes: 9, linkBytesPerS: 1024 / 0.01 }) * 1000, 6);
  });
});
