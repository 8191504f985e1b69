/**
 * The large-fleet path: Lagrangian decomposition of the ILP (ilp.ts) over its only coupling rows, the per-(region,
 * GPU type) capacities. With prices λ ≥ 0 on GPUs, the problem splits into one small problem per model:
 *   min Σ (hold + λ·gpus)·N' + start·Δ⁺ + penalty·unmet  s.t. regional covers α·F(m,r), global cover Σ_r F(m,r), bounds.
 * Its LP relaxation is a covering problem over a laminar family (each region's endpoints inside the model's), so a
 * greedy over cost per token/s is exact: forced minimums, then each region's cheapest units up to α·F, then the
 * cheapest remaining units anywhere up to Σ F (instance costs are convex: keeping one of the N current instances
 * costs hold, a new one hold + start). L(λ) = Σ_m LP_m(λ) − Σ λ·capacity is a lower bound on the LP relaxation and so
 * on the ILP; subgradient steps (Polyak, towards the best integer cost) raise it. Each round also builds an integer
 * plan — whole instances by the same greedy, pruned, repaired where capacity is exceeded, then improved by local
 * search (move an instance to a cheaper endpoint) — and keeps the best. The gap reported is
 * (best integer cost − best bound) / best integer cost. The per-model subproblem lives in subproblem.ts.
 */
import type { IlpModel } from "./ilp.js";
import { Structure, planCost, pruneModel, solveModel } from "./subproblem.js";

export { planCost };

/** Stopping rules of the decomposition: time, gap, iterations. */
export interface DecomposeOptions {
  /** Stop after this many ms (default 6,000). */
  timeLimitMs?: number;
  /** Stop when the gap is at most this (default 0.005). */
  targetGap?: number;
  maxIterations?: number;
  /** Monotonic time source in ms (performance.now by default; tests may inject). */
  nowMs?: () => number;
}

/** Integer targets, their cost, the best lower bound and the gap between them. */
export interface DecomposeResult {
  /** Integer N' per endpoint (same order as model.endpoints). */
  targets: Int32Array;
  /** Cost of `targets` as the ILP counts it (holding + starts + penalties for unmet demand). */
  objective: number;
  /** Best Lagrangian lower bound (≤ the LP relaxation's optimum ≤ the ILP's). */
  bound: number;
  gap: number;
  iterations: number;
  elapsedMs: number;
}

/** GPUs used per capacity row, and tokens/s covered per (model, region) and per model, at integer `levels`. */
function tally(s: Structure, levels: Float64Array, modelOf: Int32Array, mrOf: Int32Array, pairs: number): { usage: Float64Array; covMr: Float64Array; covM: Float64Array } {
  const usage = new Float64Array(s.capacity.length);
  const covMr = new Float64Array(pairs);
  const covM = new Float64Array(s.models.length);
  s.model.endpoints.forEach((e, i) => {
    usage[s.capOf[i]!]! += levels[i]! * e.gpusPerInstance;
    covMr[mrOf[i]!]! += levels[i]! * e.tokensPerS;
    covM[modelOf[i]!]! += levels[i]! * e.tokensPerS;
  });
  return { usage, covMr, covM };
}

