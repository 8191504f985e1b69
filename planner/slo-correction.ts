/**
 * The live correction of capacity at the SLO (issue 31): when the regions' telemetry shows a model's instances meet
 * the SLO at a different load than capacityAtSlo predicts (core/perf/slo-capacity.ts), a per-model factor moves
 * the capacity the next plan uses: tokensPerS = predicted × factor, for every GPU type of the model.
 *
 * The rule, per model, from the telemetry since the last plan (slo-window.ts): attainment = met / requests; the
 * observed load L = tokens/s per serving instance (request-weighted); the prediction X = capacityAtSlo's tokens/s
 * per instance (GPU types mixed as the serving instances were); the capacity the last plan used C = factor × X.
 * - attainment < percentile while L < C: an instance missed the SLO below the capacity planned for it, so its
 *   capacity is at most L — the factor moves down toward L / X;
 * - attainment ≥ percentile while L > C: an instance met the SLO above the capacity planned, so it is at least
 *   L — the factor moves up toward L / X;
 * - otherwise (met within capacity; missed above it, which says more instances were needed, not that each is
 *   smaller) it stays, as it does with fewer than MIN_REQUESTS requests or no measured load.
 * A move goes halfway (STEP) from the previous factor to L / X and is bounded to [MIN_FACTOR, MAX_FACTOR]; the
 * factor is carried from report to report (PlanReport.slo[].correction.factor; 1 when none). A change of more
 * than LOG_CHANGE of the previous factor is logged by the round (service.ts). Pure.
 */

/** Bounds of the factor, its smoothing step and the fewest requests it moves on. */
export const MIN_FACTOR = 0.5;
export const MAX_FACTOR = 1.5;
export const STEP = 0.5;
export const MIN_REQUESTS = 50;
/** A relative change above this is logged. */
export const LOG_CHANGE = 0.05;

/** What the rule reads for one model. */
export interface CorrectionInput {
  /** The factor the last plan used (1 when none). */
  previous: number;
  /** The SLO's percentile, in (0, 1). */
  percentile: number;
  requests: number;
  met: number;
  /** L: observed tokens/s per serving instance. */
  observedTokensPerSPerInstance?: number;
  /** X: predicted tokens/s per instance, before any factor. */
  predictedTokensPerSPerInstance?: number;
}

/** The factor for the next plan and why. */
export interface Correction {
  factor: number;
  previous: number;
  rule: "down" | "up" | "held";
  why: string;
  observedTokensPerSPerInstance?: number;
  predictedTokensPerSPerInstance?: number;
}

const clamp = (x: number): number => Math.min(MAX_FACTOR, Math.max(MIN_FACTOR, x));
const n0 = (x: number): string => Math.round(x).toLocaleString("en-US");
const pc = (x: number): string => `${(100 * x).toFixed(1)}%`;

/** The next factor by the rule in the file comment. */
export function nextCorrection(i: CorrectionInput): Correction {
  const previous = Number.isFinite(i.previous) && i.previous > 0 ? clamp(i.previous) : 1;
  const L = i.observedTokensPerSPerInstance;
  const X = i.predictedTokensPerSPerInstance;
  const figures = { ...(L === undefined ? {} : { observedTokensPerSPerInstance: L }), ...(X === undefined ? {} : { predictedTokensPerSPerInstance: X }) };
  const held = (why: string): Correction => ({ factor: previous, previous, rule: "held", why, ...figures });
  if (i.requests < MIN_REQUESTS) return held(`${i.requests} request(s) since the last plan, fewer than ${MIN_REQUESTS}: too few to judge`);
  if (L === undefined || X === undefined || !(X > 0)) return held("no load per serving instance was measured");
  const attainment = i.met / i.requests;
  const C = previous * X;
  const target = L / X;
  const at = `${pc(attainment)} met (target ${pc(i.percentile)}) at ${n0(L)} tokens/s per instance`;
  const move = (rule: "down" | "up", why: string): Correction => {
    const raw = previous + STEP * (target - previous);
    return { factor: clamp(raw), previous, rule, why: `${why}: halfway toward ${target.toFixed(2)}${clamp(raw) !== raw ? `, bounded to [${MIN_FACTOR}, ${MAX_FACTOR}]` : ""}`, ...figures };
  };
  if (attainment < i.percentile && L < C) return move("down", `${at}, below the ${n0(C)} planned`);
  if (attainment >= i.percentile && L > C) return move("up", `${at}, above the ${n0(C)} planned`);
  return held(attainment < i.percentile ? `${at}, above the ${n0(C)} planned: more instances were needed, not a smaller capacity` : `${at}, within the ${n0(C)} planned`);
}

/** Whether the factor changed by more than LOG_CHANGE of its previous value. */
export function changedMuch(c: Correction): boolean {
  return Math.abs(c.factor - c.previous) > LOG_CHANGE * c.previous;
}
