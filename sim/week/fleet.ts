/**
 * The replay's fleet file: the tidegate config (regions, GPUs, endpoints with min/max — core/config.ts) plus what
 * only the simulation needs: engine settings per model (vLLM max_num_seqs and KV tokens per sequence, which set
 * the instance's KV capacity), the actuator's delays (SageServe §7.1), which models' weights each region stores,
 * and the spot instances each region starts with (capacity not in the plan, SageServe §6.5). Validated once;
 * every error names its field (`fleet.regions[1].gpus[0].count`, `spot[0].model`).
 */
import { readFileSync } from "node:fs";
import { DEFAULT_CONFIG_JSON, gpusPerInstanceOf, parseConfig, type TidegateConfig } from "../../core/config.js";
import "../../region/config-sections.js"; // region's config sections (keystage, loading), before any config is parsed
import { MODEL_SPECS } from "../../core/models.js";
import { ObjectReader, ValidationError, parseJson } from "../../core/validate.js";
import { SAGESERVE_DELAYS, type ActuatorDelays } from "../../region/actuator/sim.js";
import { getProfile } from "../../core/perf/model.js";
import type { LoadingConfig } from "../../region/liveload/liveload-config.js";

/** Engine settings of one model in the replay. */
export interface ReplayEngine {
  /** vLLM max_num_seqs. */
  maxBatch: number;
  /**
   * KV capacity = maxBatch × this (tokens), like vLLM's gpu_memory_utilization sizing the cache: ≥ 4096 tokens (or the
   * model's context) in all; the replay clamps the prompt of a request that would not fit.
   */
  kvTokensPerSeq: number;
}

export interface FleetSpec {
  config: TidegateConfig;
  engines: Record<string, ReplayEngine>;
  delays: ActuatorDelays;
  /** region → models whose weights the region stores (default: every model it has an endpoint for). */
  weights: Record<string, string[]>;
  /** Spot instances per region at start: { region, model, gpu, count }. */
  spot: { region: string; model: string; gpu: string; count: number }[];
  /**
   * The share of an instance's capacity at the SLO (planner: capacityAtSlo) the planner counts on: 1 by default (that
   * capacity already holds the SLO's percentile); lower plans headroom, higher counts on more than the model says
   * (bench:strategies sweeps it; a fleet file takes (0, 1]) (capacity.ts).
   */
  plannedUtilization: number;
}

const DEFAULT_MODELS = [
  { name: "llama2-70b", gpusPerInstance: { "h100-80gb": 4 } },
  { name: "bloom-176b", gpusPerInstance: { "h100-80gb": 8 } },
  { name: "llama3.1-8b", gpusPerInstance: { "h100-80gb": 2 } },
  { name: "llama3.2-3b", gpusPerInstance: { "h100-80gb": 2 } },
];

function region(name: string, utcOffsetH: number, proximity: string[], start: Record<string, number>) {
  return {
    name,
    utcOffsetH,
    proximity,
    gpus: [{ type: "h100-80gb", count: 256 }],
    endpoints: DEFAULT_MODELS.map((m) => ({ model: m.name, gpu: "h100-80gb", instances: start[m.name] ?? 1, minInstances: 1, maxInstances: 48 })),
  };
}

/**
 * The default replay fleet: 3 US regions × 256 H100, 4 models, min 1 / max 48 instances per endpoint; GPUs not
 * serving at the start are spot instances (most of them llama2-70b's, the model with the most traffic), so an 8×
 * burst can be absorbed by reclaiming spot.
 */
export const DEFAULT_FLEET_JSON = {
  fleet: {
    models: DEFAULT_MODELS,
    // One scaling step per endpoint per pass, as SageServe's controller paces them (§6.5); live regions default to 8.
    controller: { maxStepsPerPass: 1 },
    regions: [
      region("us-east", -5, ["us-central", "us-west"], { "llama2-70b": 3, "bloom-176b": 2 }),
      region("us-central", -6, ["us-east", "us-west"], { "llama2-70b": 2, "bloom-176b": 2 }),
      region("us-west", -8, ["us-central", "us-east"], { "llama2-70b": 2, "bloom-176b": 2 }),
    ],
  },
  engines: Object.fromEntries(DEFAULT_MODELS.map((m) => [m.name, { maxBatch: 16, kvTokensPerSeq: 1500 }])),
  actuator: SAGESERVE_DELAYS,
  spot: ["us-east", "us-central", "us-west"].flatMap((r) => [
    { region: r, model: "llama2-70b", gpu: "h100-80gb", count: 30 },
    { region: r, model: "bloom-176b", gpu: "h100-80gb", count: 6 },
    { region: r, model: "llama3.1-8b", gpu: "h100-80gb", count: 8 },
    { region: r, model: "llama3.2-3b", gpu: "h100-80gb", count: 8 },
  ]),
};

