/**
 * Builds one region's Gateway from the config file: an endpoint per `regions[i].endpoints[j]` and its instances,
 * each an `Engine` from a factory — in-process simulated engines (`engines.kind: "sim"`), `engine-sim` child
 * processes behind the openai-http adapter (`--spawn-engines`), or given URLs (`engines.kind: "openai-http"`,
 * `engines.urls`). The factory is the only thing that differs; routing and telemetry are the same Gateway.
 */
import type { Clock } from "../../core/clock.js";
import type { TidegateConfig } from "../../core/config.js";
import { TidegateError } from "../../core/errors.js";
import type { GpuType, ModelName, RegionName } from "../../core/models.js";
import type { Engine } from "../../core/ports.js";
import { SimEngine } from "../engines/sim/sim-engine.js";
import { PipelineEngine, type PipelineSpec } from "../keystage/pipeline-engine.js";
import { Gateway, type GatewayOptions } from "../gateway/gateway.js";

/** One instance to create. `url` is set for openai-http engines (from engines.urls). */
export interface InstanceSlot {
  region: RegionName;
  model: ModelName;
  gpu: GpuType;
  /** GPUs per instance (models[].gpusPerInstance[gpu]). */
  tp: number;
  /** `region/model/gpu/index`, unique in the region. */
  instanceId: string;
  url?: string;
}

export type EngineFactory = (slot: InstanceSlot) => Promise<Engine>;

/**
 * In-process simulated engines on `clock`, timing scaled by `timeScale` (engines.timeScale): a SimEngine, or a
 * PipelineEngine for an endpoint `pipeline` names (config keystage.pipelines; region/keystage/pipeline-engine.ts).
 */
export function simEngineFactory(clock: Clock, timeScale: number, kvCapacityTokens?: number, pipeline?: (model: string, gpu: string) => PipelineSpec | undefined): EngineFactory {
  return async (s) => {
    const spec = pipeline?.(s.model, s.gpu);
    if (spec !== undefined) return new PipelineEngine({ instanceId: s.instanceId, model: s.model, gpu: s.gpu, gpus: s.tp, spec, clock, timeScale });
    return new SimEngine({ instanceId: s.instanceId, model: s.model, gpu: s.gpu, tp: s.tp, clock, timeScale, ...(kvCapacityTokens === undefined ? {} : { kvCapacityTokens }) });
  };
}

/**
 * The instances of one region. For `engines.kind: "sim"` each endpoint gets `instances` slots. For "openai-http"
 * the URLs under `engines.urls["region/model/gpu"]` go to that endpoint; those under `"region/model"` are dealt to
 * the model's remaining endpoints in order (`instances` each, the rest to the last). An endpoint left without a URL
 * is an invalid_config error naming engines.urls.
 */
export function instanceSlots(config: TidegateConfig, regionName: RegionName): InstanceSlot[] {
  const region = config.regions.find((r) => r.name === regionName);
  if (region === undefined) {
    throw new TidegateError("invalid_config", `unknown region ${JSON.stringify(regionName)}; the config has ${config.regions.map((r) => r.name).join(", ")}`);
  }
  const slots: InstanceSlot[] = [];
  const shared = new Map<ModelName, string[]>();
  region.endpoints.forEach((ep, j) => {
    const tp = config.models.find((m) => m.name === ep.model)?.gpusPerInstance[ep.gpu];
    if (tp === undefined) throw new TidegateError("invalid_config", `regions[${regionName}].endpoints[${j}]: ${ep.model} has no gpusPerInstance for ${ep.gpu}`);
    const slot = (i: number, url?: string): InstanceSlot => ({
      region: regionName,
      model: ep.model,
      gpu: ep.gpu,
      tp,
      instanceId: `${regionName}/${ep.model}/${ep.gpu}/${i}`,
      ...(url === undefined ? {} : { url }),
    });
    if (config.engines.kind === "sim") {
      for (let i = 0; i < ep.instances; i++) slots.push(slot(i));
      return;
    }
    let urls = config.engines.urls[`${regionName}/${ep.model}/${ep.gpu}`];
    if (urls === undefined) {
      if (!shared.has(ep.model)) shared.set(ep.model, [...(config.engines.urls[`${regionName}/${ep.model}`] ?? [])]);
      const pool = shared.get(ep.model)!;
      const isLast = !region.endpoints.slice(j + 1).some((e) => e.model === ep.model && config.engines.urls[`${regionName}/${e.model}/${e.gpu}`] === undefined);
      urls = isLast ? pool.splice(0) : pool.splice(0, Math.max(1, ep.instances));
    }
    if (urls.length === 0) {
      throw new TidegateError("invalid_config", `engines.urls: no URL for ${regionName}/${ep.model}/${ep.gpu} (give "${regionName}/${ep.model}/${ep.gpu}" or more under "${regionName}/${ep.model}")`);
    }
    urls.forEach((u, i) => slots.push(slot(i, u)));
  });
  return slots;
}

/** Creates the region's Gateway with every slot's engine added as serving; closes what it made if one fails. */
export async function buildRegionGateway(config: TidegateConfig, regionName: RegionName, factory: EngineFactory, gatewayOpts: Omit<GatewayOptions, "region">): Promise<Gateway> {
  const slots = instanceSlots(config, regionName);
  const gateway = new Gateway({ ...gatewayOpts, region: regionName });
  for (const ep of config.regions.find((r) => r.name === regionName)!.endpoints) gateway.addEndpoint(ep.model, ep.gpu);
  const made = await Promise.allSettled(slots.map((s) => factory(s)));
  const failed = made.find((m): m is PromiseRejectedResult => m.status === "rejected");
  if (failed !== undefined) {
    await Promise.all(made.map((m) => (m.status === "fulfilled" ? m.value.close() : undefined)));
    throw failed.reason;
  }
  made.forEach((m, i) => gateway.addInstance(slots[i]!.gpu, (m as PromiseFulfilledResult<Engine>).value, "serving"));
  return gateway;
}
