import { describe, expect, it, beforeAll } from "vitest";
import type { Fleet } from "./fleet.js";
import { buildIlp, columnsFromTargets, maxViolation, type Demand } from "./ilp.js";
import { decompose } from "./decompose.js";
import { HighsSolver } from "../core/solver.js";
import { solvePlan } from "./solve.js";
import { syntheticFleet } from "./synthetic.js";
import { spotActions } from "./spot.js";

let solver: HighsSolver;
beforeAll(async () => {
  solver = await HighsSolver.create();
});

/** Two regions, one GPU type, one model: 1 instance = 100 tokens/s on 1 GPU, holding 1, start 0.5. */
function tiny(over: { capA?: number; capB?: number; nA?: number; nB?: number; minA?: number; maxA?: number; alpha?: number } = {}): Fleet {
  return {
    alpha: over.alpha ?? 0.5,
    beta: 0,
    gpus: { g: { holdPerGpu: 1, vmStartPerGpu: 0.25 } },
    models: { m: { g: { gpusPerInstance: 1, tokensPerS: 100, modelStartCost: 0.25 } } },
    regions: [
      { name: "a", capacity: { g: over.capA ?? 100 }, endpoints: [{ model: "m", gpu: "g", instances: over.nA ?? 0, minInstances: over.minA ?? 0, maxInstances: over.maxA ?? 100, spotInstances: 0 }] },
      { name: "b", capacity: { g: over.capB ?? 100 }, endpoints: [{ model: "m", gpu: "g", instances: over.nB ?? 0, minInstances: 0, maxInstances: 100, spotInstances: 0 }] },
    ],
  };
}

function targetsOf(fleet: Fleet, demand: Demand[]) {
  const model = buildIlp(fleet, demand);
  const sol = solvePlan(model, solver);
  return { model, sol, byRegion: Object.fromEntries(model.endpoints.map((e, i) => [e.region, sol.targets[i]!])) };
}

describe("ILP on hand-solved cases", () => {
  it("a region short of capacity re-routes the rest to another region", () => {
    // Demand 600 tokens/s in a; a holds only 4 GPUs. α = 0.5 needs ≥ 300 in a (3 instances); global needs 600 → 2 more in b.
    const { byRegion, sol } = targetsOf(tiny({ capA: 4 }), [{ model: "m", region: "a", tokensPerS: 600 }]);
    expect(sol.status).toBe("optimal");
    expect(byRegion.a! + byRegion.b!).toBe(6);
    expect(byRegion.a).toBe(4);
    expect(byRegion.b).toBe(2);
  });

  it("an idle instance is removed (the holding cost makes it worth it)", () => {
    const { byRegion } = targetsOf(tiny({ nA: 3, nB: 2 }), [{ model: "m", region: "a", tokensPerS: 250 }, { model: "m", region: "b", tokensPerS: 0 }]);
    // 250 tokens/s need 3 instances in total; b's two are idle and go; a keeps 3.
    expect(byRegion).toEqual({ a: 3, b: 0 });
  });

  it("keeps existing instances rather than starting new ones elsewhere", () => {
    const { byRegion } = targetsOf(tiny({ nB: 2 }), [{ model: "m", region: "a", tokensPerS: 200 }]);
    // α·200 = 100 in a (1 instance); the second can be b's existing one (no start cost).
    expect(byRegion).toEqual({ a: 1, b: 1 });
  });

  it("a capacity limit binds and what cannot be met is reported as slack", () => {
    const { model, sol, byRegion } = targetsOf(tiny({ capA: 2, capB: 1 }), [{ model: "m", region: "a", tokensPerS: 1000 }]);
    expect(byRegion).toEqual({ a: 2, b: 1 });
    const x = columnsFromTargets(model, sol.targets);
    // global cover: 1000 − 300 = 700 unmet; regional: 500 − 200 = 300 unmet
    const slacks = Array.from(x.slice(model.firstSlackCol));
    expect(slacks.reduce((s, v) => s + v, 0)).toBeCloseTo(1000, 6);
  });

  it("min and max instances hold as bounds", () => {
    const low = targetsOf(tiny({ minA: 2 }), [{ model: "m", region: "a", tokensPerS: 0 }]);
    expect(low.byRegion.a).toBe(2);
    const high = targetsOf(tiny({ maxA: 1 }), [{ model: "m", region: "a", tokensPerS: 400 }]);
    expect(high.byRegion.a).toBe(1);
    expect(high.byRegion.b).toBe(3);
  });

  it("the decomposition finds the same optimum on the hand-solved cases", () => {
    for (const [fleet, demand] of [
      [tiny({ capA: 4 }), [{ model: "m", region: "a", tokensPerS: 600 }]],
      [tiny({ nA: 3, nB: 2 }), [{ model: "m", region: "a", tokensPerS: 250 }]],
      [tiny({ maxA: 1 }), [{ model: "m", region: "a", tokensPerS: 400 }]],
    ] as [Fleet, Demand[]][]) {
      const model = buildIlp(fleet, demand);
      const mip = solvePlan(model, solver);
      const d = decompose(model);
      expect(d.objective).toBeCloseTo(mip.objective, 6);
      expect(maxViolation(model, columnsFromTargets(model, d.targets))).toBeLessThan(1e-6);
    }
  });

  it("large fleets: the decomposition is feasible and within 1% of the HiGHS LP bound (50 × 10 × 4)", () => {
    const { fleet, demand } = syntheticFleet(50, 10, 4, 7);
    const model = buildIlp(fleet, demand);
    const d = decompose(model, { timeLimitMs: 60_000, maxIterations: 300 }); // an iteration budget, not a time limit: deterministic under load
    const lp = solver.solve(model, { relax: true });
    expect(lp.status).toBe("optimal");
    expect(maxViolation(model, columnsFromTargets(model, d.targets))).toBeLessThan(1e-6);
    expect(d.bound).toBeLessThanOrEqual(lp.objective + 1e-6 * lp.objective);
    expect((d.objective - lp.objective) / d.objective).toBeLessThan(0.01);
  });
});

describe("spot", () => {
  it("reclaims the model's own spot first, then other models' spot, and donates idle GPUs", () => {
    const fleet: Fleet = {
      alpha: 1,
      beta: 0,
      gpus: { g: { holdPerGpu: 1, vmStartPerGpu: 0 } },
      models: { m: { g: { gpusPerInstance: 2, tokensPerS: 100, modelStartCost: 0 } }, n: { g: { gpusPerInstance: 1, tokensPerS: 100, modelStartCost: 0 } } },
      regions: [{ name: "a", capacity: { g: 20 }, endpoints: [
        { model: "m", gpu: "g", instances: 0, minInstances: 0, maxInstances: 10, spotInstances: 1 },
        { model: "n", gpu: "g", instances: 2, minInstances: 0, maxInstances: 10, spotInstances: 4 },
      ] }],
    };
    const model = buildIlp(fleet, [{ model: "m", region: "a", tokensPerS: 300 }, { model: "n", region: "a", tokensPerS: 100 }]);
    const { actions, regions } = spotActions(fleet, model.endpoints, [3, 1]);
    expect(actions[0]).toMatchObject({ target: 3, reclaimSameModel: 1, reclaimOtherModel: 2, newInstances: 0 });
    expect(actions[1]).toMatchObject({ target: 1, donate: 1 });
    expect(regions[0]).toMatchObject({ plannedGpus: 7, donatedGpus: 13, reclaimedFrom: { n: 4 } });
  });
});
