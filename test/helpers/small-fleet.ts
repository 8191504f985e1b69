/**
 * The small fleet the live-versus-replay tests share (sim/week/two-shapes.test.ts, test/e2e/live-vs-replay.test.ts):
 * two regions of 16 H100s each serving llama3.1-8b (one instance to start, at most five, two spot instances each),
 * engines of 8 sequences × 1,000 KV tokens so a modest burst fills them, deploy delays of one to four seconds so
 * scaling lands within a short test, and plans every 100 s.
 */
import { parseFleet, type FleetSpec } from "../../sim/week/fleet.js";

export const SMALL_MODEL = "llama3.1-8b";
export const SMALL_REGIONS = ["us-east", "us-west"] as const;

export function smallFleet(): FleetSpec {
  return parseFleet({
    fleet: {
      models: [{ name: SMALL_MODEL, gpusPerInstance: { "h100-80gb": 2 } }],
      regions: SMALL_REGIONS.map((name, i) => ({ name, utcOffsetH: -5 - 3 * i, proximity: SMALL_REGIONS.filter((r) => r !== name), gpus: [{ type: "h100-80gb", count: 16 }], endpoints: [{ model: SMALL_MODEL, gpu: "h100-80gb", instances: 1, minInstances: 1, maxInstances: 5 }] })),
      controller: { maxStepsPerPass: 1 },
      // Plans every 100 s, so LT-U/LT-UA pace their way to each target (and reach their tail) within a test.
      planner: { intervalMs: 100_000 },
    },
    engines: { [SMALL_MODEL]: { maxBatch: 8, kvTokensPerSeq: 1000 } },
    actuator: { spotMedianMs: 800, spotMaxMs: 2000, spotSigma: 0.5, redeployLocalMs: 1500, redeployRemoteMs: 4000, vmProvisionMs: 1000 },
    spot: SMALL_REGIONS.map((region) => ({ region, model: SMALL_MODEL, gpu: "h100-80gb", count: 2 })),
  });
}
