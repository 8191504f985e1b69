/**
 * bench:forecast's verdict (test/bench/forecast.ts; issue 31 item 5). On each ServeGen language series, the
 * planner's forecaster is judged against the best naive method measured in the same run: next-hour peak MAPE ≤ 0.9×
 * the better of persistence and seasonal-naive, and its 90% upper bound covering between 85% and 95% of the hours
 * (a bound that covers everything is as wrong as one that covers too little: it over-provisions). A series that was
 * not run, a method without a figure (NaN) — the judged one or a naive baseline (issue 45: the other naive method
 * then set a looser bar) — or an invalid forecast (non-finite, negative) fails its checks; the
 * 1,000-series throughput keeps its own check.
 */
import { DEFAULT_FORECASTER } from "../../../core/defaults.js";
import { atLeast, atMost, ratio, type Check } from "./common.js";

/** The forecaster bench:forecast judges: the planner's default (core/defaults.ts). */
export const FORECAST_JUDGED = DEFAULT_FORECASTER;

/** Targets per series, and the throughput target. */
export const FORECAST_TARGET = {
  series: ["m-large", "m-mid", "m-small"],
  mapeRatioToBestNaive: 0.9,
  upperCoverage: [0.85, 0.95] as [number, number],
  thousandSeriesMs: 60_000,
};

/** One series' backtest figures: the judged forecaster and the naive methods, as measured in the same run. */
export interface SeriesFigures {
  /** The judged forecaster's next-hour peak MAPE, percent. */
  mapePct: number;
  /** Fraction of hours whose actual peak ≤ the judged forecaster's upper bound. */
  upperCoverage: number;
  /** Forecasts that were not finite or not ≥ 0 after the guards. */
  invalid: number;
  /** MAPE of each naive method (persistence, seasonal-naive), percent. */
  naiveMapePct: Readonly<Record<string, number>>;
}

/** The best (lowest) naive MAPE; NaN when none was measured (a NaN figure never counts as the best). */
export function bestNaive(naive: Readonly<Record<string, number>>): { method: string; mapePct: number } {
  let best = { method: "none", mapePct: Number.NaN };
  for (const [method, mapePct] of Object.entries(naive)) if (Number.isFinite(mapePct) && !(mapePct >= best.mapePct)) best = { method, mapePct };
  return best;
}

/** Three checks per target series (MAPE ratio, coverage floor, coverage ceiling), and throughput. */
export function forecastChecks(results: Readonly<Record<string, SeriesFigures>>, throughput: { ms: number; invalid: number }): Check[] {
  const t = FORECAST_TARGET;
  const checks: Check[] = [];
  for (const name of t.series) {
    const r = results[name];
    if (r === undefined) {
      checks.push({ check: `${name}: not run`, value: Number.NaN, limit: t.mapeRatioToBestNaive, ok: false });
      continue;
    }
    const best = bestNaive(r.naiveMapePct);
    const invalid = r.invalid > 0 ? ` (${r.invalid} invalid forecasts)` : "";
    // A naive method with no figure is a baseline that failed (issue 45): the better of the rest is no bar.
    const failed = Object.entries(r.naiveMapePct).filter(([, m]) => !Number.isFinite(m)).map(([m]) => m);
    const noBaseline = failed.length > 0 ? ` (${failed.join(", ")}: no MAPE)` : "";
    const value = ratio(r.mapePct, best.mapePct);
    checks.push({ check: `${name}: MAPE / best naive (${best.method})${invalid}${noBaseline}`, value, limit: t.mapeRatioToBestNaive, ok: invalid === "" && noBaseline === "" && atMost(value, t.mapeRatioToBestNaive) });
    checks.push({ check: `${name}: upper-bound coverage ≥`, value: r.upperCoverage, limit: t.upperCoverage[0], ok: invalid === "" && atLeast(r.upperCoverage, t.upperCoverage[0]) });
    checks.push({ check: `${name}: upper-bound coverage ≤`, value: r.upperCoverage, limit: t.upperCoverage[1], ok: invalid === "" && atMost(r.upperCoverage, t.upperCoverage[1]) });
  }
  const tInvalid = throughput.invalid > 0 ? ` (${throughput.invalid} invalid forecasts)` : "";
  checks.push({ check: `1,000 series ms${tInvalid}`, value: throughput.ms, limit: t.thousandSeriesMs, ok: tInvalid === "" && atMost(throughput.ms, t.thousandSeriesMs) });
  return checks;
}
