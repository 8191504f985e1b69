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
 *  3. Smooth (§5.2, Algorithm 1 `Smooth`). Each stage is sized for its burstiness: CV̂_i = max(its own arrival CV,
 *     the CV propagated from stage i−1 (cv.ts)), need_i = the fewest replicas whose G/G/c delay at (λ̂_i, μ_i, CV̂_i)
 *     meets T_target,i; Eq. 7 blends it with the neighbours' needs with weight β(CV̂_i), and the stage keeps
 *     max(r_min, need_i, ⌈y'_i⌉) — so a stage whose neighbours are about to push a burst into it keeps its
 *     replicas. Replicas beyond that are surplus.
 *  4. Budget (the planner's GPUs for this pipeline; held, not handed back between bursts).
 *     Key-stage mode: key stages take the budget's free GPUs one at a time, most overloaded (T_i / T_target,i)
 *     first; a key stage still short and below its share of the Eq. 1 water-filled split of the budget
 *     (`waterfill`) takes one surplus replica per pass from a donor — a stage that is not key,
 *     did not grow within `reclaimCooldownMs` (at most `maxMovesPerPass` moves a pass), holds more than its share of the Eq. 1 water-filled split of the
 *     budget (`waterfill`) and keeps its smoothed need with one fewer. Over budget (the planner lowered it), the
 *     stages with the most slack shrink first.
 *     Whole-pipeline mode (the baseline): the same per-stage answers, but every stage gets the largest count any
 *     stage asks for while one is key (scale out together, up to ⌊budget / S⌋); it holds otherwise.
 *  5. Scale-in (`releaseAfterMs` > 0; 0 holds the budget). QUART's Smooth reclaims surplus (§5.2: "use the Smooth
 *     method to gracefully reclaim resources"), and the serverless systems it is compared with (§8.1) release idle
 *     instances. Key-stage: a stage that is not key, holds more than its smoothed keep and has not grown for
 *     `releaseAfterMs` gives one replica back per pass (before key stages take free GPUs, so a key stage may take
 *     it in the same pass). Whole-pipeline: when no stage is key, every stage's count is above the largest keep and
 *     none grew for `releaseAfterMs`, one whole pipeline goes.
 */
import { propagateCv, smoothingBeta } from "./cv.js";
import type { StageObservation } from "./pipeline.js";
import type { Pid } from "./pid.js";
import { mmcDelayMs, replicasForTarget } from "./queueing.js";
import type { KeyStageParams } from "../strategies/keystage.js";

/** How the budget is split: per stage (key-stage, QUART) or every stage together (whole-pipeline, the baseline). */
export type ScalingMode = "key-stage" | "whole-pipeline";

/**
 * Per stage: the observation, the replica count (serving + starting), when it last grew (now while a replica is still
 * starting past its start time: scaler.ts `grownAt`), its expected service.
 */
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

/** Everything one pass needs; `pids` (one per stage) carry state between passes, `dtS` is the time since the last. */
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
      desired = s.replicas + Math.max(0, Math.round(dr));
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
    if (!pl.key) pl.desired = Math.max(x.stages[i]!.replicas, p.minReplicasPerStage);
  });
  return x.mode === "key-stage" ? fitKeyStage(plans, x) : fitWholePipeline(plans, x);
}

/**
 * Key-stage budget. Surplus (replicas beyond a stage's smoothed keep) is reclaimed toward key stages, not into an
 * idle pool: the planner's budget is held either way. 1) Over budget (the planner lowered it): stages give up
 * replicas, most slack first. 2) Key stages take the budget's free GPUs one at a time, most overloaded first. 3) A
 * key stage still short takes one replica from a donor — a stage that is not key, was not grown within
 * `reclaimCooldownMs`, keeps at least its smoothed need (Eq. 7) with one fewer, and stays under its target (Eq. 1 at
 * r − 1) — the donor with the most slack first.
 */
