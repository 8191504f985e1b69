/**
 * The planner's integer program, built by pure code (DESIGN "ILP"; SageServe §6.4 with a holding cost added).
 *
 * For each endpoint (model m, region r, GPU type g) with N current instances: integer Δ⁺, Δ⁻ ≥ 0, N' = N + Δ⁺ − Δ⁻.
 *   minimise   Σ hold(g)·gpus(m,g)·N'  +  Σ (vmStart(g)·gpus(m,g) + modelStart(m,g))·Δ⁺  +  penalty·Σ unmet
 *   s.t.       per (m, r):  Σ_g tps(m,g)·N' + u_mr ≥ α·F(m,r)            (regional cover; SageServe §6.4 eq. cover)
 *              per m:       Σ_{r,g} tps(m,g)·N' + u_m ≥ Σ_r F(m,r)          (global cover: load may be re-routed)
 *              per (r, g):  Σ_m gpus(m,g)·N' ≤ capacity(r,g)
 *              min ≤ N' ≤ max as bounds on Δ⁺ and Δ⁻ (exact: Δ⁺ ∈ [max(0,min−N), max(0,max−N)], Δ⁻ ∈ [max(0,N−max), max(0,N−min)])
 * The unmet slacks u ≥ 0 make every instance feasible. Their penalty per token/s is 100× the dearest instance, so
 * leaving even 0.01 token/s unmet costs more than any one instance: demand that can be met is met, and what cannot
 * be met is reported (never a silent zero).
 * Columns: [Δ⁺₀, Δ⁻₀, Δ⁺₁, Δ⁻₁, …, u per cover row, u per model]. Rows: cover rows, then global rows, then capacity.
 */
import type { GpuType, ModelName, RegionName } from "../core/models.js";
import type { Fleet } from "./fleet.js";
import type { MipModel } from "../core/solver.js";

/** Forecast demand F(m, r) in tokens/s (peak forecast + β × last hour's NIW tokens/s). */
export interface Demand {
  model: ModelName;
  region: RegionName;
  tokensPerS: number;
}

/** One (model, region, GPU type) decision. */
export interface Endpoint {
  model: ModelName;
  region: RegionName;
  gpu: GpuType;
  current: number;
  min: number;
  max: number;
  spot: number;
  tokensPerS: number;
  gpusPerInstance: number;
  /** hold(g) · gpus(m, g): cost of holding one instance. */
  holdCost: number;
  /** vmStart(g) · gpus(m, g) + modelStart(m, g): cost of starting one instance. */
  startCost: number;
}

/** What a row of the ILP constrains. */
export type RowKind = "cover" | "global" | "capacity";

/** The meaning of one row. */
export interface RowInfo {
  kind: RowKind;
  model?: ModelName;
  region?: RegionName;
  gpu?: GpuType;
}

/** The planner's minimisation model: a `MipModel` (HiGHS's sparse CSR layout) plus what each row and column means. */
export interface IlpModel extends MipModel {
  endpoints: Endpoint[];
  rows: RowInfo[];
  /** Constant term Σ hold·N (the cost of keeping today's fleet). */
  offset: number;
  /** Cost per unmet token/s. */
  penalty: number;
  /** Column of the first slack; slacks follow row order of the cover and global rows. */
  firstSlackCol: number;
  /** Demand per row for cover and global rows (α·F or ΣF), NaN for capacity rows. */
  rowDemand: Float64Array;
}

/** Builds the endpoints of `fleet` in a stable order (region, model, GPU as listed). */
export function fleetEndpoints(fleet: Fleet): Endpoint[] {
  const out: Endpoint[] = [];
  for (const r of fleet.regions) {
    for (const e of r.endpoints) {
      const mg = fleet.models[e.model]![e.gpu]!;
      const cost = fleet.gpus[e.gpu]!;
      out.push({
        model: e.model,
        region: r.name,
        gpu: e.gpu,
        current: e.instances,
        min: e.minInstances,
        max: e.maxInstances,
        spot: e.spotInstances,
        tokensPerS: mg.tokensPerS,
        gpusPerInstance: mg.gpusPerInstance,
        holdCost: cost.holdPerGpu * mg.gpusPerInstance,
        startCost: cost.vmStartPerGpu * mg.gpusPerInstance + (e.modelStartCost ?? mg.modelStartCost),
      });
    }
  }
  return out;
}

