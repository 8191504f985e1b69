/**
 * Deterministic assignment of trace requests to (model, client region). The public traces carry neither, so each
 * request i draws two numbers from a seeded PRNG (mulberry32, two draws per request whatever happens, so request
 * i's assignment depends only on the seed and i):
 * - client region: uniform over the configured regions (the region the request says it comes from, first in its
 *   preference order);
 * - model: uniform over the models whose context holds prompt + output tokens (MODEL_SPECS maxContextTokens:
 *   llama2-70b 4,096, bloom-176b 8,192, Llama-3 131,072). A request no configured model can hold is marked
 *   unassignable (the router would reject it with 400) and counted, not replayed. A request that names its model
 *   (TraceRequest.model, a configured one) keeps it (the draws are made all the same).
 */
import type { TidegateConfig } from "../../core/config.js";
import { MODEL_SPECS, type ModelName, type RegionName } from "../../core/models.js";
import type { TraceRequest } from "./traces.js";
import { mulberry32 } from "../../core/random.js";

export interface Assignment {
  clientRegion: RegionName;
  /** undefined when no configured model's context holds the request. */
  model: ModelName | undefined;
}

/** Assigns every request of a trace; the same (config, seed, trace) gives the same assignments. */
export function assignRequests(requests: readonly TraceRequest[], config: TidegateConfig, seed: number): Assignment[] {
  const rand = mulberry32(seed);
  const regions = config.regions.map((r) => r.name);
  const models = config.models.map((m) => m.name);
  const context = models.map((m) => MODEL_SPECS[m]?.maxContextTokens ?? 0);
  const out: Assignment[] = new Array(requests.length);
  const fitting: ModelName[] = [];
  for (let i = 0; i < requests.length; i++) {
    const r = requests[i]!;
    const uRegion = rand();
    const uModel = rand();
    fitting.length = 0;
    const need = r.promptTokens + r.outputTokens;
    for (let m = 0; m < models.length; m++) if (context[m]! >= need) fitting.push(models[m]!);
    out[i] = {
      clientRegion: regions[Math.floor(uRegion * regions.length)]!,
      model: r.model !== undefined && models.includes(r.model) ? r.model : fitting.length === 0 ? undefined : fitting[Math.floor(uModel * fitting.length)],
    };
  }
  return out;
}
