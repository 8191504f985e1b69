/**
 * Fitting the performance model to measured rows (data.ts), and its error on held-out rows.
 *
 * Per (model, GPU, TP):
 * - prefill: a piecewise-linear curve in log(tokens)–log(ms) through knots at each measured batched prompt size
 *   T = batch × prompt (median of the training runs at that T). Prefill in the data is flat below ~512 tokens (launch
 *   floor), then super-linear, then linear; a three-term polynomial misses all three regimes by ~9% (tried), the knot
 *   curve follows them. Below the first knot: the first knot's time; above the last: proportional to T.
 * - decode iteration: τ(B, C) = c0 + cB·B + cB2·B² + cCtx·C ms, B = batch size, C = context tokens held by the batch
 *   (Σ prompt + generated), fitted by least squares on relative error (weights 1/y). cCtx is constrained ≥ 0 (refit
 *   without it when negative) so iterations never speed up as context grows.
 *
 * Held-out split: the 5th run (repeat index 4) of every measured configuration is held out; the model is fitted on
 * runs 0–3. Mean absolute percentage error (MAPE) is reported on the held-out runs for TTFT (prefill) and time per
 * output token (decode iteration). `leaveConfigOut` is the harsher check (a whole configuration unseen).
 */
import type { MeasuredRow } from "./data.js";

/** The fitted profile of one (model, GPU, TP); everything the engine and planner need to time work. */
export interface ProfileFit {
  model: string;
  gpu: string;
  tp: number;
  /** [batched prompt tokens, prefill ms] knots, tokens ascending. */
  prefillKnots: [number, number][];
  /** τ(B, C) = c0 + cB·B + cB2·B² + cCtx·C (ms). */
  decode: { c0: number; cB: number; cB2: number; cCtx: number };
  /** Largest batch measured (τ is extrapolated linearly beyond it). */
  maxMeasuredBatch: number;
  /** "measured", or how the profile was derived from measured ones. */
  source: string;
}

export function profileKey(model: string, gpu: string, tp: number): string {
  return `${model}/${gpu}/tp${tp}`;
}

/** Prefill time (ms) of `tokens` batched prompt tokens (≥ 0) under the knot curve. */
export function prefillFromKnots(knots: readonly [number, number][], tokens: number): number {
  const first = knots[0]!;
  if (tokens <= first[0]) return first[1];
  const last = knots[knots.length - 1]!;
  if (tokens >= last[0]) return (last[1] * tokens) / last[0];
  let lo = 0;
  let hi = knots.length - 1;
  while (hi - lo > 1) {
    const mid = (lo + hi) >> 1;
    if (knots[mid]![0] <= tokens) lo = mid;
    else hi = mid;
  }
  const [x0, y0] = knots[lo]!;
  const [x1, y1] = knots[hi]!;
  if (y0 === y1) return y0;
  const f = (Math.log(tokens) - Math.log(x0)) / (Math.log(x1) - Math.log(x0));
  return Math.exp(Math.log(y0) + f * (Math.log(y1) - Math.log(y0)));
}

