/**
 * Seeded randomness for workloads and simulated delays: a small, fast generator (mulberry32 seeded through
 * splitmix32) and the draws the workload needs — standard normal, Gamma (Marsaglia–Tsang, with the shape < 1
 * boost), Weibull and exponential. Same seed, same sequence, on every machine.
 */
import type { Random } from "../../core/random.js";

export type { Random };
export { mix32, seededRandom } from "../../core/random.js";

/** Standard normal (Box–Muller). */
export function normal(r: Random): number {
  const u = Math.max(r(), 1e-300);
  return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * r());
}

/** Gamma(shape k > 0, scale 1). Marsaglia & Tsang (2000); for k < 1 uses Gamma(k+1)·U^(1/k). */
export function gamma(r: Random, k: number): number {
  if (k < 1) return gamma(r, k + 1) * Math.pow(Math.max(r(), 1e-300), 1 / k);
  const d = k - 1 / 3;
  const c = 1 / Math.sqrt(9 * d);
  for (;;) {
    let x: number;
    let v: number;
    do {
      x = normal(r);
      v = 1 + c * x;
    } while (v <= 0);
    v = v * v * v;
    const u = r();
    if (u < 1 - 0.0331 * x * x * x * x) return d * v;
    if (Math.log(Math.max(u, 1e-300)) < 0.5 * x * x + d * (1 - v + Math.log(v))) return d * v;
  }
}

/** Weibull(shape k > 0, scale 1) by inversion. */
export function weibull(r: Random, k: number): number {
  return Math.pow(-Math.log(Math.max(1 - r(), 1e-300)), 1 / k);
}

/** Exponential with mean 1. */
export function exponential(r: Random): number {
  return -Math.log(Math.max(1 - r(), 1e-300));
}

/** Γ(x) for x > 0 (Lanczos, g = 7), enough for mean-normalising Weibull draws. */
export function gammaFn(x: number): number {
  if (x < 0.5) return Math.PI / (Math.sin(Math.PI * x) * gammaFn(1 - x));
  const g = 7;
  const c = [0.99999999999980993, 676.5203681218851, -1259.1392167224028, 771.32342877765313, -176.61502916214059, 12.507343278686905, -0.13857109526572012, 9.9843695780195716e-6, 1.5056327351493116e-7];
  x -= 1;
  let a = c[0]!;
  const t = x + g + 0.5;
  for (let i = 1; i < g + 2; i++) a += c[i]! / (x + i);
  return Math.sqrt(2 * Math.PI) * Math.pow(t, x + 0.5) * Math.exp(-t) * a;
}
