/**
 * The performance model the simulated engine, replay and the planner share: prefill time from prompt tokens (one
 * prompt, or a batch of several), decode iteration time from batch size and context, KV bytes per token from the
 * model's architecture and weights per GPU. Coefficients come from fitted.ts (generated from measured data, see fit.ts and README.md).
 */
import { TidegateError } from "../errors.js";
import { GPU_SPECS, MODEL_SPECS, baseModelOf, kvBytesPerToken, kvCapacityBytes, weightBytes, type GpuType, type ModelName } from "../models.js";
import { decodeFromFit, prefillFromFit, profileKey, type ProfileFit } from "./fit.js";
import { FITTED_PROFILES } from "./fitted.js";

/** vLLM's default max_num_seqs, a simulated engine's batch cap when none is given. */
export const DEFAULT_MAX_BATCH = 256;

/** vLLM's default gpu_memory_utilization: the share of GPU memory the engine may use for weights + KV. */
export const DEFAULT_MEMORY_FRACTION = 0.9;

/** Timing and memory of one instance of `model` on `tp` GPUs of type `gpu`. Times in ms, sizes in bytes. */
export class PerfProfile {
  readonly kvBytesPerToken: number;
  /** Weight bytes each GPU holds (weights / TP). */
  readonly weightBytesPerGpu: number;
  /** KV bytes the instance can hold: memory × fraction − weights. */
  readonly kvCapacityBytes: number;
  /** Decode iteration ms added per context token the batch holds (cCtx of the fit, ≥ 0). */
  readonly decodeMsPerContextToken: number;

  constructor(
    readonly fit: ProfileFit,
    readonly memoryFraction = DEFAULT_MEMORY_FRACTION,
  ) {
    const spec = MODEL_SPECS[fit.model]!;
    const gpu = GPU_SPECS[fit.gpu]!;
    this.kvBytesPerToken = kvBytesPerToken(spec);
    this.weightBytesPerGpu = weightBytes(spec) / fit.tp;
    this.kvCapacityBytes = kvCapacityBytes(spec, gpu, fit.tp, memoryFraction);
    this.decodeMsPerContextToken = fit.decode.cCtx;
  }

  get model(): ModelName {
    return this.fit.model;
  }
  get gpu(): GpuType {
    return this.fit.gpu;
  }
  get tp(): number {
    return this.fit.tp;
  }

  /**
   * Prefill (time to first token) of a batch of `sequences` prompts holding `tokens` prompt tokens in total (≥ 1):
   * the single-sequence curve for one prompt, the batched curve for two or more (fit.ts).
   */
  prefillMs(tokens: number, sequences = 1): number {
    return prefillFromFit(this.fit, Math.max(1, tokens), sequences);
  }

  /** One decode iteration (every running request gets one token) at `batch` requests holding `contextTokens`. */
  decodeIterMs(batch: number, contextTokens: number): number {
    return decodeFromFit(this.fit, Math.max(1, batch), Math.max(0, contextTokens));
  }

  /** The most tokens of KV the instance holds. */
  get kvCapacityTokens(): number {
    return Math.floor(this.kvCapacityBytes / this.kvBytesPerToken);
  }
}

const cache = new Map<string, PerfProfile>();

/** Profiles available: "model/gpu/tpN" keys. */
export function knownProfiles(): string[] {
  return FITTED_PROFILES.map((p) => profileKey(p.model, p.gpu, p.tp));
}

/**
 * The profile of (model, GPU, TP). Throws invalid_config when no profile exists (no measured or derived rows for
 * that TP) or the weights do not fit in `tp` GPUs; it never substitutes another TP silently.
 */
export function getProfile(model: ModelName, gpu: GpuType, tp: number, memoryFraction = DEFAULT_MEMORY_FRACTION): PerfProfile {
  const key = `${profileKey(model, gpu, tp)}@${memoryFraction}`;
  const hit = cache.get(key);
  if (hit !== undefined) return hit;
  const base = baseModelOf(model);
  const fit = FITTED_PROFILES.find((p) => p.model === base && p.gpu === gpu && p.tp === tp);
  if (fit === undefined) {
    throw new TidegateError("invalid_config", `no performance profile for ${profileKey(model, gpu, tp)}; known: ${knownProfiles().join(", ")}`);
  }
  const profile = new PerfProfile(fit, memoryFraction);
  if (profile.kvCapacityBytes <= 0) throw new TidegateError("invalid_config", `${model} does not fit in ${tp} × ${gpu} at memory fraction ${memoryFraction}`);
  cache.set(key, profile);
  return profile;
}

/** Service-level objective for throughputAtSlo: TTFT of one request's prefill and time between tokens. */
export interface Slo {
  ttftMs: number;
  tbtMs: number;
}

export interface SloThroughput {
  /** Largest batch meeting the SLO and the KV capacity (0 when even one request misses it). */
  batch: number;
  outputTokensPerS: number;
  /** Prompt + output tokens per second (the unit the planner's forecasts use). */
  totalTokensPerS: number;
}

/**
 * Steady-state throughput of one instance at an SLO (for the planner's tps(m, g), DESIGN "ILP"). Requests of
 * `promptTokens` in and `outputTokens` out (defaults: Azure conversation trace means, 1,155 / 211) run in a
 * continuous batch of B: each decode iteration must take ≤ tbtMs, one prompt's prefill ≤ ttftMs, and B × (prompt +
 * output) tokens of KV must fit. Per request, a prefill interrupts the batch once, so over one request lifetime
 * the batch spends O × τ(B) decoding and B × prefill(P) prefilling: outputTokensPerS = B·O / (O·τ(B) + B·prefill(P)).
 * The largest B that meets every constraint is returned (the throughput grows with B in the measured range).
 */
export function throughputAtSlo(model: ModelName, gpu: GpuType, tp: number, slo: Slo, work: { promptTokens?: number; outputTokens?: number } = {}): SloThroughput {
  const p = getProfile(model, gpu, tp);
  const promptTokens = work.promptTokens ?? 1155;
  const outputTokens = work.outputTokens ?? 211;
  const prefill = p.prefillMs(promptTokens);
  const zero = { batch: 0, outputTokensPerS: 0, totalTokensPerS: 0 };
  if (prefill > slo.ttftMs) return zero;
  const maxByKv = Math.floor(p.kvCapacityTokens / (promptTokens + outputTokens));
  let best = zero;
  for (let b = 1; b <= Math.min(maxByKv, 1024); b++) {
    const ctx = b * (promptTokens + outputTokens / 2);
    const tau = p.decodeIterMs(b, ctx);
    if (tau > slo.tbtMs) break;
    const out = (b * outputTokens * 1000) / (outputTokens * tau + b * prefill);
    if (out > best.outputTokensPerS) best = { batch: b, outputTokensPerS: out, totalTokensPerS: (out * (promptTokens + outputTokens)) / outputTokens };
  }
  return best;
}
