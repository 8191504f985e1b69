/**
 * The peak blend: the planner's default forecaster, chosen on evidence (README "Forecast model choice").
 *
 * The planner provisions for the PEAK of the next hour (SageServe §5). At origin o (the end of the history) the blend
 * 1. cleans collection outages out of the history (outage.ts);
 * 2. computes five peak predictors (peak-components.ts): persistence, seasonal ratio, seasonal-naive, a local-level
 *    Kalman filter on the windows scaled to a peak, and a local-level Kalman filter on the hourly peaks;
 * 3. weighs them (w ≥ 0, Σw = 1, a 0.1 grid) to minimise the MAPE of their combination over the history's OWN last
 *    `fitHours` hourly origins (rolling origin: the weights at o use only peaks that ended before o; origins inside
 *    an outage, or whose peak was one, are left out);
 * 4. bounds it conformal-style (conformal.ts): the 10% and 90% quantiles of actual / combination over the same origins
 *    scale the point forecast (clamped to [0, 1] and [1, 2]), the upper quantile adapted to the misses of those origins;
 * 5. inside an outage (the last window below the outage threshold), follows the analog rule of outage.ts: a normal
 *    forecast where every earlier origin in that state recovered, the MAPE-optimal point over their outcomes where
 *    some stayed down, persistence where there is no such origin yet; the upper bound always covers a recovery.
 * With a pool (`arima`; `blend-arima`, the planner's default), an ARIMA component (SageServe §6.4 forecasts with
 * ARIMA): SARIMA(1,0,1)(0,1,0)24 by conditional sum of squares on the log peaks of the last 72 hourly blocks, mixed
 * in with a weight λ ∈ {0, ¼, ½, ¾, 1} fitted on the last `arimaOrigins` (24) origins and kept out where it is
 * unstable (learnArimaWeight). Every forecast carries `components`: each part's weight and its own recent MAPE.
 * Fit window (96 h), the predictor set and the adaptation step were chosen on days 8–10 of the three ServeGen language
 * series, before the held-out days 11–14 (README).
 */
import type { ArimaOrder, ArimaPool } from "./arima-pool.js";
import { INTERVAL_LOWER_QUANTILE, INTERVAL_UPPER_QUANTILE, quantile, type Band, type Forecast, type ForecastComponent, type ForecastInput, type Forecaster } from "./forecaster.js";
import { ACI_GAMMA, conformalBand } from "./conformal.js";
import { cleanOutages, outageAnalog, outageThreshold } from "./outage.js";
import { COMPONENTS, PeakPredictors, type Components } from "./peak-components.js";

/** Tuning of the blend; defaults are the values chosen on the validation days. */
export interface BlendOptions {
  /** Hours of in-sample origins the weights and the band are fitted on (default 96). */
  fitHours?: number;
  /** Minutes of recent history averaged into the seasonal ratio's level (default 30). */
  levelMinutes?: number;
  /** Days of seasonal ratios averaged (default 7). */
  ratioDays?: number;
  /** With a pool: ARIMA on the log hourly peaks as a guarded component with a learned weight (see the file comment). */
  arima?: ArimaPool;
  /** The ARIMA component's model (defaults: ARIMA_COMPONENT_ORDER, the daily lag, ARIMA_COMPONENT_MAX_PEAKS). */
  arimaModel?: ArimaComponentOptions;
  /** Origins the ARIMA weight λ is fitted on (default 24). */
  arimaOrigins?: number;
  /** Spacing of those origins, in fit origins (default 1: the last `arimaOrigins` in a row). */
  arimaStride?: number;
  /** λ > 0 only where it lowers the fit origins' summed APE by more than this fraction of λ = 0's (default 0). */
  arimaMargin?: number;
  /** Nominal quantile of actual / fitted over the fit origins that scales the upper bound (default 0.9, the port's). */
  upperQuantile?: number;
  /** Step γ of the upper quantile's adaptation (conformal.ts; default `ACI_GAMMA`, 0: none). */
  aciGamma?: number;
}

