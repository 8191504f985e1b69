/**
 * One correct-and-smooth pass over a pipeline's stages (QUART §5.1–5.2, Algorithm 1), as a pure function of what
 * the stages were observed doing, their replica counts, the GPU budget and the PID states.
 *
 * Per stage i (rates per s, delays in ms):
 *  1. Demand. λ̂_i = max(λ_i, inflow_i) + q_i / horizon: the observed arrival rate, raised to what the predecessor
 *     is about to pass on (inflow_i = min(λ̂_{i−1}, r_{i−1}·μ_{i−1}) — a burst queued upstream reaches stage i next),
 *     plus the queue as work to clear within `backlogHorizonMs`.
 *  2. Key stage (§5.1). T_i = Eq. 1 at (λ̂_i, μ_i, r_i); T_target,i = targetDelayFactor / μ_i. T_i > T_target,i marks
 *     i key; the PID (Eq. 3) gives Δr and r'_i = r_i + Δr (Eq. 2), at least one more replica per pass while key.
 *  3. Smooth (§5.2, Algorithm 1 `Smooth`). A stage that is not key is sized for its burstiness: CV̂_i = max(its own
 *     arrival CV, the CV propagated from stage i−1 (cv.ts)), need_i = the fewest replicas whose G/G/c delay at
 *     (λ̂_i, μ_i, CV̂_i) meets T_target,i; Eq. 7 blends it with the neighbours' needs with weight β(CV̂_i), and the
 *     stage keeps max(r_min, need_i, ⌈y'_i⌉) — so a stage whose neighbours are about to push a burst into it keeps
 *     its replicas. Surplus beyond that is reclaimed, no sooner than `reclaimCooldownMs` after the stage grew.
 *  4. Budget. Key-stage mode: reclaimed replicas go back to the pool first, then key stages take free GPUs one at a
 *     time, most overloaded (T_i / T_target,i) first. Whole-pipeline mode (the baseline): the same per-stage
 *     answers, but every stage gets the largest count any stage asks for (scale out together, up to
 *     ⌊budget / S⌋), and the pipeline shrinks only when every stage may shrink.
 */
import { propagateCv, smoothingBeta } from "./cv.js";
import type { StageObservation } from "./pipeline.js";
import type { Pid } from "./pid.js";
import { mmcDelayMs, replicasForTarget } from "./queueing.js";
import type { KeyStageParams } from "./strategy.js";

export type ScalingMode = "key-stage" | "whole-pipeline";

/** Per stage: the observation, the replica count (serving + starting), when it last grew, its expected service. */
export interface StageInput {
  obs: StageObservation;
  replicas: number;
  lastGrowMs: number | undefined;
  /** Mean service time expected from the performance model (ms), used before any completion is observed. */
  expectedServiceMs: number;
}

/** The decision of one pass for one stage. */
export interface StagePlan {
  desired: number;
  key: boolean;
  /** Eq. 1 delay at the current replicas and the target (ms). */
  delayMs: number;
  targetMs: number;
  /** Demand used (req/s), its predicted CV, and what the smoother would keep. */
  demandPerS: number;
  cv: number;
  keep: number;
}

export interface PassInput {
  stages: StageInput[];
  pids: Pid[];
  params: KeyStageParams;
  mode: ScalingMode;
  /** GPUs the planner gives this pipeline (one per stage replica). */
  budgetGpus: number;
  nowMs: number;
  dtS: number;
}

