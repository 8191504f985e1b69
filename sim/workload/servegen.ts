/**
 * Reads ServeGen's per-client 10-minute series (ServeGen, arXiv 2505.09999; data/<category>/<model>/
 * chunk-<client>-trace.csv, no header: window_start_s, rate_rps, cv, arrival_dist (Weibull | Gamma | empty),
 * shape, scale). Only what the generator needs is kept: per window the rate, the distribution and its shape
 * (the scale is re-derived so each window's mean inter-arrival matches its rate exactly).
 */
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { ValidationError } from "../../core/validate.js";

/** Arrival distribution of a window: 0 = exponential (no fit given), 1 = Gamma, 2 = Weibull. */
export type DistCode = 0 | 1 | 2;

/** One client's series: parallel arrays indexed by window (600 s each). */
export interface ClientSeries {
  /** `<category>/<model>/chunk-<n>`. */
  id: string;
  rateRps: Float64Array;
  dist: Uint8Array;
  shape: Float64Array;
}

/** Window length of the ServeGen series. */
export const SERVEGEN_WINDOW_S = 600;

/** Parses one trace CSV; errors name the file and line. */
export function parseClientCsv(id: string, text: string): ClientSeries {
  const lines = text.split("\n").filter((l) => l.trim() !== "");
  const rateRps = new Float64Array(lines.length);
  const dist = new Uint8Array(lines.length);
  const shape = new Float64Array(lines.length);
  lines.forEach((line, i) => {
    const f = line.trim().split(",");
    const where = `${id} line ${i + 1}`;
    if (f.length < 4) throw new ValidationError(where, `expected 6 comma-separated fields, got ${f.length}`);
    const start = Number(f[0]);
    if (start !== i * SERVEGEN_WINDOW_S) throw new ValidationError(where, `window_start_s ${f[0]} is not ${i * SERVEGEN_WINDOW_S}`);
    const rate = Number(f[1]);
    if (!Number.isFinite(rate) || rate < 0) throw new ValidationError(where, `rate_rps must be a finite number ≥ 0, got ${f[1]}`);
    rateRps[i] = rate;
    const d = f[3] ?? "";
    const k = Number(f[4]);
    if (d === "Gamma" || d === "Weibull") {
      if (!(k > 0) || !Number.isFinite(k)) throw new ValidationError(where, `${d} shape must be > 0, got ${f[4]}`);
      dist[i] = d === "Gamma" ? 1 : 2;
      shape[i] = Math.max(k, 0.05);
    } else if (d !== "") throw new ValidationError(where, `arrival_dist must be Weibull, Gamma or empty, got ${JSON.stringify(d)}`);
  });
  return { id, rateRps, dist, shape };
}

/** Loads every client of `<root>/<source>` (source like `language/m-mid`), sorted by client number. */
export function loadServeGen(root: string, source: string): ClientSeries[] {
  const dir = join(root, source);
  let names: string[];
  try {
    names = readdirSync(dir).filter((n) => /^chunk-\d+-trace\.csv$/.test(n));
  } catch (err) {
    const why = (err as NodeJS.ErrnoException).code === "ENOENT" ? `no ServeGen per-client series at ${dir}: they are not shipped with tidegate (27 MB); pass --data-dir with a full copy of the public data (e.g. ../shared/data; core/data/README.txt), or set servegenDir in a workload file` : `cannot read ServeGen directory ${dir}: ${(err as Error).message}`;
    throw new ValidationError(`source ${source}`, why);
  }
  if (names.length === 0) throw new ValidationError(`source ${source}`, `no chunk-*-trace.csv files in ${dir}`);
  const num = (n: string) => Number(n.split("-")[1]);
  names.sort((a, b) => num(a) - num(b));
  return names.map((n) => parseClientCsv(`${source}/${n.replace("-trace.csv", "")}`, readFileSync(join(dir, n), "utf8")));
}
