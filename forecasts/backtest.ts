/**
 * Rolling-origin backtest of hourly PEAK forecasts (issue 4: "each hour's peak forecast from the preceding 7 days").
 * For every hour h in the held-out window, each method sees only the `historyDays` before h and forecasts the next
 * hour; the actual is the hour's peak (max of its steps). Hours whose actual peak is 0 are left out of MAPE (a
 * percentage of 0 is undefined) and counted.
 */
import type { Forecast, Forecaster } from "./forecaster.js";

/** Where the held-out window lies and how much history each forecast sees. */
export interface BacktestOptions {
  /** Step of `values` in ms (e.g. 600_000). */
  stepMs: number;
  /** First held-out hour, as a day index from the start of the series (e.g. 10 = days 11.. held out). */
  heldOutFromDay: number;
  /** Last held-out day, exclusive (default: the end of the series). */
  heldOutToDay?: number;
  /** Days of history each forecast sees (default 7). */
  historyDays?: number;
  /** Called after each method with its progress (for a stderr progress line). */
  onProgress?: (method: string, done: number, total: number) => void;
  /** Called with every forecast: the method, the held-out hour's index (0 = the first), the forecast. */
  onForecast?: (method: string, hourIndex: number, forecast: Forecast) => void;
}

/** One method's score over the held-out hours. */
export interface MethodScore {
  method: string;
  /** Mean absolute percentage error of the peak, in percent. */
  mapePct: number;
  /** Fraction of hours whose actual peak ≤ the forecast's upper (90%) bound. */
  upperCoverage: number;
  /** Hours scored (actual > 0). */
  hours: number;
  /** Forecasts that fell back to seasonal-naive, with the first reason seen. */
  fallbacks: number;
  firstFallbackReason?: string;
  /** Forecasts that were not finite or not ≥ 0 after the guards (must be 0). */
  invalid: number;
  /** Wall time for all of this method's forecasts, ms. */
  elapsedMs: number;
}

/** Every method's score, and how many held-out hours there were. */
export interface BacktestResult {
  hoursHeldOut: number;
  zeroActualHours: number;
  scores: MethodScore[];
}

/** Runs every forecaster over the held-out hours of `values` (no gaps). Forecasts within a method run concurrently. */
export async function backtestPeaks(values: readonly number[], methods: readonly Forecaster[], options: BacktestOptions): Promise<BacktestResult> {
  const hourSteps = Math.round(3_600_000 / options.stepMs);
  if (hourSteps < 1 || Math.abs(hourSteps * options.stepMs - 3_600_000) > 1) throw new RangeError(`step ${options.stepMs} ms does not divide an hour`);
  const daySteps = 24 * hourSteps;
  const historySteps = (options.historyDays ?? 7) * daySteps;
  const fromHour = options.heldOutFromDay * 24;
  const toHour = Math.min(Math.floor(values.length / hourSteps), (options.heldOutToDay ?? Infinity) * 24);
  if (fromHour * hourSteps < historySteps) throw new RangeError(`held-out window starts at day ${options.heldOutFromDay}, before ${options.historyDays ?? 7} days of history`);
  if (toHour <= fromHour) throw new RangeError(`no held-out hours: the series has ${values.length} steps`);
  const hours: number[] = [];
  for (let h = fromHour; h < toHour; h++) hours.push(h);
  const actual = hours.map((h) => Math.max(...values.slice(h * hourSteps, (h + 1) * hourSteps)));
  const scores: MethodScore[] = [];
  for (const m of methods) {
    const t0 = performance.now();
    let done = 0;
    const forecasts = await Promise.all(
      hours.map(async (h, i) => {
        const f = await m.forecast({ values: values.slice(h * hourSteps - historySteps, h * hourSteps), stepMs: options.stepMs, seasonSteps: daySteps, horizonSteps: hourSteps });
        options.onForecast?.(m.name, i, f);
        done++;
        if (done % 24 === 0 || done === hours.length) options.onProgress?.(m.name, done, hours.length);
        return f;
      }),
    );
    let err = 0;
    let n = 0;
    let covered = 0;
    let fallbacks = 0;
    let invalid = 0;
    let firstFallbackReason: string | undefined;
    forecasts.forEach((f, i) => {
      const a = actual[i]!;
      if (f.fallbackReason !== undefined) {
        fallbacks++;
        firstFallbackReason ??= f.fallbackReason;
      }
      if (!Number.isFinite(f.peak.mean) || f.peak.mean < 0 || !Number.isFinite(f.peak.upper)) invalid++;
      if (!(a > 0)) return;
      err += Math.abs(f.peak.mean - a) / a;
      if (a <= f.peak.upper) covered++;
      n++;
    });
    scores.push({
      method: m.name,
      mapePct: n > 0 ? (100 * err) / n : Number.NaN,
      upperCoverage: n > 0 ? covered / n : Number.NaN,
      hours: n,
      fallbacks,
      ...(firstFallbackReason === undefined ? {} : { firstFallbackReason }),
      invalid,
      elapsedMs: performance.now() - t0,
    });
  }
  return { hoursHeldOut: hours.length, zeroActualHours: actual.filter((a) => !(a > 0)).length, scores };
}
