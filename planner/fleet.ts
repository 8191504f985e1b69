/**
 * The fleet the planner plans over (a JSON "fleet file" for `tidegate plan`, or built from the config for the
 * planner process): GPU types with costs, models with per-GPU-type instance size, throughput and start cost, and
 * regions with capacity and endpoints (current instances, min/max, instances lent to spot).
 *
 * tps(m, g) — tokens/s one instance serves at the SLO — is `tokensPerS` when given; otherwise it is the capacity of
 * one instance at the SLO (core/perf/slo-capacity.ts capacityAtSlo on the measured-profile performance model,
 * fitted to ../shared/data/splitwise_sim/perf_model.csv and the SageServe profiles) for the Azure conversation mix
 * (capacity.ts DEFAULT_MIX): from the config's `slo` per model (fleetFromConfig), or a fleet file's `slo` (default
 * p95 TTFT 1,000 ms, TPOT 100 ms; `tbtMs` is read as `tpotMs`). A file entry whose capacity is 0 or has no profile
 * must give `tokensPerS` (the error names the path). Each derived entry keeps how (`ModelOnGpu.capacity`) for the
 * plan report. Costs are per GPU-hour (hold) and per start.
 */
import { readFileSync } from "node:fs";
import type { GpuType, ModelName, RegionName } from "../core/models.js";
import type { RegionTelemetry } from "../core/ports.js";
import { ObjectReader, ValidationError, parseJson } from "../core/validate.js";
import { DEFAULT_SLO, sloFor, type ModelSlo, type TidegateConfig } from "../core/config.js";
import { capacityBasis, configLimits, DEFAULT_MIX, type SloCapacityBasis } from "./capacity.js";
import { poolModel, poolTokensPerS, splitPoolModel } from "./pools.js";

/** Costs of one GPU type. */
export interface GpuCost {
  /** Cost of holding one GPU for the planning interval (e.g. $/GPU-hour). */
  holdPerGpu: number;
  /** Cost of starting a VM, per GPU. */
  vmStartPerGpu: number;
}

/** One model on one GPU type: instance size, throughput at the SLO, start cost. */
export interface ModelOnGpu {
  gpusPerInstance: number;
  /** tokens/s (prompt + output) one instance serves at the SLO: the ILP's tps(m, g) (capacity × correction when derived). */
  tokensPerS: number;
  /** Cost of loading the model onto a started VM, per instance. */
  modelStartCost: number;
  /** How tokensPerS was derived at the SLO and the correction applied; absent when a fleet file gave tokensPerS. */
  capacity?: SloCapacityBasis;
}

/** A deployable (model, GPU type) in a region, with today's instances and bounds. */
export interface FleetEndpoint {
  model: ModelName;
  gpu: GpuType;
  instances: number;
  minInstances: number;
  maxInstances: number;
  /** Instances of this model currently lent to spot in this region/GPU type (reclaimable without a redeploy). */
  spotInstances: number;
  /**
   * Cost of loading one instance here, when the region reported how long a scale-out takes (liveFleet); otherwise
   * the model's configured `modelStartCost` applies.
   */
  modelStartCost?: number;
}

/** A region's GPUs and endpoints. */
export interface FleetRegion {
  name: RegionName;
  /** GPUs per type in the region. */
  capacity: Record<GpuType, number>;
  endpoints: FleetEndpoint[];
}

/** Everything the ILP needs besides demand. */
export interface Fleet {
  /** Per-region cover factor α and NIW buffer factor β (DESIGN planner section). */
  alpha: number;
  beta: number;
  /** The point of the peak forecast the ILP covers (core/config.ts PlannerConfig.provisionFor); default "upper". */
  provisionFor?: "upper" | "mean";
  /** Currency of every cost (a label for reports; default "USD"). */
  currency?: string;
  gpus: Record<GpuType, GpuCost>;
  models: Record<ModelName, Record<GpuType, ModelOnGpu>>;
  regions: FleetRegion[];
  /** The interactive SLO each model is held to (the config's `slo`, a fleet file's); absent for hand-built fleets. */
  slo?: Record<ModelName, ModelSlo>;
}

/** Default costs when a fleet file gives none: on-demand list prices in $/GPU-hour, a VM start ≈ 5 min of holding. */
export const DEFAULT_GPU_COST: Record<string, GpuCost> = {
  "a100-80gb": { holdPerGpu: 3.0, vmStartPerGpu: 0.25 },
  "h100-80gb": { holdPerGpu: 5.0, vmStartPerGpu: 0.4 },
};

