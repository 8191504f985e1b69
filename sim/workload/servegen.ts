/**
 * Reads ServeGen's per-client 10-minute series (ServeGen, arXiv 2505.09999; data/<category>/<model>/
 * chunk-<client>-trace.csv, no header: window_start_s, rate_rps, cv, arrival_dist (Weibull | Gamma | empty),
 * shape, scale). Only what the generator needs is kept: per window the rate, the distribution and its shape
 * (the scale is re-derived so each window's mean inter-arrival matches its rate exactly).
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { gunzipSync } from "node:zlib";
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

/**
 * The packed form of a source's clients, `<root>/<source>.csv.gz` beside where its folder would be (core/data ships
 * the week workload's sources this way: core/data/README.txt). What the generator reads, and nothing else: per
 * client and non-empty window its rate, distribution and shape, written so that reading it gives the same numbers as
 * the per-client files (JavaScript's shortest round-trip decimal of each double). A window with rate 0 and no fitted
 * distribution is left out; the header keeps the window count and every client's number, all-zero clients included,
 * since a workload's `clientStride` / `clientOffset` pick clients by their place in that order.
 */
export const PACKED_EXTENSION = ".csv.gz";
const PACKED_COLUMNS = "client,window,rate_rps,arrival_dist,shape";
const DIST_NAMES = ["", "Gamma", "Weibull"] as const;

/** The packed text (before gzip) of a source's clients, as `loadServeGen` read them. */
export function packClients(source: string, clients: readonly ClientSeries[]): string {
  const windows = clients[0]?.rateRps.length ?? 0;
  const numbers = clients.map((c) => {
    if (c.rateRps.length !== windows) throw new RangeError(`${c.id} has ${c.rateRps.length} windows, ${clients[0]!.id} ${windows}: a packed source has one window count`);
    return clientNumber(c.id);
  });
  const out = [`# ServeGen per-client series of ${source}, packed (sim/workload/servegen.ts packClients): windows of ${SERVEGEN_WINDOW_S} s, empty ones left out`, `# windows ${windows}`, `# clients ${numbers.join(" ")}`, PACKED_COLUMNS];
  clients.forEach((c, k) => {
    for (let i = 0; i < windows; i++) {
      const d = c.dist[i]!;
      if (c.rateRps[i] === 0 && d === 0) continue;
      out.push(`${numbers[k]},${i},${c.rateRps[i]},${DIST_NAMES[d]},${d === 0 ? "" : c.shape[i]}`);
    }
  });
  return `${out.join("\n")}\n`;
}

/** Reads a packed source (`packClients`); errors name the source and line. */
export function parsePackedClients(source: string, text: string): ClientSeries[] {
  const lines = text.split("\n");
  const header = (k: number, key: string): string => {
    const m = new RegExp(`^# ${key} (.*)$`).exec(lines[k] ?? "");
    if (m === null) throw new ValidationError(`packed ${source} line ${k + 1}`, `expected "# ${key} …"`);
    return m[1]!;
  };
  const windows = Number(header(1, "windows"));
  if (!Number.isInteger(windows) || windows < 1) throw new ValidationError(`packed ${source} line 2`, `windows must be an integer ≥ 1, got ${lines[1]}`);
  const numbers = header(2, "clients").split(" ").map(Number);
  if (numbers.some((n) => !Number.isInteger(n) || n < 0)) throw new ValidationError(`packed ${source} line 3`, "client numbers must be integers ≥ 0");
  if (lines[3] !== PACKED_COLUMNS) throw new ValidationError(`packed ${source} line 4`, `expected the columns ${PACKED_COLUMNS}`);
  const byNumber = new Map<number, ClientSeries>();
  const clients = numbers.map((n) => {
    const c: ClientSeries = { id: `${source}/chunk-${n}`, rateRps: new Float64Array(windows), dist: new Uint8Array(windows), shape: new Float64Array(windows) };
    byNumber.set(n, c);
    return c;
  });
  for (let k = 4; k < lines.length; k++) {
    const line = lines[k]!;
    if (line === "") continue;
    const where = `packed ${source} line ${k + 1}`;
    const f = line.split(",");
    const c = byNumber.get(Number(f[0]));
    if (c === undefined || f.length !== 5) throw new ValidationError(where, `expected a client of the header and 5 fields, got ${JSON.stringify(line)}`);
    const i = Number(f[1]);
    if (!Number.isInteger(i) || i < 0 || i >= windows) throw new ValidationError(where, `window must be an integer in [0, ${windows}), got ${f[1]}`);
    const rate = Number(f[2]);
    if (!Number.isFinite(rate) || rate < 0) throw new ValidationError(where, `rate_rps must be a finite number ≥ 0, got ${f[2]}`);
    c.rateRps[i] = rate;
    const d = DIST_NAMES.indexOf(f[3] as (typeof DIST_NAMES)[number]);
    if (d === -1) throw new ValidationError(where, `arrival_dist must be Weibull, Gamma or empty, got ${JSON.stringify(f[3])}`);
    if (d !== 0) {
      const shape = Number(f[4]);
      if (!(shape > 0) || !Number.isFinite(shape)) throw new ValidationError(where, `${f[3]} shape must be > 0, got ${f[4]}`);
      c.dist[i] = d;
      c.shape[i] = Math.max(shape, 0.05);
    }
  }
  return clients;
}

/** A packed file's text; a file that is not gzip (damaged, truncated) is a ValidationError naming it. */
function readPacked(file: string, source: string): string {
  try {
    return gunzipSync(readFileSync(file)).toString("utf8");
  } catch (err) {
    throw new ValidationError(`source ${source}`, `cannot read the packed series ${file}: ${(err as Error).message}`);
  }
}

/** The client number of an id `<source>/chunk-<n>`. */
function clientNumber(id: string): number {
  return Number(id.slice(id.lastIndexOf("chunk-") + "chunk-".length));
}

/**
 * Loads every client of `<root>/<source>` (source like `language/m-mid`), sorted by client number: from the per-client
 * files when the folder exists (a full copy of the public data), else from the packed `<root>/<source>.csv.gz` (the
 * shipped data, core/data).
 */
export function loadServeGen(root: string, source: string): ClientSeries[] {
  const dir = join(root, source);
  const packed = `${dir}${PACKED_EXTENSION}`;
  let names: string[];
  try {
    names = readdirSync(dir).filter((n) => /^chunk-\d+-trace\.csv$/.test(n));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT" && existsSync(packed)) return parsePackedClients(source, readPacked(packed, source));
    const why = (err as NodeJS.ErrnoException).code === "ENOENT" ? `no ServeGen per-client series at ${dir}, nor their packed form ${packed} (core/data ships language/m-mid, m-large and m-small packed; core/data/README.txt): pass --data-dir with a copy of the public data that holds this source, or set servegenDir in a workload file` : `cannot read ServeGen directory ${dir}: ${(err as Error).message}`;
    throw new ValidationError(`source ${source}`, why);
  }
  if (names.length === 0) throw new ValidationError(`source ${source}`, `no chunk-*-trace.csv files in ${dir}`);
  const num = (n: string) => Number(n.split("-")[1]);
  names.sort((a, b) => num(a) - num(b));
  return names.map((n) => parseClientCsv(`${source}/${n.replace("-trace.csv", "")}`, readFileSync(join(dir, n), "utf8")));
}
