/**
 * Capacity at the SLO in the planner (issue 31): the SLO window over region telemetry, the fleet's capacities from
 * the config and from fleet files, sizing at the reported mix, corrections, the report section, and planRound
 * putting them together.
 */
import { describe, expect, it } from "vitest";
import { VirtualClock } from "../core/clock.js";
import { DEFAULT_CONFIG_JSON, parseConfig } from "../core/config.js";
import { createLogger } from "../core/log.js";
import type { ModelTelemetry, RegionTelemetry } from "../core/ports.js";
import { capacityAtSlo } from "../core/perf/slo-capacity.js";
import { HighsSolver } from "../core/solver.js";
import { MemoryHistory } from "../forecasts/history.js";
import { createForecaster } from "../forecasts/registry.js";
import { fleetFromConfig, parseFleet, type Fleet } from "./fleet.js";
import type { PlanReport } from "./report.js";
import { planRound } from "./service.js";
import { applyCorrections, correctionsFor, sizeAtSlo, sloReport } from "./slo-round.js";
import { latestMix, SloWindow } from "./slo-window.js";

const SLO = { ttftMs: 1000, tpotMs: 100, percentile: 0.95 };

function model(name: string, tokensPerS: number, serving: Record<string, number>, slo?: ModelTelemetry["slo"]): ModelTelemetry {
  const n = Object.values(serving).reduce((a, b) => a + b, 0);
  return {
    model: name, effectiveMemoryUtilization: 0.5, tokensPerS, running: 0, waiting: 0,
    instances: { provisioning: 0, loading: 0, serving: n, draining: 0, spot: 0 },
    endpoints: Object.entries(serving).map(([gpu, k]) => ({ endpointId: `${name}/${gpu}`, gpu, effectiveMemoryUtilization: 0.5, servingInstances: k })),
    ...(slo === undefined ? {} : { slo }),
  };
}
const tel = (region: string, atMs: number, models: ModelTelemetry[]): RegionTelemetry => ({ region, seq: atMs, atMs, models });

describe("SloWindow", () => {
  it("sums what each report adds to the region's previous one, and weighs mix, load per instance and GPU shares by requests; take empties it", () => {
    const w = new SloWindow();
    expect(w.take()).toBeUndefined();
    // A region's first report only sets its baseline (totals since it started are not this hour's).
    w.observe(tel("east", 500, [model("m", 1, { h100: 2 }, { requests: 7, met: 7, finished: 7, promptTokens: 700, outputTokens: 70 })]));
    w.observe(tel("west", 500, [model("m", 1, { a100: 1 }, { requests: 0, met: 0, finished: 0, promptTokens: 0, outputTokens: 0 })]));
    w.observe(tel("east", 1000, [model("m", 6000, { h100: 2 }, { requests: 107, met: 97, finished: 107, promptTokens: 100_700, outputTokens: 20_070 }), model("old", 50, { h100: 1 })]));
    w.observe(tel("west", 2000, [model("m", 1000, { a100: 1 }, { requests: 300, met: 300, finished: 300, promptTokens: 600_000, outputTokens: 30_000 })]));
    // Nothing new since the last report: it adds nothing (and its load weighs nothing).
    w.observe(tel("west", 3000, [model("m", 9999, { a100: 1 }, { requests: 300, met: 300, finished: 300, promptTokens: 600_000, outputTokens: 30_000 })]));
    const h = w.take()!;
    expect([h.fromMs, h.toMs]).toEqual([500, 3000]);
    expect([...h.models.keys()]).toEqual(["m"]); // "old" reports no slo
    const m = h.models.get("m")!;
    expect(m).toMatchObject({ requests: 400, met: 390, mix: { promptTokens: 1750, outputTokens: 125 } });
    expect(m.tokensPerSPerInstance).toBeCloseTo((100 * 3000 + 300 * 1000) / 400, 9);
    expect(m.gpuShare).toEqual({ h100: 0.25, a100: 0.75 });
    expect(w.take()).toBeUndefined();
  });

  it("counts a region that restarted (its totals went down) from zero", () => {
    const w = new SloWindow();
    w.observe(tel("east", 0, [model("m", 1, { g: 1 }, { requests: 50, met: 50, finished: 50, promptTokens: 5000, outputTokens: 500 })]));
    w.observe(tel("east", 1000, [model("m", 1, { g: 1 }, { requests: 4, met: 3, finished: 4, promptTokens: 400, outputTokens: 40 })]));
    expect(w.take()!.models.get("m")).toMatchObject({ requests: 4, met: 3, mix: { promptTokens: 100, outputTokens: 10 } });
  });

  it("latestMix weighs the regions' latest totals by finished requests", () => {
    const t = new Map([
      ["east", tel("east", 0, [model("m", 1, { g: 1 }, { requests: 1, met: 1, finished: 1, promptTokens: 100, outputTokens: 10 })])],
      ["west", tel("west", 0, [model("m", 1, { g: 1 }, { requests: 3, met: 3, finished: 3, promptTokens: 1500, outputTokens: 150 }), model("n", 1, { g: 1 }, { requests: 2, met: 2, finished: 0, promptTokens: 0, outputTokens: 0 })])],
    ]);
    expect([...latestMix(t)]).toEqual([["m", { promptTokens: 400, outputTokens: 40 }]]);
  });
});

