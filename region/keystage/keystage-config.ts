/**
 * The `keystage` configuration section, region's own: this module registers its parser and its rules against the
 * other sections with core's config (core/config/sections.ts) when it loads, so core/config parseConfig reads it
 * at start-up; a process loads it through region/config-sections.ts. Errors name the exact path, e.g.
 * `keystage.pipelines[0].layersPerStage`, `keystage.params.kp`. Absent section = no pipelined endpoints.
 *
 * {
 *   "pipelines": [{ "model": "bloom-176b", "gpu": "h100-80gb", "layersPerStage": [9, 9, 9, 9, 9, 9, 8, 8],
 *                   "profileTp": 8, "hiddenSize": 14336 }],
 *   "cluster": { "gpusPerServer": 8, "hostMemoryBytes": 1099511627776, "evictAbove": 0.85,
 *                "pcieBytesPerS": 25e9, "networkBytesPerS": 12.5e9, "blockCount": 16, "forkMs": 200,
 *                "diskBytesPerS": 955555555 },   // optional: a cache miss reads the disk (absent: the data plane)
 *   "params": { "kp": 1, "ki": 0.1, "kd": 0, ... },         // the `keystage` strategy's schema (strategy.ts)
 *   "stageProcesses": false                                 // true: stage replicas as processes on agents (staged-engine.ts)
 * }
 */
import type { TidegateConfig } from "../../core/config.js";
import { registerConfigSection, type ConfigSection } from "../../core/config/sections.js";
import { gpusPerInstanceOf } from "../../core/config/lookups.js";
import { GPU_SPECS, MODEL_SPECS } from "../../core/models.js";
import { ObjectReader, ValidationError } from "../../core/validate.js";
import { knownProfiles } from "../../core/perf/model.js";
import { resolveStrategy } from "../strategies/strategy-registry.js";
import type { StartCost } from "./cache.js";
import { HIDDEN_SIZE, stageMemoryLimitBytes, type PipelineLayout } from "./stages.js";
import type { KeyStageParams } from "../strategies/keystage.js";

/** Servers of a region as key-stage scaling sees them, and the rates replica starts run at. */
export interface ClusterConfig extends StartCost {
  gpusPerServer: number;
  hostMemoryBytes: number;
  /** LRU eviction threshold of the stage cache (QUART §6.1: 0.85). */
  evictAbove: number;
}

/** The parsed `keystage` section: pipeline layouts, the cluster as key-stage scaling sees it, strategy parameters. */
export interface KeystageConfig {
  pipelines: PipelineLayout[];
  cluster: ClusterConfig;
  params: KeyStageParams;
  /**
   * Serve every pipelined instance as stage processes on the region's node agents (staged-engine.ts: one
   * `engine-sim --stage` process per stage replica, activations passed between them) instead of one process that
   * simulates its stages. Default false. Needs the agents actuator in process (`tidegate dev`).
   */
  stageProcesses: boolean;
}

const GiB = 1024 ** 3;

/** Cluster defaults: DGX-like 8-GPU servers with 1 TiB host memory, PCIe 4.0, 100 Gbit/s data plane, QUART's 85%. */
export const DEFAULT_CLUSTER: ClusterConfig = {
  gpusPerServer: 8,
  hostMemoryBytes: 1024 * GiB,
  evictAbove: 0.85,
  pcieBytesPerS: 25e9, // PCIe 4.0 x16, practical
  networkBytesPerS: 12.5e9, // 100 Gbit/s
  blockCount: 16,
  forkMs: 200,
};

/**
 * Reads the JSON text of a process flag (`engine-sim --pipeline`, `--stage`) at `path` that holds a pipeline layout
 * of (model, gpu): the layout, and the reader for the flag's other fields (the caller calls `done`).
 */
export function readLayoutFlag(text: string, model: string, gpu: string, path: string): { r: ObjectReader; layout: PipelineLayout } {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw new ValidationError(path, `not JSON: ${(err as Error).message}`);
  }
  const r = new ObjectReader(json, path);
  const layout = parsePipeline({ model, gpu, layersPerStage: r.raw("layersPerStage"), profileTp: r.raw("profileTp"), ...(r.has("hiddenSize") ? { hiddenSize: r.raw("hiddenSize") } : {}) }, path);
  return { r, layout };
}

/** Reads one pipeline layout at `path`; every rule names its field. */
export function parsePipeline(v: unknown, path: string): PipelineLayout {
  const r = new ObjectReader(v, path);
  const model = r.string("model");
  const spec = MODEL_SPECS[model];
  if (spec === undefined) return r.fail("model", `unknown model ${JSON.stringify(model)}; known: ${Object.keys(MODEL_SPECS).join(", ")}, or <known>:<tag> for a variant of one`);
  const gpu = r.string("gpu");
  if (GPU_SPECS[gpu] === undefined) r.fail("gpu", `unknown GPU type ${JSON.stringify(gpu)}; known: ${Object.keys(GPU_SPECS).join(", ")}`);
  const layersPerStage = r.array("layersPerStage", (l, lp) => {
    if (typeof l !== "number" || !Number.isInteger(l) || l < 1) throw new ValidationError(lp, `expected an integer ≥ 1 layers, got ${JSON.stringify(l)}`);
    return l;
  }, undefined, { minLength: 2 });
  const sum = layersPerStage.reduce((a, b) => a + b, 0);
  if (sum !== spec.layers) r.fail("layersPerStage", `stages hold ${sum} layers in all; ${model} has ${spec.layers}`);
  const limit = stageMemoryLimitBytes(gpu);
  layersPerStage.forEach((l, i) => {
    const bytes = (spec.params * spec.dtypeBytes * l) / spec.layers;
    if (bytes > limit) {
      throw new ValidationError(`${path}.layersPerStage[${i}]`, `a stage of ${l} layers holds ${(bytes / GiB).toFixed(1)} GiB of weights; one ${gpu} holds ${(limit / GiB).toFixed(1)} GiB (stages run on one GPU)`);
    }
  });
  const profileTp = r.number("profileTp", undefined, { integer: true, min: 1, max: 64 });
  const key = `${model}/${gpu}/tp${profileTp}`;
  if (!knownProfiles().includes(key)) r.fail("profileTp", `no performance profile for ${key}; known: ${knownProfiles().join(", ")}`);
  const hiddenSize = r.number("hiddenSize", HIDDEN_SIZE[model], { integer: true, min: 1 });
  r.done();
  return { model, gpu, layersPerStage, profileTp, hiddenSize };
}