/** Parses and cross-checks a fleet file's JSON. */
export function parseFleet(json: unknown): FleetSpec {
  const r = new ObjectReader(json, "");
  const fleetJson = r.raw("fleet") ?? DEFAULT_CONFIG_JSON;
  let config: TidegateConfig;
  try {
    config = parseConfig(fleetJson);
  } catch (err) {
    if (err instanceof ValidationError) throw new ValidationError(`fleet.${err.path}`, err.message.slice(err.path.length + 2));
    throw err;
  }
  config.regions.forEach((reg, ri) =>
    reg.gpus.forEach((g, gi) => {
      if (g.count <= 0) throw new ValidationError(`fleet.regions[${ri}].gpus[${gi}].count`, `region ${reg.name} has zero ${g.type} capacity; a replay region needs GPUs`);
    }),
  );
  const er = r.object("engines");
  const engines: Record<string, ReplayEngine> = {};
  for (const m of config.models) {
    const e = er.object(m.name);
    const spec = { maxBatch: e.number("maxBatch", 16, { integer: true, min: 1, max: 1024 }), kvTokensPerSeq: e.number("kvTokensPerSeq", 1500, { integer: true, min: 16 }) };
    e.done();
    const longest = Math.min(MODEL_SPECS[m.name]!.maxContextTokens, 4096);
    if (spec.maxBatch * spec.kvTokensPerSeq < longest) e.fail("kvTokensPerSeq", `maxBatch × kvTokensPerSeq = ${spec.maxBatch * spec.kvTokensPerSeq} tokens cannot hold one ${longest}-token request of ${m.name}`);
    for (const [gpu, tp] of Object.entries(m.gpusPerInstance)) {
      const p = getProfile(m.name, gpu, tp);
      if (spec.maxBatch * spec.kvTokensPerSeq > p.kvCapacityTokens) e.fail("kvTokensPerSeq", `${m.name} on ${tp} × ${gpu} holds at most ${p.kvCapacityTokens} KV tokens, not ${spec.maxBatch * spec.kvTokensPerSeq}`);
    }
    engines[m.name] = spec;
  }
  er.done();
  const ar = r.object("actuator");
  const d = SAGESERVE_DELAYS;
  const delays: ActuatorDelays = {
    spotMedianMs: ar.number("spotMedianMs", d.spotMedianMs, { gt: 0 }),
    spotMaxMs: ar.number("spotMaxMs", d.spotMaxMs, { gt: 0 }),
    spotSigma: ar.number("spotSigma", d.spotSigma, { min: 0, max: 5 }),
    redeployLocalMs: ar.number("redeployLocalMs", d.redeployLocalMs, { min: 0 }),
    redeployRemoteMs: ar.number("redeployRemoteMs", d.redeployRemoteMs, { min: 0 }),
    vmProvisionMs: ar.number("vmProvisionMs", d.vmProvisionMs, { min: 0 }),
    spotKeepsModel: ar.boolean("spotKeepsModel", true),
  };
  if (delays.spotMaxMs < delays.spotMedianMs) ar.fail("spotMaxMs", `must be ≥ spotMedianMs (${delays.spotMedianMs})`);
  ar.done();
  const regionNames = config.regions.map((x) => x.name);
  const wr = r.object("weights");
  const weights: Record<string, string[]> = {};
  for (const reg of config.regions) {
    weights[reg.name] = wr.has(reg.name)
      ? wr.array(reg.name, (v, path) => {
          if (typeof v !== "string" || !config.models.some((m) => m.name === v)) throw new ValidationError(path, `unknown model ${JSON.stringify(v)}`);
          return v;
        })
      : (wr.allow(reg.name), [...new Set(reg.endpoints.map((e) => e.model))]);
  }
  wr.done();
  const spot = r.array("spot", (v, path) => {
    const o = new ObjectReader(v, path);
    const regionName = o.string("region");
    if (!regionNames.includes(regionName)) o.fail("region", `unknown region ${JSON.stringify(regionName)}`);
    const model = o.string("model");
    const mc = config.models.find((m) => m.name === model);
    if (mc === undefined) return o.fail("model", `unknown model ${JSON.stringify(model)}`);
    const gpu = o.string("gpu");
    if (mc.gpusPerInstance[gpu] === undefined) o.fail("gpu", `${model} has no gpusPerInstance for ${gpu}`);
    const count = o.number("count", undefined, { integer: true, min: 0 });
    o.done();
    return { region: regionName, model, gpu, count };
  }, []);
  for (const reg of config.regions) {
    for (const g of reg.gpus) {
      const gpusOf = (model: string) => gpusPerInstanceOf(config, model, g.type) ?? 0;
      const used = reg.endpoints.filter((e) => e.gpu === g.type).reduce((s, e) => s + e.instances * gpusOf(e.model), 0) + spot.filter((s) => s.region === reg.name && s.gpu === g.type).reduce((s, x) => s + x.count * gpusOf(x.model), 0);
      if (used > g.count) {
        const si = spot.findIndex((s) => s.region === reg.name && s.gpu === g.type);
        throw new ValidationError(si >= 0 ? `spot[${si}].count` : `fleet.regions[${regionNames.indexOf(reg.name)}].gpus`, `region ${reg.name}: starting + spot instances need ${used} ${g.type} GPUs, it has ${g.count}`);
      }
    }
  }
  const plannedUtilization = r.number("plannedUtilization", 1, { gt: 0, max: 1 });
  r.done();
  return { config, engines, delays, weights, spot, plannedUtilization };
}

