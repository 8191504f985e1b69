import { describe, expect, it } from "vitest";
import { capacitySignals, requestPriority, slotsForUtilization } from "./policy.js";
import type { RegionTelemetry } from "../../core/ports.js";

const T = { dispatchOneBelow: 0.6, dispatchTwoBelow: 0.5 };

describe("SageServe §6.3 dispatch policy", () => {
  it("sends two below 0.50, one below 0.60, none at or above 0.60 or on unknown utilization", () => {
    expect([0, 0.2, 0.4999, 0.5, 0.55, 0.5999, 0.6, 0.7, 1.3].map((u) => slotsForUtilization(u, T))).toEqual([2, 2, 2, 1, 1, 1, 0, 0, 0]);
    expect([Number.NaN, Number.POSITIVE_INFINITY, -0.1].map((u) => slotsForUtilization(u, T))).toEqual([0, 0, 0]);
    expect(slotsForUtilization(0.65, { dispatchOneBelow: 0.7, dispatchTwoBelow: 0.4 })).toBe(1);
  });

  it("promotes requests to priority 0 once they are promoteAfterMs old", () => {
    const tenH = 10 * 3600_000;
    expect(requestPriority(0, tenH - 1, tenH)).toBe(1);
    expect(requestPriority(0, tenH, tenH)).toBe(0);
    expect(requestPriority(1000, 1000, tenH)).toBe(1);
  });

  it("sums endpoint slots per model, skipping models not queued and endpoints with no serving instance", () => {
    const report: RegionTelemetry = {
      region: "us-east", seq: 1, atMs: 0,
      models: [
        { model: "a", effectiveMemoryUtilization: 0.5, tokensPerS: 0, running: 0, waiting: 0, instances: { provisioning: 0, loading: 0, serving: 3, draining: 0, spot: 0 },
          endpoints: [
            { endpointId: "a/h100", gpu: "h100-80gb", effectiveMemoryUtilization: 0.3, servingInstances: 2 },
            { endpointId: "a/a100", gpu: "a100-80gb", effectiveMemoryUtilization: 0.55, servingInstances: 1 },
            { endpointId: "a/cold", gpu: "a100-80gb", effectiveMemoryUtilization: 0, servingInstances: 0 },
          ] },
        { model: "b", effectiveMemoryUtilization: 0.9, tokensPerS: 0, running: 0, waiting: 0, instances: { provisioning: 0, loading: 0, serving: 1, draining: 0, spot: 0 },
          endpoints: [{ endpointId: "b/h100", gpu: "h100-80gb", effectiveMemoryUtilization: 0.9, servingInstances: 1 }] },
        { model: "c", effectiveMemoryUtilization: 0.1, tokensPerS: 0, running: 0, waiting: 0, instances: { provisioning: 0, loading: 0, serving: 1, draining: 0, spot: 0 },
          endpoints: [{ endpointId: "c/h100", gpu: "h100-80gb", effectiveMemoryUtilization: 0.1, servingInstances: 1 }] },
      ],
    };
    const s = capacitySignals(report, new Set(["a", "b"]), T);
    expect(s.map((x) => [x.region, x.model, x.slots])).toEqual([["us-east", "a", 3]]);
  });
});