/** The ARIMA component's model: an ARIMA on the log peaks, seasonally differenced first. */
export interface ArimaComponentOptions {
  /** Order fitted to the seasonally differenced log peaks (P, D, Q, s unused: the seasonal difference is `seasonalLag`). */
  order?: ArimaOrder;
  /** Seasonal lag in peaks (24 on hourly peaks: y_t = z_t − z_{t−24}); 0: none. Default: peaks per season (S / H). */
  seasonalLag?: number;
  /** Longest window of peaks a fit sees (default ARIMA_COMPONENT_MAX_PEAKS). */
  maxPeaks?: number;
}

/** The ARIMA component's default order on the seasonally differenced log peaks (README "Forecast model choice"). */
export const ARIMA_COMPONENT_ORDER: ArimaOrder = { p: 1, d: 0, q: 1, P: 0, D: 0, Q: 0, s: 0, method: 1 };
/** Peaks a fit sees at most: 3 days of hourly peaks (48 seasonal differences), the window that kept a cold forecast of 1,000 series in budget. */
export const ARIMA_COMPONENT_MAX_PEAKS = 72;
/** Memoised ARIMA fits per forecaster (oldest evicted first). */
const FIT_CACHE_SIZE = 50_000;

/** What the ARIMA component did at one forecast. */
export interface ArimaOutcome {
  /** Learned weight λ ∈ {0, ¼, ½, ¾, 1}. */
  lambda: number;
  /** ARIMA's forecast at the current origin (NaN: no fit). */
  now: number;
  /** Whether the current origin's ARIMA forecast was rejected by the guards. */
  nowRejected: boolean;
  /** Past origins whose ARIMA forecast was rejected, and how many were kept with their MAPE (percent). */
  rejected: number;
  origins: number;
  mapePct: number;
}

/** λ ∈ {0, ¼, ½, ¾, 1} minimising Σ |(1 − λ)·blend + λ·arima − actual| / actual; ties keep the smaller λ. */
export function fitLambda(pairs: readonly { blend: number; arima: number; actual: number }[], margin = 0): number {
  let lambda = 0;
  let bestErr = Infinity;
  for (const l of [0, 0.25, 0.5, 0.75, 1]) {
    let e = 0;
    for (const p of pairs) e += Math.abs((1 - l) * p.blend + l * p.arima - p.actual) / p.actual;
    if (l === 0) e *= 1 - margin;
    if (e < bestErr - 1e-12) {
      bestErr = e;
      lambda = l;
    }
  }
  return lambda;
}

/** Whether an ARIMA forecast is kept: finite, > 0 and within 3× of the blend's either way. */
export function arimaStable(arima: number, blend: number): boolean {
  return Number.isFinite(arima) && arima > 0 && arima <= 3 * blend && arima >= blend / 3;
}

/**
 * The ARIMA weight from the recent origins (oldest first: the blend's fitted value, ARIMA's forecast — NaN where the
 * fit failed — and the actual peak) and the current origin's two forecasts. The guards: a past ARIMA forecast that is
 * not `arimaStable` counts as the blend's own value (and is left out of ARIMA's MAPE); λ = 0 when the current one is
 * not stable, or more than half of the past ones were not; otherwise λ = fitLambda over the pairs.
 */
export function learnArimaWeight(past: readonly { blend: number; arima: number; actual: number }[], now: { arima: number; blend: number }, margin = 0): ArimaOutcome {
  let rejected = 0;
  let err = 0;
  const pairs = past.map((p) => {
    const ok = arimaStable(p.arima, p.blend);
    if (ok) err += Math.abs(p.arima - p.actual) / p.actual;
    else rejected++;
    return { blend: p.blend, arima: ok ? p.arima : p.blend, actual: p.actual };
  });
  const origins = past.length - rejected;
  const base = { now: now.arima, rejected, nowRejected: !arimaStable(now.arima, now.blend), origins, mapePct: origins > 0 ? (100 * err) / origins : Number.NaN };
  if (base.nowRejected || 2 * rejected > past.length) return { ...base, lambda: 0 };
  return { ...base, lambda: fitLambda(pairs, margin) };
}

