import { describe, expect, it } from "vitest";
import { planBinaryTree, planRingBootstrap, planRingBroadcast, planUnicast, RING_BOOTSTRAP_BYTES } from "./baselines.js";
import { chainEdges, planChains } from "./blitzscale.js";
import { idealSeconds } from "./ideal.js";
import { binomialTransfers, executionPipelines, kWayOrders, planBinomial } from "./lambdascale.js";
import { roleFor } from "./role.js";
import { sendOrder, type MulticastPlan } from "./schedule.js";
import { validatePlan } from "./validate.js";

const model = (blockCount: number, totalBytes = blockCount * 1024) => ({ totalBytes, blockCount });

// One-port model: per step a node sends at most one block and receives at most one.
function onePort(plan: MulticastPlan): void {
  const seen = new Set<string>();
  for (const t of plan.transfers) {
    for (const key of [`s${t.step}:${t.from}`, `r${t.step}:${t.to}`]) {
      expect(seen.has(key), key).toBe(false);
      seen.add(key);
    }
  }
}

describe("λScale k-way transmission and execution pipelines (λScale §4.2–4.3)", () => {
  it("2 → 8 with four blocks: two chunks, circular shift, three execution pipelines (Fig. 5)", () => {
    expect(kWayOrders(4, 2)).toEqual([
      [0, 1, 2, 3],
      [2, 3, 0, 1],
    ]);
    const plan = planBinomial({ model: model(4), sources: ["n1", "n2"], targets: ["n3", "n4", "n5", "n6", "n7", "n8"] });
    expect(plan.subGroups).toEqual([
      { source: "n1", nodes: ["n3", "n4", "n5"], order: [0, 1, 2, 3] },
      { source: "n2", nodes: ["n6", "n7", "n8"], order: [2, 3, 0, 1] },
    ]);
    expect(plan.pipelines).toEqual([
      ["n3", "n6"],
      ["n4", "n7"],
      ["n5", "n8"],
    ]);
    // each sub-group is a 1 → 4 binomial pipeline: b + log₂4 − 1 = 5 steps
    expect(plan.steps).toBe(5);
    validatePlan(plan);
    onePort(plan);
    // step 0: each source starts with the first block of its own order
    const first = plan.transfers.filter((t) => t.step === 0).map((t) => [t.from, t.block]);
    expect(first).toEqual([
      ["n1", 0],
      ["n2", 2],
    ]);
    // each pipeline holds a complete model as soon as both halves arrived: by step b/k + log₂4 − 1 = 3
    for (const [a, b] of plan.pipelines!) {
      const held = new Set(plan.transfers.filter((t) => (t.to === a || t.to === b) && t.step <= 3).map((t) => t.block));
      expect(held.size, `${a}+${b}`).toBe(4);
    }
  });

  it("k-way orders cover every block once per sub-group, uneven chunks included", () => {
    expect(kWayOrders(5, 2)).toEqual([
      [0, 1, 2, 3, 4],
      [3, 4, 0, 1, 2],
    ]);
    expect(kWayOrders(16, 3).map((o) => [...o].sort((x, y) => x - y))).toEqual([0, 1, 2].map(() => [...Array(16).keys()]));
    expect(kWayOrders(3, 1)).toEqual([[0, 1, 2]]);
  });

  it("Algorithm 2 with uneven sub-groups: cross pipelines while ≥ 2 sub-groups remain, then one local pipeline", () => {
    expect(executionPipelines([["a", "b", "c"], ["x"]])).toEqual([["a", "x"], ["b", "c"]]);
    expect(executionPipelines([["a"], ["x"], ["p", "q"]])).toEqual([["a", "x", "p"], ["q"]]);
  });

  it("1 → L binomial pipeline takes b + log₂L − 1 steps for L a power of two, one block per node per step", () => {
    for (const L of [2, 4, 8, 16])
      for (let b = 1; b <= 20; b++) {
        const nodes = [...Array(L).keys()].map((i) => `n${i}`);
        const plan = planBinomial({ model: model(b), sources: ["n0"], targets: nodes.slice(1) });
        expect(plan.steps, `L=${L} b=${b}`).toBe(b + Math.log2(L) - 1);
        validatePlan(plan);
        onePort(plan);
      }
  });

  it("non-power-of-two groups still deliver everything, within 3 steps of b + ⌈log₂L⌉ − 1", () => {
    for (const L of [3, 5, 6, 7, 9, 12])
      for (const b of [1, 4, 16]) {
        const nodes = [...Array(L).keys()].map((i) => `n${i}`);
        const t = binomialTransfers(nodes, [...Array(b).keys()]);
        const steps = Math.max(...t.map((x) => x.step)) + 1;
        expect(steps, `L=${L} b=${b}`).toBeLessThanOrEqual(b + Math.ceil(Math.log2(L)) - 1 + 3);
        validatePlan({ algorithm: "binomial", blockCount: b, blockBytes: 8, totalBytes: 8 * b, sources: ["n0"], targets: nodes.slice(1), transfers: t, steps });
      }
  });
});

