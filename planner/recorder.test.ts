import { describe, expect, it } from "vitest";
import { MemoryHistory } from "../forecasts/history.js";
import type { ModelTelemetry, RegionTelemetry } from "../core/ports.js";
import { TelemetryRecorder } from "./recorder.js";

const model = (name: string, tokensPerS: number): ModelTelemetry => ({
  model: name, effectiveMemoryUtilization: 0.5, tokensPerS, running: 1, waiting: 0,
  instances: { provisioning: 0, loading: 0, serving: 1, draining: 0, spot: 0 }, endpoints: [],
});
const t = (atMs: number, models: ModelTelemetry[]): RegionTelemetry => ({ region: "east", seq: atMs, atMs, models });

describe("TelemetryRecorder", () => {
  it("averages a minute's telemetry and writes it when the next minute starts; skips bad values", async () => {
    const h = new MemoryHistory();
    const r = new TelemetryRecorder(h);
    await r.observe(t(60_000, [model("m", 10), model("n", 1)]));
    await r.observe(t(90_000, [model("m", 30), model("n", Number.NaN)]));
    expect(r.written).toBe(0);
    await r.observe(t(120_000, [model("m", 5), model("n", 2)]));
    expect(r.written).toBe(2);
    expect(await h.series({ kind: "iw", model: "m", region: "east" }, 60_000, 180_000)).toEqual([20, Number.NaN]);
    expect(await h.series({ kind: "iw", model: "n", region: "east" }, 60_000, 120_000)).toEqual([1]);
  });
});

describe("TelemetryRecorder and batch", () => {
  it("records interactive demand only: what batch requests took (batchTokensPerS) is left to the NIW recorder", async () => {
    const h = new MemoryHistory();
    const r = new TelemetryRecorder(h);
    await r.observe(t(0, [{ ...model("m", 100), batchTokensPerS: 30 }]));
    await r.observe(t(30_000, [{ ...model("m", 50), batchTokensPerS: 60 }])); // a report can lag: never below 0
    await r.observe(t(60_000, [model("m", 1)]));
    expect(await h.series({ kind: "iw", model: "m", region: "east" }, 0, 60_000)).toEqual([35]);
  });
});