/** A 64-bit hash of a series' exact values, tagged: the memo key of an ARIMA fit. */
function seriesKey(tag: string, v: readonly number[]): string {
  const u = new Uint32Array(Float64Array.from(v).buffer);
  let h1 = 0xdeadbeef;
  let h2 = 0x41c6ce57;
  for (let i = 0; i < u.length; i++) {
    h1 = Math.imul(h1 ^ u[i]!, 2654435761);
    h2 = Math.imul(h2 ^ u[i]!, 1597334677);
  }
  h1 = Math.imul(h1 ^ (h1 >>> 16), 2246822507) ^ Math.imul(h2 ^ (h2 >>> 13), 3266489909);
  h2 = Math.imul(h2 ^ (h2 >>> 16), 2246822507) ^ Math.imul(h1 ^ (h1 >>> 13), 3266489909);
  return `${tag}:${v.length}:${(h1 >>> 0).toString(36)}:${(h2 >>> 0).toString(36)}`;
}

/** Every weight vector on the 0.1 grid of the simplex over `k` predictors. */
function simplexGrid(k: number, steps = 10): number[][] {
  const out: number[][] = [];
  const rec = (prefix: number[], left: number) => {
    if (prefix.length === k - 1) {
      out.push([...prefix, left / steps]);
      return;
    }
    for (let i = 0; i <= left; i++) rec([...prefix, i / steps], left - i);
  };
  rec([], steps);
  return out;
}
const GRID = simplexGrid(COMPONENTS.length);

function maxOf(x: readonly number[], from: number, to: number): number {
  let m = -Infinity;
  for (let i = from; i < to; i++) if (x[i]! > m) m = x[i]!;
  return m;
}

const vectorOf = (c: Components): number[] => COMPONENTS.map((n) => c[n]);
const dot = (w: readonly number[], v: readonly number[]) => {
  let s = 0;
  for (let i = 0; i < w.length; i++) if (w[i]! > 0) s += w[i]! * v[i]!;
  return s;
};

/** An in-sample origin: its predictors and the peak that followed it. */
interface FitOrigin {
  origin: number;
  v: number[];
  actual: number;
}

/** The blend (see the file comment). Throws only when the history is shorter than the horizon. */
export class BlendForecaster implements Forecaster {
  readonly name: string;
  private readonly fits = new Map<string, Promise<number>>();
  constructor(private readonly options: BlendOptions = {}) {
    this.name = options.arima === undefined ? "blend" : "blend-arima";
  }

