/** Small lookups over a validated config that several tiers share. */
import { TidegateError } from "../errors.js";
import type { GpuType, ModelName } from "../models.js";
import type { TidegateConfig } from "./parse.js";
import type { RegionConfig } from "./regions-section.js";

/** The models an endpoint list of a region serves. */
export function regionModels(region: RegionConfig): ModelName[] {
  return [...new Set(region.endpoints.map((e) => e.model))];
}

/** GPUs per instance of `model` on `gpu` (models[].gpusPerInstance); undefined where the config has none. */
export function gpusPerInstanceOf(config: Pick<TidegateConfig, "models">, model: ModelName, gpu: GpuType): number | undefined {
  return config.models.find((m) => m.name === model)?.gpusPerInstance[gpu];
}

/** gpusPerInstanceOf for a (model, gpu) the config validated (an endpoint's): an invalid_config error where it is absent. */
export function instanceGpus(config: Pick<TidegateConfig, "models">, model: ModelName, gpu: GpuType): number {
  const n = gpusPerInstanceOf(config, model, gpu);
  if (n === undefined) throw new TidegateError("invalid_config", `${model} has no gpusPerInstance for ${gpu}`);
  return n;
}
