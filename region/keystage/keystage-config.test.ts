import { describe, expect, it } from "vitest";
import { DEFAULT_CONFIG_JSON, parseConfig } from "../../core/config.js";
import "../config-sections.js"; // region's config sections (keystage, loading)
import { ValidationError } from "../../core/validate.js";
import { resolveStrategy } from "../strategies/strategy-registry.js";
import { parseKeystageConfig } from "./keystage-config.js";

const BLOOM = { model: "bloom-176b", gpu: "h100-80gb", layersPerStage: [9, 9, 9, 9, 9, 9, 8, 8], profileTp: 8 };

function withKeystage(keystage: unknown): unknown {
  return { ...(DEFAULT_CONFIG_JSON as Record<string, unknown>), keystage };
}

/** The ValidationError parseConfig throws on `json`. */
function configError(json: unknown): ValidationError {
  try {
    parseConfig(json);
  } catch (err) {
    if (err instanceof ValidationError) return err;
    throw err;
  }
  throw new Error("expected a ValidationError");
}

const errorOf = (keystage: unknown): ValidationError => configError(withKeystage(keystage));

describe("keystage config section (read by parseConfig)", () => {
  it("parses a valid section with defaults, and no section means none", () => {
    const c = parseConfig(withKeystage({ pipelines: [BLOOM], params: { kp: 2 } }));
    expect(c.keystage?.pipelines[0]).toEqual({ ...BLOOM, hiddenSize: 14336 });
    expect(c.keystage?.params.kp).toBe(2);
    expect(c.keystage?.params.ki).toBe(0.1);
    expect(c.keystage?.cluster.evictAbove).toBe(0.85);
    expect(parseConfig(DEFAULT_CONFIG_JSON).keystage).toBeUndefined();
  });

  it("rejects stage layers that do not add up to the model", () => {
    const e = errorOf({ pipelines: [{ ...BLOOM, layersPerStage: [9, 9, 9, 9, 9, 9, 8, 7] }] });
    expect(e.path).toBe("keystage.pipelines[0].layersPerStage");
    expect(e.message).toMatch(/69 layers in all; bloom-176b has 70/);
  });

  it("rejects a stage larger than a GPU, naming the stage", () => {
    const e = errorOf({ pipelines: [{ model: "llama2-70b", gpu: "h100-80gb", layersPerStage: [10, 70], profileTp: 4 }] });
    expect(e.path).toBe("keystage.pipelines[0].layersPerStage[1]");
    expect(e.message).toMatch(/114\.1 GiB of weights; one h100-80gb holds 72\.0 GiB/);
  });

  it("rejects K values out of range and unknown parameters, naming the path", () => {
    expect(errorOf({ pipelines: [BLOOM], params: { kp: 50 } }).path).toBe("keystage.params.kp");
    expect(errorOf({ pipelines: [BLOOM], params: { ki: -0.1 } }).message).toMatch(/keystage\.params\.ki: must be ≥ 0/);
    expect(errorOf({ pipelines: [BLOOM], params: { kd: 11 } }).message).toMatch(/keystage\.params\.kd: must be ≤ 10/);
    expect(errorOf({ pipelines: [BLOOM], params: { kq: 1 } }).path).toBe("keystage.params.kq");
  });

  it("rejects a pipeline with no performance profile, an unknown model and a bad cluster", () => {
    expect(errorOf({ pipelines: [{ ...BLOOM, profileTp: 4 }] }).path).toBe("keystage.pipelines[0].profileTp");
    expect(errorOf({ pipelines: [{ ...BLOOM, model: "gpt-5" }] }).path).toBe("keystage.pipelines[0].model");
    expect(errorOf({ pipelines: [BLOOM], cluster: { evictAbove: 1.5 } }).path).toBe("keystage.cluster.evictAbove");
    expect(errorOf({ pipelines: [BLOOM], cluster: { diskBytesPerS: 0 } }).path).toBe("keystage.cluster.diskBytesPerS");
    expect(parseKeystageConfig({ pipelines: [BLOOM], cluster: { diskBytesPerS: 1e9 } })?.cluster.diskBytesPerS).toBe(1e9);
    expect(parseKeystageConfig({ pipelines: [BLOOM] })?.cluster.diskBytesPerS).toBeUndefined();
    expect(errorOf({ pipelines: [BLOOM, BLOOM] }).path).toBe("keystage.pipelines[1]");
  });

  it("checks pipelines against the fleet: instance GPUs for every stage, engine-sim only, and the keystage strategy", () => {
    const base = DEFAULT_CONFIG_JSON as Record<string, unknown>;
    // llama2-70b runs 4 GPUs an instance in the default config: 8 stages do not fit in one.
    const e = errorOf({ pipelines: [{ model: "llama2-70b", gpu: "h100-80gb", layersPerStage: [10, 10, 10, 10, 10, 10, 10, 10], profileTp: 4 }] });
    expect(e.path).toBe("keystage.pipelines[0]");
    expect(e.message).toMatch(/has 4 GPUs \(models\[\]\.gpusPerInstance\); 8 stages × 1 replicas .* need ≥ 8/);
    const ks = { pipelines: [BLOOM] };
    expect(configError({ ...base, controller: { strategy: "keystage" } }).path).toBe("controller.strategy");
    expect(parseConfig({ ...base, controller: { strategy: "keystage" }, keystage: ks }).controller.strategy).toBe("keystage");
    expect(configError({ ...base, engines: { commandTemplate: "vllm serve {model} --port {port}" }, keystage: ks }).message).toMatch(/keystage\.pipelines\[0\]: pipelined instances run in engine-sim/);
  });

  it("stageProcesses: off by default, and only with the agents actuator (stage processes run on node agents)", () => {
    const base = DEFAULT_CONFIG_JSON as Record<string, unknown>;
    expect(parseConfig(withKeystage({ pipelines: [BLOOM] })).keystage?.stageProcesses).toBe(false);
    expect(parseConfig(withKeystage({ pipelines: [BLOOM], stageProcesses: true })).keystage?.stageProcesses).toBe(true);
    const e = configError({ ...base, controller: { actuator: "sim" }, keystage: { pipelines: [BLOOM], stageProcesses: true } });
    expect(e.path).toBe("keystage.stageProcesses");
    expect(e.message).toMatch(/controller\.actuator must be "agents", got "sim"/);
    expect(errorOf({ pipelines: [BLOOM], stageProcesses: "yes" }).path).toBe("keystage.stageProcesses");
  });

  it("the keystage strategy is in the registry and holds the planner's GPU target", () => {
    const s = resolveStrategy("keystage");
    expect(s.params.kp).toBe(1);
    const input = { nowMs: 0, windowStartMs: 0, windowMs: 3_600_000, current: 8, serving: 8, utilization: 0.5, observedTokensPerS: 0, forecastTokensPerS: 0, minInstances: 8, maxInstances: 64, lastActionMs: undefined };
    expect(s.decide({ ...input, target: 40 })).toEqual({ desired: 40, reason: "gpu-budget" });
    expect(s.decide({ ...input, target: undefined }).desired).toBe(8);
  });
});