/** Decode iteration time (ms) at batch `batch` (≥ 1) holding `contextTokens` tokens of KV. */
export function decodeFromFit(fit: ProfileFit, batch: number, contextTokens: number): number {
  const { c0, cB, cB2, cCtx } = fit.decode;
  const poly = (b: number) => c0 + cB * b + cB2 * b * b;
  let base: number;
  if (batch <= fit.maxMeasuredBatch) base = poly(batch);
  else {
    const bm = fit.maxMeasuredBatch;
    const slope = (poly(bm) - poly(bm / 2)) / (bm / 2);
    base = poly(bm) + Math.max(0, slope) * (batch - bm);
  }
  return Math.max(base, c0 * 0.5) + cCtx * contextTokens;
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 === 1 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

/** Solves the weighted least-squares problem min Σ w²(x·c − y)² by normal equations (small, well-scaled). */
function weightedLeastSquares(xs: number[][], ys: number[], ws: number[]): number[] {
  const k = xs[0]!.length;
  const a = Array.from({ length: k }, () => new Array<number>(k + 1).fill(0));
  xs.forEach((x, n) => {
    const w2 = ws[n]! * ws[n]!;
    for (let i = 0; i < k; i++) {
      for (let j = 0; j < k; j++) a[i]![j]! += w2 * x[i]! * x[j]!;
      a[i]![k]! += w2 * x[i]! * ys[n]!;
    }
  });
  for (let col = 0; col < k; col++) {
    let piv = col;
    for (let r = col + 1; r < k; r++) if (Math.abs(a[r]![col]!) > Math.abs(a[piv]![col]!)) piv = r;
    [a[col], a[piv]] = [a[piv]!, a[col]!];
    const p = a[col]![col]!;
    if (Math.abs(p) < 1e-300) throw new Error("singular least-squares system");
    for (let r = 0; r < k; r++) {
      if (r === col) continue;
      const f = a[r]![col]! / p;
      for (let c = col; c <= k; c++) a[r]![c]! -= f * a[col]![c]!;
    }
  }
  return a.map((row, i) => row[k]! / row[i]!);
}

/** Context tokens the batch holds, averaged over a run: B × (prompt + output / 2). */
export function runContextTokens(r: MeasuredRow): number {
  return r.batch * (r.promptTokens + r.outputTokens / 2);
}

/** Fits one (model, GPU, TP) from its training rows (outliers skipped). */
export function fitProfile(rows: readonly MeasuredRow[]): ProfileFit {
  const head = rows[0];
  if (head === undefined) throw new Error("fitProfile: no rows");
  const byTokens = new Map<number, number[]>();
  for (const r of rows) {
    if (r.prefillOutlier !== undefined) continue;
    const t = r.batch * r.promptTokens;
    byTokens.set(t, [...(byTokens.get(t) ?? []), r.prefillMs]);
  }
  const prefillKnots = [...byTokens.entries()].sort((a, b) => a[0] - b[0]).map(([t, ms]) => [t, median(ms)] as [number, number]);
  const dec = rows.filter((r) => r.decodeOutlier === undefined);
  const ys = dec.map((r) => r.decodeIterMs);
  const ws = ys.map((y) => 1 / y);
  let c = weightedLeastSquares(dec.map((r) => [1, r.batch, r.batch * r.batch, runContextTokens(r)]), ys, ws);
  if (c[3]! < 0) c = [...weightedLeastSquares(dec.map((r) => [1, r.batch, r.batch * r.batch]), ys, ws), 0];
  return {
    model: head.model,
    gpu: head.gpu,
    tp: head.tp,
    prefillKnots,
    decode: { c0: c[0]!, cB: c[1]!, cB2: c[2]!, cCtx: c[3]! },
    maxMeasuredBatch: Math.max(...dec.map((r) => r.batch)),
    source: "measured",
  };
}

/** Groups rows by (model, GPU, TP). */
export function groupRows(rows: readonly MeasuredRow[]): Map<string, MeasuredRow[]> {
  const g = new Map<string, MeasuredRow[]>();
  for (const r of rows) {
    const k = profileKey(r.model, r.gpu, r.tp);
    g.set(k, [...(g.get(k) ?? []), r]);
  }
  return g;
}

/** True for the held-out runs (the 5th run of each configuration). */
export function isHeldOut(r: MeasuredRow): boolean {
  return r.repeat === 4;
}

/**
 * Derives a profile for a GPU without measured rows of `base.model` by scaling `base` (same model, measured GPU)
 * with the ratios `prefillRatio` / `decodeRatio` measured on a reference model that ran on both GPUs.
 */
export function scaleProfile(base: ProfileFit, gpu: string, prefillRatio: number, decodeRatio: number, source: string): ProfileFit {
  const d = base.decode;
  return {
    ...base,
    gpu,
    prefillKnots: base.prefillKnots.map(([t, ms]) => [t, ms * prefillRatio] as [number, number]),
    decode: { c0: d.c0 * decodeRatio, cB: d.cB * decodeRatio, cB2: d.cB2 * decodeRatio, cCtx: d.cCtx * decodeRatio },
    source,
  };
}

/** Median GPU-to-GPU time ratios (target / base) of one reference model at one TP, from two fitted profiles. */
export function gpuRatios(reference: ProfileFit, referenceOnTarget: ProfileFit): { prefillRatio: number; decodeRatio: number } {
  const prefill: number[] = [];
  for (const [t, ms] of reference.prefillKnots) {
    const other = referenceOnTarget.prefillKnots.find((k) => k[0] === t);
    if (other !== undefined) prefill.push(other[1] / ms);
  }
  const decode: number[] = [];
  for (const b of [1, 2, 4, 8, 16, 32]) decode.push(decodeFromFit(referenceOnTarget, b, b * 576) / decodeFromFit(reference, b, b * 576));
  return { prefillRatio: median(prefill), decodeRatio: median(decode) };
}

/** Error of `fit` on `rows` (outliers skipped): MAPE of TTFT and of time per output token, as fractions. */
export function errorOn(fit: ProfileFit, rows: readonly MeasuredRow[]): { ttftMape: number; tpotMape: number; ttftRows: number; tpotRows: number } {
  let pe = 0;
  let pn = 0;
  let de = 0;
  let dn = 0;
  for (const r of rows) {
    if (r.prefillOutlier === undefined) {
      pe += Math.abs(prefillFromKnots(fit.prefillKnots, r.batch * r.promptTokens) - r.prefillMs) / r.prefillMs;
      pn++;
    }
    if (r.decodeOutlier === undefined) {
      de += Math.abs(decodeFromFit(fit, r.batch, runContextTokens(r)) - r.decodeIterMs) / r.decodeIterMs;
      dn++;
    }
  }
  return { ttftMape: pn ? pe / pn : 0, tpotMape: dn ? de / dn : 0, ttftRows: pn, tpotRows: dn };
}
