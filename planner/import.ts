/**
 * Demand history from the public data (core/data/ ships the ServeGen aggregates and the Azure traces; the full folder,
 * e.g. ../shared/data, has the rest), for `tidegate plan --history` and `tidegate history import`. Each file becomes
 * one (model, region) series of IW tokens/s per minute:
 *   servegen-aggregate  aggregate/<cat>_<model>_total_rate_600s.csv: rate × (mean input + mean output tokens)
 *   servegen-client     data/<cat>/<model>/chunk-<n>-trace.csv (no header): rate × --tokens-per-request
 *   azure-trace         AzureLLMInferenceTrace_*.csv: Σ (ContextTokens + GeneratedTokens) per minute / 60
 *   per-minute          derived/*_per_minute.csv: (input_tokens + output_tokens) / 60
 *   history             the history CSV itself (planner/history-file.ts), any number of series
 * ServeGen windows (10 minutes) are spread over their minutes. ServeGen and Mooncake count seconds from the trace
 * start, not calendar time: such series are "relative" and reports show hours from the start ("hour 336").
 * Errors are ValidationErrors naming `file:line`.
 */
import { readFileSync } from "node:fs";
import { basename, dirname } from "node:path";
import { ValidationError } from "../core/validate.js";
import { DAY_MS, MINUTE_MS, MemoryHistory, type DemandSample } from "../forecasts/history.js";
import { parseHistoryCsv } from "./history-file.js";
import { readServegenAggregate } from "./seed.js";

/** The formats `importHistory` reads. */
export type SourceFormat = "history" | "servegen-aggregate" | "servegen-client" | "azure-trace" | "per-minute";

/** Times before 2000-01-01 are offsets from a trace start, not calendar times. */
export const CALENDAR_FROM_MS = Date.UTC(2000, 0, 1);

/** The format of a file from its first line. */
export function detectFormat(firstLine: string, name: string): SourceFormat {
  const h = firstLine.trim();
  if (h.startsWith("minute_start_s,model,region")) return "history";
  if (h.startsWith("window_start_s,total_rate_rps")) return "servegen-aggregate";
  if (h.startsWith("TIMESTAMP,ContextTokens,GeneratedTokens")) return "azure-trace";
  if (h.startsWith("minute_index,minute_start")) return "per-minute";
  if (/^\d+(\.\d+)?,[\d.eE+-]+,[\d.eE+-]*,(Weibull|Gamma)?,/.test(h)) return "servegen-client";
  throw new ValidationError(`${name}:1`, "unknown format: expected a tidegate history CSV, a ServeGen aggregate or per-client trace, an Azure LLM trace or a derived per-minute CSV (core/data/README.txt)", "invalid_request");
}

/** What `importHistory` read. */
export interface ImportedHistory {
  samples: DemandSample[];
  format: SourceFormat;
  /** The (model, region) pairs, and one line describing the conversion. */
  series: { model: string; region: string }[];
  description: string;
  /** "relative" when the times are offsets from the trace start. */
  timeBase: "calendar" | "relative";
}

/** Options: which (model, region) a single-series file becomes, and the tokens per request for per-client traces. */
export interface ImportOptions {
  model?: string;
  region?: string;
  tokensPerRequest?: number;
}

/** A default model name from the file: ServeGen's model ("m-large"), or the trace's name ("azure-code"). */
function defaultModel(file: string, format: SourceFormat): string {
  const b = basename(file).replace(/\.csv$/i, "");
  if (format === "servegen-aggregate") return b.replace(/^[a-z]+_/, "").replace(/_total_rate_\d+s$/, "");
  if (format === "servegen-client") return `${basename(dirname(file))}-${b.replace(/-trace$/, "")}`;
  if (format === "azure-trace") return `azure-${b.replace(/^AzureLLMInferenceTrace_/, "")}`;
  return b.replace(/_per_minute$/, "");
}

const defaultRegion = (format: SourceFormat) => (format.startsWith("servegen") ? "servegen" : format === "azure-trace" ? "azure" : "trace");

/** Per-minute samples from windows of `stepMs` starting at `startMs` (NaN windows are gaps). */
function spread(model: string, region: string, startMs: number, stepMs: number, values: readonly number[]): DemandSample[] {
  const out: DemandSample[] = [];
  const per = Math.max(1, Math.round(stepMs / MINUTE_MS));
  values.forEach((v, i) => {
    if (!Number.isFinite(v)) return;
    for (let k = 0; k < per; k++) out.push({ kind: "iw", model, region, minuteMs: startMs + i * stepMs + k * MINUTE_MS, tokensPerS: v });
  });
  return out;
}

