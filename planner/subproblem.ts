/**
 * The per-model subproblem of the Lagrangian decomposition (decompose.ts): index structures over the ILP, the
 * exact greedy for one model's LP relaxation at GPU prices λ (a covering problem over a laminar family: forced
 * minimums, each region's α·F with its cheapest units, then Σ F with the cheapest remaining), its integer version,
 * pruning, and the true cost of integer targets.
 */
import type { IlpModel } from "./ilp.js";

/** A run of instances of one endpoint at one marginal cost. */
export interface Segment {
  ep: number;
  /** Instances in the segment. */
  count: number;
  /** Cost per instance (with λ), and per token/s. */
  cost: number;
  perTps: number;
}

/** Index structures shared by every round. */
export class Structure {
  readonly E: number;
  readonly models: number[][]; // endpoint indices per model
  readonly modelRegions: Map<string, number[]>[]; // per model: region -> endpoint indices
  readonly regionDemand: Map<string, number>[]; // per model: region -> α·F
  readonly globalDemand: number[];
  readonly capOf: Int32Array; // endpoint -> capacity row index (0..C-1)
  readonly capacity: Float64Array;
  readonly coverRow: Map<string, number>; // model\tregion -> row
  readonly globalRow: number[];

  constructor(readonly model: IlpModel) {
    const eps = model.endpoints;
    this.E = eps.length;
    const modelIndex = new Map<string, number>();
    this.models = [];
    this.modelRegions = [];
    this.regionDemand = [];
    this.globalDemand = [];
    this.globalRow = [];
    this.coverRow = new Map();
    const capIndex = new Map<string, number>();
    const caps: number[] = [];
    model.rows.forEach((row, r) => {
      if (row.kind === "cover") {
        this.coverRow.set(`${row.model}\t${row.region}`, r);
        let mi = modelIndex.get(row.model!);
        if (mi === undefined) mi = this.addModel(modelIndex, row.model!);
        this.regionDemand[mi]!.set(row.region!, model.rowDemand[r]!);
      } else if (row.kind === "global") {
        let mi = modelIndex.get(row.model!);
        if (mi === undefined) mi = this.addModel(modelIndex, row.model!);
        this.globalDemand[mi] = model.rowDemand[r]!;
        this.globalRow[mi] = r;
      } else {
        capIndex.set(`${row.region}\t${row.gpu}`, caps.length);
        // rowUpper = cap − gpus·N (current); add the current usage back below.
        caps.push(model.rowUpper[r]!);
      }
    });
    this.capOf = new Int32Array(this.E);
    eps.forEach((e, i) => {
      const mi = modelIndex.get(e.model)!;
      this.models[mi]!.push(i);
      const rl = this.modelRegions[mi]!.get(e.region) ?? [];
      rl.push(i);
      this.modelRegions[mi]!.set(e.region, rl);
      const c = capIndex.get(`${e.region}\t${e.gpu}`)!;
      this.capOf[i] = c;
      caps[c]! += e.gpusPerInstance * e.current;
    });
    this.capacity = Float64Array.from(caps);
  }

  private addModel(index: Map<string, number>, name: string): number {
    const mi = this.models.length;
    index.set(name, mi);
    this.models.push([]);
    this.modelRegions.push(new Map());
    this.regionDemand.push(new Map());
    this.globalDemand.push(0);
    this.globalRow.push(-1);
    return mi;
  }
}

/** The cost segments of endpoint i above `from` instances at prices λ: keep (≤ N), then new (> N). */
export function segmentsOf(m: IlpModel, i: number, lambda: Float64Array, capOf: Int32Array, from: number): Segment[] {
  const e = m.endpoints[i]!;
  const price = lambda[capOf[i]!]! * e.gpusPerInstance;
  const out: Segment[] = [];
  const keepTo = Math.min(e.current, e.max);
  if (keepTo > from) out.push({ ep: i, count: keepTo - from, cost: e.holdCost + price, perTps: (e.holdCost + price) / e.tokensPerS });
  const newFrom = Math.max(from, e.current);
  if (e.max > newFrom) out.push({ ep: i, count: e.max - newFrom, cost: e.holdCost + e.startCost + price, perTps: (e.holdCost + e.startCost + price) / e.tokensPerS });
  return out;
}

/**
 * One model's subproblem at prices λ: fills `level` (fractional when `integer` is false) and returns its cost
 * (with λ) including the penalty for unmet demand.
 */
