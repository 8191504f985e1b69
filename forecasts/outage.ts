/**
 * Collection outages in a demand series (README "Forecast model choice"). ServeGen's m-mid aggregate has stretches of
 * zero windows, often closed by one tiny window (0, 0, 0, 0, 0, 14 req/s, then ≈ 2,000 again): the collector was
 * down, not the demand. Forecasting through them needs two things, both pure functions here:
 * - `cleanOutages`: for fitting and for the level-based predictors, windows below the outage threshold (5% of the
 *   median positive value) are replaced by the last normal value, so an outage neither drags a level to 0 nor
 *   teaches the blend that the next hour follows a 0;
 * - `outageAnalog`: at an origin inside an outage, what followed the same state earlier in the same history (state =
 *   the classes zero / tiny / normal of the last two windows). When every such earlier origin recovered, the
 *   normal forecast stands; when some stayed down, the point forecast is the value minimising the mean absolute
 *   percentage error over those outcomes (their 1/a-weighted median: a near-zero hour forecast at the normal level
 *   is an error of thousands of percent), and the upper bound covers a recovery.
 */

/** Fraction of the median positive value below which a window counts as an outage (the blend's `minBase` before). */
export const OUTAGE_FRACTION = 0.05;
/** Earlier origins in the same state needed before the analog decides (fewer: persistence, see blend.ts). */
export const MIN_ANALOGS = 3;

/** The outage threshold of a series: `OUTAGE_FRACTION` × its median positive value (0 when nothing is positive). */
export function outageThreshold(values: readonly number[]): number {
  const positive = values.filter((v) => v > 0).sort((a, b) => a - b);
  return positive.length > 0 ? OUTAGE_FRACTION * positive[Math.floor(positive.length / 2)]! : 0;
}

/** A window's class: 0 zero, 1 tiny (0 < v < threshold), 2 normal. */
export function windowClass(v: number, threshold: number): 0 | 1 | 2 {
  if (v >= threshold && v > 0) return 2;
  return v > 0 ? 1 : 0;
}

/** `values` with every window below `threshold` replaced by the last normal one (leading ones by the first). */
export function cleanOutages(values: readonly number[], threshold: number): number[] {
  const out = [...values];
  const first = out.findIndex((v) => v >= threshold && v > 0);
  if (first === -1) return out; // nothing normal: nothing to fill from
  let last = out[first]!;
  for (let i = 0; i < out.length; i++) {
    if (out[i]! >= threshold && out[i]! > 0) last = out[i]!;
    else out[i] = last;
  }
  return out;
}

/** What the analog rule says at an origin inside an outage. */
export type OutageVerdict =
  /** Fewer than `MIN_ANALOGS` earlier origins in this state: no evidence either way. */
  | { kind: "unknown"; analogs: number; outcomes: number[] }
  /** Every earlier origin in this state was followed by a normal horizon: forecast as usual. */
  | { kind: "recovers"; analogs: number; outcomes: number[] }
  /** Some stayed down: `point` minimises the MAPE over the outcomes (the peaks that followed each analog). */
  | { kind: "stays-down"; analogs: number; point: number; outcomes: number[] };

/**
 * The analog rule at origin `o` (x[0..o) known), horizon `H`: only meaningful when x[o−1] is below `threshold`.
 * Earlier origins t (2 ≤ t, t + H ≤ o) whose last two windows have the same classes as at `o` are the analogs;
 * each outcome is max x[t..t+H).
 */
export function outageAnalog(x: readonly number[], o: number, H: number, threshold: number): OutageVerdict {
  const key = (t: number) => windowClass(x[t - 2]!, threshold) * 3 + windowClass(x[t - 1]!, threshold);
  const k0 = o >= 2 ? key(o) : -1;
  const outcomes: number[] = [];
  for (let t = 2; t + H <= o; t++) {
    if (key(t) !== k0) continue;
    let m = -Infinity;
    for (let i = t; i < t + H; i++) if (x[i]! > m) m = x[i]!;
    outcomes.push(m);
  }
  if (outcomes.length < MIN_ANALOGS) return { kind: "unknown", analogs: outcomes.length, outcomes };
  if (outcomes.every((a) => a >= threshold && a > 0)) return { kind: "recovers", analogs: outcomes.length, outcomes };
  const positive = outcomes.filter((a) => a > 0);
  return { kind: "stays-down", analogs: outcomes.length, point: positive.length > 0 ? weightedMedian(positive, positive.map((a) => 1 / a)) : 0, outcomes };
}

/** The weighted median of `values` (weights ≥ 0, not all 0): the smallest v whose cumulative weight reaches half. */
export function weightedMedian(values: readonly number[], weights: readonly number[]): number {
  const idx = values.map((_, i) => i).sort((a, b) => values[a]! - values[b]!);
  const total = weights.reduce((s, w) => s + w, 0);
  let c = 0;
  for (const i of idx) {
    c += weights[i]!;
    if (c >= total / 2) return values[i]!;
  }
  return values[idx[idx.length - 1]!]!;
}
