/**
 * BlitzScale's live autoscaling of one loading episode (BlitzScale §5.2), as pure policy: a new instance (the
 * target, inst.1) that is still receiving layers serves the first T_i layers of request batch i while the overloaded
 * instance (the source, inst.0, with the whole model) serves the other S_i = L − T_i. Time is in units of one layer's
 * computation for one batch (equal batches, FIFO); layer k reaches the target at `layerArrival[k − 1]` (layer 1 at 0
 * in the paper's example, which counts from "the first layer has been loaded").
 *
 * - `rehearse` executes a configuration the way §5.2 "(2) Scheduling requests" describes: the target always runs
 *   the earliest request that has a layer ready for it, and a request that lacks its next layer waits in a pending
 *   queue until that layer loads (so the target comes back to it: the zigzag); the source runs requests FIFO, each
 *   once the target finished its T_i layers. A request's latency is when its last layer finishes.
 * - `bestEffort`: each batch runs as many layers on the target as it holds when it takes the batch up, at most half.
 * - `zigzag`: the pipeline configuration from an ILP (Eq. 1), solved with HiGHS. As printed, Eq. 1's load limit
 *   (Time_l·T_i ≤ Σ_{j<i} T_j) forbids any target layer for batch i unless earlier batches ran Time_l target
 *   layers, so the constraints here are the ones the text states: the target runs batches in order (start τ_i ≥
 *   τ_{i−1} + T_{i−1}), every layer it runs has arrived (τ_i + k − 1 ≥ arrival of layer k, for k ≤ T_i: C3), the
 *   source starts batch i after batch i − 1 and after the target's part of batch i (σ_i ≥ σ_{i−1} + S_{i−1},
 *   σ_i ≥ τ_i + T_i: C2), S_i + T_i = L (C1); minimise the mean latency Σ (σ_i + S_i) / N. The target may wait for a
 *   layer (τ_i above the previous finish), which is what lets it take more layers of later batches; `rehearse` then
 *   fills those waits with other batches' ready layers.
 */
import type { MipModel, Solver } from "../../../core/solver.js";

/** One loading episode: L layers arriving at the target, N equal request batches queued at the start. */
export interface Episode {
  layers: number;
  /** When each layer reaches the target (non-decreasing, in layer-compute units); layerArrival[0] is layer 1. */
  layerArrival: readonly number[];
  batches: number;
}

/** The episode of BlitzScale's Figure 12 shape: layer k arrives at (k − 1)·loadTime. */
export function uniformEpisode(layers: number, loadTime: number, batches: number): Episode {
  return { layers, batches, layerArrival: Array.from({ length: layers }, (_, k) => k * loadTime) };
}

function check(e: Episode): void {
  if (!Number.isInteger(e.layers) || e.layers < 1) throw new RangeError(`layers must be a positive integer, got ${e.layers}`);
  if (!Number.isInteger(e.batches) || e.batches < 1) throw new RangeError(`batches must be a positive integer, got ${e.batches}`);
  if (e.layerArrival.length !== e.layers) throw new RangeError(`layerArrival has ${e.layerArrival.length} entries for ${e.layers} layers`);
  for (let k = 0; k < e.layers; k++)
    if (!(e.layerArrival[k]! >= 0) || (k > 0 && e.layerArrival[k]! < e.layerArrival[k - 1]!)) throw new RangeError("layerArrival must be non-negative and non-decreasing");
}

/** What a rehearsal gives: each batch's target layers and the time its last layer finished. */
export interface Rehearsal {
  targetLayers: number[];
  latency: number[];
  mean: number;
  makespan: number;
}

/**
 * Runs the episode. `targetLayers(i, now, loaded)` says how many layers batch i runs on the target, asked when the
 * target first could take batch i up (`loaded`: layers it holds then); fixed configurations ignore the arguments.
 */
export function rehearse(e: Episode, targetLayers: (batch: number, now: number, loaded: number) => number): Rehearsal {
  check(e);
  const N = e.batches;
  const L = e.layers;
  const T: (number | undefined)[] = new Array<number | undefined>(N).fill(undefined);
  const done = new Array<number>(N).fill(0); // target layers done per batch
  const targetDone = new Array<number>(N).fill(Infinity);
  const loadedAt = (t: number) => e.layerArrival.filter((a) => a <= t).length;
  let now = 0;
  // The target: always the earliest batch with a ready layer; otherwise idle until the next layer arrives.
  for (;;) {
    let pick = -1;
    for (let i = 0; i < N && pick < 0; i++) {
      if (T[i] === undefined) {
        const t = Math.max(0, Math.min(L, Math.floor(targetLayers(i, now, loadedAt(now)))));
        if (!Number.isFinite(t)) throw new RangeError(`target layers for batch ${i} is not a number`);
        T[i] = t;
        if (t === 0) targetDone[i] = 0;
      }
      if (done[i]! < T[i]! && e.layerArrival[done[i]!]! <= now) pick = i;
    }
    if (pick >= 0) {
      now += 1;
      done[pick]!++;
      if (done[pick] === T[pick]) targetDone[pick] = now;
      continue;
    }
    const waiting = T.some((t, i) => done[i]! < t!);
    if (!waiting) break;
    now = Math.min(...T.map((t, i) => (done[i]! < t! ? e.layerArrival[done[i]!]! : Infinity)));
  }
  // The source: FIFO, each batch once the target finished its part.
  const latency: number[] = [];
  let source = 0;
  for (let i = 0; i < N; i++) {
    const s = L - T[i]!;
    if (s === 0) {
      latency.push(targetDone[i]!);
      continue;
    }
    source = Math.max(source, targetDone[i]!) + s;
    latency.push(source);
  }
  return { targetLayers: T.map((t) => t!), latency, mean: latency.reduce((a, b) => a + b, 0) / N, makespan: Math.max(...latency) };
}

