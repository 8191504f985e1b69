/**
 * The ARIMA forecaster (DESIGN "Forecast"; SageServe §5 forecasts with ARIMA). Fits on a log-transformed series
 * (demand is multiplicative and must stay ≥ 0), capped to the last `maxPoints` values (the package crashes above
 * ~8,100), in an `ArimaPool` worker. Daily seasonality is modelled as SARIMA(1,0,1)(1,1,1)s when the season is short
 * (hourly series, s = 24); at 10 minutes (s = 144) the seasonal fit is too slow and unstable, so the order is
 * ARIMA(1,1,1). The raw output is not trusted: wrap this in `guarded()` (guards.ts).
 */
import { ArimaPool, type ArimaOrder } from "./arima-pool.js";
import { INTERVAL_UPPER_QUANTILE, peakOf, type Band, type Forecast, type ForecastInput, type Forecaster } from "./forecaster.js";

/** z of the one-sided 90% normal quantile: the interval is 80% two-sided. */
const Z90 = 1.2815515655446004;

/** Order, history cap and pool of an ArimaForecaster. */
export interface ArimaForecasterOptions {
  /** Order; default chosen from the season length as above. */
  order?: ArimaOrder;
  /** Longest history used (default 2,016 points = 14 days of 10-minute windows); must be ≤ 8,000. */
  maxPoints?: number;
  /** The pool to run on; one is created (and owned) when omitted. */
  pool?: ArimaPool;
}

/** The default order for a season length (steps per day). */
export function defaultArimaOrder(seasonSteps: number): ArimaOrder {
  if (seasonSteps <= 48) return { p: 1, d: 0, q: 1, P: 1, D: 1, Q: 1, s: seasonSteps };
  return { p: 1, d: 1, q: 1, P: 0, D: 0, Q: 0, s: 0 };
}

/** Human-readable order, e.g. "sarima(1,0,1)(1,1,1)24". */
export function orderName(o: ArimaOrder): string {
  return o.s > 0 ? `sarima(${o.p},${o.d},${o.q})(${o.P},${o.D},${o.Q})${o.s}` : `arima(${o.p},${o.d},${o.q})`;
}

/** ARIMA on log(x + c) in a worker; throws (for `guarded` to catch) on short input or a worker failure. */
export class ArimaForecaster implements Forecaster {
  readonly name = "arima";
  private readonly pool: ArimaPool;
  private readonly ownsPool: boolean;
  private readonly maxPoints: number;

  constructor(private readonly options: ArimaForecasterOptions = {}) {
    this.maxPoints = options.maxPoints ?? 2016;
    if (!(this.maxPoints >= 10 && this.maxPoints <= 8000)) throw new RangeError(`maxPoints must be in [10, 8000], got ${this.maxPoints}`);
    this.ownsPool = options.pool === undefined;
    this.pool = options.pool ?? new ArimaPool();
  }

  async forecast(input: ForecastInput): Promise<Forecast> {
    const order = this.options.order ?? defaultArimaOrder(input.seasonSteps);
    const values = input.values.slice(-this.maxPoints);
    const minPoints = order.s > 0 ? order.s * 2 + 4 : 12;
    if (values.length < minPoints) throw new RangeError(`${orderName(order)} needs ≥ ${minPoints} points, got ${values.length}`);
    const mean = values.reduce((s, v) => s + v, 0) / values.length;
    // log(x + c): c keeps zeros finite; 1% of the mean (or 1e-6 for an all-zero series).
    const c = Math.max(1e-6, 0.01 * mean);
    const logged = values.map((v) => Math.log(v + c));
    const r = await this.pool.run({ order, values: logged, horizonSteps: input.horizonSteps });
    const steps: Band[] = r.mean.map((m, i) => {
      const sd = Math.sqrt(r.variance[i] ?? Number.NaN);
      return { mean: Math.exp(m) - c, lower: Math.max(0, Math.exp(m - Z90 * sd) - c), upper: Math.exp(m + Z90 * sd) - c };
    });
    // Clamp tiny negative means from the back-transform (exp(m) < c) to 0; NaN/∞ stay for the guards to reject.
    for (const s of steps) if (s.mean < 0 && s.mean > -c) s.mean = 0;
    if (steps.length === 0) throw new RangeError("arima returned no predictions");
    return { steps, peak: peakOf(steps), method: `${orderName(order)}log`, detail: { points: values.length, upperQuantile: INTERVAL_UPPER_QUANTILE } };
  }

  async close(): Promise<void> {
    if (this.ownsPool) await this.pool.close();
  }
}
