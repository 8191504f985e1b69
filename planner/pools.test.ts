/**
 * A disaggregated model's pools in the hourly plan (pools.ts): each planned as a unit of its own with its role's
 * tps, ⌈α·F / tps⌉ instances each (Dynamo's num_p and num_d), heard back by the region as (model, gpu, role) targets,
 * over the wire too.
 */
import { describe, expect, it } from "vitest";
import { parseConfig } from "../core/config.js";
import { sloFor } from "../core/config/slo-section.js";
import type { Forecast, ForecastInput, Forecaster } from "../forecasts/forecaster.js";
import { MemoryHistory, type DemandSample } from "../forecasts/history.js";
import { regionService, targetsFromWire, targetsToWire, telemetryFromWire, telemetryToWire } from "../region/link/region-proto.js";
import type { InstanceRecord, RuntimeActuator } from "../region/actuator/port.js";
import { withActuatorCounts } from "../region/runtime/runtime.js";
import type { RegionTelemetry } from "../core/ports.js";
import { DEFAULT_MIX } from "./capacity.js";
import { fleetFromConfig, liveFleet } from "./fleet.js";
import { renderPlanHtml } from "./html.js";
import { targetsFor } from "./loop.js";
import { runPlan } from "./plan.js";
import { poolDemand, poolModel, poolTokensPerS, splitPoolModel } from "./pools.js";
import { HighsSolver } from "../core/solver.js";

const flat: Forecaster = {
  name: "flat",
  async forecast(input: ForecastInput): Promise<Forecast> {
    const band = { mean: 22_000, lower: 22_000, upper: 22_000 };
    return { steps: Array.from({ length: input.horizonSteps }, () => band), peak: band, method: "flat" };
  },
  async close() {},
};

const ep = { model: "llama2-70b", gpu: "h100-80gb", instances: 1, minInstances: 1, maxInstances: 40 };
const config = parseConfig({
  models: [{ name: "llama2-70b", gpusPerInstance: { "h100-80gb": 4 } }],
  regions: [
    { name: "us-east", gpus: [{ type: "h100-80gb", count: 256 }], endpoints: [{ ...ep, role: "prefill" }, { ...ep, role: "decode" }] },
    { name: "us-west", gpus: [{ type: "h100-80gb", count: 64 }], endpoints: [ep] },
  ],
  planner: { alpha: 1, beta: 0 },
});