/** Reads the `cluster` object (defaults: DEFAULT_CLUSTER); every rule names its field. */
export function parseCluster(r: ObjectReader): ClusterConfig {
  const d = DEFAULT_CLUSTER;
  const c: ClusterConfig = {
    gpusPerServer: r.number("gpusPerServer", d.gpusPerServer, { integer: true, min: 1, max: 64 }),
    hostMemoryBytes: r.number("hostMemoryBytes", d.hostMemoryBytes, { gt: 0 }),
    evictAbove: r.number("evictAbove", d.evictAbove, { gt: 0, max: 1 }),
    pcieBytesPerS: r.number("pcieBytesPerS", d.pcieBytesPerS, { gt: 0 }),
    networkBytesPerS: r.number("networkBytesPerS", d.networkBytesPerS, { gt: 0 }),
    blockCount: r.number("blockCount", d.blockCount, { integer: true, min: 1, max: 4096 }),
    forkMs: r.number("forkMs", d.forkMs, { min: 0 }),
  };
  const disk = r.optionalNumber("diskBytesPerS", { gt: 0 });
  if (disk !== undefined) c.diskBytesPerS = disk;
  r.done();
  return c;
}

/**
 * Parses the `keystage` section (`json` undefined = absent → undefined). Rejects stages whose layers do not add
 * up to the model, a stage whose weights exceed one GPU, a pipeline with no performance profile, and strategy
 * parameters outside their schema (e.g. `keystage.params.kp: must be ≤ 20`).
 */
export function parseKeystageConfig(json: unknown, path = "keystage"): KeystageConfig | undefined {
  if (json === undefined) return undefined;
  const root = new ObjectReader(json, path);
  const pipelines = root.array("pipelines", (v, p) => parsePipeline(v, p), undefined, { minLength: 1 });
  pipelines.forEach((p, i) => {
    if (pipelines.findIndex((q) => q.model === p.model && q.gpu === p.gpu) !== i) {
      throw new ValidationError(`${path}.pipelines[${i}]`, `duplicate pipeline for ${p.model} on ${p.gpu}`);
    }
  });
  const cluster = parseCluster(root.object("cluster"));
  const params = resolveStrategy("keystage", root.raw("params") ?? {}, path).params as KeyStageParams;
  const stageProcesses = root.boolean("stageProcesses", false);
  root.done();
  return { pipelines, cluster, params, stageProcesses };
}

declare module "../../core/config/sections.js" {
  interface ConfigSections {
    /** Key-stage scaling of pipelined models (region/keystage/keystage-config.ts); absent = none. */
    keystage?: KeystageConfig | undefined;
  }
}

/**
 * The rules between the `keystage` section and the rest: the keystage strategy needs pipelines; each pipeline is a
 * configured model with GPUs per instance for its GPU type, enough for `minReplicasPerStage` replicas of every
 * stage (an instance's GPUs are the budget its stages share); a pipeline runs in engine-sim, not a command template.
 */
export function checkPipelinedEndpoints(config: Pick<TidegateConfig, "keystage" | "models" | "controller" | "engines">): void {
  const { keystage, models, controller, engines } = config;
  if (keystage === undefined) {
    if (controller.strategy === "keystage") throw new ValidationError("controller.strategy", `"keystage" splits pipelined instances over their stages: add a keystage section with its pipelines`);
    return;
  }
  keystage.pipelines.forEach((p, i) => {
    const path = `keystage.pipelines[${i}]`;
    const gpus = gpusPerInstanceOf({ models }, p.model, p.gpu);
    if (gpus === undefined) throw new ValidationError(path, `${p.model} on ${p.gpu} is not configured: models[] needs gpusPerInstance["${p.gpu}"] for ${p.model}`);
    const need = p.layersPerStage.length * keystage.params.minReplicasPerStage;
    if (gpus < need) {
      throw new ValidationError(path, `an instance of ${p.model} on ${p.gpu} has ${gpus} GPUs (models[].gpusPerInstance); ${p.layersPerStage.length} stages × ${keystage.params.minReplicasPerStage} replicas (keystage.params.minReplicasPerStage) need ≥ ${need}`);
    }
    if (keystage.stageProcesses && controller.actuator !== "agents") throw new ValidationError("keystage.stageProcesses", `stage processes run on node agents: controller.actuator must be "agents", got "${controller.actuator}"`);
    if (engines.commandTemplate !== undefined) throw new ValidationError(path, "pipelined instances run in engine-sim; engines.commandTemplate starts another engine that tidegate cannot split into stages");
  });
}

/** The `keystage` section as core's config registry takes it (registered below, when this module loads). */
export const KEYSTAGE_SECTION: ConfigSection<"keystage"> = {
  key: "keystage",
  parse: (raw, path) => parseKeystageConfig(raw, path),
  check: checkPipelinedEndpoints,
};
registerConfigSection(KEYSTAGE_SECTION);