  async forecast(input: ForecastInput): Promise<Forecast> {
    const x = input.values;
    const H = input.horizonSteps;
    const S = input.seasonSteps;
    const o = x.length;
    if (o < H) throw new RangeError(`blend needs ≥ ${H} points, got ${o}`);
    const L = Math.max(1, Math.round(((this.options.levelMinutes ?? 30) * 60_000) / input.stepMs));
    const originStep = Math.max(H, Math.round(3_600_000 / input.stepMs));
    const fitOrigins = Math.max(1, Math.round(((this.options.fitHours ?? 96) * 3_600_000) / (originStep * input.stepMs)));
    const threshold = outageThreshold(x);
    const clean = cleanOutages(x, threshold);
    const predictors = new PeakPredictors(clean, { H, S, L, ...(this.options.ratioDays === undefined ? {} : { ratioDays: this.options.ratioDays }) });
    const now = vectorOf(predictors.at(o));
    const usable = now.map((v) => Number.isFinite(v));
    const normal = (v: number) => v >= threshold && v > 0;

    // In-sample origins, oldest first: known peak, not inside an outage, every usable predictor computable.
    const hist: FitOrigin[] = [];
    for (let k = fitOrigins; k >= 1; k--) {
      const origin = o - k * originStep;
      if (origin - H < 0 || origin < 1) continue;
      const actual = maxOf(x, origin, origin + H);
      if (!normal(actual) || !normal(x[origin - 1]!)) continue;
      const v = vectorOf(predictors.at(origin));
      if (v.some((c, i) => usable[i] && !Number.isFinite(c))) continue;
      hist.push({ origin, v, actual });
    }
    let best: number[] = COMPONENTS.map((_, i) => (i === 0 ? 1 : 0));
    if (hist.length >= 6) {
      let bestErr = Infinity;
      for (const w of GRID) {
        if (w.some((wi, i) => wi > 0 && !usable[i])) continue;
        let e = 0;
        for (const h of hist) e += Math.abs(dot(w, h.v) - h.actual) / h.actual;
        if (e < bestErr - 1e-12) {
          bestErr = e;
          best = w;
        }
      }
    }
    let mean = Math.max(0, dot(best, now.map((v) => (Number.isFinite(v) ? v : 0))));
    const fitted = hist.map((h) => dot(best, h.v));
    const detail: Record<string, number | string> = Object.fromEntries(COMPONENTS.map((n, i) => [`w_${n}`, best[i]!]));
    detail.fitOrigins = hist.length;
    detail.levelSteps = L;

    // Each component's weight and its own MAPE over the fit origins (the plan report shows both).
    const components: ForecastComponent[] = COMPONENTS.map((name, i) => {
      let e = 0;
      let n = 0;
      for (const h of hist) {
        if (!Number.isFinite(h.v[i]!)) continue;
        e += Math.abs(h.v[i]! - h.actual) / h.actual;
        n++;
      }
      return { name, weight: best[i]!, recentMapePct: n > 0 ? (100 * e) / n : Number.NaN, origins: n };
    });
    if (this.options.arima !== undefined) {
      const arima: ForecastComponent = { name: "arima", weight: 0, recentMapePct: Number.NaN, origins: 0 };
      if (normal(x[o - 1]!) && hist.length >= 6) {
        const r = await this.arimaChallenger(this.options.arima, clean, o, H, S, mean, hist, fitted);
        if (r.lambda > 0) {
          mean = (1 - r.lambda) * mean + r.lambda * r.now;
          for (const c of components) c.weight *= 1 - r.lambda;
        }
        Object.assign(arima, { weight: r.lambda, recentMapePct: r.mapePct, origins: r.origins });
        detail.arimaWeight = r.lambda;
        if (r.rejected > 0) detail.arimaRejected = r.rejected;
        if (r.nowRejected) detail.arimaNowRejected = 1;
      }
      components.push(arima);
    }
    // Band: quantiles of actual / fitted over the same origins, the upper one adapted to recent misses (conformal.ts).
    const ratios = hist.map((h, i) => h.actual / Math.max(1e-12, fitted[i]!)).filter((r) => Number.isFinite(r));
    const band = conformalBand(ratios, INTERVAL_LOWER_QUANTILE, this.options.upperQuantile ?? INTERVAL_UPPER_QUANTILE, this.options.aciGamma ?? ACI_GAMMA);
    detail.upperQuantile = Number(band.upperQuantile.toFixed(4));
    let peak: Band = { mean, lower: mean * band.lower, upper: mean * band.upper };

    if (!normal(x[o - 1]!)) {
      const verdict = outageAnalog(x, o, H, threshold);
      detail.outage = verdict.kind;
      detail.outageAnalogs = verdict.analogs;
      if (verdict.kind === "recovers") {
        peak = { ...peak, upper: Math.max(peak.upper, quantile(verdict.outcomes, INTERVAL_UPPER_QUANTILE)) };
      } else if (verdict.kind === "stays-down") {
        const point = verdict.point;
        peak = { mean: point, lower: Math.min(point, quantile(verdict.outcomes, INTERVAL_LOWER_QUANTILE)), upper: Math.max(peak.upper, quantile(verdict.outcomes, INTERVAL_UPPER_QUANTILE), point) };
      } else {
        const point = maxOf(x, o - H, o);
        peak = { mean: point, lower: Math.min(point, peak.lower), upper: Math.max(peak.upper, point) };
      }
    }

    // The path: yesterday's shape over the horizon scaled so its maximum equals the peak (flat without a day).
    const shape: number[] = [];
    for (let k = 0; k < H; k++) shape.push(o - S + k >= 0 ? clean[o - S + k]! : 1);
    const shapeMax = Math.max(...shape);
    const steps: Band[] = shape.map((v) => {
      const f = shapeMax > 0 ? v / shapeMax : 1;
      return { mean: peak.mean * f, lower: peak.lower * f, upper: peak.upper * f };
    });
    return { steps, peak, method: this.name, detail, components };
  }

