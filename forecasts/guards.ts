/**
 * Forecast guards (DESIGN "Forecaster": finite, non-negative, bounded forecasts, else fall back and say so). Pure.
 * `checkForecast` names the first violated rule; `guarded` wraps a forecaster so a failing or throwing primary is
 * replaced by the fallback's forecast with the reason recorded in `fallbackReason`.
 */
import type { Forecast, ForecastInput, Forecaster } from "./forecaster.js";

/** Limits a forecast must respect relative to its history. */
export interface GuardLimits {
  /** No forecast value may exceed this multiple of the history's maximum (or of 1 when the history is all 0). */
  maxMultipleOfHistory: number;
}

/** Default: no forecast above 3× the history's maximum. */
export const DEFAULT_GUARD_LIMITS: GuardLimits = { maxMultipleOfHistory: 3 };

/** Checks an input series: non-empty, finite, ≥ 0. Returns the reason it is unusable, or undefined. */
export function checkInput(input: ForecastInput): string | undefined {
  if (input.values.length === 0) return "empty history";
  if (!(input.horizonSteps >= 1) || !Number.isInteger(input.horizonSteps)) return `horizonSteps must be an integer ≥ 1, got ${input.horizonSteps}`;
  if (!(input.seasonSteps >= 1) || !Number.isInteger(input.seasonSteps)) return `seasonSteps must be an integer ≥ 1, got ${input.seasonSteps}`;
  for (let i = 0; i < input.values.length; i++) {
    const v = input.values[i]!;
    if (!Number.isFinite(v)) return `history value ${i} is not finite (${v})`;
    if (v < 0) return `history value ${i} is negative (${v})`;
  }
  return undefined;
}

/** The first rule `f` breaks for history `values`, or undefined when it passes. */
export function checkForecast(values: readonly number[], f: Forecast, horizonSteps: number, limits: GuardLimits = DEFAULT_GUARD_LIMITS): string | undefined {
  if (f.steps.length !== horizonSteps) return `expected ${horizonSteps} steps, got ${f.steps.length}`;
  let histMax = 0;
  for (const v of values) if (v > histMax) histMax = v;
  const cap = limits.maxMultipleOfHistory * Math.max(histMax, 1);
  const bands = [...f.steps.map((b, i) => [`step ${i}`, b] as const), ["peak", f.peak] as const];
  for (const [name, b] of bands) {
    for (const key of ["mean", "lower", "upper"] as const) {
      const v = b[key];
      if (!Number.isFinite(v)) return `${name} ${key} is not finite (${v})`;
      if (v < 0) return `${name} ${key} is negative (${v})`;
      if (v > cap) return `${name} ${key} ${v.toPrecision(4)} exceeds ${limits.maxMultipleOfHistory}× the history maximum ${histMax.toPrecision(4)}`;
    }
    if (b.lower > b.mean + 1e-9 || b.mean > b.upper + 1e-9) return `${name} interval is not ordered (lower ${b.lower}, mean ${b.mean}, upper ${b.upper})`;
  }
  return undefined;
}

/**
 * A forecaster that runs `primary`, checks its output, and on a guard failure or exception returns `fallback`'s
 * forecast with `fallbackReason` = "<primary name>: <reason>". The fallback itself is checked too; if it also fails,
 * the forecast throws (callers report the series as unforecastable rather than planning on garbage).
 */
export function guarded(primary: Forecaster, fallback: Forecaster, limits: GuardLimits = DEFAULT_GUARD_LIMITS): Forecaster {
  return {
    name: primary.name,
    async forecast(input: ForecastInput): Promise<Forecast> {
      const bad = checkInput(input);
      if (bad !== undefined) throw new RangeError(`cannot forecast: ${bad}`);
      let reason: string;
      try {
        const f = await primary.forecast(input);
        const broken = checkForecast(input.values, f, input.horizonSteps, limits);
        if (broken === undefined) return f;
        reason = `${primary.name}: ${broken}`;
      } catch (err) {
        reason = `${primary.name} failed: ${err instanceof Error ? err.message : String(err)}`;
      }
      const fb = await fallback.forecast(input);
      const fbBroken = checkForecast(input.values, fb, input.horizonSteps, limits);
      if (fbBroken !== undefined) throw new RangeError(`${reason}; fallback ${fallback.name} also failed: ${fbBroken}`);
      return { ...fb, fallbackReason: fb.fallbackReason === undefined ? reason : `${reason}; ${fb.fallbackReason}` };
    },
    async close() {
      await primary.close();
      await fallback.close();
    },
  };
}