/** Builds the ILP for `fleet` and `demand` (demands for unknown models or regions still get rows, met only by slack). */
export function buildIlp(fleet: Fleet, demand: readonly Demand[]): IlpModel {
  const endpoints = fleetEndpoints(fleet);
  const E = endpoints.length;
  for (const d of demand) if (!(Number.isFinite(d.tokensPerS) && d.tokensPerS >= 0)) throw new RangeError(`demand for ${d.model}@${d.region} must be finite and ≥ 0, got ${d.tokensPerS}`);
  // Aggregate demand per (m, r) and per m.
  const perMr = new Map<string, { model: string; region: string; f: number }>();
  for (const d of demand) {
    const k = `${d.model}\t${d.region}`;
    const cur = perMr.get(k) ?? { model: d.model, region: d.region, f: 0 };
    cur.f += d.tokensPerS;
    perMr.set(k, cur);
  }
  for (const e of endpoints) if (!perMr.has(`${e.model}\t${e.region}`)) perMr.set(`${e.model}\t${e.region}`, { model: e.model, region: e.region, f: 0 });
  const covers = [...perMr.values()];
  const models = [...new Set(covers.map((c) => c.model))];
  const capKeys: { region: string; gpu: string; cap: number }[] = [];
  for (const r of fleet.regions) for (const [g, cap] of Object.entries(r.capacity)) capKeys.push({ region: r.name, gpu: g, cap });

  const numCols = 2 * E + covers.length + models.length;
  const numRows = covers.length + models.length + capKeys.length;
  const colCost = new Float64Array(numCols);
  const colLower = new Float64Array(numCols);
  const colUpper = new Float64Array(numCols);
  const integrality = new Int32Array(numCols);
  let maxInstanceCost = 0;
  let offset = 0;
  endpoints.forEach((e, i) => {
    colCost[2 * i] = e.holdCost + e.startCost;
    colCost[2 * i + 1] = -e.holdCost;
    colLower[2 * i] = Math.max(0, e.min - e.current);
    colUpper[2 * i] = Math.max(0, e.max - e.current);
    colLower[2 * i + 1] = Math.max(0, e.current - e.max);
    colUpper[2 * i + 1] = Math.max(0, e.current - e.min);
    integrality[2 * i] = 1;
    integrality[2 * i + 1] = 1;
    offset += e.holdCost * e.current;
    maxInstanceCost = Math.max(maxInstanceCost, e.holdCost + e.startCost);
  });
  const penalty = 100 * Math.max(maxInstanceCost, 1e-6);
  const firstSlackCol = 2 * E;
  for (let j = firstSlackCol; j < numCols; j++) {
    colCost[j] = penalty;
    colUpper[j] = Infinity;
  }

  const rowLower = new Float64Array(numRows);
  const rowUpper = new Float64Array(numRows);
  const rowDemand = new Float64Array(numRows).fill(Number.NaN);
  const rows: RowInfo[] = [];
  const coverIdx = new Map<string, number>();
  covers.forEach((c, i) => {
    coverIdx.set(`${c.model}\t${c.region}`, i);
    rows.push({ kind: "cover", model: c.model, region: c.region });
    rowDemand[i] = fleet.alpha * c.f;
  });
  const globalIdx = new Map<string, number>();
  const perModel = new Map<string, number>();
  for (const c of covers) perModel.set(c.model, (perModel.get(c.model) ?? 0) + c.f);
  models.forEach((m, i) => {
    globalIdx.set(m, covers.length + i);
    rows.push({ kind: "global", model: m });
    rowDemand[covers.length + i] = perModel.get(m)!;
  });
  const capIdx = new Map<string, number>();
  capKeys.forEach((c, i) => {
    capIdx.set(`${c.region}\t${c.gpu}`, covers.length + models.length + i);
    rows.push({ kind: "capacity", region: c.region, gpu: c.gpu });
  });
  // CSR in two passes (count, then fill). Row activities in terms of Δ: tps·(Δ⁺ − Δ⁻) ≥ demand − tps·N, and
  // gpus·(Δ⁺ − Δ⁻) ≤ cap − gpus·N.
  const epRows = new Int32Array(3 * E);
  const counts = new Int32Array(numRows);
  endpoints.forEach((e, i) => {
    const a = coverIdx.get(`${e.model}\t${e.region}`)!;
    const b = globalIdx.get(e.model)!;
    const c = capIdx.get(`${e.region}\t${e.gpu}`)!;
    epRows[3 * i] = a;
    epRows[3 * i + 1] = b;
    epRows[3 * i + 2] = c;
    counts[a]! += 2;
    counts[b]! += 2;
    counts[c]! += 2;
  });
  for (let r = 0; r < covers.length + models.length; r++) counts[r]! += 1;
  const rowStarts = new Int32Array(numRows + 1);
  for (let r = 0; r < numRows; r++) rowStarts[r + 1] = rowStarts[r]! + counts[r]!;
  const nnz = rowStarts[numRows]!;
  const rowIndex = new Int32Array(nnz);
  const rowValue = new Float64Array(nnz);
  const fill = Int32Array.from(rowStarts.subarray(0, numRows));
  const currentCover = new Float64Array(numRows);
  const put = (r: number, col: number, v: number) => {
    const k = fill[r]!++;
    rowIndex[k] = col;
    rowValue[k] = v;
  };
  endpoints.forEach((e, i) => {
    for (let t = 0; t < 3; t++) {
      const r = epRows[3 * i + t]!;
      const coef = t < 2 ? e.tokensPerS : e.gpusPerInstance;
      put(r, 2 * i, coef);
      put(r, 2 * i + 1, -coef);
      currentCover[r]! += coef * e.current;
    }
  });
  for (let r = 0; r < covers.length + models.length; r++) {
    put(r, firstSlackCol + r, 1);
    rowLower[r] = rowDemand[r]! - currentCover[r]!;
    rowUpper[r] = Infinity;
  }
  capKeys.forEach((c, i) => {
    const r = covers.length + models.length + i;
    rowLower[r] = -Infinity;
    rowUpper[r] = c.cap - currentCover[r]!;
  });
  return { endpoints, numCols, numRows, colCost, colLower, colUpper, integrality, rowStarts, rowIndex, rowValue, rowLower, rowUpper, rows, offset, penalty, firstSlackCol, rowDemand };
}

