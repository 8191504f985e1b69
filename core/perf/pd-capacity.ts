/**
 * What one prefill or one decode instance sustains at an SLO (issue 48 item 4), and how many of each a load needs:
 * NVIDIA Dynamo's SLA planner (docs "SLA-based Planner", planner_core): from a per-engine profile at the TTFT and ITL
 * targets it sizes the two pools as
 *
 *   num_p = ceil(request rate × ISL / prefill throughput per engine at the TTFT target)
 *   num_d = ceil(request rate × OSL / decode throughput per engine at the ITL target, context ISL + OSL/2)
 *
 * Dynamo profiles prefill as one prompt of ISL tokens on an idle engine ("no in-flight batching", its pre-deployment
 * profiling) and decode as iterations over a batch of in-flight requests; here both come from the fitted
 * performance model (perf/model.ts), the same curves the simulated engines run on:
 * - prefill: ISL / prefill(ISL) tokens/s while prefill(ISL) ≤ ttftMs (else 0: the target cannot hold);
 * - decode: the largest batch B (≤ the engine's max batch) whose iteration τ(B, B·(ISL + OSL/2)) ≤ tpotMs and whose
 *   KV (B·(ISL + OSL)) fits the engine's KV cache, decoding B / τ(B) tokens/s (0 when one request alone misses tpotMs);
 * each step's time × the engine's time scale (a slowed engine-sim is slower at both).
 * The region controller turns them into each pool's utilization (demand ÷ serving capacity), which every strategy
 * acts on as it acts on a colocated endpoint's (region/runtime/pool-signals.ts).
 */
import type { GpuType, ModelName } from "../models.js";
import { getProfile } from "./model.js";

/** One engine's capacity at the targets, per role. */
export interface PoolCapacity {
  /** Prompt tokens/s one prefill engine computes with each prompt's prefill within the TTFT target (0: never). */
  prefillTokensPerS: number;
  /** Output tokens/s one decode engine produces within the TPOT target (0: never). */
  decodeTokensPerS: number;
  /** The decode batch behind `decodeTokensPerS`. */
  decodeBatch: number;
}

/** Typical request sizes (Dynamo's ISL/OSL); the Azure conversation trace's means by default, as throughputAtSlo. */
export interface PoolWork {
  promptTokens?: number;
  outputTokens?: number;
}

const DEFAULT_ISL = 1155;
const DEFAULT_OSL = 211;
const MAX_BATCH = 1024;

/**
 * The engine's own limits where they differ from the profile's: `timeScale` (engine-sim's: every step takes that many
 * times the measured time), `maxBatch` (vLLM max_num_seqs) and `kvCapacityTokens`.
 */
export interface PoolEngine {
  timeScale?: number;
  maxBatch?: number;
  kvCapacityTokens?: number;
}

export function poolCapacity(model: ModelName, gpu: GpuType, tp: number, slo: { ttftMs: number; tpotMs: number }, work: PoolWork = {}, engine: PoolEngine = {}): PoolCapacity {
  const p = getProfile(model, gpu, tp);
  const scale = engine.timeScale ?? 1;
  const isl = Math.max(1, work.promptTokens ?? DEFAULT_ISL);
  const osl = Math.max(1, work.outputTokens ?? DEFAULT_OSL);
  const prefill = p.prefillMs(isl) * scale;
  const prefillTokensPerS = prefill <= slo.ttftMs ? (isl * 1000) / prefill : 0;
  const maxByKv = Math.floor((engine.kvCapacityTokens ?? p.kvCapacityTokens) / (isl + osl));
  let decodeBatch = 0;
  let decodeTokensPerS = 0;
  for (let b = 1; b <= Math.min(maxByKv, engine.maxBatch ?? MAX_BATCH); b++) {
    const tau = p.decodeIterMs(b, b * (isl + osl / 2)) * scale;
    if (tau > slo.tpotMs) break;
    const rate = (b * 1000) / tau;
    if (rate > decodeTokensPerS) {
      decodeTokensPerS = rate;
      decodeBatch = b;
    }
  }
  return { prefillTokensPerS, decodeTokensPerS, decodeBatch };
}

/**
 * Dynamo's replica counts for a load of `requestsPerS` with the work's ISL/OSL (the formulas above); Infinity when
 * the load is positive and an engine's capacity is 0.
 */
export function poolsFor(requestsPerS: number, cap: PoolCapacity, work: PoolWork = {}): { prefill: number; decode: number } {
  const isl = work.promptTokens ?? DEFAULT_ISL;
  const osl = work.outputTokens ?? DEFAULT_OSL;
  const need = (tokensPerS: number, per: number) => (tokensPerS <= 0 ? 0 : per <= 0 ? Infinity : Math.ceil(tokensPerS / per - 1e-9));
  return { prefill: need(requestsPerS * isl, cap.prefillTokensPerS), decode: need(requestsPerS * osl, cap.decodeTokensPerS) };
}

/**
 * A pool's utilization for the strategies: the tokens/s its role must serve over what its serving engines sustain
 * at the targets (1 with none serving, as a colocated endpoint with none reads as full; ≥ 0, may exceed 1).
 */
export function poolUtilization(demandTokensPerS: number, serving: number, perEngineTokensPerS: number): number {
  const capacity = serving * perEngineTokensPerS;
  if (!(capacity > 0)) return 1;
  return Math.max(0, demandTokensPerS) / capacity;
}