/**
 * Capacity at `slo` for the default mix from the performance model; undefined when no profile exists for
 * (model, gpu, gpusPerInstance) — the only error getProfile throws. Its predictedTokensPerS may be 0 (the SLO
 * cannot hold; the derivation says why).
 */
export function profileCapacity(model: ModelName, gpu: GpuType, gpusPerInstance: number, slo: ModelSlo = DEFAULT_SLO): SloCapacityBasis | undefined {
  try {
    return capacityBasis(model, gpu, gpusPerInstance, slo, { ...DEFAULT_MIX, source: "default" });
  } catch {
    return undefined;
  }
}

/** Reads a fleet file's `slo`: ttftMs, tpotMs (or its old name tbtMs, not both), percentile; defaults DEFAULT_SLO. */
function readFleetSlo(sr: ObjectReader): ModelSlo {
  const ttftMs = sr.number("ttftMs", DEFAULT_SLO.ttftMs, { gt: 0 });
  const tpot = sr.optionalNumber("tpotMs", { gt: 0 });
  const tbt = sr.optionalNumber("tbtMs", { gt: 0 });
  if (tpot !== undefined && tbt !== undefined) sr.fail("tbtMs", "give tpotMs only (tbtMs is its old name)");
  const percentile = sr.number("percentile", DEFAULT_SLO.percentile, { gt: 0, max: 0.999 });
  sr.done();
  return { ttftMs, tpotMs: tpot ?? tbt ?? DEFAULT_SLO.tpotMs, percentile };
}

/** Parses and validates a fleet document; errors name the exact path. */
export function parseFleet(json: unknown): Fleet {
  const root = new ObjectReader(json, "");
  const alpha = root.number("alpha", 0.8, { gt: 0, max: 1 });
  const beta = root.number("beta", 0.2, { min: 0, max: 10 });
  const provisionFor = root.string("provisionFor", "upper", { oneOf: ["upper", "mean"] }) as Fleet["provisionFor"];
  const currency = root.string("currency", "USD", { nonEmpty: true, maxLength: 12 });
  const slo = readFleetSlo(root.object("slo"));
  const gr = root.object("gpus", true);
  const gpus: Record<string, GpuCost> = {};
  for (const g of Object.keys(gr.value)) {
    const r = gr.object(g);
    const def = DEFAULT_GPU_COST[g];
    gpus[g] = { holdPerGpu: r.number("holdPerGpu", def?.holdPerGpu, { min: 0 }), vmStartPerGpu: r.number("vmStartPerGpu", def?.vmStartPerGpu, { min: 0 }) };
    r.done();
  }
  const mr = root.object("models", true);
  const models: Record<string, Record<string, ModelOnGpu>> = {};
  for (const m of Object.keys(mr.value)) {
    const r = mr.object(m);
    models[m] = {};
    for (const g of Object.keys(r.value)) {
      if (gpus[g] === undefined) r.fail(g, `GPU type ${JSON.stringify(g)} is not in gpus`);
      const e = r.object(g);
      const gpusPerInstance = e.number("gpusPerInstance", undefined, { integer: true, min: 1, max: 64 });
      const given = e.optionalNumber("tokensPerS", { gt: 0 });
      const modelStartCost = e.number("modelStartCost", 0.5, { min: 0 });
      if (given !== undefined) models[m]![g] = { gpusPerInstance, tokensPerS: given, modelStartCost };
      else {
        const c = profileCapacity(m, g, gpusPerInstance, slo) ?? e.fail("tokensPerS", `is required: no performance profile for ${m} on ${gpusPerInstance} × ${g}`);
        if (!(c.predictedTokensPerS > 0)) e.fail("tokensPerS", `is required: one instance of ${m} on ${gpusPerInstance} × ${g} cannot meet the SLO (${c.derivation})`);
        models[m]![g] = { gpusPerInstance, tokensPerS: c.predictedTokensPerS, modelStartCost, capacity: c };
      }
      e.done();
    }
  }
  const regions = root.array("regions", (v, path) => {
    const r = new ObjectReader(v, path);
    const name = r.string("name");
    const cr = r.object("capacity", true);
    const capacity: Record<string, number> = {};
    for (const g of Object.keys(cr.value)) {
      if (gpus[g] === undefined) cr.fail(g, `GPU type ${JSON.stringify(g)} is not in gpus`);
      capacity[g] = cr.number(g, undefined, { integer: true, min: 0 });
    }
    cr.done();
    const endpoints = r.array("endpoints", (ev, ep) => {
      const e = new ObjectReader(ev, ep);
      const model = e.string("model");
      if (models[model] === undefined) e.fail("model", `unknown model ${JSON.stringify(model)} (not in models)`);
      const gpu = e.string("gpu");
      if (capacity[gpu] === undefined) e.fail("gpu", `region has no capacity entry for ${JSON.stringify(gpu)}`);
      if (models[model]![gpu] === undefined) e.fail("gpu", `model ${model} has no entry for ${gpu} in models`);
      const minInstances = e.number("minInstances", 0, { integer: true, min: 0 });
      const maxInstances = e.number("maxInstances", 1_000_000, { integer: true, min: 0 });
      if (maxInstances < minInstances) e.fail("maxInstances", `must be ≥ minInstances (${minInstances})`);
      const instances = e.number("instances", 0, { integer: true, min: 0 });
      const spotInstances = e.number("spotInstances", 0, { integer: true, min: 0 });
      e.done();
      return { model, gpu, instances, minInstances, maxInstances, spotInstances };
    }, []);
    const seen = new Set<string>();
    endpoints.forEach((e, i) => {
      const k = `${e.model}/${e.gpu}`;
      if (seen.has(k)) throw new ValidationError(`${path}.endpoints[${i}]`, `duplicate endpoint ${k}`);
      seen.add(k);
    });
    r.done();
    return { name, capacity, endpoints };
  }, undefined, { minLength: 1 });
  const names = new Set<string>();
  regions.forEach((r, i) => {
    if (names.has(r.name)) throw new ValidationError(`regions[${i}].name`, `duplicate region ${JSON.stringify(r.name)}`);
    names.add(r.name);
  });
  root.done();
  return { alpha, beta, provisionFor, currency, gpus, models, regions, slo: Object.fromEntries(Object.keys(models).map((m) => [m, slo])) };
}

