import { describe, expect, it } from "vitest";
import { parseConfig, DEFAULT_CONFIG_JSON } from "../core/config.js";
import type { RegionTelemetry } from "../core/ports.js";
import { fleetFromConfig, liveFleet } from "./fleet.js";
import { fleetEndpoints } from "./ilp.js";
import { withExpectedScaleOut } from "./service.js";
import type { PlanReport } from "./report.js";

describe("liveFleet", () => {
  it("takes current and spot instances per (model, region, GPU) from the regions' telemetry", () => {
    const base = fleetFromConfig(parseConfig(DEFAULT_CONFIG_JSON));
    const t: RegionTelemetry = {
      region: "us-east",
      seq: 1,
      atMs: 0,
      models: [
        {
          model: "llama3.2-3b",
          effectiveMemoryUtilization: 0.2,
          tokensPerS: 10,
          running: 0,
          waiting: 0,
          instances: { provisioning: 1, loading: 1, serving: 3, draining: 1, spot: 4 },
          endpoints: [{ endpointId: "llama3.2-3b/h100-80gb", gpu: "h100-80gb", effectiveMemoryUtilization: 0.2, servingInstances: 3, instances: { provisioning: 1, loading: 1, serving: 3, draining: 1, spot: 4 } }],
        },
        // an older region: no per-endpoint counts → the config's figures stay
        { model: "llama3.1-8b", effectiveMemoryUtilization: 0, tokensPerS: 0, running: 0, waiting: 0, instances: { provisioning: 0, loading: 0, serving: 7, draining: 0, spot: 0 }, endpoints: [{ endpointId: "llama3.1-8b/h100-80gb", gpu: "h100-80gb", effectiveMemoryUtilization: 0, servingInstances: 7 }] },
      ],
    };
    const f = liveFleet(base, new Map([["us-east", t]]));
    const ep = (region: string, model: string) => f.regions.find((r) => r.name === region)!.endpoints.find((e) => e.model === model)!;
    expect(ep("us-east", "llama3.2-3b")).toMatchObject({ instances: 5, spotInstances: 4 });
    expect(ep("us-east", "llama3.1-8b")).toMatchObject({ instances: 2, spotInstances: 0 });
    expect(ep("us-west", "llama3.2-3b")).toMatchObject({ instances: 2, spotInstances: 0 });
    // the base is not modified
    expect(base.regions[0]!.endpoints.find((e) => e.model === "llama3.2-3b")!.instances).toBe(2);
  });

  it("prices a model start from the region's expected scale-out time (the data plane's), not the configured constant", () => {
    const base = fleetFromConfig(parseConfig(DEFAULT_CONFIG_JSON));
    const gpu = "h100-80gb";
    const mg = base.models["llama3.2-3b"]![gpu]!;
    const hold = base.gpus[gpu]!.holdPerGpu;
    const hour = 3_600_000;
    const t = (ms: number): RegionTelemetry => ({
      region: "us-east", seq: 1, atMs: 0,
      models: [{ model: "llama3.2-3b", effectiveMemoryUtilization: 0, tokensPerS: 0, running: 0, waiting: 0, instances: { provisioning: 0, loading: 0, serving: 1, draining: 0, spot: 0 }, endpoints: [{ endpointId: `llama3.2-3b/${gpu}`, gpu, effectiveMemoryUtilization: 0, servingInstances: 1, expectedScaleOutMs: ms }] }],
    });
    const start = (f: ReturnType<typeof liveFleet>, region: string) => fleetEndpoints(f).find((e) => e.region === region && e.model === "llama3.2-3b")!.startCost;
    const vm = base.gpus[gpu]!.vmStartPerGpu * mg.gpusPerInstance;
    // 36 s of scale-out in a one-hour interval: 1% of the instance's hourly hold price
    const fast = liveFleet(base, new Map([["us-east", t(36_000)]]), hour);
    expect(start(fast, "us-east")).toBeCloseTo(vm + hold * mg.gpusPerInstance * 0.01, 9);
    // a region that loads 10× slower pays 10× the model start
    const slow = liveFleet(base, new Map([["us-east", t(360_000)]]), hour);
    expect(start(slow, "us-east") - vm).toBeCloseTo(10 * (start(fast, "us-east") - vm), 9);
    // a region that reported nothing keeps the configured constant; so does a call without the interval
    expect(start(fast, "us-west")).toBeCloseTo(vm + mg.modelStartCost, 9);
    expect(start(liveFleet(base, new Map([["us-east", t(36_000)]])), "us-east")).toBeCloseTo(vm + mg.modelStartCost, 9);
  });

  it("copies each endpoint's expected scale-out time from its region's telemetry into the plan's actions", () => {
    const t: RegionTelemetry = {
      region: "us-east", seq: 1, atMs: 0,
      models: [{ model: "llama3.2-3b", effectiveMemoryUtilization: 0, tokensPerS: 0, running: 0, waiting: 0, instances: { provisioning: 0, loading: 0, serving: 1, draining: 0, spot: 0 }, endpoints: [{ endpointId: "llama3.2-3b/h100-80gb", gpu: "h100-80gb", effectiveMemoryUtilization: 0, servingInstances: 1, expectedScaleOutMs: 1234 }] }],
    };
    const report = { actions: [{ model: "llama3.2-3b", region: "us-east", gpu: "h100-80gb" }, { model: "llama3.2-3b", region: "us-west", gpu: "h100-80gb" }] } as unknown as PlanReport;
    withExpectedScaleOut(report, new Map([["us-east", t]]));
    expect(report.actions[0]!.expectedScaleOutMs).toBe(1234);
    expect(report.actions[1]!.expectedScaleOutMs).toBeUndefined();
  });
});
