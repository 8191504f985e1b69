/**
 * The SLO side of one planning round (issue 31), in the order planRound (service.ts) applies it:
 * 1. `sizeAtSlo`: each (model, GPU)'s capacity at its SLO derived again for the request mix the regions reported
 *    (capacity.ts; a caller's override, e.g. the week replay's engines, takes precedence);
 * 2. `correctionsFor`: each model's correction factor from the previous report's and the telemetry since it
 *    (slo-correction.ts);
 * 3. `applyCorrections`: tokensPerS = predicted × factor, what the ILP covers demand with;
 * then `sloReport` (called by plan.ts runPlan) puts the SLO, the capacity per instance with its derivation and
 * factor, and the attainment since the last plan in the report. Pure.
 */
import type { ModelSlo } from "../core/config/slo-section.js";
import type { GpuType, ModelName } from "../core/models.js";
import type { RequestMix, SloCapacity } from "../core/perf/slo-capacity.js";
import { capacityBasis, fromCapacity, type SloCapacityBasis } from "./capacity.js";
import type { Fleet, ModelOnGpu } from "./fleet.js";
import type { InstanceCapacity, ModelSloReport, PlanReport } from "./report.js";
import { nextCorrection, type Correction } from "./slo-correction.js";
import type { SloHour } from "./slo-window.js";

/**
 * A caller's capacity for (model, GPU) at `slo` and the round's `mix`: a number (tokens/s, recorded as given by the
 * caller) or a capacityAtSlo result for its own engines; undefined keeps the config's.
 */
export type CapacityOverride = (model: ModelName, gpu: GpuType, slo: ModelSlo, mix: RequestMix) => number | SloCapacity | undefined;

/** What sizeAtSlo reads besides the fleet. */
export interface SizeAtSloOptions {
  /** The request mix per model the regions reported (models absent keep their entry's mix). */
  mixes?: ReadonlyMap<ModelName, RequestMix>;
  override?: CapacityOverride;
}

const GIVEN = "given in the fleet (tokensPerS)";

/**
 * The fleet with every entry's capacity at its model's SLO for the mix given (correction 1, tokensPerS = the
 * prediction). An entry whose capacity at the reported mix is 0 keeps its previous one, with a warning; entries a
 * fleet file gave keep their tokensPerS.
 */
export function sizeAtSlo(fleet: Fleet, o: SizeAtSloOptions = {}): { fleet: Fleet; warnings: string[] } {
  const warnings: string[] = [];
  const models: Fleet["models"] = {};
  for (const [model, byGpu] of Object.entries(fleet.models)) {
    models[model] = {};
    const slo = fleet.slo?.[model];
    const live = o.mixes?.get(model);
    for (const [gpu, mg] of Object.entries(byGpu)) {
      let c: SloCapacityBasis = mg.capacity === undefined ? { predictedTokensPerS: mg.tokensPerS, correction: 1, derivation: GIVEN } : { ...mg.capacity, correction: 1 };
      const mix = live ?? c.mix;
      const given = slo !== undefined && mix !== undefined ? o.override?.(model, gpu, slo, mix) : undefined;
      const byCaller = typeof given === "number" ? given : given?.tokensPerS;
      if (byCaller !== undefined && !(byCaller > 0)) {
        warnings.push(`${model} on ${gpu}: the round's caller gave no capacity (${typeof given === "number" ? `${given} tokens/s` : given!.derivation}); sized as the config says`);
      } else if (typeof given === "number") {
        c = { predictedTokensPerS: given, correction: 1, derivation: `${given.toFixed(0)} tokens/s, given by the planning round's caller for its engines`, ...(slo === undefined ? {} : { slo }) };
      } else if (given !== undefined) {
        c = fromCapacity(given, slo!, { ...mix!, source: live === undefined ? c.mix?.source ?? "default" : "telemetry" });
      } else if (live !== undefined && c.slo !== undefined) {
        const again = capacityBasis(model, gpu, mg.gpusPerInstance, c.slo, { ...live, source: "telemetry" }, c.limits);
        if (again.predictedTokensPerS > 0) c = again;
        else warnings.push(`${model} on ${gpu}: sized at the ${c.mix?.source ?? "default"} mix — at the mix the regions reported, ${again.derivation}`);
      }
      if (!(c.predictedTokensPerS > 0)) throw new RangeError(`${model} on ${gpu}: capacity must be > 0 tokens/s (${c.derivation})`);
      models[model]![gpu] = { ...mg, tokensPerS: c.predictedTokensPerS, capacity: c };
    }
  }
  return { fleet: { ...fleet, models }, warnings };
}

/** The factor `previous` applied to `model` (1 when it had none). */
export function previousFactor(previous: PlanReport | undefined, model: ModelName): number {
  return previous?.slo?.find((s) => s.model === model)?.correction.factor ?? 1;
}