/** Largest violation of any row or bound by `x` (0 when feasible), for checks and tests. */
export function maxViolation(model: IlpModel, x: ArrayLike<number>): number {
  let worst = 0;
  for (let j = 0; j < model.numCols; j++) worst = Math.max(worst, model.colLower[j]! - x[j]!, x[j]! - model.colUpper[j]!);
  for (let r = 0; r < model.numRows; r++) {
    let a = 0;
    for (let k = model.rowStarts[r]!; k < model.rowStarts[r + 1]!; k++) a += model.rowValue[k]! * x[model.rowIndex[k]!]!;
    worst = Math.max(worst, model.rowLower[r]! - a, a - model.rowUpper[r]!);
  }
  return worst;
}

/** Columns for integer targets N' per endpoint, with the smallest slacks that make the cover rows hold. */
export function columnsFromTargets(model: IlpModel, targets: ArrayLike<number>): Float64Array {
  const x = new Float64Array(model.numCols);
  model.endpoints.forEach((e, i) => {
    const d = targets[i]! - e.current;
    x[2 * i] = Math.max(0, d);
    x[2 * i + 1] = Math.max(0, -d);
  });
  for (let r = 0; r < model.numRows; r++) {
    if (model.rows[r]!.kind === "capacity") continue;
    let a = 0;
    for (let k = model.rowStarts[r]!; k < model.rowStarts[r + 1]!; k++) {
      const c = model.rowIndex[k]!;
      if (c < model.firstSlackCol) a += model.rowValue[k]! * x[c]!;
    }
    x[model.firstSlackCol + r] = Math.max(0, model.rowLower[r]! - a);
  }
  return x;
}