/** Makes integer `levels` respect every capacity row, re-covering displaced demand where capacity is left. */
function repair(s: Structure, levels: Float64Array, modelOf: Int32Array, capEndpoints: number[][], mrOf: Int32Array, mrDemand: Float64Array): void {
  const m = s.model;
  const { usage, covMr, covM } = tally(s, levels, modelOf, mrOf, mrDemand.length);
  const change = (i: number, d: number) => {
    const e = m.endpoints[i]!;
    levels[i]! += d;
    usage[s.capOf[i]!]! += d * e.gpusPerInstance;
    covMr[mrOf[i]!]! += d * e.tokensPerS;
    covM[modelOf[i]!]! += d * e.tokensPerS;
  };
  const fits = (i: number) => usage[s.capOf[i]!]! + m.endpoints[i]!.gpusPerInstance <= s.capacity[s.capOf[i]!]! + 1e-9;
  for (let c = 0; c < s.capacity.length; c++) {
    let guard = 0;
    while (usage[c]! > s.capacity[c]! + 1e-9 && guard++ < 1_000_000) {
      // 1. an instance whose removal leaves its model's covers intact (largest saving first)
      let pick = -1;
      let bestSaving = -Infinity;
      let smallest = -1;
      for (const i of capEndpoints[c]!) {
        const e = m.endpoints[i]!;
        if (levels[i]! <= e.min) continue;
        if (smallest === -1 || e.tokensPerS < m.endpoints[smallest]!.tokensPerS) smallest = i;
        if (covMr[mrOf[i]!]! - e.tokensPerS < mrDemand[mrOf[i]!]! - 1e-9 || covM[modelOf[i]!]! - e.tokensPerS < s.globalDemand[modelOf[i]!]! - 1e-9) continue;
        const saving = e.holdCost + (levels[i]! > e.current ? e.startCost : 0);
        if (saving > bestSaving) (bestSaving = saving), (pick = i);
      }
      if (smallest === -1) break; // minimums alone exceed capacity: reported by the caller
      if (pick !== -1) {
        change(pick, -1);
        continue;
      }
      // 2. move an instance: remove from the candidate with the smallest tps, re-cover elsewhere where it fits.
      pick = smallest;
      const mi = modelOf[pick]!;
      const mr = mrOf[pick]!;
      change(pick, -1);
      for (let tries = 0; tries < 64; tries++) {
        const regionShort = covMr[mr]! < mrDemand[mr]! - 1e-9;
        const globalShort = covM[mi]! < s.globalDemand[mi]! - 1e-9;
        if (!regionShort && !globalShort) break;
        let best = -1;
        let bestPer = Infinity;
        for (const j of s.models[mi]!) {
          const e = m.endpoints[j]!;
          if (j === pick || levels[j]! >= e.max || !fits(j)) continue;
          if (regionShort && mrOf[j] !== mr) continue;
          const per = (e.holdCost + (levels[j]! >= e.current ? e.startCost : 0)) / e.tokensPerS;
          if (per < bestPer) (bestPer = per), (best = j);
        }
        if (best === -1) break; // no room anywhere: the demand stays unmet (slack, reported)
        change(best, 1);
      }
    }
  }
}

/**
 * Local search on integer `levels`: moves one instance of a model from endpoint i to endpoint j (another GPU type or
 * region) when that is cheaper and every cover, bound and capacity still holds; repeats until no move improves.
 */
function improve(s: Structure, levels: Float64Array, modelOf: Int32Array, mrOf: Int32Array, mrDemand: Float64Array, deadlineMs: number, now: () => number): void {
  const m = s.model;
  const { usage, covMr, covM } = tally(s, levels, modelOf, mrOf, mrDemand.length);
  for (let pass = 0; pass < 20; pass++) {
    let moved = 0;
    for (let mi = 0; mi < s.models.length; mi++) {
      if (now() > deadlineMs) return;
      const eps = s.models[mi]!;
      for (const i of eps) {
        const ei = m.endpoints[i]!;
        while (levels[i]! > ei.min) {
          const saving = ei.holdCost + (levels[i]! > ei.current ? ei.startCost : 0);
          let best = -1;
          let bestGain = 1e-9;
          for (const j of eps) {
            if (j === i) continue;
            const ej = m.endpoints[j]!;
            if (levels[j]! >= ej.max) continue;
            const gain = saving - (ej.holdCost + (levels[j]! >= ej.current ? ej.startCost : 0));
            if (gain <= bestGain) continue;
            const cj = s.capOf[j]!;
            const room = s.capacity[cj]! - usage[cj]! + (cj === s.capOf[i]! ? ei.gpusPerInstance : 0);
            if (room < ej.gpusPerInstance - 1e-9) continue;
            const ri = mrOf[i]!;
            const rj = mrOf[j]!;
            if (covMr[ri]! - ei.tokensPerS + (ri === rj ? ej.tokensPerS : 0) < mrDemand[ri]! - 1e-9) continue;
            if (covM[mi]! - ei.tokensPerS + ej.tokensPerS < s.globalDemand[mi]! - 1e-9) continue;
            best = j;
            bestGain = gain;
          }
          if (best === -1) break;
          const ej = m.endpoints[best]!;
          levels[i]! -= 1;
          levels[best]! += 1;
          usage[s.capOf[i]!]! -= ei.gpusPerInstance;
          usage[s.capOf[best]!]! += ej.gpusPerInstance;
          covMr[mrOf[i]!]! -= ei.tokensPerS;
          covMr[mrOf[best]!]! += ej.tokensPerS;
          covM[mi]! += ej.tokensPerS - ei.tokensPerS;
          moved++;
        }
      }
      pruneModel(s, mi, levels);
    }
    if (moved === 0) return;
    // prune may have lowered levels: recompute the running sums for the next pass
    usage.fill(0);
    covMr.fill(0);
    covM.fill(0);
    m.endpoints.forEach((e, i) => {
      usage[s.capOf[i]!]! += levels[i]! * e.gpusPerInstance;
      covMr[mrOf[i]!]! += levels[i]! * e.tokensPerS;
      covM[modelOf[i]!]! += levels[i]! * e.tokensPerS;
    });
  }
}

