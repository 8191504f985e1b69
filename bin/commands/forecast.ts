/** `tidegate forecast backtest`: rolling-origin backtest of hourly peak forecasts on a series file. */
import type { Command } from "../command.js";
import { TidegateError } from "../../core/errors.js";
import { ArimaPool } from "../../forecasts/arima-pool.js";
import { backtestPeaks } from "../../forecasts/backtest.js";
import { DEFAULT_FORECASTER_NAME, FORECASTER_NAMES, createForecaster, isForecasterName } from "../../forecasts/registry.js";
import { fillGaps, readSeriesFile } from "../../forecasts/series.js";

/**
 * Throws a usage error saying how long the series must be when it cannot give one held-out hour: the held-out
 * hours start at day `heldOutFromDay`, after `historyDays` ≤ heldOutFromDay days of history.
 */
export function tooShort(steps: number, stepMs: number, heldOutFromDay: number, historyDays: number, file: string): void {
  if (!(Number.isInteger(heldOutFromDay) && heldOutFromDay >= 1)) throw new TidegateError("invalid_request", `--held-out-from-day must be an integer ≥ 1, got ${heldOutFromDay}`);
  if (!(Number.isInteger(historyDays) && historyDays >= 1)) throw new TidegateError("invalid_request", `--history-days must be an integer ≥ 1, got ${historyDays}`);
  if (historyDays > heldOutFromDay) throw new TidegateError("invalid_request", `--history-days ${historyDays} must be ≤ --held-out-from-day ${heldOutFromDay} (each forecast needs that many days before the first held-out hour)`);
  const hourSteps = Math.round(3_600_000 / stepMs);
  const need = (heldOutFromDay * 24 + 1) * hourSteps;
  if (steps >= need) return;
  const hours = (steps * stepMs) / 3_600_000;
  throw new TidegateError(
    "invalid_request",
    `${file} is too short for a backtest: it covers ${hours.toFixed(1)} h (${steps} rows of ${stepMs / 60_000} min); with --held-out-from-day ${heldOutFromDay} it must cover at least ${heldOutFromDay * 24 + 1} h (${need} rows: ${heldOutFromDay} days before the first held-out hour, plus that hour). ` +
      (hours < 25 ? `No backtest fits it: even --held-out-from-day 1 --history-days 1 needs 25 h (${25 * hourSteps} rows).` : `Lower --held-out-from-day (and --history-days ≤ it), e.g. --held-out-from-day ${Math.floor((hours - 1) / 24)} --history-days ${Math.min(historyDays, Math.floor((hours - 1) / 24))}.`),
  );
}

export const command: Command = {
  name: "forecast",
  summary: "forecasting tools (`forecast backtest`)",
  description: `Usage: tidegate forecast backtest --series FILE [--held-out-from-day 10] [--held-out-to-day N] [--methods blend,arima,seasonal-naive,persistence]

Rolling-origin backtest: for every hour from --held-out-from-day to --held-out-to-day (default: the end of the
series), each method forecasts
that hour's PEAK from the preceding --history-days days, and the MAPE and the coverage of the 90% upper bound are
printed per method (one JSON line per method on stdout; progress on stderr).

Series file: CSV whose first column is a time in seconds and second a rate, evenly spaced (ServeGen aggregate
files with a header, per-client files without), e.g. core/data/servegen/aggregate/language_m-large_total_rate_600s.csv (shipped).
Gaps (missing rows) are filled; NaN or negative values are rejected naming the line.`,
  flags: {
    series: { type: "string", help: "series CSV file (required)" },
    "held-out-from-day": { type: "number", help: "first held-out day (0-based; 10 = days 11.. held out)", default: 10 },
    "held-out-to-day": { type: "number", help: "last held-out day, exclusive (e.g. 10 with --held-out-from-day 7: a validation window before the default held-out days)" },
    "history-days": { type: "number", help: "days of history per forecast", default: 7 },
    methods: { type: "string", help: `comma-separated: ${FORECASTER_NAMES.join(",")}`, default: `${DEFAULT_FORECASTER_NAME},blend,arima,seasonal-naive,persistence` },
  },
  async run(flags, positional) {
    if (positional[0] !== "backtest") throw new TidegateError("invalid_request", "usage: tidegate forecast backtest --series FILE (see --help)");
    if (typeof flags.series !== "string") throw new TidegateError("invalid_request", "--series is required (see --help)");
    const s = readSeriesFile(flags.series);
    const hourSteps = Math.round(3_600_000 / s.stepMs);
    tooShort(s.values.length, s.stepMs, Number(flags["held-out-from-day"]), Number(flags["history-days"]), flags.series);
    const values = fillGaps(s.values, 24 * hourSteps);
    if (s.gaps.length > 0) process.stderr.write(`tidegate forecast: ${s.gaps.length} missing rows filled\n`);
    const names = String(flags.methods).split(",").map((m) => m.trim());
    for (const n of names) if (!isForecasterName(n)) throw new TidegateError("invalid_request", `unknown method ${JSON.stringify(n)}; known: ${FORECASTER_NAMES.join(", ")}`);
    const toDay = flags["held-out-to-day"] === undefined ? undefined : Number(flags["held-out-to-day"]);
    if (toDay !== undefined && !(Number.isInteger(toDay) && toDay > Number(flags["held-out-from-day"]))) throw new TidegateError("invalid_request", `--held-out-to-day must be an integer > --held-out-from-day, got ${flags["held-out-to-day"]}`);
    const pool = new ArimaPool();
    const methods = names.map((n) => createForecaster({ name: n as (typeof FORECASTER_NAMES)[number], pool }));
    try {
      const r = await backtestPeaks(values, methods, {
        stepMs: s.stepMs,
        heldOutFromDay: Number(flags["held-out-from-day"]),
        historyDays: Number(flags["history-days"]),
        ...(toDay === undefined ? {} : { heldOutToDay: toDay }),
        onProgress: (m, done, total) => process.stderr.write(`tidegate forecast: ${m} ${done}/${total} hours\n`),
      });
      process.stderr.write(`tidegate forecast: ${r.hoursHeldOut} held-out hours (${r.zeroActualHours} with a zero peak, not scored)\n`);
      for (const sc of r.scores) process.stdout.write(JSON.stringify({ method: sc.method, mapePct: Number(sc.mapePct.toFixed(3)), upperCoverage: Number(sc.upperCoverage.toFixed(4)), hours: sc.hours, fallbacks: sc.fallbacks, ...(sc.firstFallbackReason ? { firstFallbackReason: sc.firstFallbackReason } : {}), invalid: sc.invalid, elapsedMs: Math.round(sc.elapsedMs) }) + "\n");
      return 0;
    } finally {
      await Promise.all(methods.map((m) => m.close()));
      await pool.close();
    }
  },
};
