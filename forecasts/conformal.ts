/**
 * The blend's band (blend.ts), conformal-style: the scores are actual / forecast over the history's own fit origins
 * (oldest first), and the bound multiplies the point forecast by their quantile. The upper quantile adapts as in
 * adaptive conformal inference (Gibbs & Candès 2021): replayed over the fit origins in order, each origin's bound taken
 * from the scores before it, the miss level α moves by γ·(α* − miss), so a history whose recent errors ran wider than
 * the nominal 10% raises its quantile, and one whose bound covered everything lowers it. Pure.
 */

/** γ of the adaptation; chosen on days 8–10 of the ServeGen language series (README "Forecast model choice"). */
export const ACI_GAMMA = 0.02;
/** Scores seen before the replay starts judging misses. */
const WARMUP = 24;

/** Quantile `q` ∈ [0, 1] of sorted `s` (linear interpolation). */
function sortedQuantile(s: readonly number[], q: number): number {
  const pos = q * (s.length - 1);
  const lo = Math.floor(pos);
  const hi = Math.ceil(pos);
  return s[lo]! + (s[hi]! - s[lo]!) * (pos - lo);
}

/** The factors of a band and the upper quantile used. */
export interface ConformalBand {
  /** Factor of the lower bound, in [0, 1]. */
  lower: number;
  /** Factor of the upper bound, in [1, 2]. */
  upper: number;
  /** The quantile of the scores `upper` was taken at (the nominal one unless adapted). */
  upperQuantile: number;
}

/**
 * Band factors from `scores` (actual / forecast, oldest first, finite): the `lowerQuantile` quantile (≤ 1) and the
 * adapted upper quantile (clamped to [1, 2]); ±25% with fewer than 6 scores, no adaptation with fewer than 30.
 */
export function conformalBand(scores: readonly number[], lowerQuantile: number, upperQuantile: number, gamma = ACI_GAMMA): ConformalBand {
  if (scores.length < 6) return { lower: 0.75, upper: 1.25, upperQuantile };
  let q = upperQuantile;
  if (gamma > 0 && scores.length >= WARMUP + 6) {
    const target = 1 - upperQuantile;
    let alpha = target;
    const seen = scores.slice(0, WARMUP).sort((a, b) => a - b);
    for (let j = WARMUP; j < scores.length; j++) {
      const bound = sortedQuantile(seen, Math.min(1, Math.max(0.5, 1 - alpha)));
      alpha += gamma * (target - (scores[j]! > bound ? 1 : 0));
      // Insert scores[j] keeping `seen` sorted.
      let k = seen.length;
      seen.push(scores[j]!);
      while (k > 0 && seen[k - 1]! > scores[j]!) {
        seen[k] = seen[k - 1]!;
        k--;
      }
      seen[k] = scores[j]!;
    }
    q = Math.min(1, Math.max(0.5, 1 - alpha));
  }
  const sorted = [...scores].sort((a, b) => a - b);
  return {
    lower: Math.max(0, Math.min(1, sortedQuantile(sorted, lowerQuantile))),
    upper: Math.min(2, Math.max(1, sortedQuantile(sorted, q))),
    upperQuantile: q,
  };
}