/** Solves `model` by Lagrangian decomposition; see the file comment. */
export function decompose(model: IlpModel, options: DecomposeOptions = {}): DecomposeResult {
  const now = options.nowMs ?? (() => performance.now());
  const t0 = now();
  const timeLimitMs = options.timeLimitMs ?? 6000;
  const targetGap = options.targetGap ?? 0.005;
  const maxIterations = options.maxIterations ?? 500;
  const s = new Structure(model);
  const C = s.capacity.length;
  const modelOf = new Int32Array(s.E);
  s.models.forEach((eps, mi) => eps.forEach((i) => (modelOf[i] = mi)));
  const capEndpoints: number[][] = Array.from({ length: C }, () => []);
  for (let i = 0; i < s.E; i++) capEndpoints[s.capOf[i]!]!.push(i);
  const mrIndex = new Map<string, number>();
  const mrOf = new Int32Array(s.E);
  const mrDemandList: number[] = [];
  model.endpoints.forEach((e, i) => {
    const k = `${e.model}\t${e.region}`;
    let idx = mrIndex.get(k);
    if (idx === undefined) {
      idx = mrDemandList.length;
      mrIndex.set(k, idx);
      mrDemandList.push(s.regionDemand[modelOf[i]!]!.get(e.region) ?? 0);
    }
    mrOf[i] = idx;
  });
  const mrDemand = Float64Array.from(mrDemandList);
  const lambda = new Float64Array(C);
  const frac = new Float64Array(s.E);
  const ints = new Float64Array(s.E);
  let best = new Float64Array(s.E);
  let ub = Infinity;
  let lb = -Infinity;
  let theta = 1;
  let sinceImprove = 0;
  let it = 0;
  for (; it < maxIterations; it++) {
    let l = 0;
    for (let mi = 0; mi < s.models.length; mi++) l += solveModel(s, mi, lambda, false, frac);
    for (let c = 0; c < C; c++) l -= lambda[c]! * s.capacity[c]!;
    if (lb === -Infinity || l > lb + 1e-9 * Math.abs(lb)) (lb = l), (sinceImprove = 0);
    else if (++sinceImprove >= 5) (theta /= 2), (sinceImprove = 0);
    if (it < 5 || it % 3 === 0) {
      for (let mi = 0; mi < s.models.length; mi++) solveModel(s, mi, lambda, true, ints);
      repair(s, ints, modelOf, capEndpoints, mrOf, mrDemand);
      for (let mi = 0; mi < s.models.length; mi++) pruneModel(s, mi, ints);
      improve(s, ints, modelOf, mrOf, mrDemand, t0 + timeLimitMs, now);
      const cost = planCost(model, ints);
      if (cost < ub) (ub = cost), (best = Float64Array.from(ints));
    }
    if ((ub - lb) / Math.max(ub, 1e-9) <= targetGap || now() - t0 > timeLimitMs) {
      it++;
      break;
    }
    const g = new Float64Array(C);
    model.endpoints.forEach((e, i) => (g[s.capOf[i]!]! += frac[i]! * e.gpusPerInstance));
    let norm = 0;
    for (let c = 0; c < C; c++) {
      g[c]! -= s.capacity[c]!;
      if (lambda[c]! <= 0 && g[c]! < 0) g[c] = 0; // projected: a free price cannot fall
      norm += g[c]! * g[c]!;
    }
    if (norm === 0) {
      it++;
      break; // the relaxation's solution respects capacity: λ is optimal
    }
    const step = (theta * (ub - l)) / norm;
    for (let c = 0; c < C; c++) lambda[c] = Math.max(0, lambda[c]! + step * g[c]!);
  }
  const targets = Int32Array.from(best, (v) => Math.round(v));
  const objective = planCost(model, targets);
  return { targets, objective, bound: lb, gap: Math.max(0, (objective - lb) / Math.max(objective, 1e-9)), iterations: it, elapsedMs: now() - t0 };
}
