/**
 * History files for `tidegate plan --history FILE`: CSV with header
 * `minute_start_s,model,region,iw_tokens_per_s,niw_tokens_per_s`, one row per (minute, model, region). Minutes may
 * be missing (gaps are filled and reported); a NaN, negative or unparsable value is an error naming the line.
 */
import { ValidationError } from "../core/validate.js";
import { MemoryHistory, type DemandSample } from "../forecasts/history.js";

/** A parsed history file: its samples in memory and where it ends. */
export interface HistoryFile {
  history: MemoryHistory;
  /** End of the last minute in the file (the plan is made "now" = this). */
  endMs: number;
  rows: number;
}

const HEADER = "minute_start_s,model,region,iw_tokens_per_s,niw_tokens_per_s";

/** Parses history CSV text; errors name `name:line`. */
export function parseHistoryCsv(text: string, name: string): HistoryFile {
  const lines = text.split(/\r?\n/);
  if ((lines[0] ?? "").trim() !== HEADER) throw new ValidationError(`${name}:1`, `expected the header ${HEADER}`, "invalid_request");
  const samples: DemandSample[] = [];
  let endMs = -Infinity;
  for (let i = 1; i < lines.length; i++) {
    const line = lines[i]!.trim();
    if (line === "") continue;
    const where = `${name}:${i + 1}`;
    const c = line.split(",");
    if (c.length !== 5) throw new ValidationError(where, `expected 5 columns, got ${c.length}`, "invalid_request");
    const t = Number(c[0]);
    if (!Number.isFinite(t) || t < 0) throw new ValidationError(where, `minute_start_s ${JSON.stringify(c[0])} is not a time ≥ 0`, "invalid_request");
    const [model, region] = [c[1]!.trim(), c[2]!.trim()];
    if (model === "" || region === "") throw new ValidationError(where, "model and region must not be empty", "invalid_request");
    const vals = [c[3]!, c[4]!].map((v, k) => {
      const n = v.trim() === "" ? Number.NaN : Number(v);
      const col = k === 0 ? "iw_tokens_per_s" : "niw_tokens_per_s";
      if (!Number.isFinite(n)) throw new ValidationError(where, `${col} ${JSON.stringify(v)} is not a finite number`, "invalid_request");
      if (n < 0) throw new ValidationError(where, `${col} ${n} is negative`, "invalid_request");
      return n;
    });
    samples.push({ kind: "iw", model, region, minuteMs: t * 1000, tokensPerS: vals[0]! });
    samples.push({ kind: "niw", model, region, minuteMs: t * 1000, tokensPerS: vals[1]! });
    endMs = Math.max(endMs, Math.floor(t / 60) * 60_000 + 60_000);
  }
  if (samples.length === 0) throw new ValidationError(name, "has no data rows", "invalid_request");
  const history = new MemoryHistory();
  void history.add(samples);
  return { history, endMs, rows: samples.length / 2 };
}
