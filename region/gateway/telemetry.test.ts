import { describe, expect, it } from "vitest";
import type { EngineStats } from "../../core/ports.js";
import { modelTelemetry, preemptibleMemoryUtilization, type InstanceSample } from "./telemetry.js";

const stats = (used: number, preemptible?: number, stale = false): EngineStats => ({
  kvBytesUsed: used,
  kvBytesCapacity: 100,
  running: 0,
  waiting: 0,
  remainingTokens: 0,
  generatedTokensTotal: 0,
  ...(preemptible === undefined ? {} : { preemptibleKvBytes: preemptible }),
  ...(stale ? { stale: true } : {}),
});

describe("preemptible (batch) KV apart from interactive (issue 37)", () => {
  it("sums preemptible KV over serving instances, only when every serving one reports it and none is stale", () => {
    const a: InstanceSample = { endpointId: "e1", state: "serving", stats: stats(80, 60) };
    const b: InstanceSample = { endpointId: "e1", state: "serving", stats: stats(20, 0) };
    const loading: InstanceSample = { endpointId: "e1", state: "loading", stats: stats(0) };
    expect(preemptibleMemoryUtilization([a, b, loading])).toBeCloseTo(0.3, 12); // 60 / 200
    expect(preemptibleMemoryUtilization([a, { ...b, stats: stats(20) }])).toBeUndefined(); // b does not say
    expect(preemptibleMemoryUtilization([a, { ...b, stats: stats(20, 10, true) }])).toBeUndefined(); // stale
    expect(preemptibleMemoryUtilization([loading])).toBeUndefined();
  });

  it("modelTelemetry reports it per endpoint and per model beside the whole utilization", () => {
    const t = modelTelemetry("m", [{ endpointId: "e1", gpu: "h100-80gb" }, { endpointId: "e2", gpu: "a100-80gb" }], [
      { endpointId: "e1", state: "serving", stats: stats(90, 70) },
      { endpointId: "e2", state: "serving", stats: stats(30) },
    ], 0);
    expect(t.effectiveMemoryUtilization).toBeCloseTo(0.6, 12);
    expect(t.preemptibleMemoryUtilization).toBeUndefined(); // e2's engine does not preempt
    expect(t.endpoints[0]).toMatchObject({ effectiveMemoryUtilization: 0.9, preemptibleMemoryUtilization: 0.7 });
    expect(t.endpoints[1]!.preemptibleMemoryUtilization).toBeUndefined();
  });
});