describe("BlitzScale Algorithm 1 (BlitzScale §5.1)", () => {
  it("orders a chain by bandwidth: the faster target first (Fig. 10b)", () => {
    const input = {
      model: model(4),
      sources: [{ id: "S", outBytesPerS: 100 }],
      targets: [
        { id: "T1", inBytesPerS: 50 },
        { id: "T2", inBytesPerS: 100 },
      ],
    };
    expect(planChains(input).chains).toEqual([["S", "T2", "T1"]]);
    // insertion order serves the slow T1 first; S's spare half then feeds T2 directly, at half speed
    expect(planChains({ ...input, order: "insertion" }).chains).toEqual([
      ["S", "T1"],
      ["S", "T2"],
    ]);
  });

  it("builds multiple chains from several sources, ties broken by insertion order", () => {
    const plan = planChains({
      model: model(3),
      sources: [
        { id: "S1", outBytesPerS: 100 },
        { id: "S2", outBytesPerS: 100 },
      ],
      targets: [
        { id: "T1", inBytesPerS: 100 },
        { id: "T2", inBytesPerS: 100 },
      ],
    });
    expect(plan.chains).toEqual([
      ["S1", "T1"],
      ["S2", "T2"],
    ]);
    validatePlan(plan);
  });

  it("a source with spare outbound bandwidth feeds a second target directly", () => {
    const { edges } = chainEdges({
      model: model(2),
      sources: [{ id: "S", outBytesPerS: 200 }],
      targets: [
        { id: "T1", inBytesPerS: 100 },
        { id: "T2", inBytesPerS: 100 },
      ],
    });
    expect(edges).toEqual([
      ["S", "T1"],
      ["S", "T2"],
    ]);
  });

  it("prunes sources whose outbound link carries serving traffic, and groups NVLink targets", () => {
    const plan = planChains({
      model: model(2),
      sources: [
        { id: "P", outBytesPerS: 400, servingOutbound: true },
        { id: "S", outBytesPerS: 100 },
      ],
      targets: [
        { id: "A", inBytesPerS: 100, nvlinkGroup: "g" },
        { id: "B", inBytesPerS: 100, nvlinkGroup: "g" },
        { id: "C", inBytesPerS: 100 },
      ],
    });
    expect(plan.transfers.some((t) => t.from === "P")).toBe(false);
    expect(plan.chains).toEqual([["S", "C", "A"]]);
    expect(plan.transfers.filter((t) => t.medium === "nvlink").map((t) => [t.from, t.to, t.block])).toEqual([
      ["A", "B", 0],
      ["A", "B", 1],
    ]);
    validatePlan(plan);
    expect(() => planChains({ model: model(2), sources: [{ id: "P", outBytesPerS: 1, servingOutbound: true }], targets: [{ id: "A", inBytesPerS: 1 }] })).toThrow(/serving traffic/);
  });

  it("a node forwards block i at depth + i: pipelined along the chain", () => {
    const plan = planChains({ model: model(3), sources: [{ id: "S", outBytesPerS: 1 }], targets: ["A", "B"].map((id) => ({ id, inBytesPerS: 1 })) });
    expect(sendOrder(plan, "A").map((t) => [t.to, t.block, t.step])).toEqual([
      ["B", 0, 1],
      ["B", 1, 2],
      ["B", 2, 3],
    ]);
    expect(plan.steps).toBe(4); // b + hops − 1
  });
});

