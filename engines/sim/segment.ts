/**
 * Time arithmetic of a decode segment (core.ts): a run of iterations with a fixed batch in which iteration k
 * (0-based) lasts α + β·k ms — α = τ(B, C0) from the performance model, β = cCtx·B because the batch's context grows
 * by B tokens an iteration. Closed form, so token times need no per-token events.
 */

const EPS_MS = 1e-9;

/** T(n) = n·α + β·n(n−1)/2: the ms that the first `n` iterations take. */
export function segmentMs(n: number, alphaMs: number, betaMs: number): number {
  return n * alphaMs + (betaMs * n * (n - 1)) / 2;
}

/**
 * The number of iterations finished `elapsedMs` after the segment start: the largest k ≤ nEnd with T(k) ≤ elapsed
 * (1e-9 ms tolerance, so an event at exactly T(k) counts iteration k as done). 0 for elapsed ≤ 0.
 */
export function itersWithin(elapsedMs: number, alphaMs: number, betaMs: number, nEnd: number): number {
  const dt = elapsedMs + EPS_MS;
  if (dt <= 0) return 0;
  const b = alphaMs - betaMs / 2;
  let k = betaMs === 0 ? Math.floor(dt / alphaMs) : Math.floor((-b + Math.sqrt(b * b + 2 * betaMs * dt)) / betaMs);
  while (k > 0 && segmentMs(k, alphaMs, betaMs) > dt) k--;
  while (k < nEnd && segmentMs(k + 1, alphaMs, betaMs) <= dt) k++;
  return Math.min(k, nEnd);
}
