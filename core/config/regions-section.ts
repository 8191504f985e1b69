/** The `regions` section (the fleet): each region's GPUs, endpoints, neighbours and gRPC address. */
import { GPU_SPECS, type GpuType, type ModelName, type RegionName } from "../models.js";
import { ObjectReader, ValidationError } from "../validate.js";
import type { ModelConfig } from "./models-section.js";
import { readRegionSettings, type RegionSettings } from "./region-settings.js";

export interface EndpointConfig {
  model: ModelName;
  gpu: GpuType;
  /** Instances at start. */
  instances: number;
  minInstances: number;
  maxInstances: number;
  /**
   * Prefill/decode disaggregation (issue 48): a pool of prefill or of decode instances of the model, scaled on its own
   * load (region/runtime/pool-signals.ts); absent = colocated instances that prefill and decode. A region with one
   * pool of a model has the other too, and no colocated endpoint of it.
   */
  role?: "prefill" | "decode";
}

/** One region. Tiers above core add per-region settings (RegionSettings, e.g. region's `loading`). */
export interface RegionConfig extends RegionSettings {
  name: RegionName;
  /** Hours from UTC, for local-time workloads (e.g. -5 for us-east). */
  utcOffsetH: number;
  /** Other regions in order of proximity (used after this one when a client belongs here). */
  proximity: RegionName[];
  gpus: { type: GpuType; count: number }[];
  endpoints: EndpointConfig[];
  /** Where the region process listens for the global router (gRPC), when run as its own process. */
  grpcAddress: string;
  /**
   * Static regions: share of the region's engines (0–100, default 50) that may be out of service for health at once;
   * beyond it an unhealthy engine keeps serving and the region logs why (region/process/engine-health.ts). 0: never.
   * Optional here only for hand-built configs; parsing always fills it.
   */
  maxEjectedPercent?: number;
}

/**
 * Reads `regions` from the root reader: at least one, unique names, proximity naming configured regions, and every
 * model of `models` served by an endpoint somewhere.
 */
export function parseRegions(root: ObjectReader, models: readonly ModelConfig[]): RegionConfig[] {
  const regions = root.array("regions", (v, path) => parseRegion(v, path, models), undefined, { minLength: 1 });
  const names = new Set<string>();
  regions.forEach((r, i) => {
    if (names.has(r.name)) throw new ValidationError(`regions[${i}].name`, `duplicate region ${JSON.stringify(r.name)}`);
    names.add(r.name);
  });
  regions.forEach((r, i) =>
    r.proximity.forEach((p, j) => {
      if (!names.has(p)) throw new ValidationError(`regions[${i}].proximity[${j}]`, `unknown region ${JSON.stringify(p)}`);
    }),
  );
  models.forEach((m, i) => {
    if (!regions.some((r) => r.endpoints.some((e) => e.model === m.name))) {
      throw new ValidationError(`models[${i}]`, `model ${JSON.stringify(m.name)} has no endpoint in any region`);
    }
  });
  return regions;
}

function parseRegion(v: unknown, path: string, models: readonly ModelConfig[]): RegionConfig {
  const r = new ObjectReader(v, path);
  const name = r.string("name");
  if (!/^[a-z0-9][a-z0-9-]*$/.test(name)) r.fail("name", "must be lowercase letters, digits and dashes");
  const utcOffsetH = r.number("utcOffsetH", 0, { min: -12, max: 14 });
  const proximity = r.array("proximity", (p, pp) => {
    if (typeof p !== "string") throw new ValidationError(pp, "expected a region name");
    return p;
  }, []);
  const grpcAddress = r.string("grpcAddress", "127.0.0.1:0");
  const maxEjectedPercent = r.number("maxEjectedPercent", 50, { min: 0, max: 100 });
  const settings = readRegionSettings(r);
  const gpus = r.array("gpus", (g, gp) => {
    const gr = new ObjectReader(g, gp);
    const type = gr.string("type");
    if (GPU_SPECS[type] === undefined) gr.fail("type", `unknown GPU type ${JSON.stringify(type)}; known: ${Object.keys(GPU_SPECS).join(", ")}`);
    const count = gr.number("count", undefined, { integer: true, min: 0 });
    gr.done();
    return { type, count };
  }, undefined, { minLength: 1 });
  const endpoints = r.array("endpoints", (e, ep) => {
    const er = new ObjectReader(e, ep);
    const model = er.string("model");
    const spec = models.find((m) => m.name === model);
    if (spec === undefined) return er.fail("model", `unknown model ${JSON.stringify(model)} (not in models[])`);
    const gpu = er.string("gpu");
    if (!gpus.some((g) => g.type === gpu)) er.fail("gpu", `region has no GPUs of type ${JSON.stringify(gpu)}`);
    if (spec.gpusPerInstance[gpu] === undefined) er.fail("gpu", `model ${model} has no gpusPerInstance for ${gpu}`);
    const minInstances = er.number("minInstances", 0, { integer: true, min: 0 });
    const maxInstances = er.number("maxInstances", 1000, { integer: true, min: 1 });
    if (maxInstances < minInstances) er.fail("maxInstances", `must be ≥ minInstances (${minInstances})`);
    const instances = er.number("instances", minInstances, { integer: true, min: minInstances, max: maxInstances });
    const role = er.optionalString("role", { oneOf: ["prefill", "decode"] }) as "prefill" | "decode" | undefined;
    er.done();
    return { model, gpu, instances, minInstances, maxInstances, ...(role === undefined ? {} : { role }) };
  }, undefined, { minLength: 1 });
  endpoints.forEach((e, i) => {
    const same = endpoints.findIndex((x) => x.model === e.model && x.gpu === e.gpu && x.role === e.role);
    if (same !== i) throw new ValidationError(`${path}.endpoints[${i}]`, `duplicate endpoint ${e.model}/${e.gpu}${e.role === undefined ? "" : ` (${e.role})`}: endpoints[${same}] is the same`);
    const other = e.role === "prefill" ? "decode" : e.role === "decode" ? "prefill" : undefined;
    if (other !== undefined && !endpoints.some((x) => x.model === e.model && x.role === other)) {
      throw new ValidationError(`${path}.endpoints[${i}].role`, `a ${e.role} pool of ${e.model} needs a ${other} pool of it in the region (an endpoint with role ${JSON.stringify(other)})`);
    }
    // One shape per model and region: the plan covers a disaggregated model's demand with its pools (planner/pools.ts).
    if (e.role === undefined && endpoints.some((x) => x.model === e.model && x.role !== undefined)) {
      throw new ValidationError(`${path}.endpoints[${i}]`, `${e.model} is served as prefill and decode pools in this region: a colocated endpoint of it beside them is not supported (give it a role, or drop the pools)`);
    }
  });
  // Capacity check: the starting instances must fit the region's GPUs.
  for (const g of gpus) {
    const used = endpoints
      .filter((e) => e.gpu === g.type)
      .reduce((s, e) => s + e.instances * (models.find((m) => m.name === e.model)!.gpusPerInstance[g.type] ?? 0), 0);
    if (used > g.count) {
      const gi = gpus.indexOf(g);
      throw new ValidationError(`${path}.gpus[${gi}].count`, `${g.count} ${g.type} GPUs cannot hold the ${used} the starting instances need`);
    }
  }
  r.done();
  return { name, utcOffsetH, proximity, gpus, endpoints, grpcAddress, maxEjectedPercent, ...settings };
}
