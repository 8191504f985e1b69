/**
 * A fleet for planning shipped traces offline when no --fleet is given (`tidegate plan`): every (model, region) in
 * the history gets one endpoint of 4 × h100-80gb serving llama2-70b's capacity at the default SLO
 * (core/perf/slo-capacity.ts), starting with the instances the last day's peak needed (at least 1), bounded by
 * [1, 2 × that + 4], and the region's capacity is what those maxima need. Prices are the defaults (USD per
 * GPU-hour). The description says all of this in one line for stderr and the report's warnings.
 */
import type { DemandHistory } from "../forecasts/history.js";
import { DAY_MS } from "../forecasts/history.js";
import { DEFAULT_SLO } from "../core/config.js";
import { DEFAULT_GPU_COST, profileCapacity, type Fleet } from "./fleet.js";

const GPU = "h100-80gb";
const GPUS_PER_INSTANCE = 4;
const PROFILE_MODEL = "llama2-70b";

/** The stand-in fleet for `series` whose history ends at `endMs`. */
export async function standInFleet(history: DemandHistory, series: readonly { model: string; region: string }[], endMs: number): Promise<{ fleet: Fleet; description: string }> {
  const measured = profileCapacity(PROFILE_MODEL, GPU, GPUS_PER_INSTANCE, DEFAULT_SLO);
  const capacity = measured !== undefined && measured.predictedTokensPerS > 0 ? { ...measured, derivation: `stand-in: ${PROFILE_MODEL}'s capacity on ${GPUS_PER_INSTANCE} × ${GPU} — ${measured.derivation}` } : undefined;
  const tps = capacity?.predictedTokensPerS ?? 5000;
  const regions = new Map<string, Fleet["regions"][number]>();
  const models: Fleet["models"] = {};
  for (const s of series) {
    const day = await history.series({ kind: "iw", model: s.model, region: s.region }, endMs - DAY_MS, endMs);
    const peak = Math.max(0, ...day.filter(Number.isFinite));
    const instances = Math.max(1, Math.ceil(peak / tps));
    models[s.model] = { [GPU]: { gpusPerInstance: GPUS_PER_INSTANCE, tokensPerS: tps, modelStartCost: 0.5, ...(capacity === undefined ? {} : { capacity }) } };
    const r = regions.get(s.region) ?? { name: s.region, capacity: { [GPU]: 0 }, endpoints: [] };
    const max = 2 * instances + 4;
    r.endpoints.push({ model: s.model, gpu: GPU, instances, minInstances: 1, maxInstances: max, spotInstances: 0 });
    r.capacity[GPU] = r.capacity[GPU]! + max * GPUS_PER_INSTANCE;
    regions.set(s.region, r);
  }
  return {
    fleet: { alpha: 0.8, beta: 0.2, currency: "USD", gpus: { [GPU]: DEFAULT_GPU_COST[GPU]! }, models, regions: [...regions.values()], slo: Object.fromEntries(Object.keys(models).map((m) => [m, DEFAULT_SLO])) },
    description: `no --fleet: a stand-in fleet — each (model, region) on ${GPUS_PER_INSTANCE} × ${GPU} instances at ${PROFILE_MODEL}'s measured ${tps.toFixed(0)} tokens/s, starting at what the last day's peak needed, ${DEFAULT_GPU_COST[GPU]!.holdPerGpu} USD per GPU-hour`,
  };
}