describe("the fleet at the SLO", () => {
  it("fleetFromConfig derives each capacity at the model's SLO and records how", () => {
    const config = parseConfig({ ...(DEFAULT_CONFIG_JSON as object), slo: { models: { "llama2-70b": { ttftMs: 2000 } } }, engines: { models: { "llama3.1-8b": { maxBatch: 8 } } } });
    const f = fleetFromConfig(config);
    expect(f.slo!["llama2-70b"]).toEqual({ ttftMs: 2000, tpotMs: 100, percentile: 0.95 });
    expect(f.slo!["bloom-176b"]).toEqual(SLO);
    const mg = f.models["llama2-70b"]!["h100-80gb"]!;
    const c = capacityAtSlo("llama2-70b", "h100-80gb", 4, { ttftMs: 2000, tpotMs: 100, percentile: 0.95 }, { promptTokens: 1155, outputTokens: 211 });
    expect(mg.tokensPerS).toBe(c.tokensPerS);
    expect(mg.capacity).toMatchObject({ predictedTokensPerS: c.tokensPerS, correction: 1, batch: c.batch, requestsPerS: c.requestsPerS, derivation: c.derivation, mix: { promptTokens: 1155, outputTokens: 211, source: "default" } });
    // The simulated engines' max batch caps the batch.
    expect(f.models["llama3.1-8b"]!["h100-80gb"]!.capacity).toMatchObject({ batch: 8, limits: { maxBatch: 8 } });
  });

  it("a config SLO no instance can meet is rejected naming the path", () => {
    expect(() => fleetFromConfig(parseConfig({ ...(DEFAULT_CONFIG_JSON as object), slo: { models: { "bloom-176b": { ttftMs: 5 } } } }))).toThrow(/slo\.models\.bloom-176b.*cannot meet it/);
  });

  const file = (slo: object, entry: object = {}) => ({ slo, gpus: { "h100-80gb": {} }, models: { "llama2-70b": { "h100-80gb": { gpusPerInstance: 4, ...entry } } }, regions: [{ name: "r", capacity: { "h100-80gb": 8 }, endpoints: [{ model: "llama2-70b", gpu: "h100-80gb" }] }] });

  it("a fleet file's slo reads tbtMs as tpotMs, accepts tpotMs and a percentile, not both names", () => {
    const old = parseFleet(file({ ttftMs: 1500, tbtMs: 80 }));
    expect(old.slo!["llama2-70b"]).toEqual({ ttftMs: 1500, tpotMs: 80, percentile: 0.95 });
    expect(old.models["llama2-70b"]!["h100-80gb"]!.tokensPerS).toBe(capacityAtSlo("llama2-70b", "h100-80gb", 4, { ttftMs: 1500, tpotMs: 80, percentile: 0.95 }, { promptTokens: 1155, outputTokens: 211 }).tokensPerS);
    expect(parseFleet(file({ tpotMs: 80, percentile: 0.9 })).slo!["llama2-70b"]).toEqual({ ttftMs: 1000, tpotMs: 80, percentile: 0.9 });
    expect(() => parseFleet(file({ tpotMs: 80, tbtMs: 80 }))).toThrow(/slo\.tbtMs.*give tpotMs only/);
    expect(() => parseFleet(file({ ttftMs: 5 }))).toThrow(/models\.llama2-70b\.h100-80gb\.tokensPerS.*cannot meet the SLO/);
    // A given tokensPerS stays as given, without a derivation.
    expect(parseFleet(file({}, { tokensPerS: 1234 })).models["llama2-70b"]!["h100-80gb"]).toEqual({ gpusPerInstance: 4, tokensPerS: 1234, modelStartCost: 0.5 });
  });
});