function fitKeyStage(plans: StagePlan[], x: PassInput): StagePlan[] {
  const base = x.stages.map((s) => Math.max(s.replicas, x.params.minReplicasPerStage));
  const mu = (j: number) => 1000 / (x.stages[j]!.obs.meanServiceMs ?? x.stages[j]!.expectedServiceMs);
  const slackAfter = (j: number) => mmcDelayMs(plans[j]!.demandPerS, mu(j), base[j]! - 1) / plans[j]!.targetMs;
  const shrinkable = (j: number) => base[j]! > x.params.minReplicasPerStage;
  // Draining replicas still hold their GPUs until their request finishes.
  const draining = x.stages.reduce((a, s) => a + s.obs.draining, 0);
  if (x.params.releaseAfterMs > 0) {
    plans.forEach((pl, j) => {
      if (!pl.key && base[j]! > pl.keep && shrinkable(j) && idleFor(x.stages[j]!, x) >= x.params.releaseAfterMs) base[j]!--;
    });
  }
  let total = base.reduce((a, b) => a + b, 0) + draining;
  while (total > x.budgetGpus) {
    const j = pickMin(plans.map((_, k) => k).filter(shrinkable), slackAfter);
    if (j < 0) break;
    base[j]!--;
    total--;
  }
  let free = x.budgetGpus - total;
  const wants = plans.map((pl, i) => (pl.key ? pl.desired - base[i]! : 0));
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
  const ideal = waterfill(plans.map((pl) => pl.demandPerS), plans.map((_, j) => mu(j)), x.budgetGpus, x.params.minReplicasPerStage);
  let moves = 0;
  for (const i of order) {
    if (moves >= x.params.maxMovesPerPass) break;
    if (wants[i]! <= 0 || base[i]! >= ideal[i]!) continue; // at its share of the split: a transient queue, not a move
    const donors = plans.map((_, j) => j).filter((j) => {
      const s = x.stages[j]!;
      const cooled = s.lastGrowMs === undefined || x.nowMs - s.lastGrowMs >= x.params.reclaimCooldownMs;
      return j !== i && !plans[j]!.key && cooled && shrinkable(j) && base[j]! > ideal[j]! && base[j]! - 1 >= plans[j]!.keep;
    });
    const donor = pickMin(donors, slackAfter);
    if (donor < 0) continue;
    base[donor]!--;
    base[i]!++;
    moves++;
  }
  return plans.map((pl, i) => ({ ...pl, desired: base[i]! }));
}

/**
 * The split of `budget` replicas over stages that minimises Σ λ_i·T_i (Eq. 1), by greedy marginal allocation from
 * `min` each (T is convex and decreasing in the replica count, so greedy is optimal). An overloaded stage costs
 * 1e9 ms × (1 + its excess load λ − c·μ), so replicas still go first to the stage furthest from keeping up. With equal
 * demands it is the even split.
 */
export function waterfill(lambdaPerS: readonly number[], muPerS: readonly number[], budget: number, min: number): number[] {
  const c = lambdaPerS.map(() => min);
  const cost = (j: number, k: number) => {
    const t = mmcDelayMs(lambdaPerS[j]!, muPerS[j]!, k);
    return lambdaPerS[j]! * (Number.isFinite(t) ? Math.min(t, 1e9) : 1e9 * (1 + lambdaPerS[j]! - k * muPerS[j]!));
  };
  for (let left = budget - min * c.length; left > 0; left--) {
    let best = -1;
    let bestGain = 0;
    for (let j = 0; j < c.length; j++) {
      const g = cost(j, c[j]!) - cost(j, c[j]! + 1);
      if (g > bestGain) {
        bestGain = g;
        best = j;
      }
    }
    if (best < 0) break;
    c[best]!++;
  }
  return c;
}

/** The element of `xs` with the smallest `f` (first on ties), or -1. */
function pickMin(xs: number[], f: (j: number) => number): number {
  let best = -1;
  let bestV = Number.POSITIVE_INFINITY;
  for (const j of xs) {
    const v = f(j);
    if (best < 0 || v < bestV) {
      best = j;
      bestV = v;
    }
  }
  return best;
}

/**
 * Whole-pipeline budget (the baseline): every stage at the same count — the largest any stage asks for while one is
 * key, within ⌊budget / S⌋; otherwise it holds (and shrinks together only when the planner lowers the budget).
 */
function fitWholePipeline(plans: StagePlan[], x: PassInput): StagePlan[] {
  const n = plans.length;
  const current = Math.max(...x.stages.map((s) => s.replicas));
  const anyKey = plans.some((pl) => pl.key);
  let wanted = anyKey ? Math.max(current, ...plans.map((pl) => pl.desired)) : current;
  const release = x.params.releaseAfterMs > 0 && !anyKey && current > Math.max(...plans.map((pl) => pl.keep)) && x.stages.every((s) => idleFor(s, x) >= x.params.releaseAfterMs);
  if (release) wanted = current - 1;
  const target = Math.max(x.params.minReplicasPerStage, Math.min(Math.floor(x.budgetGpus / n), wanted));
  return plans.map((pl) => ({ ...pl, desired: target }));
}

/** How long since the stage last grew (ms; +Infinity when it never did). */
function idleFor(s: StageInput, x: PassInput): number {
  return s.lastGrowMs === undefined ? Number.POSITIVE_INFINITY : x.nowMs - s.lastGrowMs;
}

function ratio(pl: StagePlan): number {
  return Number.isFinite(pl.delayMs) ? pl.delayMs / pl.targetMs : Number.MAX_VALUE;
}
