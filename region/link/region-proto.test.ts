import { describe, expect, it } from "vitest";
import type { GenerateRequest, RegionTelemetry } from "../../core/ports.js";
import { requestFromWire, requestToWire, telemetryFromWire, telemetryToWire } from "./region-proto.js";

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
});