describe("a round's sizing, corrections and report section", () => {
  const base = (): Fleet => fleetFromConfig(parseConfig(DEFAULT_CONFIG_JSON));

  it("sizes at the reported mix, takes a caller's capacity, and keeps the default where the mix cannot meet the SLO", () => {
    const mix = { promptTokens: 400, outputTokens: 300 };
    const s = sizeAtSlo(base(), { mixes: new Map([["llama2-70b", mix], ["bloom-176b", { promptTokens: 60_000, outputTokens: 10 }]]), override: (m, g, slo, x) => (m === "llama3.2-3b" ? capacityAtSlo(m, g, 2, slo, x, { maxBatch: 4 }) : m === "llama3.1-8b" ? 777 : undefined) });
    const at = (m: string) => s.fleet.models[m]!["h100-80gb"]!;
    expect(at("llama2-70b").tokensPerS).toBe(capacityAtSlo("llama2-70b", "h100-80gb", 4, SLO, mix).tokensPerS);
    expect(at("llama2-70b").capacity!.mix).toEqual({ ...mix, source: "telemetry" });
    expect(at("llama3.2-3b").capacity).toMatchObject({ batch: 4, mix: { promptTokens: 1155, source: "default" } });
    expect(at("llama3.1-8b")).toMatchObject({ tokensPerS: 777, capacity: { predictedTokensPerS: 777, derivation: "777 tokens/s, given by the planning round's caller for its engines" } });
    expect(at("bloom-176b").capacity!.mix!.source).toBe("default");
    expect(s.warnings.filter((w) => w.startsWith("bloom-176b on h100-80gb: sized at the default mix — at the mix the regions reported"))).toHaveLength(1);
  });

  it("corrects each model from the window and the previous report's factor, and reports it", () => {
    const fleet: Fleet = { ...base(), models: { m: { a: { gpusPerInstance: 1, tokensPerS: 1000, modelStartCost: 0 }, b: { gpusPerInstance: 1, tokensPerS: 3000, modelStartCost: 0 } }, n: { a: { gpusPerInstance: 1, tokensPerS: 500, modelStartCost: 0 } } }, slo: { m: SLO, n: SLO } };
    const sized = sizeAtSlo(fleet).fleet;
    const previous = { slo: [{ model: "m", correction: { factor: 1.2 } }] } as unknown as PlanReport;
    // Predicted per instance: ½ × 1000 + ½ × 3000 = 2000; planned 1.2 × 2000 = 2400; observed 1800 with 80% met → down toward 0.9.
    const hour = { fromMs: 0, toMs: 3_600_000, models: new Map([["m", { requests: 500, met: 400, tokensPerSPerInstance: 1800, gpuShare: { a: 0.5, b: 0.5 } }]]) };
    const cs = correctionsFor(sized, previous, hour);
    expect(cs.get("m")).toMatchObject({ rule: "down", previous: 1.2, predictedTokensPerSPerInstance: 2000, observedTokensPerSPerInstance: 1800 });
    expect(cs.get("m")!.factor).toBeCloseTo(1.05, 12);
    expect(cs.get("n")).toMatchObject({ rule: "held", factor: 1, why: "no region reported this model's SLO since the last plan" });
    const planned = applyCorrections(sized, cs);
    expect(planned.models.m!.b!.tokensPerS).toBeCloseTo(3150, 9);
    const report = sloReport(planned, { hour, corrections: cs })!;
    expect(report.map((r) => r.model)).toEqual(["m", "n"]);
    expect(report[0]!.capacity[1]).toMatchObject({ gpu: "b", predictedTokensPerS: 3000, derivation: "given in the fleet (tokensPerS)" });
    expect(report[0]!.capacity[1]!.tokensPerS).toBeCloseTo(3150, 9);
    expect(report[0]!.lastHour).toMatchObject({ requests: 500, met: 400, attainment: 0.8, tokensPerSPerInstance: 1800 });
    expect(report[1]!.lastHour).toMatchObject({ requests: 0, met: 0, attainment: null });
    expect(sloReport(planned)![0]!.lastHour).toBeNull(); // offline: not measured
    expect(sloReport({ ...planned, slo: undefined })).toBeUndefined();
  });
});

