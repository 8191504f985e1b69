/**
 * The `slo` section (issue 31): the interactive service-level objective each model must meet — time to first token
 * and time per output token (TPOT, the mean inter-token latency of one request after its first token) at a
 * percentile — as a default for every model and per-model overrides. Batch requests keep their deadlines
 * (`queue`). Every judgement of "met" in tidegate reads it: the region's attainment counters and `/metrics`, the
 * planner's capacity per instance (core/perf/slo-capacity.ts, planner/capacity.ts) and its plan report, the week
 * replay's results.
 *
 *   "slo": { "ttftMs": 1000, "tpotMs": 100, "percentile": 0.95,
 *            "models": { "bloom-176b": { "ttftMs": 1500 } } }
 *
 * A request meets the SLO when its TTFT ≤ ttftMs and its TPOT ≤ tpotMs; a request never served (refused, failed
 * before its first token) is a miss. A model meets the SLO over a span when the `percentile` of its TTFTs and of its
 * TPOTs are within the targets, which is the same as at least `percentile` of its requests meeting each target.
 */
import type { ModelName } from "../models.js";
import type { ObjectReader } from "../validate.js";

/** One model's interactive SLO. */
export interface ModelSlo {
  /** Time to first token, ms. */
  ttftMs: number;
  /** Time per output token after the first (mean inter-token latency of a request), ms. */
  tpotMs: number;
  /** The percentile both targets hold at, in (0, 1) (0.95 = p95). */
  percentile: number;
}

export interface SloConfig extends ModelSlo {
  /** Per-model overrides of the defaults above (absent keys take the default). */
  models: Record<ModelName, ModelSlo>;
}

/** The default SLO: p95 TTFT ≤ 1 s and p95 TPOT ≤ 100 ms (issue 31; Dynamo's SLA planner states its targets the same way). */
export const DEFAULT_SLO: ModelSlo = { ttftMs: 1000, tpotMs: 100, percentile: 0.95 };

function readTargets(r: ObjectReader, base: ModelSlo): ModelSlo {
  return {
    ttftMs: r.number("ttftMs", base.ttftMs, { gt: 0, max: 600_000 }),
    tpotMs: r.number("tpotMs", base.tpotMs, { gt: 0, max: 60_000 }),
    percentile: r.number("percentile", base.percentile, { gt: 0, max: 0.999 }),
  };
}

/** Reads `slo` (every field optional); `models` keys must be models the config serves. */
export function parseSlo(r: ObjectReader, models: readonly { name: ModelName }[]): SloConfig {
  const base = readTargets(r, DEFAULT_SLO);
  const mr = r.object("models");
  const known = new Set(models.map((m) => m.name));
  const perModel: Record<string, ModelSlo> = {};
  for (const name of Object.keys(mr.value)) {
    if (!known.has(name)) mr.fail(name, `is not a model of this config; known: ${[...known].join(", ")}`);
    const m = mr.object(name);
    perModel[name] = readTargets(m, base);
    m.done();
  }
  mr.done();
  r.done();
  return { ...base, models: perModel };
}

/** The SLO `model` is held to: its override, else the default. */
export function sloFor(slo: SloConfig, model: ModelName): ModelSlo {
  const m = slo.models[model];
  return m ?? { ttftMs: slo.ttftMs, tpotMs: slo.tpotMs, percentile: slo.percentile };
}

/** Whether one served request met `slo` (TPOT undefined: a one-token answer has no inter-token time and meets it). */
export function meetsSlo(slo: ModelSlo, ttftMs: number, tpotMs: number | undefined): boolean {
  return ttftMs <= slo.ttftMs && (tpotMs === undefined || tpotMs <= slo.tpotMs);
}
