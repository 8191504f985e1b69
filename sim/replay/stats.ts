/**
 * Replay statistics: latency percentiles per (model, region), per model, per region and overall, and the
 * utilization seen in telemetry. Latencies in ms: TTFT = first token − arrival, E2E = done − arrival, TBT = a
 * request's mean time between tokens, (done − first token) / (output tokens − 1), for requests with ≥ 2 tokens.
 */

/** What the replay records per request. */
export interface RequestRecord {
  model: string;
  clientRegion: string;
  /** Region that served it ("" when none did). */
  region: string;
  arrivalMs: number;
  firstTokenMs: number;
  doneMs: number;
  outputTokens: number;
  /** The request's prompt length. */
  promptTokens: number;
  /** undefined when served; otherwise the error code (no_region_available, invalid_request, …). */
  error?: string;
}

export interface Percentiles {
  p50: number;
  p90: number;
  p99: number;
  mean: number;
}

export interface GroupStats {
  /** "model@region", "model@*", "*@region" or "*@*". */
  key: string;
  requests: number;
  ttftMs: Percentiles;
  tbtMs: Percentiles;
  e2eMs: Percentiles;
}

/** Nearest-rank percentiles of `xs` (sorted in place); zeros for an empty list. */
export function percentiles(xs: Float64Array): Percentiles {
  if (xs.length === 0) return { p50: 0, p90: 0, p99: 0, mean: 0 };
  xs.sort();
  const at = (q: number) => xs[Math.min(xs.length - 1, Math.max(0, Math.ceil(q * xs.length) - 1))]!;
  let sum = 0;
  for (const x of xs) sum += x;
  return { p50: at(0.5), p90: at(0.9), p99: at(0.99), mean: sum / xs.length };
}

/** Groups served records by model × region (and the marginals) and computes their percentiles. */
export function groupStats(records: readonly RequestRecord[]): GroupStats[] {
  const groups = new Map<string, RequestRecord[]>();
  const add = (key: string, r: RequestRecord) => {
    let g = groups.get(key);
    if (g === undefined) groups.set(key, (g = []));
    g.push(r);
  };
  for (const r of records) {
    if (r.error !== undefined) continue;
    add(`${r.model}@${r.region}`, r);
    add(`${r.model}@*`, r);
    add(`*@${r.region}`, r);
    add("*@*", r);
  }
  const out: GroupStats[] = [];
  for (const [key, rs] of [...groups.entries()].sort((a, b) => a[0].localeCompare(b[0]))) {
    const ttft = new Float64Array(rs.length);
    const e2e = new Float64Array(rs.length);
    const tbt: number[] = [];
    rs.forEach((r, i) => {
      ttft[i] = r.firstTokenMs - r.arrivalMs;
      e2e[i] = r.doneMs - r.arrivalMs;
      if (r.outputTokens >= 2) tbt.push((r.doneMs - r.firstTokenMs) / (r.outputTokens - 1));
    });
    out.push({ key, requests: rs.length, ttftMs: percentiles(ttft), tbtMs: percentiles(Float64Array.from(tbt)), e2eMs: percentiles(e2e) });
  }
  return out;
}

/** Running mean and max of a utilization series per (region, model), fed from telemetry. */
export class UtilizationTracker {
  private readonly byRegion = new Map<string, Map<string, { n: number; sum: number; max: number; runningSum: number }>>();

  add(region: string, model: string, utilization: number, running: number): void {
    let models = this.byRegion.get(region);
    if (models === undefined) this.byRegion.set(region, (models = new Map()));
    let s = models.get(model);
    if (s === undefined) models.set(model, (s = { n: 0, sum: 0, max: 0, runningSum: 0 }));
    s.n++;
    s.sum += utilization;
    s.runningSum += running;
    if (utilization > s.max) s.max = utilization;
  }

  /** Per "model@region": samples, mean and max effective memory utilization, mean running requests. */
  summary(): { key: string; samples: number; meanUtilization: number; maxUtilization: number; meanRunning: number }[] {
    const out: { key: string; samples: number; meanUtilization: number; maxUtilization: number; meanRunning: number }[] = [];
    for (const [region, models] of this.byRegion) {
      for (const [model, s] of models) out.push({ key: `${model}@${region}`, samples: s.n, meanUtilization: s.sum / s.n, maxUtilization: s.max, meanRunning: s.runningSum / s.n });
    }
    return out.sort((a, b) => a.key.localeCompare(b.key));
  }
}

const f = (x: number) => (x >= 1000 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x.toFixed(2));

/** A fixed-width text table of group stats (ms). */
export function formatGroups(groups: readonly GroupStats[]): string {
  const head = `${"model@region".padEnd(26)} ${"n".padStart(6)} | ${"TTFT p50".padStart(9)} ${"p90".padStart(8)} ${"p99".padStart(8)} | ${"TBT p50".padStart(8)} ${"p90".padStart(7)} ${"p99".padStart(7)} | ${"E2E p50".padStart(8)} ${"p90".padStart(8)} ${"p99".padStart(8)}`;
  const rows = groups.map(
    (g) =>
      `${g.key.padEnd(26)} ${String(g.requests).padStart(6)} | ${f(g.ttftMs.p50).padStart(9)} ${f(g.ttftMs.p90).padStart(8)} ${f(g.ttftMs.p99).padStart(8)} | ${f(g.tbtMs.p50).padStart(8)} ${f(g.tbtMs.p90).padStart(7)} ${f(g.tbtMs.p99).padStart(7)} | ${f(g.e2eMs.p50).padStart(8)} ${f(g.e2eMs.p90).padStart(8)} ${f(g.e2eMs.p99).padStart(8)}`,
  );
  return [head, "-".repeat(head.length), ...rows].join("\n");
}