/** Reads one file in any `SourceFormat` (see the file comment). */
export function importHistory(file: string, o: ImportOptions = {}): ImportedHistory {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (err) {
    throw new ValidationError(file, `cannot read history file: ${(err as Error).message}`, "invalid_request");
  }
  const lines = text.split(/\r?\n/);
  const format = detectFormat(lines[0] ?? "", file);
  if (format === "history") {
    const h = parseHistoryCsv(text, file);
    const samples: DemandSample[] = [];
    const pairs = new Map<string, { model: string; region: string }>();
    for (const line of lines.slice(1)) {
      const c = line.trim().split(",");
      if (c.length !== 5) continue;
      const minuteMs = Number(c[0]) * 1000;
      pairs.set(`${c[1]}\t${c[2]}`, { model: c[1]!, region: c[2]! });
      samples.push({ kind: "iw", model: c[1]!, region: c[2]!, minuteMs, tokensPerS: Number(c[3]) }, { kind: "niw", model: c[1]!, region: c[2]!, minuteMs, tokensPerS: Number(c[4]) });
    }
    return { samples, format, series: [...pairs.values()], description: `${file}: tidegate history, ${h.rows} rows`, timeBase: h.endMs < CALENDAR_FROM_MS ? "relative" : "calendar" };
  }
  const model = o.model ?? defaultModel(file, format);
  const region = o.region ?? defaultRegion(format);
  const cells = (from: number) => lines.slice(from).map((l, i) => ({ c: l.split(","), line: i + from + 1 })).filter((x) => x.c.length > 1);
  const num = (v: string | undefined, where: string, what: string) => {
    const n = Number(v);
    if (v === undefined || v.trim() === "" || !Number.isFinite(n) || n < 0) throw new ValidationError(where, `${what} ${JSON.stringify(v)} is not a number ≥ 0`, "invalid_request");
    return n;
  };
  let samples: DemandSample[];
  let description: string;
  let timeBase: "calendar" | "relative" = "relative";
  if (format === "servegen-aggregate") {
    const agg = readServegenAggregate(file);
    samples = spread(model, region, 0, agg.stepMs, agg.tokensPerS);
    description = `${file}: ServeGen aggregate, ${agg.tokensPerS.length} × ${agg.stepMs / 60_000}-min windows, tokens/s = rate × (mean input + mean output tokens) → ${model}@${region}`;
  } else if (format === "servegen-client") {
    const tpr = o.tokensPerRequest ?? 1000;
    const rows = cells(0).map((x) => ({ t: num(x.c[0], `${file}:${x.line}`, "window_start_s"), rate: num(x.c[1], `${file}:${x.line}`, "rate_rps") }));
    const stepS = rows.length > 1 ? rows[1]!.t - rows[0]!.t : 600;
    const values: number[] = [];
    for (const r of rows) {
      const idx = Math.round((r.t - rows[0]!.t) / stepS);
      while (values.length < idx) values.push(Number.NaN);
      values.push(r.rate * tpr);
    }
    samples = spread(model, region, rows[0]!.t * 1000, stepS * 1000, values);
    description = `${file}: ServeGen per-client trace, ${rows.length} × ${stepS / 60}-min windows, tokens/s = rate × ${tpr} tokens per request (--tokens-per-request) → ${model}@${region}`;
  } else if (format === "azure-trace") {
    timeBase = "calendar";
    const perMinute = new Map<number, number>();
    for (const x of cells(1)) {
      const where = `${file}:${x.line}`;
      const t = Date.parse(`${x.c[0]!.trim().replace(" ", "T").slice(0, 23)}Z`);
      if (!Number.isFinite(t)) throw new ValidationError(where, `TIMESTAMP ${JSON.stringify(x.c[0])} is not a time`, "invalid_request");
      const m = Math.floor(t / MINUTE_MS) * MINUTE_MS;
      perMinute.set(m, (perMinute.get(m) ?? 0) + num(x.c[1], where, "ContextTokens") + num(x.c[2], where, "GeneratedTokens"));
    }
    const minutes = [...perMinute.keys()].sort((a, b) => a - b);
    const values: number[] = [];
    for (let m = minutes[0]!; m <= minutes.at(-1)!; m += MINUTE_MS) values.push((perMinute.get(m) ?? 0) / 60);
    samples = spread(model, region, minutes[0]!, MINUTE_MS, values);
    description = `${file}: Azure LLM trace (naive timestamps read as UTC), ${values.length} minutes, tokens/s = (context + generated tokens) per minute / 60 → ${model}@${region}`;
  } else {
    const rows = cells(1).map((x) => ({ t: num(x.c[1], `${file}:${x.line}`, "minute_start"), tokens: num(x.c[3], `${file}:${x.line}`, "input_tokens") + num(x.c[4], `${file}:${x.line}`, "output_tokens") }));
    timeBase = rows[0]!.t * 1000 >= CALENDAR_FROM_MS ? "calendar" : "relative";
    samples = rows.map((r) => ({ kind: "iw" as const, model, region, minuteMs: r.t * 1000, tokensPerS: r.tokens / 60 }));
    description = `${file}: per-minute series, ${rows.length} minutes, tokens/s = (input + output tokens) / 60 → ${model}@${region}`;
  }
  if (samples.length === 0) throw new ValidationError(file, "has no demand (every window is zero or empty)", "invalid_request");
  return { samples, format, series: [{ model, region }], description, timeBase };
}