describe("baselines and ideal times", () => {
  it("unicast sends every copy from the source; the binary tree feeds two children per node", () => {
    const targets = ["a", "b", "c", "d"];
    const u = planUnicast({ model: model(2), source: "s", targets });
    expect(u.transfers.every((t) => t.from === "s")).toBe(true);
    expect(u.transfers).toHaveLength(8);
    const tree = planBinaryTree({ model: model(2), source: "s", targets });
    expect(sendOrder(tree, "s").map((t) => `${t.to}${t.block}`)).toEqual(["a0", "b0", "a1", "b1"]);
    expect(sendOrder(tree, "a").map((t) => `${t.to}${t.block}`)).toEqual(["c0", "d0", "c1", "d1"]);
    validatePlan(u);
    validatePlan(tree);
  });

  it("the NCCL-style ring passes every block rank to rank in rank order, pipelined; its bootstrap is one small block", () => {
    const ring = planRingBroadcast({ model: model(2), source: "s", targets: ["a", "b", "c"] });
    expect(sendOrder(ring, "s").map((t) => `${t.to}${t.block}@${t.step}`)).toEqual(["a0@0", "a1@1"]);
    expect(sendOrder(ring, "a").map((t) => `${t.to}${t.block}@${t.step}`)).toEqual(["b0@1", "b1@2"]);
    expect(sendOrder(ring, "b").map((t) => `${t.to}${t.block}@${t.step}`)).toEqual(["c0@2", "c1@3"]);
    expect(sendOrder(ring, "c")).toEqual([]); // the link back to the source carries nothing in a broadcast
    expect(ring.steps).toBe(4); // b + hops − 1 = 2 + 3 − 1
    expect(ring.chains).toEqual([["s", "a", "b", "c"]]);
    validatePlan(ring);
    const boot = planRingBootstrap("s", ["a", "b", "c"]);
    expect(boot.blockCount).toBe(1);
    expect(boot.totalBytes).toBe(4 * RING_BOOTSTRAP_BYTES);
    expect(boot.transfers.map((t) => `${t.from}${t.to}`)).toEqual(["sa", "ab", "bc"]);
    validatePlan(boot);
    // On equal links the ring's broadcast is the chain's time: 16 + (8 − 2) block times.
    expect(idealSeconds("ring", { totalBytes: 1600, blockCount: 16, nodes: 8, linkBytesPerS: 100 })).toBeCloseTo(22);
  });

  it("ideal formulas: chain M/B + (N−2)·M/(bB), binomial (b + ⌈log₂N⌉ − 1)·M/(bB), unicast (N−1)·M/B", () => {
    const x = { totalBytes: 1600, blockCount: 16, nodes: 8, linkBytesPerS: 100 };
    expect(idealSeconds("chain", x)).toBeCloseTo(16 + 6 * 1);
    expect(idealSeconds("binomial", x)).toBeCloseTo(16 + 3 - 1);
    expect(idealSeconds("unicast", x)).toBeCloseTo(7 * 16);
    expect(idealSeconds("binomial", { ...x, nodes: 2 })).toBeCloseTo(16);
  });

  it("roleFor gives each node its sends in order and the blocks it expects per peer", () => {
    const plan = planChains({ model: model(2), sources: [{ id: "S", outBytesPerS: 1 }], targets: ["A", "B"].map((id) => ({ id, inBytesPerS: 1 })) });
    const addrs = { S: { host: "h", port: 1 }, A: { host: "h", port: 2 }, B: { host: "h", port: 3 } };
    const role = roleFor(plan, "A", addrs, 9);
    expect(role.self).toBe(1);
    expect(role.sends).toEqual([
      { peer: 2, block: 0 },
      { peer: 2, block: 1 },
    ]);
    expect(role.expect).toEqual([[0, 1], [], []]);
    expect(() => roleFor(plan, "Z", addrs, 9)).toThrow(/not part of this plan/);
  });
});
