import { beforeAll, describe, expect, it } from "vitest";
import { VirtualClock } from "../../core/clock.js";
import type { ModelName } from "../../core/models.js";
import { HighsSolver } from "../../core/solver.js";
import type { ControllerAction } from "../../region/controller/reconciler.js";
import { defaultDataDir } from "../../core/paths.js";
import type { SimEngine } from "../../engines/sim/sim-engine.js";
import { startSimRegion } from "../../region/runtime/sim-region.js";
import { resolveStrategy } from "../../region/strategies/strategy-registry.js";
import { seededRandom } from "../workload/rng.js";
import { BURST_HPA, burstConfig, rescale, runLoading } from "./loading.js";
import { runReplay } from "./run.js";
import { readTrace } from "./traces.js";

// A strategy that never acts (reactive with thresholds it cannot cross) and reads no plan: the tests scale by hand.
const HOLD = resolveStrategy("reactive", { outAbove: 2, inBelow: 0 });
const NO_DELAYS = { spotMedianMs: 0, spotMaxMs: 0, spotSigma: 0, redeployLocalMs: 0, redeployRemoteMs: 0, vmProvisionMs: 0 };

describe("serve while loading in a running region (sim actuator, issue 12)", () => {
  let solver: HighsSolver;
  beforeAll(async () => {
    solver = await HighsSolver.create();
  });

  it("blitzscale: a new instance pairs with the most loaded serving one until its last layer lands, then serves alone", () => {
    const clock = new VirtualClock(0);
    const config = burstConfig("llama2-70b", 2, 4, 48_000);
    const region = startSimRegion({ config, region: "burst", clock, delays: NO_DELAYS, weightsInRegion: ["llama2-70b"], random: seededRandom(1, 0), strategy: HOLD, loading: { source: "blitzscale", solver } });
    const [a, b] = region.actuator.instances().map((i) => region.engine(i.id) as SimEngine);
    // load the second instance more
    for (let k = 0; k < 6; k++) b!.core.submit({ id: `q${k}`, promptTokens: 2000, maxTokens: 50, priority: 0 });
    const t = region.actuator.provision("llama2-70b", "h100-80gb", 4);
    clock.advanceToSync(0);
    expect(b!.core.paired).toBe(true);
    expect(a!.core.paired).toBe(false);
    const ready = region.actuator.get(t.id)!.readyAtMs!;
    // 35 GB per GPU over 100 Gbps: 2.8 s from the one serving source
    expect(ready).toBeCloseTo(2800, -1);
    expect(region.loading!.expectedLoadMs("llama2-70b", "h100-80gb")).toBeCloseTo(2800, -1);
    clock.advanceToSync(ready);
    expect(region.actuator.get(t.id)!.state).toBe("serving");
    expect(b!.core.paired).toBe(false);
    expect(region.loading!.counters).toMatchObject({ scaleOuts: 1, instancesLoaded: 1, pairs: 1 });
    expect(region.loading!.counters.episodes).toBeGreaterThan(0);
    void region.close();
  });

  it("lambdascale: a 1 → 3 scale-out serves as an execution pipeline before any member holds the model, then locally", () => {
    const clock = new VirtualClock(0);
    const config = burstConfig("llama2-70b", 1, 4, 48_000);
    const region = startSimRegion({ config, region: "burst", clock, delays: NO_DELAYS, weightsInRegion: ["llama2-70b"], random: seededRandom(1, 0), strategy: HOLD, loading: { source: "lambdascale" } });
    const ids = [0, 1, 2].map(() => region.actuator.provision("llama2-70b", "h100-80gb", 4).id);
    clock.advanceToSync(0);
    const ready = Math.max(...ids.map((id) => region.actuator.get(id)!.readyAtMs!));
    const pipelineIds = () => region.gateway.instances().map((i) => i.instanceId).filter((id) => id.endsWith("/pipeline"));
    clock.advanceToSync(ready - 1);
    expect(pipelineIds().length).toBeGreaterThan(0);
    expect(ids.every((id) => region.actuator.get(id)!.state === "loading")).toBe(true);
    clock.advanceToSync(ready + 2000);
    expect(ids.every((id) => region.actuator.get(id)!.state === "serving")).toBe(true);
    expect(pipelineIds()).toEqual([]);
    expect(region.loading!.counters.pipelines).toBeGreaterThan(0);
    void region.close();
  });

  it("the ssd source: a host that served the model within 5 minutes loads it over PCIe, a fresh one from SSD", () => {
    const clock = new VirtualClock(0);
    const config = burstConfig("llama3.1-8b", 1, 4, 48_000);
    const region = startSimRegion({ config, region: "burst", clock, delays: NO_DELAYS, weightsInRegion: ["llama3.1-8b"], random: seededRandom(1, 0), strategy: HOLD, loading: { source: "ssd" } });
    const x = region.actuator.provision("llama3.1-8b", "h100-80gb", 2);
    clock.advanceToSync(0);
    // 8 GB per GPU at 10 Gbps
    expect(region.actuator.get(x.id)!.readyAtMs).toBeCloseTo(6400, 0);
    clock.advanceToSync(7000);
    region.actuator.drainToSpot(x.id);
    clock.advanceToSync(9000);
    expect(region.actuator.get(x.id)!.state).toBe("spot");
    region.actuator.reclaimSpot(x.id);
    clock.advanceToSync(9000);
    // 8 GB at 128 Gbps
    expect(region.actuator.get(x.id)!.readyAtMs! - 9000).toBeCloseTo(500, 0);
    expect(region.loading!.counters.cacheHits).toBe(1);
    void region.close();
  });

  it("a reactive controller's scale-outs are not cancelled while they load (no plan reaches a replay)", async () => {
    const trace = rescale(readTrace("azure-code", defaultDataDir()), 2, 300_000);
    const actions: ControllerAction[] = [];
    await runReplay({
      trace,
      config: burstConfig("llama2-70b" as ModelName, 1, 8, 48_000),
      seed: 1,
      wiring: { strategy: resolveStrategy("reactive-hpa", BURST_HPA), delays: NO_DELAYS, loading: { source: "ssd" }, onAction: (_i, a) => actions.push(a) },
    });
    expect(actions.filter((a) => a.kind !== "drain").length).toBeGreaterThan(0);
    expect(actions.filter((a) => a.reason === "initial-deployment-surplus")).toEqual([]);
  });

  it("one trace, two loading sources, the same router, gateway and engines: blitzscale pairs and answers faster than ssd on the 70B", async () => {
    const trace = readTrace("azure-conv", defaultDataDir());
    const base = { trace, model: "llama2-70b", speedup: 4, windowMs: 600_000, startInstances: 1, maxInstances: 16, kvCapacityTokens: 48_000 };
    const ssd = await runLoading({ ...base, loading: { source: "ssd" } });
    const blitz = await runLoading({ ...base, loading: { source: "blitzscale", solver } });
    expect(ssd.requests).toBe(blitz.requests);
    expect(ssd.failed + blitz.failed).toBe(0);
    expect(ssd.counters.scaleOuts).toBeGreaterThan(1);
    expect(blitz.counters.pairs).toBeGreaterThan(0);
    expect(blitz.meanTtftMs).toBeLessThan(ssd.meanTtftMs);
    expect(blitz.gpuHours).toBeGreaterThan(0);
  });
});
