/**
 * Shared vocabulary: the models and GPU types tidegate knows, with the architecture facts the performance model
 * and the planner need. Sizes in bytes, counts as integers.
 */

export type ModelName = string;
export type RegionName = string;
export type GpuType = string;

export interface ModelSpec {
  name: ModelName;
  /** Parameter count. */
  params: number;
  layers: number;
  /** KV heads (GQA groups; equals attention heads for MHA models). */
  kvHeads: number;
  headDim: number;
  /** Bytes per weight and per KV element (2 for fp16/bf16). */
  dtypeBytes: number;
  /** Longest context the model serves (prompt + output tokens). */
  maxContextTokens: number;
}

export interface GpuSpec {
  type: GpuType;
  memoryBytes: number;
}

const GiB = 1024 ** 3;

/** Architecture facts from the models' published configs. */
const BASE_SPECS: Readonly<Record<string, ModelSpec>> = {
  "llama2-70b": { name: "llama2-70b", params: 70e9, layers: 80, kvHeads: 8, headDim: 128, dtypeBytes: 2, maxContextTokens: 4096 },
  "bloom-176b": { name: "bloom-176b", params: 176e9, layers: 70, kvHeads: 112, headDim: 128, dtypeBytes: 2, maxContextTokens: 8192 },
  "llama3.1-8b": { name: "llama3.1-8b", params: 8e9, layers: 32, kvHeads: 8, headDim: 128, dtypeBytes: 2, maxContextTokens: 131072 },
  "llama3.2-3b": { name: "llama3.2-3b", params: 3.2e9, layers: 28, kvHeads: 8, headDim: 128, dtypeBytes: 2, maxContextTokens: 131072 },
};

/**
 * A model-as-a-service zoo holds many models of a few architectures (fine-tunes of one base; BlitzScale §2.1): a name
 * `<base>:<tag>` (e.g. `llama3.1-8b:ft07`) is a model of its own — routed, scaled, cached and counted apart — with the
 * base's architecture and performance profile. `MODEL_SPECS[name]` answers for such names too (its keys list the
 * bases only); `baseModelOf` names the base.
 */
const variants = new Map<string, ModelSpec>();
export const MODEL_SPECS: Readonly<Record<string, ModelSpec>> = new Proxy(BASE_SPECS, {
  get(target, key) {
    if (typeof key !== "string") return Reflect.get(target, key);
    const base = target[key];
    if (base !== undefined) return base;
    const cut = key.indexOf(":");
    if (cut <= 0 || cut === key.length - 1) return undefined;
    let v = variants.get(key);
    if (v === undefined) {
      const of = target[key.slice(0, cut)];
      if (of === undefined) return undefined;
      variants.set(key, (v = { ...of, name: key }));
    }
    return v;
  },
});

/** The base architecture of `model` (`llama3.1-8b` for `llama3.1-8b:ft07`; the name itself for a base). */
export function baseModelOf(model: ModelName): ModelName {
  const cut = model.indexOf(":");
  return cut > 0 && BASE_SPECS[model.slice(0, cut)] !== undefined ? model.slice(0, cut) : model;
}

export const GPU_SPECS: Readonly<Record<string, GpuSpec>> = {
  "a100-80gb": { type: "a100-80gb", memoryBytes: 80 * GiB },
  "h100-80gb": { type: "h100-80gb", memoryBytes: 80 * GiB },
};

/** KV-cache bytes one token occupies across all layers: 2 (K and V) × layers × kvHeads × headDim × dtypeBytes. */
export function kvBytesPerToken(spec: ModelSpec): number {
  return 2 * spec.layers * spec.kvHeads * spec.headDim * spec.dtypeBytes;
}

/** Weight bytes of the whole model. */
export function weightBytes(spec: ModelSpec): number {
  return spec.params * spec.dtypeBytes;
}

/**
 * KV capacity of one instance in bytes: GPU memory of its `gpus` GPUs × `memoryFraction` (vLLM's
 * gpu_memory_utilization), minus the weights. Negative means the model does not fit.
 */
export function kvCapacityBytes(spec: ModelSpec, gpu: GpuSpec, gpus: number, memoryFraction = 0.9): number {
  return gpu.memoryBytes * gpus * memoryFraction - weightBytes(spec);
}