/** Best effort (BlitzScale §5.2's baseline): as many layers as the target holds when it takes a batch up, ≤ ⌊L/2⌋. */
export function bestEffort(e: Episode): Rehearsal {
  return rehearse(e, (_i, _now, loaded) => Math.min(loaded, Math.floor(e.layers / 2)));
}

/** Builds a MIP from rows of {col: coefficient} with bounds (CSR for the HiGHS adapter). */
function buildMip(cols: { cost: number; lower: number; upper: number; integer: boolean }[], rows: { coef: Map<number, number>; lower: number; upper: number }[], offset: number): MipModel {
  const starts: number[] = [0];
  const index: number[] = [];
  const value: number[] = [];
  for (const r of rows) {
    for (const [c, v] of [...r.coef].sort((a, b) => a[0] - b[0])) {
      index.push(c);
      value.push(v);
    }
    starts.push(index.length);
  }
  return {
    numCols: cols.length,
    numRows: rows.length,
    offset,
    colCost: Float64Array.from(cols, (c) => c.cost),
    colLower: Float64Array.from(cols, (c) => c.lower),
    colUpper: Float64Array.from(cols, (c) => c.upper),
    integrality: Int32Array.from(cols, (c) => (c.integer ? 1 : 0)),
    rowStarts: Int32Array.from(starts),
    rowIndex: Int32Array.from(index),
    rowValue: Float64Array.from(value),
    rowLower: Float64Array.from(rows, (r) => r.lower),
    rowUpper: Float64Array.from(rows, (r) => r.upper),
  };
}

/**
 * The zigzag pipeline configuration (see the file comment): T_i per batch, from the ILP. §5.2 solves it while the
 * first layer loads; `timeLimitS` bounds HiGHS and the best configuration found by then is used (a 7-layer, 6-batch
 * episode proves optimal in about 0.3 s here, 32 layers × 10 batches in about 0.6 s and 80 × 12 in 1.5 s, on a busy 2-core box).
 */
export function zigzagConfiguration(e: Episode, solver: Solver, timeLimitS = 2): number[] {
  check(e);
  const N = e.batches;
  const L = e.layers;
  // Columns: y[i][k] = 1 when batch i runs layer k + 1 on the target (T_i = Σ_k y[i][k]); τ_i; σ_i.
  const y = (i: number, k: number) => i * L + k;
  const tau = (i: number) => N * L + i;
  const sigma = (i: number) => N * L + N + i;
  const horizon = e.layerArrival[L - 1]! + N * L + 1;
  const cols = [
    ...Array.from({ length: N * L }, () => ({ cost: -1, lower: 0, upper: 1, integer: true })), // −T_i in Σ (σ_i + L − T_i)
    ...Array.from({ length: N }, () => ({ cost: 0, lower: 0, upper: horizon, integer: false })),
    ...Array.from({ length: N }, () => ({ cost: 1, lower: 0, upper: horizon * 2, integer: false })),
  ];
  const rows: { coef: Map<number, number>; lower: number; upper: number }[] = [];
  const g = [0];
  for (let k = 0; k < L; k++) g.push(Math.max(g[k]!, e.layerArrival[k]! - k));
  const T = (i: number, sign = 1) => Array.from({ length: L }, (_, k) => [y(i, k), sign] as [number, number]);
  for (let i = 0; i < N; i++) {
    // layers in order: y[i][k] ≥ y[i][k+1]
    for (let k = 0; k + 1 < L; k++) rows.push({ coef: new Map([[y(i, k), 1], [y(i, k + 1), -1]]), lower: 0, upper: Infinity });
    // C3: layer k + 1 runs at τ_i + k, after it arrived, for every k < T_i: τ_i ≥ g(T_i) with g(T) = max over k < T
    // of (arrival(k + 1) − k), non-decreasing; with the y's in order, g(T_i) = Σ_k (g(k + 1) − g(k))·y[i][k].
    rows.push({ coef: new Map([[tau(i), 1], ...Array.from({ length: L }, (_, k) => [y(i, k), -(g[k + 1]! - g[k]!)] as [number, number])]), lower: 0, upper: Infinity });
    // C2: σ_i ≥ τ_i + T_i
    rows.push({ coef: new Map([[sigma(i), 1], [tau(i), -1], ...T(i, -1)]), lower: 0, upper: Infinity });
    if (i > 0) {
      // the target runs batches in order: τ_i ≥ τ_{i−1} + T_{i−1}
      rows.push({ coef: new Map([[tau(i), 1], [tau(i - 1), -1], ...T(i - 1, -1)]), lower: 0, upper: Infinity });
      // the source runs batches in order: σ_i ≥ σ_{i−1} + L − T_{i−1}
      rows.push({ coef: new Map([[sigma(i), 1], [sigma(i - 1), -1], ...T(i - 1, 1)]), lower: L, upper: Infinity });
    }
  }
  const r = solver.solve(buildMip(cols, rows, N * L), { timeLimitS, mipRelGap: 1e-3 });
  if (r.x === undefined) throw new Error(`the zigzag ILP found no solution (${r.status})`);
  return Array.from({ length: N }, (_, i) => {
    let t = 0;
    for (let k = 0; k < L; k++) t += r.x![y(i, k)]! > 0.5 ? 1 : 0;
    return t;
  });
}

/** Zigzag (BlitzScale §5.2): the ILP's configuration, executed as `rehearse` does. */
export function zigzag(e: Episode, solver: Solver, timeLimitS = 2): Rehearsal {
  const config = zigzagConfiguration(e, solver, timeLimitS);
  return rehearse(e, (i) => config[i]!);
}
