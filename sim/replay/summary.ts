/**
 * A trace replay's summary: replays a trace (run.ts) and condenses the records into the figures `tidegate replay
 * --trace` prints and bench:replay reports.
 */
import type { TidegateConfig } from "../../core/config.js";
import { runReplay, type ReplayResult } from "./run.js";
import { formatGroups, groupStats, type GroupStats } from "./stats.js";
import type { Trace } from "./traces.js";

/** Everything a trace replay reports (also the JSON line). */
export interface TraceSummary {
  trace: string;
  seed: number;
  requests: number;
  served: number;
  errors: Record<string, number>;
  unassignable: number;
  traceSpanS: number;
  virtualEndS: number;
  wallMs: number;
  requestsPerWallS: number;
  speedupVsRealTime: number;
  events: number;
  groups: GroupStats[];
  utilization: { key: string; samples: number; meanUtilization: number; maxUtilization: number; meanRunning: number }[];
  /**
   * Prefix-cache hit rate (hit / queried prompt tokens, the engines' vLLM counters) per region and per instance;
   * requests without block hashes (traces without `hash_ids`) are queried and never hit.
   */
  prefixHitRate: { region: string; instance?: string; queriedTokens: number; hitRate: number }[];
}

/** Replays `trace` on `config` and summarizes. `onProgress` as in run.ts. */
export async function replayTrace(trace: Trace, config: TidegateConfig, seed: number, opts: { limit?: number; onProgress?: (virtualMs: number, spanMs: number, finished: number, total: number) => void } = {}): Promise<{ result: ReplayResult; summary: TraceSummary }> {
  const result = await runReplay({ trace, config, seed, ...(opts.limit === undefined ? {} : { limitRequests: opts.limit }), ...(opts.onProgress === undefined ? {} : { onProgress: opts.onProgress }) });
  const errors: Record<string, number> = {};
  for (const r of result.records) if (r.error !== undefined) errors[r.error] = (errors[r.error] ?? 0) + 1;
  const groups = groupStats(result.records);
  const requests = result.records.length + result.unassignable;
  const spanMs = trace.requests[Math.min(requests, trace.requests.length) - 1]?.arrivalMs ?? 0;
  const summary: TraceSummary = {
    trace: trace.name,
    seed,
    requests,
    served: result.records.length - Object.values(errors).reduce((a, b) => a + b, 0),
    errors,
    unassignable: result.unassignable,
    traceSpanS: spanMs / 1000,
    virtualEndS: result.virtualEndMs / 1000,
    wallMs: result.wallMs,
    requestsPerWallS: requests / (result.wallMs / 1000),
    speedupVsRealTime: result.virtualEndMs / result.wallMs,
    events: result.events,
    groups,
    utilization: result.utilization.summary(),
    prefixHitRate: prefixRates(result.prefix),
  };
  return { result, summary };
}

/** Hit rates per region (instance absent), then per instance, from the engines' counters. */
export function prefixRates(stats: ReplayResult["prefix"]): TraceSummary["prefixHitRate"] {
  const byRegion = new Map<string, { q: number; h: number }>();
  for (const s of stats) {
    const r = byRegion.get(s.region) ?? { q: 0, h: 0 };
    r.q += s.queriedTokens;
    r.h += s.hitTokens;
    byRegion.set(s.region, r);
  }
  const rate = (h: number, q: number) => (q > 0 ? h / q : Number.NaN);
  return [
    ...[...byRegion].map(([region, r]) => ({ region, queriedTokens: r.q, hitRate: rate(r.h, r.q) })),
    ...stats.map((s) => ({ region: s.region, instance: s.instanceId, queriedTokens: s.queriedTokens, hitRate: rate(s.hitTokens, s.queriedTokens) })),
  ];
}

/** Human-readable report of a summary. */
export function formatSummary(s: TraceSummary): string {
  const lines = [
    `trace ${s.trace}: ${s.requests} requests over ${s.traceSpanS.toFixed(0)} s (seed ${s.seed}); served ${s.served}, unassignable ${s.unassignable}, errors ${JSON.stringify(s.errors)}`,
    "",
    "latency (ms): TTFT = first token − arrival; TBT = mean time between a request's tokens; E2E = done − arrival",
    formatGroups(s.groups),
    "",
    "effective memory utilization (KV in use / KV capacity) from telemetry, sampled every second:",
    `${"model@region".padEnd(26)} ${"mean".padStart(7)} ${"max".padStart(7)} ${"running".padStart(8)}`,
    ...s.utilization.map((u) => `${u.key.padEnd(26)} ${u.meanUtilization.toFixed(4).padStart(7)} ${u.maxUtilization.toFixed(4).padStart(7)} ${u.meanRunning.toFixed(2).padStart(8)}`),
    "",
    "prefix-cache hit rate (hit / queried prompt tokens; the engines' prefix caches; instances that served nothing left out):",
    ...s.prefixHitRate.filter((p) => p.queriedTokens > 0).map((p) => `${(p.instance === undefined ? `${p.region} (region)` : `${p.region} ${p.instance}`).padEnd(34)} ${p.hitRate.toFixed(4).padStart(7)}  of ${p.queriedTokens.toLocaleString("en")} tokens`),
    "",
    `replayed ${s.requests} requests (${s.virtualEndS.toFixed(0)} s of virtual time, ${s.events} clock events) in ${s.wallMs.toFixed(0)} ms wall: ${Math.round(s.requestsPerWallS).toLocaleString("en")} simulated requests per wall second, ${Math.round(s.speedupVsRealTime).toLocaleString("en")}x real time`,
  ];
  return lines.join("\n");
}

