/**
 * Seasonal-naive forecasting: each step repeats the value one season (day) earlier; with less than a season of
 * history, the last value. The interval comes from the history's own seasonal-naive errors: the 10% and 90%
 * quantiles of x[t] / x[t − season] over up to the last 7 seasons, applied to the point forecast. Pure and total:
 * it never throws on a valid input, which makes it the fallback of every guarded forecaster.
 */
import { INTERVAL_LOWER_QUANTILE, INTERVAL_UPPER_QUANTILE, peakOf, quantile, type Band, type Forecast, type ForecastInput, type Forecaster } from "./forecaster.js";

/** Ratios actual / seasonal-naive forecast over the last `maxSeasons` seasons (pairs with a zero base skipped). */
export function seasonalRatios(values: readonly number[], seasonSteps: number, maxSeasons = 7): number[] {
  const out: number[] = [];
  const from = Math.max(seasonSteps, values.length - maxSeasons * seasonSteps);
  for (let t = from; t < values.length; t++) {
    const base = values[t - seasonSteps]!;
    if (base > 0) out.push(values[t]! / base);
  }
  return out;
}

/** Point forecasts for `horizonSteps` steps after `values`. */
export function seasonalNaivePath(values: readonly number[], seasonSteps: number, horizonSteps: number): number[] {
  const n = values.length;
  const out: number[] = [];
  for (let k = 0; k < horizonSteps; k++) {
    const i = n - seasonSteps + (k % seasonSteps);
    out.push(i >= 0 ? values[i]! : values[n - 1]!);
  }
  return out;
}

/** Seasonal-naive with an empirical interval; the fallback of every guarded method. */
export class SeasonalNaiveForecaster implements Forecaster {
  readonly name = "seasonal-naive";

  async forecast(input: ForecastInput): Promise<Forecast> {
    const path = seasonalNaivePath(input.values, input.seasonSteps, input.horizonSteps);
    const ratios = seasonalRatios(input.values, input.seasonSteps);
    const lo = ratios.length > 0 ? Math.min(1, quantile(ratios, INTERVAL_LOWER_QUANTILE)) : 1;
    // Capped at 2× so a tiny seasonal base cannot blow the bound past the guards' limit.
    const hi = ratios.length > 0 ? Math.min(2, Math.max(1, quantile(ratios, INTERVAL_UPPER_QUANTILE))) : 1;
    const steps: Band[] = path.map((m) => ({ mean: m, lower: m * lo, upper: m * hi }));
    return { steps, peak: peakOf(steps), method: "seasonal-naive" };
  }

  async close(): Promise<void> {}
}
