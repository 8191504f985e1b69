/**
 * The `Forecaster` port (DESIGN "Ports and their adapters"): given a demand series at a fixed step, forecast the next
 * `horizonSteps` values with a prediction interval, and the peak over that horizon (the planner provisions for the
 * peak of the next hour, SageServe §5). Adapters: ARIMA in worker threads (arima.ts), seasonal-naive
 * (seasonal-naive.ts), and the evidence-chosen blend (blend.ts). Every forecast passes the guards (guards.ts).
 */

/** A series to forecast. Values are demand (tokens/s or requests/s), finite and ≥ 0, oldest first, no gaps. */
export interface ForecastInput {
  values: readonly number[];
  /** Spacing of `values` in ms (e.g. 600_000 for 10-minute windows). */
  stepMs: number;
  /** Steps per season (daily period: 144 at 10 minutes, 24 hourly). */
  seasonSteps: number;
  /** Steps to forecast (≥ 1); the peak is taken over these. */
  horizonSteps: number;
  /**
   * Which series this is and where its forecast starts (the planner's clock): only a forecaster that is given the
   * future reads it (the week replay's oracle, sim/week/oracle.ts, which bounds what any forecast can save); every
   * real forecaster ignores it.
   */
  series?: { model: string; region: string; fromMs: number };
}

/** Nominal coverage of `lower`..`upper`: 80% two-sided, so `upper` is a one-sided 90% upper bound. */
export const INTERVAL_UPPER_QUANTILE = 0.9;
/** Quantile of the interval's lower bound (10%). */
export const INTERVAL_LOWER_QUANTILE = 0.1;

/** A point forecast with its interval; lower ≤ mean ≤ upper, all finite and ≥ 0. */
export interface Band {
  mean: number;
  lower: number;
  upper: number;
}

/** A forecast over the horizon: per-step bands, the peak band, and how it was made. */
export interface Forecast {
  /** One band per horizon step. */
  steps: Band[];
  /** The peak over the horizon (not always the max of `steps`: the blend forecasts the peak directly). */
  peak: Band;
  /** The method that produced this forecast, e.g. "arima(1,1,1)log", "seasonal-naive", "blend". */
  method: string;
  /** Set when the requested method failed its guards (or crashed) and `method` is the fallback's. */
  fallbackReason?: string;
  /** Free-form facts worth showing in a report (blend weights, ARIMA order). */
  detail?: Record<string, number | string>;
  /** A combining forecaster's parts (the blend's predictors and its ARIMA): each weight and its recent error. */
  components?: ForecastComponent[];
}

/** One part of a combined forecast: its weight in the combination and its own error over the fit origins. */
export interface ForecastComponent {
  name: string;
  /** Weight in the point forecast (the weights of one forecast sum to 1). */
  weight: number;
  /** The component's own peak MAPE over the recent origins the weights were fitted on, percent (NaN: none). */
  recentMapePct: number;
  /** How many origins that MAPE is over. */
  origins: number;
}

/** A forecasting method. Implementations must not throw on valid input: they return a fallback with a reason. */
export interface Forecaster {
  readonly name: string;
  forecast(input: ForecastInput): Promise<Forecast>;
  /** Releases worker threads. Idempotent. */
  close(): Promise<void>;
}

/** Quantile `q` ∈ [0, 1] of `values` (linear interpolation); NaN for an empty list. */
export function quantile(values: readonly number[], q: number): number {
  if (values.length === 0) return Number.NaN;
  const s = [...values].sort((a, b) => a - b);
  const pos = q * (s.length - 1);
  const lo = Math.floor(pos);
  const hi = Math.ceil(pos);
  return s[lo]! + (s[hi]! - s[lo]!) * (pos - lo);
}

/** The band of the largest mean (ties: first); used as the peak of a path forecast. */
export function peakOf(steps: readonly Band[]): Band {
  let best = steps[0]!;
  for (const s of steps) if (s.mean > best.mean) best = s;
  return { mean: best.mean, lower: Math.max(...steps.map((s) => s.lower)), upper: Math.max(...steps.map((s) => s.upper)) };
}
