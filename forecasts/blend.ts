/**
 * The peak blend: the planner's default forecaster, chosen on evidence (README "Forecast model choice").
 *
 * The planner needs the PEAK of the next hour (SageServe §5 provisions for the hour's peak). On the ServeGen m-large
 * aggregate, persistence (last hour's peak) scores ≈ 18% MAPE and seasonal-naive ≈ 46%, and plain
 * SARIMA(1,0,1)(1,1,1)24 ≈ 25%: the level moves from day to day, while the shape within a day repeats. So the blend
 * combines three peak predictors at origin o (H = horizon steps, S = season steps, L = steps in 30 minutes):
 *   P  persistence:     max(x[o−H .. o))
 *   R  seasonal ratio:  level(o) × gmean_{d=1..7} ( max(x[o−dS .. o−dS+H)) / level(o−dS) ),  level(t) = mean(x[t−L .. t))
 *      (today's level times the peak-to-level ratio the same hour showed on each previous day)
 *   S  seasonal-naive:  max(x[o−S .. o−S+H))
 * with weights w ≥ 0, Σw = 1 (a 0.1 grid) that minimise MAPE over the series' OWN last `fitHours` hourly origins
 * (never over the future). The interval is the 10%/90% quantiles of actual/blend over the same origins. L = 30 min
 * and fitHours = 48 were chosen on days 8–10 of m-large (a validation window before the held-out days 11–14).
 */
import { INTERVAL_LOWER_QUANTILE, INTERVAL_UPPER_QUANTILE, quantile, type Band, type Forecast, type ForecastInput, type Forecaster } from "./forecaster.js";

/** Tuning of the blend; defaults are the values chosen on the validation days. */
export interface BlendOptions {
  /** Hours of in-sample origins the weights are fitted on (default 48). */
  fitHours?: number;
  /** Minutes of recent history averaged into the level (default 30). */
  levelMinutes?: number;
  /** Days of seasonal ratios averaged (default 7). */
  ratioDays?: number;
}

/** The three component peak forecasts at origin `o` (NaN when not computable from x[0..o)). */
export interface BlendComponents {
  persistence: number;
  seasonalRatio: number;
  seasonalNaive: number;
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

/**
 * Components at origin `o` (using x[0..o) only). A day's ratio is skipped when its base level is below `minBase`
 * (collection gaps read as zeros or near-zeros would make it explode) and clamped to [1/5, 5].
 */
export function blendComponents(x: readonly number[], o: number, H: number, S: number, L: number, ratioDays: number, minBase = 0): BlendComponents {
  const persistence = maxOf(x, o - H, o);
  const seasonalNaive = maxOf(x, o - S, o - S + H);
  const level = meanOf(x, o - L, o);
  let logSum = 0;
  let n = 0;
  for (let d = 1; d <= ratioDays; d++) {
    const base = meanOf(x, o - d * S - L, o - d * S);
    const peak = maxOf(x, o - d * S, o - d * S + H);
    if (base > 0 && base >= minBase && peak > 0) {
      logSum += Math.log(Math.min(5, Math.max(0.2, peak / base)));
      n++;
    }
  }
  const seasonalRatio = n > 0 && Number.isFinite(level) ? level * Math.exp(logSum / n) : Number.NaN;
  return { persistence, seasonalRatio, seasonalNaive };
}

const GRID: [number, number, number][] = [];
for (let a = 0; a <= 10; a++) for (let b = 0; b <= 10 - a; b++) GRID.push([a / 10, b / 10, (10 - a - b) / 10]);

function combine(c: BlendComponents, w: readonly [number, number, number]): number {
  return w[0] * c.persistence + w[1] * c.seasonalRatio + w[2] * c.seasonalNaive;
}

/** The peak blend (see the file comment). Throws only when the history is shorter than the horizon. */
export class BlendForecaster implements Forecaster {
  readonly name = "blend";
  constructor(private readonly options: BlendOptions = {}) {}

