/**
 * tps(m, g) for the planner: prompt + output tokens/s one instance serves in steady state with the replay's
 * engine settings, from the shared performance model (core/perf). Same arithmetic as
 * perf/model.ts throughputAtSlo, with the batch capped by the engine's max_num_seqs and KV capacity: over one
 * request lifetime a batch of B spends O·τ(B) decoding and B·prefill(P) prefilling. The planner plans each
 * instance to `plannedUtilization` of that (the router's 0.70 effective-memory threshold, SageServe §6.2): above
 * it requests queue, and the router already treats the region as full.
 */
import { getProfile } from "../../core/perf/model.js";
import type { ReplayEngine } from "./fleet.js";

/** Steady-state tokens/s (prompt + output) of one instance of `model` on `tp` × `gpu`, for mean request sizes. */
export function instanceTokensPerS(model: string, gpu: string, tp: number, engine: ReplayEngine, promptTokens: number, outputTokens: number, plannedUtilization = 1): number {
  const p = getProfile(model, gpu, tp);
  const perSeq = promptTokens + outputTokens;
  const b = Math.max(1, Math.min(engine.maxBatch, Math.floor((engine.maxBatch * engine.kvTokensPerSeq) / perSeq)));
  const tau = p.decodeIterMs(b, b * (promptTokens + outputTokens / 2));
  const out = (b * outputTokens * 1000) / (outputTokens * tau + b * p.prefillMs(promptTokens));
  return ((out * perSeq) / outputTokens) * plannedUtilization;
}
