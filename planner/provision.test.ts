/**
 * What the ILP covers (planner provisionFor): the forecast's upper bound by default, the point forecast on request;
 * the targets sent to a region carry the point forecast's share of each target as its floor, over the wire too.
 */
import { describe, expect, it } from "vitest";
import type { Forecast, ForecastInput, Forecaster } from "../forecasts/forecaster.js";
import { MemoryHistory, type DemandSample } from "../forecasts/history.js";
import { targetsFromWire, targetsToWire } from "../region/link/region-proto.js";
import type { Fleet } from "./fleet.js";
import { targetsFor } from "./loop.js";
import { runPlan } from "./plan.js";
import type { PlanReport } from "./report.js";
import { HighsSolver } from "../core/solver.js";

/** A forecaster with a known band: peak 8,000 tokens/s, 10%–90% interval [6,000, 12,000], ramping up to it. */
const fixed: Forecaster = {
  name: "fixed",
  async forecast(input: ForecastInput): Promise<Forecast> {
    const band = { mean: 8000, lower: 6000, upper: 12000 };
    const ramp = [4000, 5000, 6000, 7000, 8000, 8000];
    return { steps: Array.from({ length: input.horizonSteps }, (_, k) => ({ ...band, mean: ramp[k] ?? 8000 })), peak: band, method: "fixed" };
  },
  async close() {},
};

function fleet(provisionFor?: "upper" | "mean"): Fleet {
  return {
    alpha: 1,
    beta: 0,
    ...(provisionFor === undefined ? {} : { provisionFor }),
    gpus: { "h100-80gb": { holdPerGpu: 5, vmStartPerGpu: 0.4 } },
    models: { "llama2-70b": { "h100-80gb": { gpusPerInstance: 4, tokensPerS: 1000, modelStartCost: 0.5 } } },
    regions: [{ name: "us-east", capacity: { "h100-80gb": 128 }, endpoints: [{ model: "llama2-70b", gpu: "h100-80gb", instances: 2, minInstances: 1, maxInstances: 30, spotInstances: 20 }] }],
  };
}

async function plan(provisionFor?: "upper" | "mean"): Promise<PlanReport> {
  const history = new MemoryHistory();
  const samples: DemandSample[] = [];
  for (let i = 0; i < 180; i++) samples.push({ kind: "iw", model: "llama2-70b", region: "us-east", minuteMs: i * 60_000, tokensPerS: 5000 });
  await history.add(samples);
  return runPlan({ fleet: fleet(provisionFor), history, forecaster: fixed, solver: await HighsSolver.create(), nowMs: 180 * 60_000, decisionId: 4 });
}

describe("provisionFor", () => {
  it("covers the upper bound by default and keeps the point forecast's count as the floor", async () => {
    const r = await plan();
    const f = r.forecasts[0]!;
    expect(f.demandTokensPerS).toBe(12000);
    expect(f.pointDemandTokensPerS).toBe(8000);
    expect(r.actions[0]!.target).toBe(12); // 12,000 / 1,000 tokens/s per instance
    const t = targetsFor(r, "us-east");
    // floorSteps: each 10-minute step's point forecast at the same share (⌈12 × step / 12,000⌉): the ramp, step by step;
    // upperSteps: the steps' 90% upper bounds (12,000 each) the same way; demandSteps: each step's band in tokens/s.
    expect(t.endpoints).toEqual([{ model: "llama2-70b", gpu: "h100-80gb", instances: 12, floorInstances: 8, floorSteps: [4, 5, 6, 7, 8, 8], upperSteps: [12, 12, 12, 12, 12, 12], demandSteps: [4000, 5000, 6000, 7000, 8000, 8000].map((mean) => ({ mean, lower: 6000, upper: 12000 })), floorStepMs: 600_000, forecastTokensPerS: 8000 }]);
    // Over the wire (RegionLink gRPC) the floor survives; a planner that sends none (0) means "the target".
    expect(targetsFromWire(targetsToWire(t))).toEqual(t);
    const wire = targetsToWire(t);
    wire.endpoints[0]!.floor_instances = 0;
    expect(targetsFromWire(wire).endpoints[0]!.floorInstances).toBeUndefined();
  });

  it("covers the point forecast with provisionFor mean; the floor is then the target", async () => {
    const r = await plan("mean");
    expect(r.forecasts[0]!.demandTokensPerS).toBe(8000);
    expect(r.actions[0]!.target).toBe(8);
    expect(targetsFor(r, "us-east").endpoints[0]).toMatchObject({ instances: 8, floorInstances: 8 });
  });
});
