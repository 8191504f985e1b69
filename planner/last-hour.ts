/**
 * Last hour's forecast error for one (model, region), as a plan reports it (report.ts `LastHourError`). The hour judged
 * is the one an earlier plan planned: [its forecast start, + its forecast steps), the forecast start being the
 * 10-minute boundary at or before it was made. It is judged only once it has ended, and only if it ended within
 * one interval before this plan (the hour just before it, not yesterday's); the actual peak is the highest 10-minute
 * mean recorded in it — recorded minutes only, never gap-filled. Until then there is no error: the note says
 * "not yet" and why, never a made-up 0.
 */
import { MINUTE_MS, type DemandHistory } from "../forecasts/history.js";
import { downsampleMean } from "../forecasts/series.js";
import { fmtTime } from "./charts.js";
import type { LastHourError, PlanReport, SeriesForecast } from "./report.js";

/** What a plan records about last hour for one series. */
export interface LastHourResult {
  lastHour: LastHourError | null;
  note?: NonNullable<SeriesForecast["lastHourNote"]>;
}

/** The hour `r` planned for `f`: [startMs, endMs). */
function plannedHour(r: PlanReport, f: SeriesForecast): { startMs: number; endMs: number } {
  const startMs = Math.floor(r.madeAtMs / f.stepMs) * f.stepMs;
  return { startMs, endMs: startMs + f.forecastSteps.length * f.stepMs };
}

/**
 * Last hour's error for (model, region) in a plan made at `nowMs` every `intervalMs`, judged against `earlier`
 * reports (any order; the newest whose hour has ended is used). Reads the actual load from `history` (IW).
 */
export async function lastHourError(o: { model: string; region: string; nowMs: number; intervalMs: number; earlier: readonly PlanReport[]; history: DemandHistory }): Promise<LastHourResult> {
  const seen = new Set<string>();
  const cands = [...o.earlier]
    .filter((r) => r.madeAtMs <= o.nowMs && !seen.has(r.id) && (seen.add(r.id), true))
    .sort((a, b) => b.madeAtMs - a.madeAtMs || b.decisionId - a.decisionId)
    .flatMap((r) => {
      const f = r.forecasts.find((x) => x.model === o.model && x.region === o.region);
      return f === undefined ? [] : [{ r, f, ...plannedHour(r, f) }];
    });
  if (cands.length === 0) return { lastHour: null, note: { state: "none", why: "no earlier plan forecast this series" } };
  const span = (c: (typeof cands)[number]) => `${c.r.id}'s hour (${fmtTime(c.startMs, c.r.timeBase)} – ${fmtTime(c.endMs, c.r.timeBase, false)})`;
  const ended = cands.find((c) => c.endMs <= o.nowMs);
  if (ended === undefined || ended.endMs <= o.nowMs - o.intervalMs) {
    const running = cands.filter((c) => c.endMs > o.nowMs).sort((a, b) => a.endMs - b.endMs)[0];
    if (running !== undefined) return { lastHour: null, note: { state: "not-yet", why: `${span(running)} is still running: its error is computed once it ends at ${fmtTime(running.endMs, running.r.timeBase, false)}` } };
    return { lastHour: null, note: { state: "none", why: `no earlier plan's hour ended in the last interval (the newest that ended is ${span(ended ?? cands[0]!)})` } };
  }
  const minutes = await o.history.series({ kind: "iw", model: o.model, region: o.region }, ended.startMs, ended.endMs);
  const windows = downsampleMean(minutes, ended.f.stepMs / MINUTE_MS);
  const recorded = windows.filter(Number.isFinite);
  if (recorded.length === 0) return { lastHour: null, note: { state: "none", why: `no load was recorded in ${span(ended)}` } };
  const actualPeak = Math.max(...recorded);
  if (!(actualPeak > 0)) return { lastHour: null, note: { state: "none", why: `the load recorded in ${span(ended)} peaked at 0 tokens/s: an error relative to it is undefined` } };
  const forecastPeak = ended.f.peak.mean;
  return {
    lastHour: {
      forecastPeak,
      actualPeak,
      errorPct: (100 * (forecastPeak - actualPeak)) / actualPeak,
      planId: ended.r.id,
      hourStartMs: ended.startMs,
      hourEndMs: ended.endMs,
      recordedWindows: recorded.length,
      windows: windows.length,
    },
  };
}