/** Several files into one history; (model, region) must not repeat, nor calendar and relative times mix. */
export async function importHistories(files: readonly string[], o: ImportOptions = {}): Promise<{ history: MemoryHistory; samples: DemandSample[]; endMs: number; rows: number; timeBase: "calendar" | "relative"; descriptions: string[]; series: { model: string; region: string }[] }> {
  if (files.length > 1 && (o.model !== undefined || o.region !== undefined)) throw new ValidationError("--model", "--model and --region name the series of a single file; give one --history file, or convert each with `tidegate history import`", "invalid_request");
  const parts = files.map((f) => importHistory(f, o));
  const bases = new Set(parts.map((p) => p.timeBase));
  if (bases.size > 1) throw new ValidationError(files.join(","), "cannot mix files with calendar times and files timed from a trace start", "invalid_request");
  const seen = new Set<string>();
  for (const [i, p] of parts.entries()) for (const s of p.series) {
    const k = `${s.model}@${s.region}`;
    if (seen.has(k)) throw new ValidationError(files[i]!, `series ${k} comes from more than one file; name it with --model/--region`, "invalid_request");
    seen.add(k);
  }
  // Relative series that end earlier (ServeGen's 1-day reason/multimodal files beside its 14-day language files) are
  // moved by whole days to end in the last day of the longest one, so one plan covers them all at the same time of day.
  const ends = parts.map((p) => Math.max(...p.samples.map((x) => x.minuteMs)));
  const last = Math.max(...ends);
  if (parts[0]!.timeBase === "relative") {
    parts.forEach((p, i) => {
      const days = Math.floor((last - ends[i]!) / DAY_MS);
      if (days === 0) return;
      for (const x of p.samples) x.minuteMs += days * DAY_MS;
      p.description += ` (moved ${days} days later to end with the longest series)`;
    });
  }
  const samples = parts.flatMap((p) => p.samples);
  const history = new MemoryHistory();
  await history.add(samples);
  const endMs = Math.max(...samples.map((s) => Math.floor(s.minuteMs / MINUTE_MS) * MINUTE_MS)) + MINUTE_MS;
  return { history, samples, endMs, rows: samples.length, timeBase: parts[0]!.timeBase, descriptions: parts.map((p) => p.description), series: parts.flatMap((p) => p.series) };
}

/** The samples as a tidegate history CSV (one row per minute, model and region; NIW 0 where only IW is known). */
export function toHistoryCsv(samples: readonly DemandSample[]): string {
  const rows = new Map<string, { t: number; model: string; region: string; iw: number; niw: number }>();
  for (const s of samples) {
    const t = Math.floor(s.minuteMs / MINUTE_MS) * 60;
    const k = `${t}\t${s.model}\t${s.region}`;
    const r = rows.get(k) ?? { t, model: s.model, region: s.region, iw: 0, niw: 0 };
    r[s.kind] += s.tokensPerS;
    rows.set(k, r);
  }
  const sorted = [...rows.values()].sort((a, b) => a.t - b.t || a.model.localeCompare(b.model) || a.region.localeCompare(b.region));
  return `minute_start_s,model,region,iw_tokens_per_s,niw_tokens_per_s\n${sorted.map((r) => `${r.t},${r.model},${r.region},${+r.iw.toFixed(4)},${+r.niw.toFixed(4)}`).join("\n")}\n`;
}
