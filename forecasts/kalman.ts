/**
 * The local-level Kalman filter (Dynamo's Kalman load predictor; Durbin & Koopman's local level model): an observed
 * series y_t = μ_t + ε_t whose level walks, μ_{t+1} = μ_t + η_t, with Var η / Var ε = q (the signal-to-noise ratio).
 * Pure. The blend runs it on log demand, so its level is a geometric mean that reacts to a shift within a few steps
 * while ignoring one noisy window (blend.ts, peak-components.ts).
 */

/** Bounds of the signal-to-noise ratio: below, the level hardly moves; above, it is the last value. */
export const SNR_RANGE = [0.001, 100] as const;

/**
 * q = Var η / Var ε by the method of moments on first differences (Δy_t = η_t + ε_t − ε_{t−1}: its variance is
 * Var η + 2 Var ε, its lag-1 autocovariance −Var ε), clamped to `SNR_RANGE`. Needs ≥ 3 values; 1 (equal noises)
 * otherwise. Non-finite values are not allowed.
 */
export function localLevelSnr(y: readonly number[]): number {
  if (y.length < 3) return 1;
  const d: number[] = [];
  for (let i = 1; i < y.length; i++) d.push(y[i]! - y[i - 1]!);
  const mean = d.reduce((s, v) => s + v, 0) / d.length;
  let g0 = 0;
  let g1 = 0;
  for (let i = 0; i < d.length; i++) {
    g0 += (d[i]! - mean) ** 2;
    if (i > 0) g1 += (d[i]! - mean) * (d[i - 1]! - mean);
  }
  g0 /= d.length;
  g1 /= d.length;
  const noise = Math.max(1e-12, -g1);
  const signal = Math.max(0, g0 + 2 * g1);
  return Math.min(SNR_RANGE[1], Math.max(SNR_RANGE[0], signal / noise));
}

/**
 * Filtered levels: out[t] is the level estimate after seeing y[0..t) (out[0] = NaN: nothing seen), so out[t] is the
 * one-step-ahead forecast of y[t] and out[y.length] the forecast of the next value. Diffuse start (the first value
 * sets the level). `q` as in `localLevelSnr`.
 */
export function filterLevels(y: readonly number[], q: number): number[] {
  const out = new Array<number>(y.length + 1).fill(Number.NaN);
  if (y.length === 0) return out;
  let level = y[0]!;
  let p = 1e6; // diffuse prior variance, in units of Var ε
  for (let t = 0; t < y.length; t++) {
    p += q;
    const gain = p / (p + 1);
    level += gain * (y[t]! - level);
    p = (1 - gain) * p;
    out[t + 1] = level;
  }
  return out;
}
