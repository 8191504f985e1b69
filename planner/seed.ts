/**
 * A first plan worth reading in `tidegate dev`: seed the planner's demand history with a day of the shipped
 * ServeGen data (README.txt §3, aggregate/<category>_<model>_total_rate_600s.csv: requests/s and mean input/output
 * tokens per 10-minute window), so the plan made at start-up has forecasts and charts instead of "no history".
 *
 * Each config model takes one ServeGen language series (llama2-70b ← m-mid, bloom-176b ← m-large, the small models
 * ← m-small, others in turn), as tokens/s = rate × (mean input + mean output tokens). Every region gets the same
 * day shifted by its UTC offset against the first region, scaled so the day's peak is `fill` (default 0.7) of what
 * the endpoint's starting instances serve at the SLO. The day ends at `nowMs`; ServeGen has no calendar, so its
 * windows are taken at the same time of day as the hours they fill (window k of a day ↦ UTC 00:00 + k × 10 min),
 * from day `startDay` on. What was seeded and the scale are returned for the log. seed-once.ts puts it into
 * `tidegate dev`'s history, once per (model, region) and data directory.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { TidegateConfig } from "../core/config.js";
import type { DemandSample } from "../forecasts/history.js";
import { MINUTE_MS } from "../forecasts/history.js";
import { ValidationError } from "../core/validate.js";
import { fleetFromConfig } from "./fleet.js";

/** Which ServeGen aggregate file each default model is seeded from (as in sim/workload's default week). */
export const SEED_SOURCES: Record<string, string> = {
  "llama2-70b": "language_m-mid",
  "bloom-176b": "language_m-large",
  "llama3.1-8b": "language_m-small",
  "llama3.2-3b": "language_m-small",
};
const FALLBACK_SOURCES = ["language_m-mid", "language_m-large", "language_m-small"];

/** A ServeGen aggregate as tokens/s per 10-minute window (a gap or zero-rate window is NaN). */
export function readServegenAggregate(file: string): { stepMs: number; tokensPerS: number[] } {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (err) {
    throw new ValidationError(file, `cannot read ServeGen aggregate: ${(err as Error).message}`, "invalid_request");
  }
  const lines = text.split(/\r?\n/).filter((l) => l.trim() !== "");
  const head = lines[0]!.split(",");
  const col = (name: string) => {
    const i = head.indexOf(name);
    if (i < 0) throw new ValidationError(`${file}:1`, `expected a ${name} column (ServeGen aggregate header)`, "invalid_request");
    return i;
  };
  const [t, rate, inp, out] = [col("window_start_s"), col("total_rate_rps"), col("mean_input_tokens"), col("mean_output_tokens")];
  const rows = lines.slice(1).map((l, i) => {
    const c = l.split(",").map(Number);
    if (!Number.isFinite(c[t]!) || !Number.isFinite(c[rate]!) || c[rate]! < 0) throw new ValidationError(`${file}:${i + 2}`, "expected numbers in window_start_s and total_rate_rps", "invalid_request");
    return c;
  });
  const stepS = rows.length > 1 ? rows[1]![t]! - rows[0]![t]! : 600;
  // Windows without token statistics use the file's rate-weighted mean tokens per request.
  let wsum = 0;
  let tsum = 0;
  for (const c of rows) if (Number.isFinite(c[inp]!) && Number.isFinite(c[out]!) && c[rate]! > 0) (wsum += c[rate]!), (tsum += c[rate]! * (c[inp]! + c[out]!));
  const meanTokens = wsum > 0 ? tsum / wsum : 1;
  const tokensPerS: number[] = [];
  for (const c of rows) {
    const idx = Math.round((c[t]! - rows[0]![t]!) / stepS);
    while (tokensPerS.length < idx) tokensPerS.push(Number.NaN);
    const per = Number.isFinite(c[inp]!) && Number.isFinite(c[out]!) && c[inp]! + c[out]! > 0 ? c[inp]! + c[out]! : meanTokens;
    tokensPerS.push(c[rate]! > 0 ? c[rate]! * per : Number.NaN);
  }
  return { stepMs: stepS * 1000, tokensPerS };
}

