import { describe, expect, it } from "vitest";
import { planBinomial } from "../../nodes/multicast/lambdascale.js";
import type { MulticastPlan } from "../../nodes/multicast/schedule.js";
import { arrivalTimes, instancesAt, lambdaPipelines } from "./lambda.js";

describe("λScale execute-while-load (λScale §4.3–4.4)", () => {
  // 2 → 4 with 4 blocks: sub-groups s0 → {t0, t1} in order 0 1 2 3 and s1 → {t2, t3} in order 2 3 0 1 (Algorithm 1);
  // Algorithm 2 pairs them as [t0, t2] and [t1, t3]. The binomial schedule (nodes/multicast, greedy for three
  // nodes) lands, with one step = 1 ms:
  //   t0: b0@1 b2@3 b3@4 b1@5   t1: b1@2 b0@3 b2@4 b3@5   t2: b2@1 b0@3 b1@4 b3@5   t3: b3@2 b2@3 b0@4 b1@5
  const plan = planBinomial({ model: { totalBytes: 4096, blockCount: 4 }, sources: ["s0", "s1"], targets: ["t0", "t1", "t2", "t3"] });

  it("arrivals follow the plan's steps (step s lands at (s + 1)·stepMs; sources hold everything at 0)", () => {
    const at = arrivalTimes(plan, 1);
    expect(at.get("t0")).toEqual([1, 5, 3, 4]);
    expect(at.get("t1")).toEqual([3, 2, 4, 5]);
    expect(at.get("t2")).toEqual([3, 4, 1, 5]);
    expect(at.get("t3")).toEqual([4, 5, 3, 2]);
    expect(at.get("s1")).toEqual([0, 0, 0, 0]);
    expect(arrivalTimes(plan, 10).get("t0")).toEqual([10, 50, 30, 40]);
  });

  it("a 2 → 4 scale-out: [t1, t3] serves from 3 ms as a two-stage pipeline (blocks 0–1 on t1, 2–3 on t3), [t0, t2] from 4 ms", () => {
    const [p0, p1] = lambdaPipelines(plan, 1);
    expect(p0!.nodes).toEqual(["t0", "t2"]);
    expect(p1!.nodes).toEqual(["t1", "t3"]);
    // [t1, t3]: b0 first on t1 (3 < 4), b1 on t1 (2 < 5), b2 on t3 (3 < 4), b3 on t3 (2 < 5): formed at max(3, 2, 3, 2)
    expect(p1).toMatchObject({ formedMs: 3, hops: 1, stages: [{ node: "t1", fromBlock: 0, toBlock: 2 }, { node: "t3", fromBlock: 2, toBlock: 4 }] });
    // [t0, t2]: b0 on t0 (1), b1 on t2 (4 < 5), b2 on t2 (1), b3 on t0 (4 < 5): formed at 4, three stages t0 → t2 → t0
    expect(p0).toMatchObject({ formedMs: 4, hops: 2, stages: [{ node: "t0", fromBlock: 0, toBlock: 1 }, { node: "t2", fromBlock: 1, toBlock: 3 }, { node: "t0", fromBlock: 3, toBlock: 4 }] });
    // both serve before any node holds the whole model (every node completes at 5 ms)
    expect(instancesAt([p0!, p1!], 2.9)).toBe(0);
    expect(instancesAt([p0!, p1!], 3)).toBe(1);
    expect(instancesAt([p0!, p1!], 4.5)).toBe(2);
  });

  it("switch to local mode after the last block: each pipeline dissolves when all its members hold the model", () => {
    const phases = lambdaPipelines(plan, 1);
    for (const p of phases) expect(p.localMs).toBe(5);
    expect(instancesAt(phases, 4.99)).toBe(2);
    expect(instancesAt(phases, 5)).toBe(4);
    // a member that completes earlier keeps serving in its pipeline until the last member completes
    const early: MulticastPlan = {
      algorithm: "binomial",
      blockCount: 2,
      blockBytes: 8,
      totalBytes: 16,
      sources: ["s"],
      targets: ["a", "b"],
      steps: 4,
      transfers: [
        { from: "s", to: "a", block: 0, step: 0 },
        { from: "s", to: "b", block: 1, step: 1 },
        { from: "s", to: "a", block: 1, step: 2 },
        { from: "a", to: "b", block: 0, step: 3 },
      ],
      pipelines: [["a", "b"]],
    };
    const [p] = lambdaPipelines(early, 2);
    expect(p).toMatchObject({ formedMs: 4, localMs: 8, hops: 1, stages: [{ node: "a", fromBlock: 0, toBlock: 1 }, { node: "b", fromBlock: 1, toBlock: 2 }] });
    expect([instancesAt([p!], 3), instancesAt([p!], 4), instancesAt([p!], 6), instancesAt([p!], 8)]).toEqual([0, 1, 1, 2]);
  });

  it("bad input is refused: a non-positive step, a pipeline member the plan does not feed", () => {
    expect(() => arrivalTimes(plan, 0)).toThrow(RangeError);
    expect(() => lambdaPipelines({ ...plan, pipelines: [["t0", "nope"]] }, 1)).toThrow(/nope is not a target/);
  });
});
