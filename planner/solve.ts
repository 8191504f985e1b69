/**
 * Chooses how to solve a plan's ILP: small fleets go to HiGHS as one MIP (proved optimal within a time limit);
 * large ones — or a MIP that ends without a proof — go to the Lagrangian decomposition (decompose.ts), which reports
 * its gap to the LP bound. Both answers are integer targets N' per endpoint.
 */
import { decompose } from "./decompose.js";
import { columnsFromTargets, maxViolation, type IlpModel } from "./ilp.js";
import type { Solver } from "../core/solver.js";

/** Integer targets and how they were found. */
export interface PlanSolution {
  targets: Int32Array;
  path: "mip" | "decomposition";
  /** "optimal" (MIP proved), "feasible" (decomposition, gap to bound reported), or the MIP status that sent it on. */
  status: string;
  objective: number;
  bound: number;
  gap: number;
  solveMs: number;
  iterations?: number;
}

/** Thresholds and limits of the two paths. */
export interface SolvePlanOptions {
  /** Endpoints up to which the monolithic MIP is tried first (default 400). */
  mipMaxEndpoints?: number;
  mipTimeLimitS?: number;
  decompositionTimeLimitMs?: number;
  targetGap?: number;
}

/** Solves `model` by the path that fits its size; the targets always respect bounds (capacity too, unless minimums exceed it). */
export function solvePlan(model: IlpModel, solver: Solver, options: SolvePlanOptions = {}): PlanSolution {
  const t0 = performance.now();
  let mipStatus = "";
  if (model.endpoints.length <= (options.mipMaxEndpoints ?? 400)) {
    // Without slacks first: when every demand can be met that model has the same optimum and HiGHS proves it ~10×
    // faster; when it is infeasible, solve the full model (what cannot be met becomes slack, reported).
    let r = solver.solve(model, { timeLimitS: options.mipTimeLimitS ?? 2, mipRelGap: 1e-6, noSlack: true });
    if (r.status === "infeasible") r = solver.solve(model, { timeLimitS: options.mipTimeLimitS ?? 2, mipRelGap: 1e-6 });
    mipStatus = r.status;
    if (r.status === "optimal" && r.x !== undefined) {
      const targets = Int32Array.from(model.endpoints, (e, i) => Math.round(e.current + r.x![2 * i]! - r.x![2 * i + 1]!));
      return { targets, path: "mip", status: "optimal", objective: r.objective, bound: r.bound, gap: r.gap, solveMs: performance.now() - t0 };
    }
  }
  const d = decompose(model, { timeLimitMs: options.decompositionTimeLimitMs ?? 6000, targetGap: options.targetGap ?? 0.005 });
  const x = columnsFromTargets(model, d.targets);
  // Only minimums above capacity can leave a violation (slacks absorb unmet demand); the report lists them.
  const feasible = maxViolation(model, x) <= 1e-6;
  const status = feasible ? (mipStatus === "" ? "feasible" : `feasible (mip: ${mipStatus})`) : "infeasible: minInstances exceed capacity";
  return { targets: d.targets, path: "decomposition", status, objective: d.objective, bound: d.bound, gap: d.gap, solveMs: performance.now() - t0, iterations: d.iterations };
}