describe("P/D pools in the plan (pools.ts)", () => {
  it("keys a pool model#role and splits it back; a region's pools each get the whole demand, other regions theirs", () => {
    expect(poolModel("m", "prefill")).toBe("m#prefill");
    expect(poolModel("m", undefined)).toBe("m");
    expect(splitPoolModel("m#decode")).toEqual({ model: "m", role: "decode" });
    expect(splitPoolModel("m")).toEqual({ model: "m" });
    const fleet = fleetFromConfig(config);
    expect(fleet.regions[0]!.endpoints.map((e) => e.model)).toEqual(["llama2-70b#prefill", "llama2-70b#decode"]);
    expect(poolDemand(fleet, [{ model: "llama2-70b", region: "us-east", tokensPerS: 7 }, { model: "llama2-70b", region: "us-west", tokensPerS: 3 }])).toEqual([
      { model: "llama2-70b#prefill", region: "us-east", tokensPerS: 7 },
      { model: "llama2-70b#decode", region: "us-east", tokensPerS: 7 },
      { model: "llama2-70b", region: "us-west", tokensPerS: 3 },
    ]);
  });

  it("plans ⌈F / tps⌉ of each pool (Dynamo's num_p, num_d) and the region hears (model, gpu, role) targets", async () => {
    const fleet = fleetFromConfig(config);
    const slo = sloFor(config.slo, "llama2-70b");
    const tpsP = poolTokensPerS("llama2-70b", "h100-80gb", 4, "prefill", slo, DEFAULT_MIX);
    const tpsD = poolTokensPerS("llama2-70b", "h100-80gb", 4, "decode", slo, DEFAULT_MIX);
    expect(fleet.models["llama2-70b#prefill"]!["h100-80gb"]!.tokensPerS).toBeCloseTo(tpsP, 9);
    expect(fleet.models["llama2-70b#decode"]!["h100-80gb"]!.tokensPerS).toBeCloseTo(tpsD, 9);
    const history = new MemoryHistory();
    const samples: DemandSample[] = [];
    for (let i = 0; i < 180; i++) for (const region of ["us-east", "us-west"]) samples.push({ kind: "iw", model: "llama2-70b", region, minuteMs: i * 60_000, tokensPerS: 22_000 });
    await history.add(samples);
    const r = await runPlan({ fleet, history, forecaster: flat, solver: await HighsSolver.create(), nowMs: 180 * 60_000, decisionId: 1 });
    const target = (model: string, region: string) => r.actions.find((a) => a.model === model && a.region === region)!.target;
    expect(target("llama2-70b#prefill", "us-east")).toBe(Math.ceil(22_000 / tpsP));
    expect(target("llama2-70b#decode", "us-east")).toBe(Math.ceil(22_000 / tpsD));
    const t = targetsFor(r, "us-east");
    expect(t.endpoints.map((e) => [e.model, e.role, e.instances, e.forecastTokensPerS])).toEqual([
      ["llama2-70b", "prefill", Math.ceil(22_000 / tpsP), 22_000],
      ["llama2-70b", "decode", Math.ceil(22_000 / tpsD), 22_000],
    ]);
    expect(targetsFromWire(targetsToWire(t))).toEqual(t);
    // The plan page lists both pools, each with its count.
    const html = renderPlanHtml(r);
    expect(html).toContain("llama2-70b · prefill pool");
    expect(html).toContain("llama2-70b · decode pool");
    expect(targetsFor(r, "us-west").endpoints[0]!.role).toBeUndefined();
  });

  it("takes each pool's current instances from the region's telemetry (the actuator's counts per role), over the wire too", () => {
    const inst = (state: InstanceRecord["state"], role?: "prefill" | "decode"): InstanceRecord => ({ id: `i${Math.random()}`, region: "us-east", gpu: "h100-80gb", gpus: 4, model: "llama2-70b", state, enteredAtMs: 0, ...(role === undefined ? {} : { role }) });
    const instances = [inst("serving", "prefill"), inst("serving", "prefill"), inst("loading", "prefill"), ...Array.from({ length: 5 }, () => inst("serving", "decode")), inst("draining", "decode"), inst("spot"), inst("spot")];
    const actuator = { instances: () => instances, expectedScaleOutMs: () => undefined } as unknown as RuntimeActuator;
    const gateway: RegionTelemetry = {
      region: "us-east", seq: 1, atMs: 0,
      models: [{ model: "llama2-70b", effectiveMemoryUtilization: 0.3, tokensPerS: 0, running: 0, waiting: 0, instances: { provisioning: 0, loading: 0, serving: 7, draining: 0, spot: 0 }, endpoints: [{ endpointId: "llama2-70b/h100-80gb", gpu: "h100-80gb", effectiveMemoryUtilization: 0.3, servingInstances: 7 }] }],
    };
    // Through the Telemetry stream's own (de)serializer: the protobuf bytes a global router reads.
    const method = regionService().service.Telemetry!;
    const wire = (x: RegionTelemetry) => telemetryFromWire(method.responseDeserialize(method.responseSerialize(telemetryToWire(x))) as Parameters<typeof telemetryFromWire>[0]);
    const t = wire(withActuatorCounts(gateway, actuator));
    const e = t.models[0]!.endpoints[0]!;
    expect(e.instances).toEqual({ provisioning: 0, loading: 1, serving: 7, draining: 1, spot: 2 });
    expect(e.pools).toEqual({ prefill: { provisioning: 0, loading: 1, serving: 2, draining: 0, spot: 0 }, decode: { provisioning: 0, loading: 0, serving: 5, draining: 1, spot: 0 } });
    const base = fleetFromConfig(config);
    const live = liveFleet(base, new Map([["us-east", t]]));
    const pool = (role: "prefill" | "decode") => live.regions.find((r) => r.name === "us-east")!.endpoints.find((x) => x.model === poolModel("llama2-70b", role))!;
    // provisioning + loading + serving: 3 prefill, 5 decode (the config says 1 each)
    expect(pool("prefill").instances).toBe(3);
    expect(pool("decode").instances).toBe(5);
    // A region that reports the endpoint's counts but no decode instance: that pool has none.
    const noDecode = wire(withActuatorCounts(gateway, { ...actuator, instances: () => instances.filter((i) => i.role !== "decode") } as RuntimeActuator));
    expect(liveFleet(base, new Map([["us-east", noDecode]])).regions[0]!.endpoints.find((x) => x.model === poolModel("llama2-70b", "decode"))!.instances).toBe(0);
    // A region that sent no telemetry keeps the config's counts.
    expect(liveFleet(base, new Map()).regions[0]!.endpoints.find((x) => x.model === poolModel("llama2-70b", "prefill"))!.instances).toBe(1);
  });
});
