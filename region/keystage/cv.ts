/**
 * Burstiness of a stage's arrivals and its propagation down the pipeline (QUART §3.1, §5.2). The coefficient of
 * variation (CV = standard deviation / mean) of inter-arrival times measures burstiness.
 *
 * Propagation inference: QUART predicts the next stage's CV with a learned graph-attention model (Eq. 4–6), trained
 * per model and pipeline. tidegate has no such training data, so it uses the closed-form departure approximation
 * of a G/G/c station (Whitt, "The Queueing Network Analyzer", 1983, Eq. 4.9):
 *   CV_d² = 1 + (1 − ρ²)·(CV_a² − 1) + ρ²·(CV_s² − 1)/√c,
 * the CV of what a stage with utilization ρ, c replicas, arrival CV_a and service CV_s passes downstream. It has the
 * behaviour the paper observes: a busy stage (ρ → 1) smooths a bursty stream toward its service CV; an idle one
 * passes the burst on.
 */

/** Inter-arrival CV of arrival times (ms, ascending); 0 with fewer than 3 arrivals. */
export function interArrivalCv(arrivalsMs: readonly number[]): number {
  if (arrivalsMs.length < 3) return 0;
  let sum = 0;
  let sumSq = 0;
  const n = arrivalsMs.length - 1;
  for (let i = 1; i < arrivalsMs.length; i++) {
    const d = arrivalsMs[i]! - arrivalsMs[i - 1]!;
    sum += d;
    sumSq += d * d;
  }
  const mean = sum / n;
  if (mean <= 0) return 0;
  const variance = Math.max(0, sumSq / n - mean * mean);
  return Math.sqrt(variance) / mean;
}

/**
 * The CV of the stream a stage passes to its successor (Whitt's G/G/c departure approximation, see above).
 * `utilization` is clamped to [0, 1]; `replicas` ≥ 1.
 */
export function propagateCv(cvArrival: number, cvService: number, utilization: number, replicas: number): number {
  const rho = Math.max(0, Math.min(1, utilization));
  const c = Math.max(1, replicas);
  const sq = 1 + (1 - rho * rho) * (cvArrival * cvArrival - 1) + (rho * rho * (cvService * cvService - 1)) / Math.sqrt(c);
  return Math.sqrt(Math.max(0, sq));
}

/**
 * β(CV) of Eq. 7: how much a stage's own demand counts against its neighbours' when the smoother reclaims
 * replicas. A bursty stage (high CV) keeps its own estimate (β → 1); a smooth one leans on its neighbours.
 * β = CV² / (1 + CV²), in [0, 1).
 */
export function smoothingBeta(cv: number): number {
  const s = cv * cv;
  return s / (1 + s);
}