/**
 * Each model's correction for this round (models with an SLO): the rule of slo-correction.ts on the telemetry since
 * the previous plan, the prediction being `fleet`'s (uncorrected) capacity mixed over GPU types as the serving
 * instances were.
 */
export function correctionsFor(fleet: Fleet, previous: PlanReport | undefined, hour: SloHour | undefined): Map<ModelName, Correction> {
  const out = new Map<ModelName, Correction>();
  for (const [model, slo] of Object.entries(fleet.slo ?? {})) {
    const prev = previousFactor(previous, model);
    const h = hour?.models.get(model);
    if (h === undefined) {
      out.set(model, { factor: prev, previous: prev, rule: "held", why: hour === undefined ? "no SLO telemetry since the last plan" : "no region reported this model's SLO since the last plan" });
      continue;
    }
    let w = 0;
    let x = 0;
    for (const [gpu, share] of Object.entries(h.gpuShare)) {
      const mg = fleet.models[model]?.[gpu];
      if (mg === undefined || !(share > 0)) continue;
      w += share;
      x += share * (mg.capacity?.predictedTokensPerS ?? mg.tokensPerS);
    }
    out.set(model, nextCorrection({ previous: prev, percentile: slo.percentile, requests: h.requests, met: h.met, ...(h.tokensPerSPerInstance === undefined ? {} : { observedTokensPerSPerInstance: h.tokensPerSPerInstance }), ...(w > 0 ? { predictedTokensPerSPerInstance: x / w } : {}) }));
  }
  return out;
}

/** The fleet with each model's factor applied: tokensPerS = predicted × factor (models without one unchanged). */
export function applyCorrections(fleet: Fleet, corrections: ReadonlyMap<ModelName, Correction>): Fleet {
  const models: Fleet["models"] = {};
  for (const [model, byGpu] of Object.entries(fleet.models)) {
    const f = corrections.get(model)?.factor;
    models[model] = Object.fromEntries(Object.entries(byGpu).map(([gpu, mg]): [string, ModelOnGpu] => {
      if (f === undefined) return [gpu, mg];
      const c: SloCapacityBasis = { ...(mg.capacity ?? { predictedTokensPerS: mg.tokensPerS, derivation: GIVEN }), correction: f };
      return [gpu, { ...mg, tokensPerS: c.predictedTokensPerS * f, capacity: c }];
    }));
  }
  return { ...fleet, models };
}

/** What a round knows about the SLO beyond the fleet (absent fields: an offline plan). */
export interface SloRoundFacts {
  hour?: SloHour;
  corrections?: ReadonlyMap<ModelName, Correction>;
  /** Notes for the report's warnings (sizeAtSlo's). */
  warnings?: readonly string[];
}

/** The report's `slo` section: one entry per model with an SLO in `fleet` (undefined when the fleet has none). */
export function sloReport(fleet: Fleet, facts: SloRoundFacts = {}): ModelSloReport[] | undefined {
  if (fleet.slo === undefined) return undefined;
  return Object.entries(fleet.slo).map(([model, slo]) => {
    const capacity: InstanceCapacity[] = Object.entries(fleet.models[model] ?? {}).map(([gpu, mg]) => {
      const c = mg.capacity;
      return {
        gpu,
        gpusPerInstance: mg.gpusPerInstance,
        tokensPerS: mg.tokensPerS,
        predictedTokensPerS: c?.predictedTokensPerS ?? mg.tokensPerS,
        ...(c?.requestsPerS === undefined ? {} : { requestsPerS: c.requestsPerS }),
        ...(c?.batch === undefined ? {} : { batch: c.batch }),
        ...(c?.mix === undefined ? {} : { mix: c.mix }),
        derivation: c?.derivation ?? GIVEN,
      };
    });
    const factor = fleet.models[model] === undefined ? 1 : (Object.values(fleet.models[model]!)[0]?.capacity?.correction ?? 1);
    const correction = facts.corrections?.get(model) ?? { factor, previous: factor, rule: "held" as const, why: "no telemetry in this plan (offline)" };
    const h = facts.hour?.models.get(model);
    const lastHour = facts.hour === undefined ? null : {
      fromMs: facts.hour.fromMs,
      toMs: facts.hour.toMs,
      requests: h?.requests ?? 0,
      met: h?.met ?? 0,
      attainment: h !== undefined && h.requests > 0 ? h.met / h.requests : null,
      ...(h?.tokensPerSPerInstance === undefined ? {} : { tokensPerSPerInstance: h.tokensPerSPerInstance }),
      ...(h?.mix === undefined ? {} : { mix: h.mix }),
    };
    return { model, slo, capacity, correction, lastHour };
  });
}