/**
 * The fleet's config as the live processes read it: its engines' settings written into `engines.models` (max batch
 * and KV cache per model) on simulated engines, so the simulated engines, the router's in-flight estimate and the
 * batch tier's fill policy all take them from config — in the replay and in its live twin alike.
 *
 * Batch dispatch is not paced here (`queue.paceDispatch` false) and does not refill on completion
 * (`queue.refillIdle` false): the replay's per-request equivalence with its other shapes (two-shapes.test.ts:
 * callbacks and streams; test/e2e/live-vs-replay.test.ts: the live processes) holds for dispatch decided at region
 * reports, and a paced send is a timer of its own, a refill a claim at a completion, whose place among events of the
 * same instant differs between those shapes. The week's batch runs as before both; `tidegate dev`, `global` and the
 * live benches pace and refill.
 */
export function fleetConfig(fleet: FleetSpec): TidegateConfig {
  const models = Object.fromEntries(Object.entries(fleet.engines).map(([m, e]) => [m, { maxBatch: e.maxBatch, kvCapacityTokens: e.maxBatch * e.kvTokensPerSeq }]));
  return { ...fleet.config, engines: { ...fleet.config.engines, kind: "sim", models }, queue: { ...fleet.config.queue, paceDispatch: false, refillIdle: false } };
}

/**
 * The fleet with every region loading from `loading` (config `controller.loading`, region/liveload/liveload-config.ts;
 * regions' own `loading` keys are dropped) — or, undefined, on the actuator's configured delays.
 */
export function withLoading(fleet: FleetSpec, loading: LoadingConfig | undefined): FleetSpec {
  const { loading: _old, ...controller } = fleet.config.controller;
  const regions = fleet.config.regions.map(({ loading: _r, ...r }) => r);
  return { ...fleet, config: { ...fleet.config, regions, controller: loading === undefined ? controller : { ...controller, loading } } };
}

/** Reads a fleet file (undefined = the default fleet). */
export function loadFleet(file?: string): FleetSpec {
  if (file === undefined) return parseFleet(DEFAULT_FLEET_JSON);
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (err) {
    throw new ValidationError(file, `cannot read fleet file: ${(err as Error).message}`);
  }
  return parseFleet(parseJson(text, `fleet file ${file}`, "invalid_config"));
}
