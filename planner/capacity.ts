/**
 * tps(m, g) at the SLO (issue 31): the tokens/s one instance of model m on GPU type g serves while the model's SLO
 * holds (core/perf/slo-capacity.ts capacityAtSlo), with how it was derived — the SLO, the request mix, the batch,
 * the request rate, one line of words — and the live correction factor applied (slo-correction.ts), so the plan
 * report can show it. The mix is the Azure conversation trace's means until the regions report one.
 */
import { modelEngineSettings, type TidegateConfig } from "../core/config.js";
import type { ModelSlo } from "../core/config/slo-section.js";
import type { GpuType, ModelName } from "../core/models.js";
import { capacityAtSlo, type CapacityLimits, type RequestMix, type SloCapacity } from "../core/perf/slo-capacity.js";

/** Mean request of the Azure LLM conversation trace (prompt / output tokens), as perf/model.ts throughputAtSlo uses. */
export const DEFAULT_MIX: RequestMix = { promptTokens: 1155, outputTokens: 211 };

/** Where a capacity's request mix came from. */
export type MixSource = "default" | "telemetry";

/** How one (model, GPU type)'s tokensPerS was obtained, for the plan report. */
export interface SloCapacityBasis {
  /** tokens/s one instance serves at the SLO before the correction factor (capacityAtSlo, or as given). */
  predictedTokensPerS: number;
  /** The live correction factor applied: tokensPerS = predictedTokensPerS × correction (1: none). */
  correction: number;
  /** One line: capacityAtSlo's derivation, or where a given figure came from. */
  derivation: string;
  /** Present when capacityAtSlo derived it: */
  slo?: ModelSlo;
  mix?: RequestMix & { source: MixSource };
  /** The engine limits it was derived under (kept to derive it again at another mix). */
  limits?: CapacityLimits;
  batch?: number;
  requestsPerS?: number;
}

/** capacityAtSlo as a basis (correction 1); `predictedTokensPerS` is 0 when the SLO cannot hold (derivation says why). */
export function capacityBasis(model: ModelName, gpu: GpuType, gpusPerInstance: number, slo: ModelSlo, mix: RequestMix & { source: MixSource }, limits?: CapacityLimits): SloCapacityBasis {
  return fromCapacity(capacityAtSlo(model, gpu, gpusPerInstance, slo, mix, limits), slo, mix, limits);
}

/** A basis from a capacityAtSlo result (e.g. one a caller computed for its own engines). */
export function fromCapacity(c: SloCapacity, slo: ModelSlo, mix: RequestMix & { source: MixSource }, limits?: CapacityLimits): SloCapacityBasis {
  return { predictedTokensPerS: c.tokensPerS, correction: 1, derivation: c.derivation, slo, mix, ...(limits === undefined ? {} : { limits }), batch: c.batch, requestsPerS: c.requestsPerS };
}

/**
 * The engine limits the config gives a model's simulated engines (`engines.models[m].maxBatch`, its
 * `kvCapacityTokens`, else `engines.kvCapacityTokens`); undefined for real engines (`openai-http`, or a command
 * template), which run vLLM's default max_num_seqs on the profile's KV capacity.
 */
export function configLimits(config: TidegateConfig, model: ModelName): CapacityLimits | undefined {
  const e = config.engines;
  if (e.kind !== "sim" || e.commandTemplate !== undefined) return undefined;
  const m = modelEngineSettings(e, model);
  const out: CapacityLimits = { ...(m.maxBatch === undefined ? {} : { maxBatch: m.maxBatch }), ...(m.kvCapacityTokens === undefined ? {} : { kvCapacityTokens: m.kvCapacityTokens }) };
  return Object.keys(out).length === 0 ? undefined : out;
}
