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
 * Optionally (`arima`), ARIMA(1,1,1) on the log hourly peaks is a challenger: mixed in with a weight λ ∈ {0, ¼, ½, ¾,
 * 1} fitted on the last `arimaOrigins` origins, and never followed where it is unstable — a forecast that is not
 * finite, or off the blend by more than 3× either way, counts as the blend's own (λ = 0 at the current origin).
 * Fit window (96 h), the predictor set and the adaptation step were chosen on days 8–10 of the three ServeGen language
 * series, before the held-out days 11–14 (README).
 */
import type { ArimaPool } from "./arima-pool.js";
import { INTERVAL_LOWER_QUANTILE, INTERVAL_UPPER_QUANTILE, quantile, type Band, type Forecast, type ForecastInput, type Forecaster } from "./forecaster.js";
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
  /** With a pool: ARIMA(1,1,1) on the log hourly peaks as a validated challenger (see the file comment). */
  arima?: ArimaPool;
  /** Origins the ARIMA weight λ is fitted on (default 24). */
  arimaOrigins?: number;
  /** Nominal quantile of actual / fitted over the fit origins that scales the upper bound (default 0.9, the port's). */
  upperQuantile?: number;
  /** Step γ of the upper quantile's adaptation (conformal.ts; default `ACI_GAMMA`, 0: none). */
  aciGamma?: number;
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

    let lambda = 0;
    if (this.options.arima !== undefined && normal(x[o - 1]!) && hist.length >= 6) {
      const r = await this.arimaChallenger(this.options.arima, clean, o, H, mean, hist, fitted);
      lambda = r.lambda;
      if (lambda > 0) mean = (1 - lambda) * mean + lambda * r.now;
      detail.arimaWeight = lambda;
      if (r.rejected > 0) detail.arimaRejected = r.rejected;
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
    return { steps, peak, method: this.name, detail };
  }

  /**
   * ARIMA(1,1,1) on the log peaks of the H-blocks ending at each origin: λ minimising the MAPE of (1 − λ)·blend + λ·ARIMA
   * over the last `arimaOrigins` fit origins. An ARIMA forecast that throws, is not finite, or is off the blend's by
   * more than 3× either way is replaced by the blend's value there (and counted in `rejected`); at the current origin
   * that means λ = 0.
   */
  private async arimaChallenger(pool: ArimaPool, clean: readonly number[], o: number, H: number, blendNow: number, hist: readonly FitOrigin[], fitted: readonly number[]): Promise<{ lambda: number; now: number; rejected: number }> {
    const c = Math.max(1e-6, 0.01 * (clean.reduce((s, v) => s + v, 0) / clean.length));
    const forecastAt = async (origin: number): Promise<number> => {
      const logPeaks: number[] = [];
      for (let t = origin - Math.floor(origin / H) * H; t + H <= origin; t += H) logPeaks.push(Math.log(maxOf(clean, t, t + H) + c));
      if (logPeaks.length < 12) return Number.NaN;
      try {
        const r = await pool.run({ order: { p: 1, d: 1, q: 1, P: 0, D: 0, Q: 0, s: 0 }, values: logPeaks, horizonSteps: 1 });
        return Math.exp(r.mean[0]!) - c;
      } catch {
        return Number.NaN; // a wasm trap or a timeout: an unstable fit, treated as rejected
      }
    };
    const stable = (v: number, ref: number) => Number.isFinite(v) && v > 0 && v <= 3 * ref && v >= ref / 3;
    const k = Math.min(hist.length, this.options.arimaOrigins ?? 24);
    const recent = hist.slice(hist.length - k);
    const recentFitted = fitted.slice(fitted.length - k);
    const [now, ...past] = await Promise.all([forecastAt(o), ...recent.map((h) => forecastAt(h.origin))]);
    let rejected = stable(now!, blendNow) ? 0 : 1;
    const pairs = recent.map((h, i) => {
      const ok = stable(past[i]!, recentFitted[i]!);
      if (!ok) rejected++;
      return { blend: recentFitted[i]!, arima: ok ? past[i]! : recentFitted[i]!, actual: h.actual };
    });
    if (!stable(now!, blendNow)) return { lambda: 0, now: blendNow, rejected };
    let lambda = 0;
    let bestErr = Infinity;
    for (const l of [0, 0.25, 0.5, 0.75, 1]) {
      let e = 0;
      for (const p of pairs) e += Math.abs((1 - l) * p.blend + l * p.arima - p.actual) / p.actual;
      if (e < bestErr - 1e-12) {
        bestErr = e;
        lambda = l;
      }
    }
    return { lambda, now: now!, rejected };
  }

  async close(): Promise<void> {}
}
