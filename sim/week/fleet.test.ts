import { describe, expect, it } from "vitest";
import { ValidationError } from "../../core/validate.js";
import { DEFAULT_FLEET_JSON, parseFleet } from "./fleet.js";

const clone = <T>(x: T): T => structuredClone(x);

function fails(json: unknown): ValidationError {
  try {
    parseFleet(json);
  } catch (err) {
    if (err instanceof ValidationError) return err;
    throw err;
  }
  throw new Error("expected a ValidationError");
}

describe("fleet file validation names the field", () => {
  it("accepts the default fleet", () => {
    const f = parseFleet(DEFAULT_FLEET_JSON);
    expect(f.config.regions).toHaveLength(3);
    expect(f.plannedUtilization).toBe(1);
    expect(f.weights["us-east"]).toContain("llama2-70b");
  });

  it("zero capacity", () => {
    const j = clone(DEFAULT_FLEET_JSON);
    j.fleet.regions[1]!.gpus[0]!.count = 0;
    j.fleet.regions[1]!.endpoints.forEach((e) => ((e.instances = 0), (e.minInstances = 0)));
    expect(fails(j).path).toBe("fleet.regions[1].gpus[0].count");
  });

  it("a model with no region", () => {
    const j = clone(DEFAULT_FLEET_JSON);
    for (const r of j.fleet.regions) r.endpoints = r.endpoints.filter((e) => e.model !== "llama3.2-3b");
    const e = fails(j);
    expect(e.path).toBe("fleet.models[3]");
    expect(e.message).toMatch(/has no endpoint in any region/);
  });

  it("more starting + spot instances than GPUs, an unknown spot model, an engine too small for a request, bad JSON types", () => {
    const j = clone(DEFAULT_FLEET_JSON);
    j.spot[0]!.count = 40;
    expect(fails(j).message).toMatch(/need \d+ h100-80gb GPUs, it has 256/);
    const k = clone(DEFAULT_FLEET_JSON);
    k.spot[2]!.model = "gpt-9";
    expect(fails(k).path).toBe("spot[2].model");
    const m = clone(DEFAULT_FLEET_JSON) as Record<string, unknown> & typeof DEFAULT_FLEET_JSON;
    m.engines["llama2-70b"] = { maxBatch: 2, kvTokensPerSeq: 1000 };
    expect(fails(m).path).toBe("engines.llama2-70b.kvTokensPerSeq");
    expect(fails({ ...clone(DEFAULT_FLEET_JSON), actuator: { spotMedianMs: "1m" } }).path).toBe("actuator.spotMedianMs");
    expect(fails({ ...clone(DEFAULT_FLEET_JSON), extra: 1 }).path).toBe("extra");
  });
});
