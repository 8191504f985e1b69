/**
 * The one registry of forecasting methods (STYLE "Small plugin interfaces"), each with a typed parameter schema.
 * `createForecaster` builds a guarded forecaster: the method's output is checked (guards.ts) and replaced by
 * seasonal-naive with the reason recorded when it fails. `persistence` is here as the baseline the benchmarks
 * compare against.
 */
import { DEFAULT_FORECASTER } from "../core/defaults.js";
import { ArimaForecaster } from "./arima.js";
import { ArimaPool } from "./arima-pool.js";
import { BlendForecaster } from "./blend.js";
import { peakOf, type Band, type Forecast, type ForecastInput, type Forecaster } from "./forecaster.js";
import { DEFAULT_GUARD_LIMITS, guarded, type GuardLimits } from "./guards.js";
import { SeasonalNaiveForecaster } from "./seasonal-naive.js";

/** Method names the registry knows. */
export const FORECASTER_NAMES = ["blend", "blend-arima", "arima", "seasonal-naive", "persistence"] as const;
/** A registered method name. */
export type ForecasterName = (typeof FORECASTER_NAMES)[number];
/** The planner's forecaster, as core/defaults.ts names it (judged by bench:forecast). */
export const DEFAULT_FORECASTER_NAME: ForecasterName = DEFAULT_FORECASTER;

/** Which method to build and its parameters. */
export interface ForecasterSpec {
  name: ForecasterName;
  /** blend, blend-arima: fit hours; arima: longest history (points). */
  fitHours?: number;
  maxPoints?: number;
  /** Worker pool for arima and blend-arima (shared across forecasters); created per forecaster when omitted. */
  pool?: ArimaPool;
  limits?: GuardLimits;
}

/** Persistence: every step and the peak repeat the last horizon's peak; no interval (lower = upper = mean). */
export class PersistenceForecaster implements Forecaster {
  readonly name = "persistence";
  async forecast(input: ForecastInput): Promise<Forecast> {
    const recent = input.values.slice(-input.horizonSteps);
    const m = Math.max(...recent);
    const steps: Band[] = Array.from({ length: input.horizonSteps }, () => ({ mean: m, lower: m, upper: m }));
    return { steps, peak: peakOf(steps), method: "persistence" };
  }
  async close(): Promise<void> {}
}

/** Type guard for a method name (CLI flags, config). */
export function isForecasterName(s: string): s is ForecasterName {
  return (FORECASTER_NAMES as readonly string[]).includes(s);
}

/** A guarded forecaster for `spec` (seasonal-naive is the fallback of every method, itself included). */
export function createForecaster(spec: ForecasterSpec): Forecaster {
  const limits = spec.limits ?? DEFAULT_GUARD_LIMITS;
  const fallback = new SeasonalNaiveForecaster();
  switch (spec.name) {
    case "blend":
      return guarded(new BlendForecaster(spec.fitHours === undefined ? {} : { fitHours: spec.fitHours }), fallback, limits);
    case "blend-arima": {
      const pool = spec.pool ?? new ArimaPool();
      const blend = new BlendForecaster({ arima: pool, ...(spec.fitHours === undefined ? {} : { fitHours: spec.fitHours }) });
      const owned: Forecaster = spec.pool !== undefined ? blend : { name: blend.name, forecast: (i) => blend.forecast(i), close: () => pool.close() };
      return guarded(owned, fallback, limits);
    }
    case "arima":
      return guarded(new ArimaForecaster({ ...(spec.maxPoints === undefined ? {} : { maxPoints: spec.maxPoints }), ...(spec.pool === undefined ? {} : { pool: spec.pool }) }), fallback, limits);
    case "seasonal-naive":
      return guarded(new SeasonalNaiveForecaster(), fallback, limits);
    case "persistence":
      return guarded(new PersistenceForecaster(), fallback, limits);
  }
}
