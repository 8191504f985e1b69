/**
 * tps(m, g) for the planner in the week replay (issue 31): the planner's own capacity at the SLO
 * (core/perf/slo-capacity.ts capacityAtSlo, as planner/capacity.ts derives it for `tidegate dev`'s simulated engines)
 * under the replay's engine limits — max_num_seqs and KV per sequence (fleet.ts ReplayEngine) — at the SLO and
 * request mix the planning round hands over, times the fleet's `plannedUtilization` (the share of that capacity the
 * planner counts on: 1 by default, lower to plan headroom; the LT strategies' knob in bench:strategies).
 */
import type { ModelSlo } from "../../core/config.js";
import type { GpuType, ModelName } from "../../core/models.js";
import { getProfile } from "../../core/perf/model.js";
import { capacityAtSlo, type RequestMix, type SloCapacity } from "../../core/perf/slo-capacity.js";
import type { FleetSpec, ReplayEngine } from "./fleet.js";

/** The planning round's capacity override for the replay's engines (planner/slo-round.ts CapacityOverride). */
export function replayCapacity(fleet: FleetSpec): (model: ModelName, gpu: GpuType, slo: ModelSlo, mix: RequestMix) => SloCapacity | undefined {
  return (model, gpu, slo, mix) => {
    const engine = fleet.engines[model];
    const tp = fleet.config.models.find((m) => m.name === model)?.gpusPerInstance[gpu];
    if (engine === undefined || tp === undefined) return undefined;
    const c = capacityAtSlo(model, gpu, tp, slo, mix, { maxBatch: engine.maxBatch, kvTokensPerSeq: engine.kvTokensPerSeq });
    const share = fleet.plannedUtilization;
    if (share === 1) return c;
    return { ...c, requestsPerS: c.requestsPerS * share, tokensPerS: c.tokensPerS * share, derivation: `${c.derivation}; × ${share} planned share` };
  };
}

/**
 * Saturation tokens/s (prompt + output) of one instance of `model` on `tp` × `gpu` for mean request sizes, times
 * `share` — no SLO: BlitzScale §5.3's demand policy sizes on it (bench:burst). Over one request lifetime a batch of B
 * (max_num_seqs, capped by KV) spends O·τ(B) decoding and B·prefill(P) prefilling (perf/model.ts throughputAtSlo).
 */
export function instanceTokensPerS(model: string, gpu: string, tp: number, engine: ReplayEngine, promptTokens: number, outputTokens: number, share = 1): number {
  const p = getProfile(model, gpu, tp);
  const perSeq = promptTokens + outputTokens;
  const b = Math.max(1, Math.min(engine.maxBatch, Math.floor((engine.maxBatch * engine.kvTokensPerSeq) / perSeq)));
  const tau = p.decodeIterMs(b, b * (promptTokens + outputTokens / 2));
  const out = (b * outputTokens * 1000) / (outputTokens * tau + b * p.prefillMs(promptTokens));
  return ((out * perSeq) / outputTokens) * share;
}
