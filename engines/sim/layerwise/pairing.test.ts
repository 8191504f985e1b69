import { beforeAll, describe, expect, it } from "vitest";
import { HighsSolver } from "../../../core/solver.js";
import { LoadingPair } from "./pairing.js";

// Figure 12 in ms: 7 layers, one layer-computation of the mean batch = 10 ms (a 70 ms batch alone), a layer loads
// in 60 ms (six computations) and layer 1 is there at the episode start.
const arrivals = Array.from({ length: 7 }, (_, k) => 1000 + k * 60);
const six = Array.from({ length: 6 }, () => ({ tokens: 100, aloneMs: 70 }));

describe("LoadingPair: a loading instance shares a serving one's prefill (BlitzScale §5.2)", () => {
  let solver: HighsSolver;
  beforeAll(async () => {
    solver = await HighsSolver.create();
  });

  it("best effort turns Figure 12 into ends 70, 130, …, 370 ms after the start (latencies 7, 13, …, 37 units)", () => {
    const p = new LoadingPair({ scheduler: "best-effort", layerArrivalMs: arrivals, hopMsPerToken: 0, groups: 7 });
    expect(p.plan(1000, six).map((t) => t - 1000)).toEqual([70, 130, 190, 250, 310, 370]);
    expect(p.episodes[0]!.targetGroups).toEqual([1, 1, 1, 1, 1, 1]);
  });

  it("zigzag's ILP gives 70, 120, 170, 210, 240, 270 ms: no batch past the 320 ms SLO that best effort's batch 6 misses", () => {
    const p = new LoadingPair({ scheduler: "zigzag", layerArrivalMs: arrivals, hopMsPerToken: 0, groups: 7, solver, timeLimitS: 30 });
    const ends = p.plan(1000, six).map((t) => Math.round(t - 1000));
    expect(ends).toEqual([70, 120, 170, 210, 240, 270]);
    expect(p.episodes[0]!.used).toBe("zigzag");
  });

  it("a split batch pays the activation hop; a batch all on the source does not; the pairing ends when the last layer lands", () => {
    const p = new LoadingPair({ scheduler: "best-effort", layerArrivalMs: arrivals, hopMsPerToken: 0.01, groups: 7 });
    expect(p.plan(1000, [{ tokens: 100, aloneMs: 70 }])[0]! - 1000).toBeCloseTo(71, 9);
    // before layer 1 arrives the target holds nothing: the source runs it all, no hop
    expect(p.plan(0, [{ tokens: 100, aloneMs: 70 }])).toEqual([70]);
    expect(p.active(1359)).toBe(true);
    expect(p.active(1360)).toBe(false);
  });

  it("layers are grouped (16 by default): a 32-layer model's group g lands with its last layer", () => {
    const p = new LoadingPair({ scheduler: "best-effort", layerArrivalMs: Array.from({ length: 32 }, (_, k) => k), hopMsPerToken: 0 });
    // at start 1, layers 0 and 1 are there: group 0 (layers 0–1) is loaded
    expect(p.plan(1, [{ tokens: 10, aloneMs: 16 }])).toEqual([1 + 16]);
    expect(p.episodes[0]!.targetGroups).toEqual([1]);
    expect(() => new LoadingPair({ scheduler: "zigzag", layerArrivalMs: [0], hopMsPerToken: 0 })).toThrow(/solver/);
  });
});

describe("LoadingPair: the pair's KV reach", () => {
  it("the source's cache holds G/(G − T) times the tokens, T the target's groups up to half", () => {
    const p = new LoadingPair({ scheduler: "best-effort", layerArrivalMs: Array.from({ length: 8 }, (_, k) => 100 * (k + 1)), hopMsPerToken: 0, groups: 8 });
    expect(p.kvScale(50)).toBe(1);
    expect(p.kvScale(100)).toBeCloseTo(8 / 7, 12);
    expect(p.kvScale(400)).toBe(2);
    expect(p.kvScale(790)).toBe(2);
  });

  it("a zigzag solve that finds nothing in time leaves best effort's split: the episode is planned, never lost", () => {
    const nothing = { solve: () => ({ status: "time_limit" as const, objective: Number.NaN, bound: Number.NaN, gap: Number.NaN, solveMs: 50 }) };
    const p = new LoadingPair({ scheduler: "zigzag", layerArrivalMs: arrivals, hopMsPerToken: 0, groups: 7, solver: nothing });
    expect(p.plan(1000, six).map((t) => t - 1000)).toEqual([70, 130, 190, 250, 310, 370]);
    expect(p.episodes[0]!.used).toBe("best-effort");
    expect(p.solveFailures).toBe(1);
    expect(p.zigzagPlanned).toBe(0);
  });
});
