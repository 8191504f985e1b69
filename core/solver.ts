/**
 * The `Solver` port and its HiGHS adapter (the `highs` package, WebAssembly). The model is built by pure code
 * (ilp.ts); this file only passes it to HiGHS and reads the answer. HiGHS solves synchronously: callers bound it
 * with `timeLimitS`.
 */
import highsLoader from "highs";

/** Solver outcome. */
export type SolveStatus = "optimal" | "time_limit" | "infeasible" | "unbounded" | "error";

/** How to solve: relaxation or MIP, limits. */
export interface SolveOptions {
  /** Solve the LP relaxation (integrality dropped). */
  relax?: boolean;
  timeLimitS?: number;
  /** Fix every unmet slack at 0 (the model without slack; HiGHS proves it much faster when demand can be met). */
  noSlack?: boolean;
  /** Relative MIP gap at which HiGHS stops (default 1e-4). */
  mipRelGap?: number;
  /** HiGHS presolve (default "choose"); "off" is faster on tiny models. */
  presolve?: "off" | "choose" | "on";
  /** HiGHS LP algorithm for relaxations (default "choose"). */
  lpSolver?: "choose" | "simplex" | "ipm" | "pdlp";
}

/** A solve's outcome; `x` only when a feasible point exists. */
export interface SolveResult {
  status: SolveStatus;
  /** Column values when a (feasible) solution exists. */
  x?: Float64Array;
  /** Objective of `x` including the model offset; NaN without a solution. */
  objective: number;
  /** Best proven lower bound (the LP optimum for a relaxation, the MIP dual bound otherwise); NaN when unknown. */
  bound: number;
  /** (objective − bound) / max(|objective|, 1e-9); NaN when either is unknown. */
  gap: number;
  solveMs: number;
}

/**
 * What HiGHS needs of a model: columns with costs, bounds and integrality (1 = integer), rows in CSR form with
 * bounds, a constant offset (the planner's `IlpModel` adds what its rows and columns mean); `firstSlackCol`
 * (columns from there on are slacks) is what `noSlack` fixes at 0.
 */
export interface MipModel {
  numCols: number;
  numRows: number;
  offset: number;
  colCost: Float64Array;
  colLower: Float64Array;
  colUpper: Float64Array;
  integrality: Int32Array;
  rowStarts: Int32Array;
  rowIndex: Int32Array;
  rowValue: Float64Array;
  rowLower: Float64Array;
  rowUpper: Float64Array;
  firstSlackCol?: number;
}

/** Solves a built model; implementations must not change it. */
export interface Solver {
  solve(model: MipModel, options?: SolveOptions): SolveResult;
}

interface HighsRuntime {
  createModel(data: unknown): HighsModel;
  infinity: number;
}

interface HighsModel {
  options: { set(o: Record<string, unknown>): void };
  info: { get(name: string): unknown };
  run(): { modelStatus: number };
  getSolution(): { colValue: Float64Array };
  getObjectiveValue(): number;
  dispose(): void;
}

const STATUS: Record<number, SolveStatus> = { 7: "optimal", 8: "infeasible", 9: "infeasible", 10: "unbounded", 13: "time_limit", 14: "time_limit", 6: "optimal" };

let runtime: Promise<HighsRuntime> | undefined;

/** Loads the HiGHS wasm runtime once per process. */
export function loadHighs(): Promise<HighsRuntime> {
  runtime ??= (highsLoader as unknown as () => Promise<HighsRuntime>)();
  return runtime;
}

/** The HiGHS adapter; create with `await HighsSolver.create()`. */
export class HighsSolver implements Solver {
  private constructor(private readonly highs: HighsRuntime) {}

  static async create(): Promise<HighsSolver> {
    return new HighsSolver(await loadHighs());
  }

  solve(model: MipModel, options: SolveOptions = {}): SolveResult {
    const inf = this.highs.infinity;
    const clamp = (a: Float64Array) => Float64Array.from(a, (v) => (v === Infinity ? inf : v === -Infinity ? -inf : v));
    const t0 = performance.now();
    const m = this.highs.createModel({
      numCols: model.numCols,
      numRows: model.numRows,
      offset: model.offset,
      colCost: model.colCost,
      colLower: model.colLower,
      colUpper: options.noSlack ? Float64Array.from(clamp(model.colUpper), (v, j) => (j >= (model.firstSlackCol ?? Infinity) ? 0 : v)) : clamp(model.colUpper),
      rowLower: clamp(model.rowLower),
      rowUpper: clamp(model.rowUpper),
      matrix: { format: "csr", numRows: model.numRows, numCols: model.numCols, starts: model.rowStarts, indices: model.rowIndex, values: model.rowValue },
      ...(options.relax ? {} : { integrality: model.integrality }),
    });
    try {
      m.options.set({ output_flag: false, time_limit: options.timeLimitS ?? 60, mip_rel_gap: options.mipRelGap ?? 1e-4, ...(options.relax && options.lpSolver ? { solver: options.lpSolver } : {}), ...(options.presolve ? { presolve: options.presolve } : {}) });
      const run = m.run();
      const status = STATUS[run.modelStatus] ?? "error";
      const primal = Number(m.info.get("primal_solution_status"));
      const hasSolution = primal === 2 || status === "optimal";
      const x = hasSolution ? Float64Array.from(m.getSolution().colValue) : undefined;
      const objective = hasSolution ? m.getObjectiveValue() : Number.NaN;
      let bound = Number.NaN;
      if (options.relax) bound = status === "optimal" ? objective : Number.NaN;
      else {
        const b = Number(m.info.get("mip_dual_bound"));
        bound = Number.isFinite(b) ? b : Number.NaN;
      }
      const gap = Number.isFinite(objective) && Number.isFinite(bound) ? Math.max(0, (objective - bound) / Math.max(Math.abs(objective), 1e-9)) : Number.NaN;
      return { status, ...(x === undefined ? {} : { x }), objective, bound, gap, solveMs: performance.now() - t0 };
    } finally {
      m.dispose();
    }
  }
}