  /**
   * The ARIMA component (SageServe §6.4 forecasts each (model, region)'s hourly demand with ARIMA): the configured
   * ARIMA on the log peaks of the H-blocks ending at each origin (at most `maxPeaks` of them), seasonally differenced
   * at `seasonalLag` peaks — SARIMA(p,d,q)(0,1,0)lag, the seasonal difference taken here so the fit is the package's
   * fast non-seasonal one. λ minimises the MAPE of (1 − λ)·blend + λ·ARIMA over the last `arimaOrigins` fit origins.
   * Guards that keep a bad fit out: a forecast that throws (wasm trap, timeout), is not finite, is ≤ 0 or is off the
   * blend's by more than 3× either way is rejected — at a past origin it counts as the blend's own value, at the
   * current origin it sets λ = 0 — and λ = 0 when more than half of the past origins were rejected.
   */
  private async arimaChallenger(pool: ArimaPool, clean: readonly number[], o: number, H: number, S: number, blendNow: number, hist: readonly FitOrigin[], fitted: readonly number[]): Promise<ArimaOutcome> {
    const model = this.options.arimaModel ?? {};
    const order = model.order ?? ARIMA_COMPONENT_ORDER;
    const lag = model.seasonalLag ?? (S % H === 0 ? S / H : 0);
    const maxPeaks = model.maxPeaks ?? ARIMA_COMPONENT_MAX_PEAKS;
    const tag = `${order.p},${order.d},${order.q},${order.method ?? 0}`;
    const forecastAt = async (origin: number): Promise<number> => {
      const peaks: number[] = [];
      for (let t = Math.max(origin - Math.floor(origin / H) * H, origin - maxPeaks * H); t + H <= origin; t += H) peaks.push(maxOf(clean, t, t + H));
      if (peaks.length < lag + 12) return Number.NaN;
      const c = Math.max(1e-6, 0.01 * (peaks.reduce((s, v) => s + v, 0) / peaks.length));
      const z = peaks.map((v) => Math.log(v + c));
      const y = lag > 0 ? z.slice(lag).map((v, i) => v - z[i]!) : z;
      try {
        const yNext = await this.arimaFit(pool, tag, order, y);
        return Math.exp(yNext + (lag > 0 ? z[z.length - lag]! : 0)) - c;
      } catch {
        return Number.NaN; // a wasm trap or a timeout: an unstable fit, rejected below
      }
    };
    const stride = this.options.arimaStride ?? 1;
    const idx: number[] = [];
    for (let i = hist.length - 1; i >= 0 && idx.length < (this.options.arimaOrigins ?? 24); i -= stride) idx.unshift(i);
    const k = idx.length;
    const recent = idx.map((i) => hist[i]!);
    const recentFitted = idx.map((i) => fitted[i]!);
    const [now, ...past] = await Promise.all([forecastAt(o), ...recent.map((h) => forecastAt(h.origin))]);
    return learnArimaWeight(recent.map((h, i) => ({ blend: recentFitted[i]!, arima: past[i]!, actual: h.actual })), { arima: now!, blend: blendNow }, this.options.arimaMargin ?? 0);
  }

  /** One ARIMA fit's next value, memoised on (order, series): rolling origins refit the same windows. */
  private arimaFit(pool: ArimaPool, tag: string, order: ArimaOrder, y: readonly number[]): Promise<number> {
    const key = seriesKey(tag, y);
    const hit = this.fits.get(key);
    if (hit !== undefined) return hit;
    const p = pool.run({ order, values: [...y], horizonSteps: 1 }).then((r) => r.mean[0]!);
    if (this.fits.size >= FIT_CACHE_SIZE) this.fits.delete(this.fits.keys().next().value!);
    this.fits.set(key, p);
    return p;
  }

  async close(): Promise<void> {}
}
