// A pipelined endpoint in the region runtime the replays run (region/runtime/sim-region.ts, virtual time): an instance
// that starts serving gets a PipelineEngine on the replay's clock, the same class `tidegate dev` and engine-sim run.
import { describe, expect, it } from "vitest";
import { VirtualClock } from "../../core/clock.js";
import { DEFAULT_CONFIG_JSON, parseConfig } from "../../core/config.js";
import type { GenerateRequest } from "../../core/ports.js";
import { seededRandom } from "../../sim/workload/rng.js";
import { SimEngine } from "../../engines/sim/sim-engine.js";
import { startSimRegion } from "../runtime/sim-region.js";
import { resolveStrategy } from "../strategies/strategy-registry.js";
import { PipelineEngine } from "./pipeline-engine.js";

const NO_DELAYS = { spotMedianMs: 0, spotMaxMs: 0, spotSigma: 0, redeployLocalMs: 0, redeployRemoteMs: 0, vmProvisionMs: 0 };
const HOLD = resolveStrategy("reactive", { outAbove: 2, inBelow: 0 });

describe("a pipelined endpoint in the sim region (week replay's runtime)", () => {
  it("serves through a PipelineEngine whose scaler splits the instance's GPUs; other endpoints stay SimEngines", async () => {
    const base = DEFAULT_CONFIG_JSON as Record<string, unknown>;
    const config = parseConfig({
      ...base,
      models: [{ name: "llama2-70b", gpusPerInstance: { "h100-80gb": 8 } }, { name: "llama3.1-8b", gpusPerInstance: { "h100-80gb": 2 } }],
      regions: [{ name: "r1", gpus: [{ type: "h100-80gb", count: 16 }], endpoints: [{ model: "llama2-70b", gpu: "h100-80gb", instances: 1 }, { model: "llama3.1-8b", gpu: "h100-80gb", instances: 1 }] }],
      controller: { strategy: "keystage" },
      keystage: { pipelines: [{ model: "llama2-70b", gpu: "h100-80gb", layersPerStage: [32, 16, 16, 16], profileTp: 4 }] },
    });
    const clock = new VirtualClock(0);
    const region = startSimRegion({ config, region: "r1", clock, delays: NO_DELAYS, weightsInRegion: ["llama2-70b", "llama3.1-8b"], random: seededRandom(1, 0), strategy: HOLD });
    clock.advanceToSync(0);
    const [pipe, whole] = ["llama2-70b", "llama3.1-8b"].map((m) => region.engine(region.actuator.instances().find((i) => i.model === m)!.id));
    expect(pipe).toBeInstanceOf(PipelineEngine);
    expect(whole).toBeInstanceOf(SimEngine);
    const p = pipe as PipelineEngine;
    expect(p.status()).toMatchObject({ mode: "key-stage", budgetGpus: 8 });

    let done = 0;
    for (let i = 0; i < 40; i++) {
      const req: GenerateRequest = { id: `q${i}`, model: "llama2-70b", kind: "chat", promptTokens: 512, maxTokens: 32, priority: 0, body: {} };
      region.gateway.submit(req, { onDone: () => done++ });
    }
    clock.advanceToSync(600_000);
    expect(done).toBe(40);
    const s = p.status();
    expect(s.scaler.added).toBeGreaterThan(0);
    expect(s.heldGpus).toBeLessThanOrEqual(8);
    expect(region.gateway.instances().every((i) => i.inFlight === 0)).toBe(true);
    await region.close();
  });
});
