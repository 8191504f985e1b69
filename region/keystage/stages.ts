/**
 * A pipelined model: S stages, each holding a contiguous share of the model's layers on one GPU (QUART §2.1,
 * Fig. 1; §8.1 splits every model evenly into stages). Timing comes from the shared performance model
 * (core/perf), the one the simulated engine uses:
 *
 *   full(P, O)      = prefillMs(P) + Σ_{k<O} decodeIterMs(1, P + k)      (one request alone, on `profileTp` GPUs)
 *   stage_s(P, O)   = full(P, O) × profileTp × layers_s / L               (one GPU running layers_s of L layers)
 *
 * The profile runs every layer on `profileTp` GPUs in tensor parallel; one GPU doing a whole layer does profileTp
 * times the per-GPU work, so a stage of layers_s layers on one GPU takes profileTp·layers_s/L of the profiled time
 * (per-GPU FLOPs and weight bytes are conserved; the TP all-reduce the profile includes makes this slightly
 * pessimistic). Weights and KV of a stage scale with its share of layers.
 */
import { GPU_SPECS, MODEL_SPECS, weightBytes, type GpuType, type ModelName } from "../../core/models.js";
import { DEFAULT_MEMORY_FRACTION, getProfile, type PerfProfile } from "../../core/perf/model.js";

/** Hidden size (activation elements per token) of the models tidegate knows, from their published configs. */
export const HIDDEN_SIZE: Readonly<Record<string, number>> = {
  "llama2-70b": 8192,
  "bloom-176b": 14336,
  "llama3.1-8b": 4096,
  "llama3.2-3b": 3072,
};

/** A validated pipeline layout (config `keystage.pipelines[i]`). */
export interface PipelineLayout {
  model: ModelName;
  gpu: GpuType;
  /** Layers of each stage, in order; they add up to the model's layers. */
  layersPerStage: number[];
  /** TP of the measured profile the stage times are scaled from. */
  profileTp: number;
  /** Activation elements per token passed between stages. */
  hiddenSize: number;
}

/** A pipeline ready to simulate: the layout plus per-stage bytes and time factors. */
export class Pipeline {
  readonly profile: PerfProfile;
  /** Weight bytes of each stage (= what one replica loads and what a host cache holds). */
  readonly stageBytes: number[];
  /** stage_s / full: profileTp × layers_s / L. */
  readonly stageFactor: number[];
  readonly dtypeBytes: number;

  constructor(readonly layout: PipelineLayout) {
    const spec = MODEL_SPECS[layout.model];
    if (spec === undefined) throw new RangeError(`unknown model ${layout.model}`);
    this.profile = getProfile(layout.model, layout.gpu, layout.profileTp);
    const total = weightBytes(spec);
    this.stageBytes = layout.layersPerStage.map((l) => (total * l) / spec.layers);
    this.stageFactor = layout.layersPerStage.map((l) => (layout.profileTp * l) / spec.layers);
    this.dtypeBytes = spec.dtypeBytes;
  }

  get stages(): number {
    return this.layout.layersPerStage.length;
  }

  /** One request alone through the whole model on `profileTp` GPUs (ms). */
  fullMs(promptTokens: number, outputTokens: number): number {
    const decodeOne = this.profile.decodeIterMs(1, promptTokens + (outputTokens - 1) / 2); // linear in context
    return this.profile.prefillMs(promptTokens) + outputTokens * decodeOne;
  }

  /** Time stage `s` spends on one request alone (ms). */
  stageMs(s: number, promptTokens: number, outputTokens: number): number {
    return this.fullMs(promptTokens, outputTokens) * this.stageFactor[s]!;
  }

  /** Activation bytes one request hands from a stage to the next (hidden × dtype × tokens). */
  activationBytes(promptTokens: number, outputTokens: number): number {
    return this.layout.hiddenSize * this.dtypeBytes * (promptTokens + outputTokens);
  }

  /** The profiled inference time of a request: every stage alone plus the S − 1 activation transfers (ms). */
  profiledMs(promptTokens: number, outputTokens: number, linkBytesPerS: number): number {
    const compute = this.fullMs(promptTokens, outputTokens) * this.stageFactor.reduce((a, b) => a + b, 0);
    return compute + (this.stages - 1) * ((this.activationBytes(promptTokens, outputTokens) / linkBytesPerS) * 1000);
  }
}

/** Bytes of GPU memory a stage may use for weights: the GPU's memory × vLLM's memory fraction. */
export function stageMemoryLimitBytes(gpu: GpuType): number {
  return GPU_SPECS[gpu]!.memoryBytes * DEFAULT_MEMORY_FRACTION;
}
