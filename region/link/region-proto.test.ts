import { describe, expect, it } from "vitest";
import type { GenerateRequest, RegionTelemetry } from "../../core/ports.js";
import type { RegionListing } from "../gateway/slo-book.js";
import { instancesFromWire, instancesToWire, regionService, requestFromWire, requestToWire, telemetryFromWire, telemetryToWire, type WireInstances, type WireTelemetry } from "./region-proto.js";

/** Through protobuf itself (the service's own serializers), as the gRPC link sends it. */
function overTheWire<T>(method: "Telemetry" | "Instances", w: T): T {
  const def = regionService().service[method]!;
  return def.responseDeserialize(def.responseSerialize(w)) as T;
}

describe("wire conversions", () => {
  it("carry a batch request's flag and the batch share of tokens/s across the link", () => {
    const req: GenerateRequest = { id: "b:000001", model: "m", kind: "completion", promptTokens: 10, maxTokens: 5, priority: 0, batch: true, body: { prompt: "x" } };
    expect(requestFromWire(requestToWire(req))).toEqual(req);
    const interactive: GenerateRequest = { ...req, id: "r1", batch: undefined };
    delete interactive.batch;
    expect(requestFromWire(requestToWire(interactive))).toEqual(interactive);
    const t: RegionTelemetry = { region: "east", seq: 1, atMs: 5, models: [{ model: "m", effectiveMemoryUtilization: 0.5, tokensPerS: 100, batchTokensPerS: 40, demandTokensPerS: 150, running: 1, waiting: 0, instances: { provisioning: 0, loading: 0, serving: 1, draining: 0, spot: 0 }, endpoints: [] }] };
    expect(telemetryFromWire(telemetryToWire(t))).toEqual(t);
  });

  it("carry each model's SLO totals in telemetry through protobuf, and none from a region that sends none", () => {
    const counts = { provisioning: 0, loading: 0, serving: 1, draining: 0, spot: 0 };
    const t: RegionTelemetry = {
      region: "east",
      seq: 7,
      atMs: 1234.5,
      models: [
        { model: "m", effectiveMemoryUtilization: 0.5, tokensPerS: 100, running: 1, waiting: 0, instances: counts, endpoints: [], slo: { requests: 12, met: 9, finished: 10, promptTokens: 5122.5, outputTokens: 1285 } },
        { model: "quiet", effectiveMemoryUtilization: 0, tokensPerS: 0, running: 0, waiting: 0, instances: counts, endpoints: [], slo: { requests: 0, met: 0, finished: 0, promptTokens: 0, outputTokens: 0 } },
        { model: "old", effectiveMemoryUtilization: 0, tokensPerS: 0, running: 0, waiting: 0, instances: counts, endpoints: [] },
      ],
    };
    expect(telemetryFromWire(overTheWire<WireTelemetry>("Telemetry", telemetryToWire(t)))).toEqual(t);
  });

  it("carry the preemptible (batch) share of KV per model and endpoint through protobuf, 0 apart from none (issue 37)", () => {
    const counts = { provisioning: 0, loading: 0, serving: 1, draining: 0, spot: 0 };
    const ep = { endpointId: "m/h100-80gb", gpu: "h100-80gb", effectiveMemoryUtilization: 0.8, servingInstances: 1 };
    const t: RegionTelemetry = {
      region: "east",
      seq: 3,
      atMs: 10,
      models: [
        { model: "m", effectiveMemoryUtilization: 0.8, preemptibleMemoryUtilization: 0.55, tokensPerS: 1, running: 1, waiting: 0, instances: counts, endpoints: [{ ...ep, preemptibleMemoryUtilization: 0.55 }] },
        { model: "idle", effectiveMemoryUtilization: 0, preemptibleMemoryUtilization: 0, tokensPerS: 0, running: 0, waiting: 0, instances: counts, endpoints: [{ ...ep, effectiveMemoryUtilization: 0, preemptibleMemoryUtilization: 0 }] },
        { model: "vllm", effectiveMemoryUtilization: 0.8, tokensPerS: 1, running: 1, waiting: 0, instances: counts, endpoints: [ep] },
      ],
    };
    expect(telemetryFromWire(overTheWire<WireTelemetry>("Telemetry", telemetryToWire(t)))).toEqual(t);
  });

  it("carry each model's SLO in the admin listing through protobuf, and none from a region that sends none", () => {
    const base: RegionListing = { region: "east", actuator: "static", instances: [], nodes: [], failures: [], actions: [] };
    const l: RegionListing = {
      ...base,
      slo: [
        { model: "m", ttftMs: 1000, tpotMs: 100, percentile: 0.95, met: 40, missed: 7, unserved: 3, lastHourRequests: 20, lastHourMet: 15, lastHourAttainment: 0.75, judgedHours: 4, violatedHours: 2 },
        { model: "quiet", ttftMs: 1500, tpotMs: 80, percentile: 0.9, met: 0, missed: 0, unserved: 0, lastHourRequests: 0, lastHourMet: 0, lastHourAttainment: null, judgedHours: 0, violatedHours: 0 },
      ],
    };
    expect(instancesFromWire(overTheWire<WireInstances>("Instances", instancesToWire(l)))).toEqual(l);
    expect(instancesFromWire(overTheWire<WireInstances>("Instances", instancesToWire(base)))).toEqual(base);
  });

  it("carry scale from zero through protobuf: held requests and the expected cold start in telemetry, cold models and cold starts in the listing", () => {
    const counts = { provisioning: 0, loading: 0, serving: 0, draining: 0, spot: 1 };
    const t: RegionTelemetry = {
      region: "east",
      seq: 3,
      atMs: 10,
      models: [
        { model: "cold", effectiveMemoryUtilization: 0, tokensPerS: 0, running: 0, waiting: 0, instances: counts, endpoints: [], cold: { held: 2, expectedMs: 640.5 } },
        { model: "unknown-time", effectiveMemoryUtilization: 0, tokensPerS: 0, running: 0, waiting: 0, instances: counts, endpoints: [], cold: { held: 0 } },
        { model: "warm", effectiveMemoryUtilization: 0, tokensPerS: 0, running: 0, waiting: 0, instances: counts, endpoints: [] },
      ],
    };
    expect(telemetryFromWire(overTheWire<WireTelemetry>("Telemetry", telemetryToWire(t)))).toEqual(t);
    const l: RegionListing = {
      region: "east",
      actuator: "agents",
      instances: [],
      nodes: [],
      failures: [],
      actions: [],
      cold: { models: [{ model: "cold", held: 2, inFlight: 2, idleForMs: 0 }], starts: [{ atMs: 1000, model: "cold", gpu: "h100-80gb", instanceId: "east/n2/cold/x", source: "peer", tookMs: 518.5 }] },
    };
    expect(instancesFromWire(overTheWire<WireInstances>("Instances", instancesToWire(l)))).toEqual(l);
  });
});
