/**
 * Fitting the performance model to measured rows (data.ts), and its error on held-out rows.
 *
 * Per (model, GPU, TP):
 * - prefill(T, n): T = batched prompt tokens, n = sequences in the prefill batch. Two piecewise-linear curves in
 *   log(tokens)–log(ms), each through knots at a measured T (median of the training runs at that point):
 *   the single-sequence curve (n = 1: the prompt-length sweep, 128..8192 tokens) and the batched curve (n ≥ 2: the
 *   batch sweep, 2..64 × 512-token prompts; below its first knot it follows the single-sequence curve). They are
 *   kept apart because the two sweeps disagree at the same T (e.g. llama2-70b A100 TP4: 4 × 512 tokens take 571 ms,
 *   one 2048-token prompt 403 ms), so one curve in T alone misses both by ~15%. Prefill in the data is flat below
 *   ~512 tokens (launch floor), then super-linear, then linear; a three-term polynomial misses all three regimes by
 *   ~9% (tried), as do (a + b·T)·g(T) and a + b·T·g(T) with a shape g shared across profiles (tried: ~7% leaving
 *   out one run setting; README); the knot curves follow them. Below the first knot: the first knot's time; above
 *   the last: proportional to T.
 *   A knot a profile lacks (a sweep point it has no valid runs at, or one left out by `leaveConfigOut`) is imputed
 *   from the profile's two nearest knots and how its peers (the other profiles measured by the same profiler,
 *   `MeasuredRow.source`) relate that point to those two (`imputeKnots`: log(t(T)/t(K1)) = a + b·log(t(K2)/t(K1)),
 *   a and b fitted across the peers). The sweeps' shape is shared by a profiler's profiles (e.g. the ×2.1–2.9 jump
 *   from 2048 to 4096 tokens in every Splitwise profile), and where it is not (the knee from the launch floor into
 *   compute-bound prefill sits at 256–1024 tokens depending on model, GPU and TP) the regression carries how the
 *   knee moves with the floor's height: a profile whose t(256)/t(1024) is high has a high t(512)/t(1024) too.
 *   Where the profile's other sweep covers the point (1024..8192 tokens in both), the knot is the mean (log space)
 *   of that estimate and one that follows the other sweep's own shape there (imputeKnots' `sibling`).
 * - decode iteration: τ(B, C) = c0 + cB·B + cB2·B² + cCtx·C ms, B = batch size, C = context tokens held by the batch
 *   (Σ prompt + generated), fitted by least squares on relative error (weights 1/y). cCtx is constrained ≥ 0 (refit
 *   without it when negative) so iterations never speed up as context grows.
 *
 * Held-out split: the 5th run (repeat index 4) of every measured (prompt, batch, output) run setting is held out;
 * the model is fitted on the others. Mean absolute percentage error (MAPE) is reported on the held-out runs for
 * TTFT (prefill) and time per output token (decode iteration). `leaveConfigOut` (evaluate.ts) is the harsher
 * check: a whole (prompt, batch) configuration unseen.
 */
import type { MeasuredRow } from "./data.js";