/** What was seeded for one model (one log line each). */
export interface SeededModel {
  model: string;
  source: string;
  /** tokens/s in the history per tokens/s in ServeGen. */
  scale: number;
  /** The seeded day's peak per region, tokens/s. */
  peakTokensPerS: Record<string, number>;
}

/** Options of `seedFromServegen`. */
export interface SeedOptions {
  /** The data folder that holds servegen/aggregate (core/paths.ts defaultDataDir: the shipped core/data). */
  dataDir: string;
  nowMs: number;
  /** Days seeded (default 1), from ServeGen day `startDay` (default 1, the second day: a full day for every series). */
  days?: number;
  startDay?: number;
  /** Peak as a fraction of the starting instances' throughput (default 0.7). */
  fill?: number;
}

/** Samples for the history (see the file comment) and what they are. Throws ValidationError on unreadable data. */
export function servegenSeedSamples(config: TidegateConfig, o: SeedOptions): { samples: DemandSample[]; seeded: SeededModel[] } {
  const fleet = fleetFromConfig(config);
  const days = o.days ?? 1;
  const startDay = o.startDay ?? 1;
  const fill = o.fill ?? 0.7;
  const endMinute = Math.floor(o.nowMs / 600_000) * 10;
  const samples: DemandSample[] = [];
  const seeded: SeededModel[] = [];
  const cache = new Map<string, { stepMs: number; tokensPerS: number[] }>();
  const offset0 = config.regions[0]!.utcOffsetH;
  config.models.forEach((m, mi) => {
    const source = SEED_SOURCES[m.name] ?? FALLBACK_SOURCES[mi % FALLBACK_SOURCES.length]!;
    const file = join(o.dataDir, "servegen", "aggregate", `${source}_total_rate_600s.csv`);
    if (!cache.has(file)) cache.set(file, readServegenAggregate(file));
    const agg = cache.get(file)!;
    const perDay = Math.round(86_400_000 / agg.stepMs);
    const all = agg.tokensPerS;
    // The time of day (in windows) of the first seeded window, so window k of a ServeGen day fills UTC k × step.
    const phase = (((endMinute * MINUTE_MS) / agg.stepMs - days * perDay) % perDay + perDay) % perDay;
    const peakOf = (xs: readonly number[]) => Math.max(0, ...xs.filter(Number.isFinite));
    const rec: SeededModel = { model: m.name, source, scale: Number.NaN, peakTokensPerS: {} };
    for (const region of config.regions) {
      const ep = region.endpoints.find((e) => e.model === m.name);
      if (ep === undefined) continue;
      const shift = Math.round((region.utcOffsetH - offset0) * (3_600_000 / agg.stepMs));
      const first = startDay * perDay + phase - shift;
      const win = Array.from({ length: days * perDay }, (_, i) => all[(((first + i) % all.length) + all.length) % all.length]!);
      const capacity = ep.instances * (fleet.models[m.name]?.[ep.gpu]?.tokensPerS ?? 0);
      const scale = peakOf(win) > 0 ? (fill * capacity) / peakOf(win) : 0;
      rec.scale = scale;
      rec.peakTokensPerS[region.name] = peakOf(win) * scale;
      const stepMin = agg.stepMs / MINUTE_MS;
      win.forEach((v, i) => {
        if (!Number.isFinite(v)) return;
        for (let k = 0; k < stepMin; k++) {
          const minute = endMinute - win.length * stepMin + i * stepMin + k;
          samples.push({ kind: "iw", model: m.name, region: region.name, minuteMs: minute * MINUTE_MS, tokensPerS: v * scale });
        }
      });
    }
    seeded.push(rec);
  });
  return { samples, seeded };
}

/** One line per model for the log: where the day came from and how it was scaled. */
export function describeSeed(seeded: readonly SeededModel[], days: number, fill: number): string[] {
  return seeded.map((s) => `${s.model} ← ServeGen ${s.source} (${days} day${days === 1 ? "" : "s"}), scaled ×${s.scale.toPrecision(3)} so each region's peak is ${Math.round(fill * 100)}% of its starting instances: ${Object.entries(s.peakTokensPerS).map(([r, p]) => `${r} ${p.toFixed(0)}`).join(", ")} tokens/s`);
}