/** Reads a fleet file (JSON). */
export function readFleetFile(file: string): Fleet {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (err) {
    throw new ValidationError(file, `cannot read fleet file: ${(err as Error).message}`, "invalid_request");
  }
  return parseFleet(parseJson(text, `fleet file ${file}`, "invalid_config"));
}

/**
 * The fleet a running tidegate plans over, from its config (capacity, endpoints, α, β, each model's SLO) and default
 * costs; tps(m, g) is capacityAtSlo at `sloFor(config.slo, m)` for the default mix, under the simulated engines'
 * limits (capacity.ts configLimits). A (model, GPU) whose profile is missing or whose instance cannot meet its SLO
 * is rejected naming the config path.
 */
export function fleetFromConfig(config: TidegateConfig): Fleet {
  const gpuTypes = new Set(config.regions.flatMap((r) => r.gpus.map((g) => g.type)));
  const gpus: Record<string, GpuCost> = {};
  for (const g of gpuTypes) {
    const def = DEFAULT_GPU_COST[g] ?? { holdPerGpu: 1, vmStartPerGpu: 0.1 };
    const price = config.planner.gpuHourPrices[g];
    // A VM start keeps the default's ratio to the hourly price (≈ 5 minutes of holding).
    gpus[g] = price === undefined ? def : { holdPerGpu: price, vmStartPerGpu: def.holdPerGpu > 0 ? (price * def.vmStartPerGpu) / def.holdPerGpu : 0 };
  }
  const models: Record<string, Record<string, ModelOnGpu>> = {};
  const slo: Record<string, ModelSlo> = {};
  for (const m of config.models) {
    models[m.name] = {};
    slo[m.name] = sloFor(config.slo, m.name);
    const limits = configLimits(config, m.name);
    for (const [g, n] of Object.entries(m.gpusPerInstance)) {
      const path = `models[${config.models.indexOf(m)}].gpusPerInstance.${g}`;
      let c: SloCapacityBasis;
      try {
        c = capacityBasis(m.name, g, n, slo[m.name]!, { ...DEFAULT_MIX, source: "default" }, limits);
      } catch {
        throw new ValidationError(path, `no performance profile for ${m.name} on ${n} × ${g}`);
      }
      if (!(c.predictedTokensPerS > 0)) throw new ValidationError(config.slo.models[m.name] === undefined ? "slo" : `slo.models.${m.name}`, `one instance of ${m.name} on ${n} × ${g} cannot meet it: ${c.derivation}`);
      models[m.name]![g] = { gpusPerInstance: n, tokensPerS: c.predictedTokensPerS, modelStartCost: 0.5, capacity: c };
    }
  }
  // A disaggregated model's pools are planned as units of their own (pools.ts), each with its role's tps.
  for (const r of config.regions) {
    for (const e of r.endpoints) {
      if (e.role === undefined) continue;
      const key = poolModel(e.model, e.role);
      const n = config.models.find((m) => m.name === e.model)!.gpusPerInstance[e.gpu]!;
      const limits = configLimits(config, e.model);
      const tokensPerS = poolTokensPerS(e.model, e.gpu, n, e.role, slo[e.model]!, DEFAULT_MIX, { ...limits, ...(config.engines.kind === "sim" ? { timeScale: config.engines.timeScale } : {}) });
      if (!(tokensPerS > 0)) throw new ValidationError(config.slo.models[e.model] === undefined ? "slo" : `slo.models.${e.model}`, `one ${e.role} instance of ${e.model} on ${n} × ${e.gpu} cannot meet it`);
      slo[key] = slo[e.model]!;
      (models[key] ??= {})[e.gpu] = { gpusPerInstance: n, tokensPerS, modelStartCost: 0.5 };
    }
  }
  return {
    alpha: config.planner.alpha,
    beta: config.planner.beta,
    provisionFor: config.planner.provisionFor,
    currency: config.planner.currency,
    gpus,
    models,
    slo,
    regions: config.regions.map((r) => ({
      name: r.name,
      capacity: Object.fromEntries(r.gpus.map((g) => [g.type, g.count])),
      endpoints: r.endpoints.map((e) => ({ model: poolModel(e.model, e.role), gpu: e.gpu, instances: e.instances, minInstances: e.minInstances, maxInstances: e.maxInstances, spotInstances: 0 })),
    })),
  };
}

