/**
 * The blend's five peak predictors (blend.ts), each a forecast of the PEAK of the next horizon, max x[o .. o+H), made
 * at origin o from x[0..o) only. Pure. With H horizon steps, S season steps and L level steps:
 *   persistence    P  = max x[o−H .. o)                                   (the last horizon's peak)
 *   seasonalRatio  R  = level(o) × gmean_{d=1..7} max x[o−dS .. o−dS+H) / level(o−dS),  level(t) = mean x[t−L .. t)
 *                        (today's level times the peak-to-level ratio of the same hour on the previous days; each
 *                        day's ratio clamped to [1/5, 5])
 *   seasonalNaive  SN = max x[o−S .. o−S+H)                                 (the same hour yesterday)
 *   kalmanWindow   KW = exp(μ_o) × k_o: μ the local-level Kalman filter on log x (kalman.ts), k_o the 1/a-weighted
 *                        median of a_t / exp(μ_t) over the last 48 origins t = o − jH before o (the peak factor that
 *                        minimises their MAPE); a Dynamo-style Kalman predictor turned into a peak
 *   kalmanPeak     KL = exp(ν): the local-level Kalman filter on the log peaks of the H-blocks ending at o
 * The series given is the outage-cleaned one (outage.ts); NaN where a predictor has too little history.
 */
import { filterLevels, localLevelSnr } from "./kalman.js";
import { weightedMedian } from "./outage.js";

/** Predictor names, in the order of the blend's weight vector. */
export const COMPONENTS = ["persistence", "seasonalRatio", "seasonalNaive", "kalmanWindow", "kalmanPeak"] as const;
/** A predictor name. */
export type ComponentName = (typeof COMPONENTS)[number];
/** One value per predictor (NaN: not computable at that origin). */
export type Components = Record<ComponentName, number>;

/** Shape of the problem: horizon, season and level window in steps; days of seasonal ratios; origins of the peak factor. */
export interface ComponentShape {
  H: number;
  S: number;
  L: number;
  /** Days of seasonal ratios (default 7). */
  ratioDays?: number;
  /** Origins the Kalman peak factor is taken over (default 48). */
  factorOrigins?: number;
}

function maxOf(x: readonly number[], from: number, to: number): number {
  if (from < 0 || to > x.length || from >= to) return Number.NaN;
  let m = -Infinity;
  for (let i = from; i < to; i++) if (x[i]! > m) m = x[i]!;
  return m;
}

function meanOf(x: readonly number[], from: number, to: number): number {
  if (from < 0 || to > x.length || from >= to) return Number.NaN;
  let s = 0;
  for (let i = from; i < to; i++) s += x[i]!;
  return s / (to - from);
}

const logOf = (v: number) => Math.log(Math.max(v, 1e-9));

/**
 * The predictors over one series (already outage-cleaned, finite, ≥ 0). The Kalman filter on log x runs once, its
 * signal-to-noise ratio estimated on the whole series given; `at(o)` then costs O(ratioDays·L + factorOrigins + o/H).
 */
export class PeakPredictors {
  private readonly levels: number[];
  private readonly ratioDays: number;
  private readonly factorOrigins: number;

  constructor(private readonly x: readonly number[], private readonly shape: ComponentShape) {
    const y = x.map(logOf);
    this.levels = filterLevels(y, localLevelSnr(y));
    this.ratioDays = shape.ratioDays ?? 7;
    this.factorOrigins = shape.factorOrigins ?? 48;
  }

  /** Every predictor at origin `o` (1 ≤ o ≤ x.length), from x[0..o) only. */
  at(o: number): Components {
    const { x } = this;
    const { H, S, L } = this.shape;
    const persistence = maxOf(x, o - H, o);
    const seasonalNaive = maxOf(x, o - S, o - S + H);
    const level = meanOf(x, o - L, o);
    let logSum = 0;
    let n = 0;
    for (let d = 1; d <= this.ratioDays; d++) {
      const base = meanOf(x, o - d * S - L, o - d * S);
      const peak = maxOf(x, o - d * S, o - d * S + H);
      if (base > 0 && peak > 0) {
        logSum += Math.log(Math.min(5, Math.max(0.2, peak / base)));
        n++;
      }
    }
    const seasonalRatio = n > 0 && Number.isFinite(level) ? level * Math.exp(logSum / n) : Number.NaN;
    return { persistence, seasonalRatio, seasonalNaive, kalmanWindow: this.kalmanWindow(o), kalmanPeak: this.kalmanPeak(o) };
  }

  private kalmanWindow(o: number): number {
    const ratios: number[] = [];
    const weights: number[] = [];
    for (let j = 1; j <= this.factorOrigins; j++) {
      const t = o - j * this.shape.H;
      if (t < 1) break;
      const a = maxOf(this.x, t, t + this.shape.H);
      const l = Math.exp(this.levels[t]!);
      if (a > 0 && l > 0) {
        ratios.push(a / l);
        weights.push(l / a);
      }
    }
    return ratios.length >= 6 ? Math.exp(this.levels[o]!) * weightedMedian(ratios, weights) : Number.NaN;
  }

  private kalmanPeak(o: number): number {
    const { H } = this.shape;
    const peaks: number[] = [];
    for (let t = o - Math.floor(o / H) * H; t + H <= o; t += H) peaks.push(logOf(maxOf(this.x, t, t + H)));
    if (peaks.length < 3) return Number.NaN;
    const lv = filterLevels(peaks, localLevelSnr(peaks));
    return Math.exp(lv[peaks.length]!);
  }
}
