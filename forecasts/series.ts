/**
 * Series files and resampling. A series file is CSV whose first column is a time in seconds and second a
 * non-negative rate (the ServeGen layout: aggregate files with a header row, per-client files without). Rows must
 * be evenly spaced; a missing row is a gap. Bad values (NaN, negative, unparsable) are errors naming the line.
 */
import { readFileSync } from "node:fs";
import { ValidationError } from "../core/validate.js";

/** A parsed, evenly spaced series with its gaps. */
export interface Series {
  /** Time of the first value, ms. */
  startMs: number;
  stepMs: number;
  /** Values, oldest first; gaps are NaN until `fillGaps`. */
  values: number[];
  /** Indices that were gaps in the file. */
  gaps: number[];
}

/** Parses series CSV text; `name` is used in error messages. */
export function parseSeriesCsv(text: string, name: string): Series {
  const times: number[] = [];
  const vals: number[] = [];
  const lines = text.split(/\r?\n/);
  lines.forEach((line, i) => {
    if (line.trim() === "") return;
    const cols = line.split(",");
    const t = Number(cols[0]);
    if (i === 0 && !Number.isFinite(t)) return; // header
    const where = `${name}:${i + 1}`;
    if (cols.length < 2) throw new ValidationError(where, "expected time_s,value", "invalid_request");
    const v = cols[1]!.trim() === "" ? Number.NaN : Number(cols[1]);
    if (!Number.isFinite(t)) throw new ValidationError(where, `time ${JSON.stringify(cols[0])} is not a number`, "invalid_request");
    if (!Number.isFinite(v)) throw new ValidationError(where, `value ${JSON.stringify(cols[1])} is not a finite number`, "invalid_request");
    if (v < 0) throw new ValidationError(where, `value ${v} is negative`, "invalid_request");
    if (times.length > 0 && t <= times[times.length - 1]!) throw new ValidationError(where, `time ${t} is not after the previous row`, "invalid_request");
    times.push(t);
    vals.push(v);
  });
  if (times.length < 2) throw new ValidationError(name, `needs at least 2 rows, got ${times.length}`, "invalid_request");
  let stepS = Infinity;
  for (let i = 1; i < times.length; i++) stepS = Math.min(stepS, times[i]! - times[i - 1]!);
  const values: number[] = [];
  const gaps: number[] = [];
  for (let i = 0; i < times.length; i++) {
    const idx = Math.round((times[i]! - times[0]!) / stepS);
    if (Math.abs(idx * stepS - (times[i]! - times[0]!)) > stepS * 1e-6) {
      throw new ValidationError(`${name}`, `row time ${times[i]} is not on the ${stepS} s grid starting at ${times[0]}`, "invalid_request");
    }
    while (values.length < idx) {
      gaps.push(values.length);
      values.push(Number.NaN);
    }
    values.push(vals[i]!);
  }
  return { startMs: times[0]! * 1000, stepMs: stepS * 1000, values, gaps };
}

/** Reads and parses a series file. */
export function readSeriesFile(file: string): Series {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (err) {
    throw new ValidationError(file, `cannot read series file: ${(err as Error).message}`, "invalid_request");
  }
  return parseSeriesCsv(text, file);
}

/**
 * Fills NaN gaps: with the value one season earlier when known, else linear interpolation between neighbours, else
 * the nearest known value. Returns a new array; throws when every value is missing.
 */
export function fillGaps(values: readonly number[], seasonSteps: number): number[] {
  const out = [...values];
  if (!out.some((v) => Number.isFinite(v))) throw new RangeError("every value is missing");
  for (let i = 0; i < out.length; i++) {
    if (Number.isFinite(out[i]!)) continue;
    const prevSeason = i - seasonSteps >= 0 ? out[i - seasonSteps]! : Number.NaN;
    if (Number.isFinite(prevSeason)) {
      out[i] = prevSeason;
      continue;
    }
    let l = i - 1;
    while (l >= 0 && !Number.isFinite(out[l]!)) l--;
    let r = i + 1;
    while (r < out.length && !Number.isFinite(values[r]!)) r++;
    if (l >= 0 && r < out.length) out[i] = out[l]! + ((values[r]! - out[l]!) * (i - l)) / (r - l);
    else out[i] = l >= 0 ? out[l]! : values[r]!;
  }
  return out;
}

/** Means of consecutive groups of `factor` values (a trailing partial group is dropped); NaNs are skipped. */
export function downsampleMean(values: readonly number[], factor: number): number[] {
  const out: number[] = [];
  for (let i = 0; i + factor <= values.length; i += factor) {
    let s = 0;
    let n = 0;
    for (let j = i; j < i + factor; j++) if (Number.isFinite(values[j]!)) (s += values[j]!), n++;
    out.push(n > 0 ? s / n : Number.NaN);
  }
  return out;
}