/** A pool the region reports no instance of. */
const NO_INSTANCES = { provisioning: 0, loading: 0, serving: 0, draining: 0, spot: 0 } as const;

/**
 * The fleet as the regions report it (DESIGN "Planner"): `base` (from the config: capacity, bounds, costs) with each
 * endpoint's current instances (provisioning + loading + serving) and spot instances taken from the region's latest
 * telemetry, where the region reports per-endpoint counts (its actuator's view; a prefill or decode pool, its role's
 * part of them). Endpoints of regions that sent none,
 * or older regions without per-endpoint counts, keep `base`'s figures. With `intervalMs` (the planning interval the
 * GPU hold prices are for), an endpoint whose region reports its expected scale-out time gets its model-start cost
 * from it: the instance's GPUs held for that time at the hold price (the configured `modelStartCost` otherwise).
 */
export function liveFleet(base: Fleet, telemetry: ReadonlyMap<RegionName, RegionTelemetry>, intervalMs?: number): Fleet {
  return {
    ...base,
    regions: base.regions.map((r) => {
      const t = telemetry.get(r.name);
      if (t === undefined) return r;
      return {
        ...r,
        endpoints: r.endpoints.map((e) => {
          // A pool (pools.ts: its fleet key is `model#role`) takes its own counts from the endpoint's `pools`; a pool
          // absent there while the region reports the endpoint's counts has no instance.
          const { model, role } = splitPoolModel(e.model);
          const reported = t.models.find((m) => m.model === model)?.endpoints.find((x) => x.gpu === e.gpu);
          const c = role === undefined || reported?.instances === undefined ? reported?.instances : (reported.pools?.[role] ?? NO_INSTANCES);
          const counts = c === undefined ? {} : { instances: c.provisioning + c.loading + c.serving, spotInstances: c.spot };
          // The model-start cost from the data plane: the GPUs of one instance held for the scale-out time the region
          // reports (its last measured scale-out, else the multicast plan's ideal transfer time), priced as holding.
          const ms = reported?.expectedScaleOutMs;
          const gpu = base.gpus[e.gpu];
          const mg = base.models[e.model]?.[e.gpu];
          const start = ms !== undefined && intervalMs !== undefined && gpu !== undefined && mg !== undefined ? { modelStartCost: (gpu.holdPerGpu * mg.gpusPerInstance * ms) / intervalMs } : {};
          return { ...e, ...counts, ...start };
        }),
      };
    }),
  };
}