  async forecast(input: ForecastInput): Promise<Forecast> {
    const x = input.values;
    const H = input.horizonSteps;
    const S = input.seasonSteps;
    const L = Math.max(1, Math.round(((this.options.levelMinutes ?? 30) * 60_000) / input.stepMs));
    const ratioDays = this.options.ratioDays ?? 7;
    const hourSteps = Math.max(1, Math.round(3_600_000 / input.stepMs));
    const originStep = Math.max(H, hourSteps);
    const fitOrigins = Math.max(1, Math.round(((this.options.fitHours ?? 48) * 3_600_000) / (originStep * input.stepMs)));
    const o = x.length;
    // 5% of the median positive value: bases below it are treated as gaps, not levels.
    const positive = x.filter((v) => v > 0).sort((a, b) => a - b);
    const minBase = positive.length > 0 ? 0.05 * positive[Math.floor(positive.length / 2)]! : 0;
    const now = blendComponents(x, o, H, S, L, ratioDays, minBase);
    if (!Number.isFinite(now.persistence)) throw new RangeError(`blend needs ≥ ${H} points, got ${o}`);
    // Components not computable now get weight 0; fit over origins whose actual peak is known and > 0.
    const usable = [true, Number.isFinite(now.seasonalRatio), Number.isFinite(now.seasonalNaive)];
    const hist: { c: BlendComponents; actual: number }[] = [];
    for (let k = fitOrigins; k >= 1; k--) {
      const origin = o - k * originStep;
      if (origin - H < 0) continue;
      const actual = maxOf(x, origin, origin + H);
      if (!(actual > 0)) continue;
      const c = blendComponents(x, origin, H, S, L, ratioDays, minBase);
      if ((usable[1] && !Number.isFinite(c.seasonalRatio)) || (usable[2] && !Number.isFinite(c.seasonalNaive))) continue;
      hist.push({ c, actual });
    }
    let best: [number, number, number] = [1, 0, 0];
    if (hist.length >= 6) {
      let bestErr = Infinity;
      for (const w of GRID) {
        if ((w[1] > 0 && !usable[1]) || (w[2] > 0 && !usable[2])) continue;
        let e = 0;
        for (const h of hist) e += Math.abs(combine(h.c, w) - h.actual) / h.actual;
        if (e < bestErr - 1e-12) {
          bestErr = e;
          best = w;
        }
      }
    }
    const safe = (v: number) => (Number.isFinite(v) ? v : 0);
    const nowSafe = { persistence: now.persistence, seasonalRatio: safe(now.seasonalRatio), seasonalNaive: safe(now.seasonalNaive) };
    const mean = Math.max(0, combine(nowSafe, best));
    const ratios = hist.map((h) => h.actual / Math.max(1e-12, combine(h.c, best))).filter((r) => Number.isFinite(r));
    // Without enough in-sample origins the interval is ±25%; ratios are clamped to [0, 3] against outliers.
    const lo = ratios.length >= 6 ? Math.min(1, quantile(ratios, INTERVAL_LOWER_QUANTILE)) : 0.75;
    const hi = ratios.length >= 6 ? Math.min(2, Math.max(1, quantile(ratios, INTERVAL_UPPER_QUANTILE))) : 1.25;
    const peak: Band = { mean, lower: mean * Math.max(0, lo), upper: mean * hi };
    // The path: yesterday's shape over the horizon scaled so its maximum equals the peak (flat without a day).
    const shape: number[] = [];
    for (let k = 0; k < H; k++) shape.push(o - S + k >= 0 ? x[o - S + k]! : 1);
    const shapeMax = Math.max(...shape);
    const steps: Band[] = shape.map((v) => {
      const f = shapeMax > 0 ? v / shapeMax : 1;
      return { mean: peak.mean * f, lower: peak.lower * f, upper: peak.upper * f };
    });
    return {
      steps,
      peak,
      method: "blend",
      detail: { wPersistence: best[0], wSeasonalRatio: best[1], wSeasonalNaive: best[2], fitOrigins: hist.length, levelSteps: L },
    };
  }

  async close(): Promise<void> {}
}