describe("planRound", () => {
  it("sizes at the hour's mix, applies the correction, logs a large change, and reports SLO, capacity and attainment", async () => {
    const config = parseConfig(DEFAULT_CONFIG_JSON);
    const clock = new VirtualClock(Date.UTC(2026, 10, 20, 12, 0));
    const mix = { promptTokens: 800, outputTokens: 250 };
    const predicted = capacityAtSlo("llama2-70b", "h100-80gb", 4, SLO, mix).tokensPerS;
    const window = new SloWindow();
    // Two serving instances at 0.6 × the prediction each, 88% of requests met: capacity is lower than predicted.
    const t = tel("us-east", clock.now(), [model("llama2-70b", 2 * 0.6 * predicted, { "h100-80gb": 2 }, { requests: 200, met: 176, finished: 200, promptTokens: 200 * mix.promptTokens, outputTokens: 200 * mix.outputTokens })]);
    window.observe(tel("us-east", clock.now() - 3_600_000, [model("llama2-70b", 0, { "h100-80gb": 2 }, { requests: 0, met: 0, finished: 0, promptTokens: 0, outputTokens: 0 })]));
    window.observe(t);
    const lines: string[] = [];
    const forecaster = createForecaster({ name: "seasonal-naive" });
    try {
      const plan = planRound({ config, clock, telemetry: new Map([["us-east", t]]), history: new MemoryHistory(), forecaster, solver: await HighsSolver.create(), intervalMs: 3_600_000, advisory: true, sloWindow: window, log: createLogger("debug", {}, (l) => lines.push(l)) });
      const report = await plan(1, undefined);
      const s = report.slo!.find((x) => x.model === "llama2-70b")!;
      expect(s.slo).toEqual(SLO);
      expect(s.lastHour).toMatchObject({ requests: 200, met: 176, attainment: 0.88 });
      expect(s.correction).toMatchObject({ rule: "down", previous: 1 });
      expect(s.correction.factor).toBeCloseTo(0.8, 6); // halfway from 1 toward 0.6
      const cap = s.capacity.find((c) => c.gpu === "h100-80gb")!;
      expect(cap.mix).toEqual({ ...mix, source: "telemetry" });
      expect(cap.predictedTokensPerS).toBeCloseTo(predicted, 6);
      expect(cap.tokensPerS).toBeCloseTo(0.8 * predicted, 6);
      expect(lines.filter((l) => l.includes("capacity correction changed") && l.includes("llama2-70b"))).toHaveLength(1);
      // Models no region reported: no requests, factor held; the window was taken, so the next round starts over.
      expect(report.slo!.find((x) => x.model === "bloom-176b")).toMatchObject({ lastHour: { requests: 0, attainment: null }, correction: { factor: 1, rule: "held" } });
      const next = await plan(2, report);
      const again = next.slo!.find((x) => x.model === "llama2-70b")!;
      expect(again.lastHour).toBeNull();
      expect(again.correction).toMatchObject({ rule: "held", why: "no SLO telemetry since the last plan" });
      expect(again.correction.factor).toBeCloseTo(0.8, 6); // carried from the previous report
    } finally {
      await forecaster.close();
    }
  });
});
