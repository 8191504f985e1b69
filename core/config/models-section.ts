/** The `models` section: the models the fleet serves and the GPUs one instance of each uses per GPU type. */
import { GPU_SPECS, MODEL_SPECS, type GpuType, type ModelName } from "../models.js";
import { ObjectReader, ValidationError } from "../validate.js";

export interface ModelConfig {
  name: ModelName;
  /** GPUs one instance of this model uses, per GPU type it can run on (tensor parallelism). */
  gpusPerInstance: Record<GpuType, number>;
}

/** The embedded default's models (used when the file gives no `models`). */
export const DEFAULT_MODELS: readonly ModelConfig[] = [
  { name: "llama2-70b", gpusPerInstance: { "a100-80gb": 4, "h100-80gb": 4 } },
  { name: "bloom-176b", gpusPerInstance: { "a100-80gb": 8, "h100-80gb": 8 } },
  { name: "llama3.1-8b", gpusPerInstance: { "a100-80gb": 2, "h100-80gb": 2 } },
  { name: "llama3.2-3b", gpusPerInstance: { "a100-80gb": 2, "h100-80gb": 2 } },
];

/** Reads `models` from the root reader (default DEFAULT_MODELS): known models and GPU types, no duplicates. */
export function parseModels(root: ObjectReader): ModelConfig[] {
  const models = root.array("models", (v, path) => {
    const r = new ObjectReader(v, path);
    const name = r.string("name");
    if (MODEL_SPECS[name] === undefined) r.fail("name", `unknown model ${JSON.stringify(name)}; known: ${Object.keys(MODEL_SPECS).join(", ")}, or <known>:<tag> for a variant of one`);
    const gpr = r.object("gpusPerInstance", true);
    const gpusPerInstance: Record<string, number> = {};
    for (const gpu of Object.keys(gpr.value)) {
      if (GPU_SPECS[gpu] === undefined) gpr.fail(gpu, `unknown GPU type; known: ${Object.keys(GPU_SPECS).join(", ")}`);
      gpusPerInstance[gpu] = gpr.number(gpu, undefined, { integer: true, min: 1, max: 64 });
    }
    gpr.done();
    r.done();
    return { name, gpusPerInstance };
  }, DEFAULT_MODELS as ModelConfig[], { minLength: 1 });
  const names = new Set<string>();
  models.forEach((m, i) => {
    if (names.has(m.name)) throw new ValidationError(`models[${i}].name`, `duplicate model ${JSON.stringify(m.name)}`);
    names.add(m.name);
  });
  return models;
}