export function solveModel(s: Structure, mi: number, lambda: Float64Array, integer: boolean, level: Float64Array): number {
  const m = s.model;
  let cost = 0;
  let total = 0;
  const segs: Segment[] = [];
  const regionCovered = new Map<string, number>();
  for (const [region, eps] of s.modelRegions[mi]!) {
    let covered = 0;
    const regionSegs: Segment[] = [];
    for (const i of eps) {
      const e = m.endpoints[i]!;
      level[i] = e.min;
      const price = lambda[s.capOf[i]!]! * e.gpusPerInstance;
      cost += e.min * (e.holdCost + price) + Math.max(0, e.min - e.current) * e.startCost;
      covered += e.min * e.tokensPerS;
      for (const sg of segmentsOf(m, i, lambda, s.capOf, e.min)) regionSegs.push(sg);
    }
    regionSegs.sort((a, b) => a.perTps - b.perTps);
    const need = s.regionDemand[mi]!.get(region) ?? 0;
    for (const sg of regionSegs) {
      if (covered >= need - 1e-9) {
        segs.push(sg);
        continue;
      }
      const tps = m.endpoints[sg.ep]!.tokensPerS;
      let take = (need - covered) / tps;
      if (integer) take = Math.ceil(take - 1e-9);
      take = Math.min(take, sg.count);
      level[sg.ep]! += take;
      cost += take * sg.cost;
      covered += take * tps;
      if (take < sg.count) segs.push({ ...sg, count: sg.count - take });
    }
    if (covered < need - 1e-9) cost += (need - covered) * m.penalty;
    regionCovered.set(region, covered);
    total += covered;
  }
  segs.sort((a, b) => a.perTps - b.perTps);
  const need = s.globalDemand[mi]!;
  for (const sg of segs) {
    if (total >= need - 1e-9) break;
    const tps = m.endpoints[sg.ep]!.tokensPerS;
    let take = (need - total) / tps;
    if (integer) take = Math.ceil(take - 1e-9);
    take = Math.min(take, sg.count);
    level[sg.ep]! += take;
    cost += take * sg.cost;
    total += take * tps;
  }
  if (total < need - 1e-9) cost += (need - total) * m.penalty;
  if (integer) pruneModel(s, mi, level);
  return cost;
}

/** Removes instances (dearest per token/s first) while every cover of the model still holds. Integer levels only. */
export function pruneModel(s: Structure, mi: number, level: Float64Array): void {
  const m = s.model;
  const eps = s.models[mi]!;
  const covered = new Map<string, number>();
  let total = 0;
  for (const i of eps) {
    const e = m.endpoints[i]!;
    covered.set(e.region, (covered.get(e.region) ?? 0) + level[i]! * e.tokensPerS);
    total += level[i]! * e.tokensPerS;
  }
  const order = [...eps].sort((a, b) => {
    const ea = m.endpoints[a]!;
    const eb = m.endpoints[b]!;
    return (eb.holdCost + eb.startCost) / eb.tokensPerS - (ea.holdCost + ea.startCost) / ea.tokensPerS;
  });
  for (const i of order) {
    const e = m.endpoints[i]!;
    const need = s.regionDemand[mi]!.get(e.region) ?? 0;
    while (level[i]! > e.min) {
      const c = covered.get(e.region)!;
      if (c - e.tokensPerS < need - 1e-9 || total - e.tokensPerS < s.globalDemand[mi]! - 1e-9) break;
      level[i]! -= 1;
      covered.set(e.region, c - e.tokensPerS);
      total -= e.tokensPerS;
    }
  }
}

/** True cost (no λ) of integer levels, with the penalty for unmet demand, as the ILP would count it. */
export function planCost(m: IlpModel, levels: ArrayLike<number>): number {
  let cost = 0;
  const covered = new Map<string, number>();
  const byModel = new Map<string, number>();
  m.endpoints.forEach((e, i) => {
    const n = levels[i]!;
    cost += e.holdCost * n + e.startCost * Math.max(0, n - e.current);
    covered.set(`${e.model}\t${e.region}`, (covered.get(`${e.model}\t${e.region}`) ?? 0) + n * e.tokensPerS);
    byModel.set(e.model, (byModel.get(e.model) ?? 0) + n * e.tokensPerS);
  });
  m.rows.forEach((row, r) => {
    if (row.kind === "cover") cost += Math.max(0, m.rowDemand[r]! - (covered.get(`${row.model}\t${row.region}`) ?? 0)) * m.penalty;
    else if (row.kind === "global") cost += Math.max(0, m.rowDemand[r]! - (byModel.get(row.model!) ?? 0)) * m.penalty;
  });
  return cost;
}