/** Runs one pass; the result has one plan per stage and Σ desired ≤ budget. */
export function correctAndSmooth(x: PassInput): StagePlan[] {
  const p = x.params;
  const n = x.stages.length;
  const plans: StagePlan[] = [];
  let prevDemand = 0;
  let prevCapacity = Number.POSITIVE_INFINITY;
  let prevCv = 0;
  let prevServiceCv = 0;
  let prevRho = 0;
  let prevReplicas = 1;
  for (let i = 0; i < n; i++) {
    const s = x.stages[i]!;
    const serviceMs = s.obs.meanServiceMs ?? s.expectedServiceMs;
    const mu = 1000 / serviceMs;
    const windowS = Math.max(s.obs.windowMs, 1) / 1000;
    const lambda = s.obs.arrivals / windowS;
    const inflow = i === 0 ? 0 : Math.min(prevDemand, prevCapacity);
    const demand = Math.max(lambda, inflow) + s.obs.queue / (p.backlogHorizonMs / 1000);
    const targetMs = p.targetDelayFactor * serviceMs;
    const delayMs = mmcDelayMs(demand, mu, s.replicas);
    const key = delayMs > targetMs;
    const cv = i === 0 ? s.obs.arrivalCv : Math.max(s.obs.arrivalCv, propagateCv(prevCv, prevServiceCv, prevRho, prevReplicas));
    const need = replicasForTarget(demand, mu, targetMs, x.budgetGpus, { arrival: cv, service: s.obs.serviceCv });
    let desired = s.replicas;
    const pid = x.pids[i]!;
    if (key) {
      const dr = pid.update(pid.error(delayMs, targetMs), x.dtS);
      desired = s.replicas + Math.max(1, Math.round(dr));
    } else pid.reset();
    plans.push({ desired, key, delayMs, targetMs, demandPerS: demand, cv, keep: need });
    prevDemand = demand;
    prevCapacity = Math.max(1, s.replicas) * mu;
    prevCv = cv;
    prevServiceCv = s.obs.serviceCv;
    prevRho = Math.min(1, demand / (Math.max(1, s.replicas) * mu));
    prevReplicas = Math.max(1, s.replicas);
  }
  // Eq. 7: y'_i = β(CV_i)·need_i + (1 − β(CV_i))·mean(need of neighbours); keep ≥ r_min, need_i, ⌈y'_i⌉.
  const needs = plans.map((pl) => pl.keep);
  plans.forEach((pl, i) => {
    const nb = [i - 1, i + 1].filter((j) => j >= 0 && j < n).map((j) => needs[j]!);
    const beta = smoothingBeta(pl.cv);
    const y = beta * needs[i]! + (1 - beta) * (nb.reduce((a, b) => a + b, 0) / nb.length);
    pl.keep = Math.max(p.minReplicasPerStage, needs[i]!, Math.ceil(y - 1e-9));
    if (!pl.key) {
      const s = x.stages[i]!;
      const cooled = s.lastGrowMs === undefined || x.nowMs - s.lastGrowMs >= p.reclaimCooldownMs;
      pl.desired = cooled && pl.keep < s.replicas ? pl.keep : Math.max(s.replicas, p.minReplicasPerStage);
    }
  });
  return x.mode === "key-stage" ? fitKeyStage(plans, x) : fitWholePipeline(plans, x);
}

/** Key-stage budget: shrink first, then key stages take free GPUs, most overloaded first. */
function fitKeyStage(plans: StagePlan[], x: PassInput): StagePlan[] {
  const base = plans.map((pl, i) => Math.min(pl.desired, x.stages[i]!.replicas));
  let free = x.budgetGpus - base.reduce((a, b) => a + b, 0);
  const wants = plans.map((pl, i) => pl.desired - base[i]!);
  const order = plans.map((_, i) => i).filter((i) => wants[i]! > 0).sort((a, b) => ratio(plans[b]!) - ratio(plans[a]!) || a - b);
  // One replica at a time, round robin in order of overload, so one stage cannot take the whole pool.
  let progress = true;
  while (free > 0 && progress) {
    progress = false;
    for (const i of order) {
      if (free === 0) break;
      if (wants[i]! > 0) {
        base[i]!++;
        wants[i]!--;
        free--;
        progress = true;
      }
    }
  }
  return plans.map((pl, i) => ({ ...pl, desired: base[i]! }));
}

/** Whole-pipeline budget: every stage at the largest count any stage asks for, within ⌊budget / S⌋. */
function fitWholePipeline(plans: StagePlan[], x: PassInput): StagePlan[] {
  const n = plans.length;
  const current = Math.max(...x.stages.map((s) => s.replicas));
  const anyKey = plans.some((pl) => pl.key);
  const wanted = anyKey ? Math.max(...plans.map((pl) => pl.desired)) : Math.max(...plans.map((pl) => pl.desired), x.params.minReplicasPerStage);
  const target = Math.min(Math.floor(x.budgetGpus / n), anyKey ? Math.max(wanted, current) : wanted);
  return plans.map((pl) => ({ ...pl, desired: target }));
}

function ratio(pl: StagePlan): number {
  return Number.isFinite(pl.delayMs) ? pl.delayMs / pl.targetMs : Number.MAX_VALUE;
}
