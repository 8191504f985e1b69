/**
 * M/M/c queueing for one pipeline stage (QUART §5.1, Eq. 1). A stage has c replicas, each completing μ requests/s,
 * and receives λ requests/s. Eq. 1 writes the stage's delay as T = P·λ / (c·μ·(μ − λ/c)) + 1/μ; the textbook
 * form of the same M/M/c result is T = C(c, a) / (c·μ − λ) + 1/μ with a = λ/μ Erlangs and C(c, a) the Erlang C
 * probability that an arrival waits (what the paper's P term stands for once the balance equations are solved).
 * Rates are per second; delays are returned in ms.
 */
import { erlangC } from "../../core/perf/slo-capacity.js";

/**
 * The stage delay of Eq. 1 in ms: queueing wait plus one service time. Infinity when λ ≥ c·μ or c = 0 with λ > 0.
 * `lambdaPerS` ≥ 0, `muPerS` > 0, `replicas` an integer ≥ 0.
 */
export function mmcDelayMs(lambdaPerS: number, muPerS: number, replicas: number): number {
  if (!(muPerS > 0) || !Number.isFinite(muPerS)) throw new RangeError(`service rate must be a finite number > 0, got ${muPerS}`);
  if (!(lambdaPerS >= 0) || !Number.isFinite(lambdaPerS)) throw new RangeError(`arrival rate must be a finite number ≥ 0, got ${lambdaPerS}`);
  if (lambdaPerS === 0) return 1000 / muPerS;
  if (replicas === 0 || lambdaPerS >= replicas * muPerS) return Number.POSITIVE_INFINITY;
  const waitS = erlangC(replicas, lambdaPerS / muPerS) / (replicas * muPerS - lambdaPerS);
  return (waitS + 1 / muPerS) * 1000;
}

/**
 * The queueing wait of a G/G/c stage by the Allen–Cunneen approximation: the M/M/c wait × (ca² + cs²) / 2, where
 * ca and cs are the coefficients of variation of inter-arrival and service times (ms; Infinity when overloaded).
 * With ca = cs = 1 it is the M/M/c wait of Eq. 1. Used by the smoother (§5.2) to size a stage for its CV.
 */
export function ggcWaitMs(lambdaPerS: number, muPerS: number, replicas: number, cvArrival: number, cvService: number): number {
  const t = mmcDelayMs(lambdaPerS, muPerS, replicas);
  if (!Number.isFinite(t)) return t;
  const waitMs = t - 1000 / muPerS;
  return (waitMs * (cvArrival * cvArrival + cvService * cvService)) / 2;
}

/**
 * The fewest replicas (≤ `maxReplicas`) whose stage delay stays ≤ `targetMs`: M/M/c when `cv` is undefined, else the
 * G/G/c wait with arrival CV `cv.arrival` and service CV `cv.service` plus one service time. Returns `maxReplicas`
 * when even that many miss the target.
 */
export function replicasForTarget(lambdaPerS: number, muPerS: number, targetMs: number, maxReplicas: number, cv?: { arrival: number; service: number }): number {
  if (lambdaPerS === 0) return 0;
  for (let c = Math.max(1, Math.floor(lambdaPerS / muPerS)); c <= maxReplicas; c++) {
    const t = cv === undefined ? mmcDelayMs(lambdaPerS, muPerS, c) : ggcWaitMs(lambdaPerS, muPerS, c, cv.arrival, cv.service) + 1000 / muPerS;
    if (t <= targetMs) return c;
  }
  return maxReplicas;
}