/** The fitted profile of one (model, GPU, TP); everything the engine and planner need to time work. */
export interface ProfileFit {
  model: string;
  gpu: string;
  tp: number;
  /** Single-sequence prefill: [prompt tokens, prefill ms] knots, tokens ascending. */
  prefillKnots: [number, number][];
  /** Prefill of ≥ 2 sequences: [batched prompt tokens, prefill ms] knots, tokens ascending. */
  prefillBatchedKnots: [number, number][];
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

/** Prefill time (ms) of `sequences` prompts holding `tokens` prompt tokens in total, under `fit`'s curves. */
export function prefillFromFit(fit: ProfileFit, tokens: number, sequences = 1): number {
  return prefillFromKnots(sequences >= 2 ? fit.prefillBatchedKnots : fit.prefillKnots, tokens);
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

type Knots = [number, number][];

/** A profile's measured prefill knots per sweep (medians of runs), before imputation. */
export interface PrefillCurves {
  /** The profiler that measured the profile (`MeasuredRow.source`): peers for imputation share it. */
  source: string;
  /** batch = 1 runs, by prompt tokens. */
  single: Knots;
  /** batch ≥ 2 runs plus the 512-token single prompt the batch sweep starts from, by batched tokens. */
  batched: Knots;
}

function medianKnots(points: Map<number, number[]>): Knots {
  return [...points.entries()].sort((a, b) => a[0] - b[0]).map(([t, ms]) => [t, median(ms)] as [number, number]);
}

/** The batch sweep's prompt length (Splitwise and SageServe both sweep batch at 512-token prompts). */
const BATCH_SWEEP_PROMPT = 512;

/** Median prefill ms at each measured point of one profile's rows (prefill outliers skipped), per sweep. */
export function rawPrefillCurves(rows: readonly MeasuredRow[]): PrefillCurves {
  const single = new Map<number, number[]>();
  const batched = new Map<number, number[]>();
  const add = (m: Map<number, number[]>, t: number, ms: number) => m.set(t, [...(m.get(t) ?? []), ms]);
  for (const r of rows) {
    if (r.prefillOutlier !== undefined) continue;
    const t = r.batch * r.promptTokens;
    if (r.batch === 1) add(single, t, r.prefillMs);
    if (r.batch >= 2 || r.promptTokens === BATCH_SWEEP_PROMPT) add(batched, t, r.prefillMs);
  }
  return { source: rows[0]?.source ?? "", single: medianKnots(single), batched: medianKnots(batched) };
}

/** The peers needed to fit both the intercept and the slope of imputeKnots' regression. */
export const MIN_REGRESSION_PEERS = 3;

/**
 * Adds to `own` a knot at every T some peer has and `own` lacks, from two anchor knots of `own`: K1, K2 = the
 * nearest own knots below and above T (at the ends of the curve, the two nearest). Across the peers that have
 * T, K1 and K2:   log(t(T) / t(K1)) = a + b · log(t(K2) / t(K1)),
 * fitted by least squares when there are ≥ MIN_REGRESSION_PEERS of them, and applied to own's t(K1), t(K2). With
 * 1–2 such peers, b is fixed to the straight log–log line through K1 and K2 (b = log(T/K1) / log(K2/K1)) and a is
 * the median of the peers' deviations from it. With one own knot, t(T) = t(K1) × the peers' median t(T)/t(K1). A T
 * no peer can speak for stays without a knot. Imputed knots are not anchors for each other.
 *
 * `sibling` (optional): the same profile's other sweep (`own`) and each peer's (`peers`, aligned with `peers`;
 * undefined where a peer has none). Where the sibling has T and K1 and ≥ MIN_REGRESSION_PEERS peers have T and K1
 * in both sweeps, a second estimate follows the own sibling's shape: log(t(T)/t(K1)) = log(s(T)/s(K1)) + the peers'
 * median of log(t(T)/t(K1)) − log(s(T)/s(K1)) (s = the sibling sweep); the knot is the weighted mean of the two
 * estimates in log space, `options.siblingWeight` on the sibling's. The two sweeps of a profile bend together
 * (llama2-70b H100 TP8: ×2.17 from 4096 to 8192 tokens in one prompt, ×2.19 in 8 → 16 prompts of 512), which
 * the peers' shape alone does not see.
 */
export function imputeKnots(
  own: readonly [number, number][],
  peers: readonly (readonly [number, number][])[],
  sibling?: { own: readonly [number, number][]; peers: readonly (readonly [number, number][] | undefined)[] },
  options: FitOptions = DEFAULT_FIT,
): Knots {
  const out: Knots = own.map(([t, ms]) => [t, ms]);
  if (own.length === 0) return out;
  const ownTs = new Set(own.map((k) => k[0]));
  const missing = [...new Set(peers.flatMap((p) => p.map((k) => k[0])))].filter((t) => !ownTs.has(t)).sort((a, b) => a - b);
  const at = (knots: readonly [number, number][], t: number) => knots.find((k) => k[0] === t)?.[1];
  for (const t of missing) {
    const below = own.filter((k) => k[0] < t);
    const above = own.filter((k) => k[0] > t);
    const byDistance = [...own].sort((x, y) => Math.abs(Math.log(x[0] / t)) - Math.abs(Math.log(y[0] / t)) || x[0] - y[0]);
    const [k1, k2] = below.length > 0 && above.length > 0 ? [below[below.length - 1]!, above[0]!] : [byDistance[0]!, byDistance[1]];
    const xs: number[] = [];
    const ys: number[] = [];
    for (const peer of peers) {
      const q = at(peer, t);
      const q1 = at(peer, k1[0]);
      const q2 = k2 === undefined ? 1 : at(peer, k2[0]);
      if (q === undefined || q1 === undefined || q2 === undefined) continue;
      xs.push(k2 === undefined ? 0 : Math.log(q2 / q1));
      ys.push(Math.log(q / q1));
    }
    if (ys.length === 0) continue;
    // The sibling sweep's estimate: the own sibling's log slope from K1 to T plus the peers' median offset.
    const sibOwnT = sibling === undefined ? undefined : at(sibling.own, t);
    const sibOwnK1 = sibling === undefined ? undefined : at(sibling.own, k1[0]);
    const offsets: number[] = [];
    if (sibling !== undefined && sibOwnT !== undefined && sibOwnK1 !== undefined) {
      peers.forEach((peer, i) => {
        const s = sibling.peers[i];
        const q = at(peer, t);
        const q1 = at(peer, k1[0]);
        const s0 = s === undefined ? undefined : at(s, t);
        const s1 = s === undefined ? undefined : at(s, k1[0]);
        if (q === undefined || q1 === undefined || s0 === undefined || s1 === undefined) return;
        offsets.push(Math.log(q / q1) - Math.log(s0 / s1));
      });
    }
    const x = k2 === undefined ? 0 : Math.log(k2[1] / k1[1]);
    let a: number;
    let b: number;
    if (k2 !== undefined && ys.length >= MIN_REGRESSION_PEERS) {
      const mx = xs.reduce((s, v) => s + v, 0) / xs.length;
      const my = ys.reduce((s, v) => s + v, 0) / ys.length;
      let sxx = 0;
      let sxy = 0;
      xs.forEach((v, i) => {
        sxx += (v - mx) ** 2;
        sxy += (v - mx) * (ys[i]! - my);
      });
      b = sxx > 0 ? sxy / sxx : 0;
      a = my - b * mx;
    } else {
      b = k2 === undefined ? 0 : Math.log(t / k1[0]) / Math.log(k2[0] / k1[0]);
      a = median(ys.map((y, i) => y - b * xs[i]!));
    }
    let y = a + b * x;
    if (offsets.length >= MIN_REGRESSION_PEERS) y = (1 - options.siblingWeight) * y + options.siblingWeight * (Math.log(sibOwnT! / sibOwnK1!) + median(offsets));
    out.push([t, k1[1] * Math.exp(y)]);
  }
  return out.sort((a, b) => a[0] - b[0]);
}

/**
 * The two prefill curves of a profile from its raw knots and its peers' (same source, other profiles): each sweep
 * imputed (imputeKnots, with the profile's other sweep as the sibling where it has one); the batched curve takes
 * the single-sequence knots below its first one, and is the single-sequence curve itself when the profile has no
 * valid batched runs (Llama-3: see data.ts).
 */
export function prefillCurves(own: PrefillCurves, peers: readonly PrefillCurves[], options: FitOptions = DEFAULT_FIT): { prefillKnots: Knots; prefillBatchedKnots: Knots } {
  const same = peers.filter((p) => p.source === own.source);
  const hasBatched = (c: PrefillCurves) => c.batched.length >= 2 && c.batched.some(([t]) => t > BATCH_SWEEP_PROMPT);
  const single = imputeKnots(
    own.single,
    same.map((p) => p.single),
    hasBatched(own) ? { own: own.batched, peers: same.map((p) => (hasBatched(p) ? p.batched : undefined)) } : undefined,
    options,
  );
  if (!hasBatched(own)) return { prefillKnots: single, prefillBatchedKnots: single };
  const batchedPeers = same.filter((p) => p.batched.length >= 2);
  const batched = imputeKnots(
    own.batched,
    batchedPeers.map((p) => p.batched),
    { own: own.single, peers: batchedPeers.map((p) => p.single) },
    options,
  );
  const first = batched[0]![0];
  return { prefillKnots: single, prefillBatchedKnots: [...single.filter(([t]) => t < first), ...batched] };
}

/**
 * The fit's one choice in imputing a knot (imputeKnots): the weight of the sibling sweep's estimate, in [0, 1].
 * nested.ts makes it on training folds only; `DEFAULT_FIT` is what that selection picks on all the data (nested.ts
 * `chooseFit`), and what fitted.ts is generated with.
 */
export interface FitOptions {
  siblingWeight: number;
}

/** The fit that ships (fitted.ts): nested.ts `chooseFit` on every measured row (perf.test.ts checks it still is). */
export const DEFAULT_FIT: FitOptions = { siblingWeight: 0.5 };

/**
 * Fits one (model, GPU, TP) from its training rows (outliers skipped). `peers`: the raw prefill knots of the other
 * profiles, for imputing knots this profile lacks (none: no imputation).
 */
export function fitProfile(rows: readonly MeasuredRow[], peers: readonly PrefillCurves[] = [], options: FitOptions = DEFAULT_FIT): ProfileFit {
  const head = rows[0];
  if (head === undefined) throw new Error("fitProfile: no rows");
  const { prefillKnots, prefillBatchedKnots } = prefillCurves(rawPrefillCurves(rows), peers, options);
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
    prefillBatchedKnots,
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
    prefillBatchedKnots: base.prefillBatchedKnots.map(([t, ms]) => [t, ms * prefillRatio] as [number, number]),
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

/**
 * Error of `fit` on `rows` (outliers skipped): MAPE of TTFT and of time per output token, as fractions. A figure with
 * no row to score is NaN ("no data"), never 0: it fails every `≤ target` check (test/bench/verdicts/replay.ts).
 */
export function errorOn(fit: ProfileFit, rows: readonly MeasuredRow[]): { ttftMape: number; tpotMape: number; ttftRows: number; tpotRows: number } {
  let pe = 0;
  let pn = 0;
  let de = 0;
  let dn = 0;
  for (const r of rows) {
    if (r.prefillOutlier === undefined) {
      pe += Math.abs(prefillFromFit(fit, r.batch * r.promptTokens, r.batch) - r.prefillMs) / r.prefillMs;
      pn++;
    }
    if (r.decodeOutlier === undefined) {
      de += Math.abs(decodeFromFit(fit, r.batch, runContextTokens(r)) - r.decodeIterMs) / r.decodeIterMs;
      dn++;
    }
  }
  return { ttftMape: pn ? pe / pn : Number.NaN, tpotMape: dn ? de / dn : Number.NaN, ttftRows: pn, tpotRows: dn };
}
