/**
 * The figures of one week replay (JSON-serialisable): instance-hours per model and region, GPU-hours lost to
 * provisioning (instances deploying: provisioning + loading; SageServe §7.3.3), spot instance-hours donated,
 * p50/p95/p99 TTFT and E2E per model for interactive traffic, batch requests done within their deadline, scaling
 * actions, and hourly series for the report's charts.
 */
import { zeroLoadingCounters, type SimLoadingCounters } from "../../region/runtime/sim-loading.js";
import { Histogram } from "./histogram.js";
import type { RunState } from "./state.js";

/**
 * Percentiles over every request, unserved ones included as infinitely late: a percentile that falls on them is
 * +Infinity (written "Infinity" in the JSON reports). `count` includes `unserved`.
 */
export interface Percentiles {
  p50: number;
  p95: number;
  p99: number;
  count: number;
  unserved: number;
}

/**
 * A model's interactive SLO over the run (core/config slo-section.ts): its targets, the TTFT and TPOT at the SLO's
 * percentile (+Infinity where it falls on unserved requests), whether both are within the targets and no request
 * failed after its first token (`met`; such a request is in neither percentile — issue 45), the requests that met
 * both (attainment; one never served or failed is a miss) and the hours whose attainment fell below the percentile
 * (`violatedHours`, of `hours` with requests).
 */
export interface SloResult {
  ttftMs: number;
  tpotMs: number;
  percentile: number;
  ttftAtPercentileMs: number;
  tpotAtPercentileMs: number;
  met: boolean;
  /** Requests that failed after their first token (books.ts IwHooks.onError): each makes `met` false. */
  failedAfterFirstToken: number;
  requests: number;
  metRequests: number;
  attainment: number;
  violatedHours: number;
  hours: number;
}

export interface ModelResult {
  ttftMs: Percentiles;
  e2eMs: Percentiles;
  /** Time per output token after the first, of requests with ≥ 2 output tokens. */
  tpotMs: Percentiles;
  slo: SloResult;
  instanceHours: number;
  provisioningGpuHours: number;
  spotInstanceHours: number;
  byRegion: Record<string, { instanceHours: number; provisioningGpuHours: number; spotInstanceHours: number }>;
}

export interface WeekResult {
  strategy: string;
  strategyParams: Record<string, number>;
  planner: string;
  seed: number;
  days: number;
  virtualMs: number;
  wallMs: number;
  plannerMs: number;
  requestsPerWallS: number;
  requests: { total: number; interactive: number; interactiveUnserved: number; batch: number };
  totals: {
    instanceHours: number;
    gpuHours: number;
    provisioningGpuHours: number;
    provisioningInstanceHours: number;
    spotInstanceHours: number;
    scalingActions: number;
    actionsByKind: Record<string, number>;
    actionsByReason: Record<string, number>;
  };
  interactive: { ttftMs: Percentiles; e2eMs: Percentiles; tpotMs: Percentiles };
  /**
   * The SLO over every model: `met` when each model meets its own (SloResult.met); attainment over all interactive
   * requests; hours in which some model's attainment fell below its percentile.
   */
  slo: { met: boolean; attainment: number; violatedHours: number; unmetModels: string[] };
  batch: { submitted: number; done: number; withinDeadline: number; late: number; missedDeadlineUndone: number; pendingNotDue: number; allWithinDeadline: boolean; sentTwice: number };
  models: Record<string, ModelResult>;
  hourly: { hours: number; models: Record<string, { instances: number[]; p95TtftMs: (number | null)[]; tokensPerS: number[]; sloAttainment: (number | null)[] }>; targets: Record<string, number[]> };
  plans: number;
  planAcks: number;
  /** Per-minute p95 TTFT per model (ms; null for minutes without requests, +Infinity where it falls on unserved ones), when asked for. */
  minuteP95TtftMs?: Record<string, (number | null)[]>;
  workload: RunState["summary"];
  /** The regions' loading sources and what they did, summed over regions (absent: the actuator's delays). */
  loading?: { sources: string[]; counters: SimLoadingCounters };
}

const H = 3_600_000;

function pct(h: { quantile(q: number): number; count: number; unserved: number }): Percentiles {
  // NaN: no request at all (reported as 0); +Infinity: the percentile falls on unserved requests.
  const r = (x: number) => (Number.isNaN(x) ? 0 : Number.isFinite(x) ? Math.round(x * 10) / 10 : x);
  return { p50: r(h.quantile(0.5)), p95: r(h.quantile(0.95)), p99: r(h.quantile(0.99)), count: h.count, unserved: h.unserved };
}

/** Builds the result of a finished run. */
export function summarize(s: RunState): WeekResult {
  const models: Record<string, ModelResult> = {};
  const totals = { instanceHours: 0, gpuHours: 0, provisioningGpuHours: 0, provisioningInstanceHours: 0, spotInstanceHours: 0, scalingActions: 0, actionsByKind: {} as Record<string, number>, actionsByReason: {} as Record<string, number> };
  s.models.forEach((m, mi) => {
    const mr: ModelResult = { ttftMs: pct(s.ttft[mi]!), e2eMs: pct(s.e2e[mi]!), tpotMs: pct(s.tpot[mi]!), slo: sloOf(s, mi), instanceHours: 0, provisioningGpuHours: 0, spotInstanceHours: 0, byRegion: {} };
    s.regions.forEach((r, ri) => {
      const t = s.ledgers[ri]!.get(m);
      if (t === undefined) return;
      const ih = (t.instanceMs.provisioning + t.instanceMs.loading + t.instanceMs.serving + t.instanceMs.draining) / H;
      const gh = (t.gpuMs.provisioning + t.gpuMs.loading + t.gpuMs.serving + t.gpuMs.draining) / H;
      const prov = (t.gpuMs.provisioning + t.gpuMs.loading) / H;
      const spot = t.instanceMs.spot / H;
      mr.byRegion[r.name] = { instanceHours: round(ih), provisioningGpuHours: round(prov), spotInstanceHours: round(spot) };
      mr.instanceHours += ih;
      mr.provisioningGpuHours += prov;
      mr.spotInstanceHours += spot;
      totals.instanceHours += ih;
      totals.gpuHours += gh;
      totals.provisioningGpuHours += prov;
      totals.provisioningInstanceHours += (t.instanceMs.provisioning + t.instanceMs.loading) / H;
      totals.spotInstanceHours += spot;
    });
    mr.instanceHours = round(mr.instanceHours);
    mr.provisioningGpuHours = round(mr.provisioningGpuHours);
    mr.spotInstanceHours = round(mr.spotInstanceHours);
    models[m] = mr;
  });
  for (const r of s.regions) {
    for (const a of r.actions) {
      if (a.atMs >= s.durationMs) continue;
      totals.scalingActions++;
      totals.actionsByKind[a.kind] = (totals.actionsByKind[a.kind] ?? 0) + 1;
      totals.actionsByReason[a.reason] = (totals.actionsByReason[a.reason] ?? 0) + 1;
    }
  }
  const allTtft = mergeHist(s.ttft);
  const allE2e = mergeHist(s.e2e);
  const allTpot = mergeHist(s.tpot);
  const endHour = Math.floor((s.durationMs + (s.o.tailMs ?? H)) / H);
  let missed = 0;
  let pending = 0;
  s.niw.pendingByDeadlineHour.forEach((n, h) => {
    if (h < endHour) missed += n;
    else pending += n;
  });
  const hours = Math.ceil(s.durationMs / H);
  const hourly: WeekResult["hourly"] = { hours, models: {}, targets: {} };
  s.models.forEach((m, mi) => {
    const inst: number[] = [];
    const p95: (number | null)[] = [];
    const tok: number[] = [];
    for (let h = 0; h < hours; h++) {
      let a = 0;
      for (let ri = 0; ri < s.regions.length; ri++) a += s.activeSamples[mi]![ri]![h]! / 60;
      inst.push(round(a));
      const q = s.ttftHourly[mi]!.quantile(h, 0.95);
      p95.push(Number.isNaN(q) ? null : Number.isFinite(q) ? Math.round(q) : q);
      tok.push(round(s.tokensHourly[mi]![h]! / 3600));
    }
    const books = s.sloHourly[mi]!;
    const attained: (number | null)[] = [];
    for (let h = 0; h < hours; h++) attained.push(books.requests[h]! > 0 ? round(books.met[h]! / books.requests[h]!) : null);
    hourly.models[m] = { instances: inst, p95TtftMs: p95, tokensPerS: tok, sloAttainment: attained };
    hourly.targets[m] = s.plans.map((p) => p.endpoints.flat().filter((e) => e.model === m).reduce((x, e) => x + e.instances, 0));
  });
  const total = s.iw + s.niw.submitted;
  const loaders = s.regions.flatMap((r) => (r.loading === undefined ? [] : [r.loading]));
  const loading =
    loaders.length === 0
      ? undefined
      : {
          sources: [...new Set(loaders.map((l) => `${l.settings.source}/${l.scheduler}`))],
          counters: loaders.reduce<SimLoadingCounters>((acc, l) => {
            for (const k of Object.keys(acc) as (keyof SimLoadingCounters)[]) acc[k] += l.counters[k];
            return acc;
          }, zeroLoadingCounters()),
        };
  return {
    strategy: s.o.strategy,
    strategyParams: { ...(s.o.strategyParams ?? {}) },
    planner: s.o.planner.name,
    seed: s.o.workload.seed,
    days: s.o.workload.days,
    virtualMs: s.durationMs,
    wallMs: Math.round(s.wallMs),
    plannerMs: Math.round(s.plannerMs),
    requestsPerWallS: Math.round(total / (s.wallMs / 1000)),
    requests: { total, interactive: s.iw, interactiveUnserved: s.iwUnserved, batch: s.niw.submitted },
    totals: { ...totals, instanceHours: round(totals.instanceHours), gpuHours: round(totals.gpuHours), provisioningGpuHours: round(totals.provisioningGpuHours), provisioningInstanceHours: round(totals.provisioningInstanceHours), spotInstanceHours: round(totals.spotInstanceHours) },
    interactive: { ttftMs: pct(allTtft), e2eMs: pct(allE2e), tpotMs: pct(allTpot) },
    slo: overallSlo(s, models),
    batch: { submitted: s.niw.submitted, done: s.niw.done, withinDeadline: s.niw.withinDeadline, late: s.niw.late, missedDeadlineUndone: missed, pendingNotDue: pending, allWithinDeadline: s.niw.late === 0 && missed === 0, sentTwice: s.niw.duplicates },
    models,
    hourly,
    ...(loading === undefined ? {} : { loading }),
    plans: s.plans.length,
    planAcks: s.plans.reduce((x, p) => x + p.acks, 0),
    workload: s.summary,
    ...(s.o.minuteSeries === true ? { minuteP95TtftMs: minuteSeries(s) } : {}),
  };
}

function minuteSeries(s: RunState): Record<string, (number | null)[]> {
  const out: Record<string, (number | null)[]> = {};
  const minutes = Math.ceil(s.durationMs / 60_000);
  s.models.forEach((m, mi) => {
    const xs: (number | null)[] = [];
    for (let k = 0; k < minutes; k++) {
      const q = s.ttftMinute[mi]!.quantile(k, 0.95);
      xs.push(Number.isNaN(q) ? null : Number.isFinite(q) ? Math.round(q) : q);
    }
    out[m] = xs;
  });
  return out;
}

/** One model's SloResult (see the type). */
function sloOf(s: RunState, mi: number): SloResult {
  const slo = s.slo[mi]!;
  const ttftQ = s.ttft[mi]!.quantile(slo.percentile);
  const tpotQ = s.tpot[mi]!.quantile(slo.percentile);
  // NaN: no request at all — nothing missed.
  const ttftAt = Number.isNaN(ttftQ) ? 0 : ttftQ;
  const tpotAt = Number.isNaN(tpotQ) ? 0 : tpotQ;
  const books = s.sloHourly[mi]!;
  let requests = 0;
  let met = 0;
  let hours = 0;
  let violated = 0;
  for (let h = 0; h < books.requests.length; h++) {
    const n = books.requests[h]!;
    if (n === 0) continue;
    requests += n;
    met += books.met[h]!;
    hours++;
    if (books.met[h]! / n < slo.percentile) violated++;
  }
  const r1 = (x: number) => (Number.isFinite(x) ? Math.round(x * 10) / 10 : x);
  const failed = failedAfterFirstToken(s, mi);
  return { ttftMs: slo.ttftMs, tpotMs: slo.tpotMs, percentile: slo.percentile, ttftAtPercentileMs: r1(ttftAt), tpotAtPercentileMs: r1(tpotAt), met: sloMet(slo, ttftAt, tpotAt, failed), failedAfterFirstToken: failed, requests, metRequests: met, attainment: requests === 0 ? 1 : Math.round((met / requests) * 10_000) / 10_000, violatedHours: violated, hours };
}

/**
 * Requests of model `mi` that failed after their first token. books.ts records an unserved request (no first token)
 * as unserved in both the TTFT and the E2E histogram, and one that failed after its first token in the E2E histogram
 * only (its TTFT was recorded, it has no TPOT): the difference counts the latter.
 */
export function failedAfterFirstToken(s: Pick<RunState, "ttft" | "e2e">, mi: number): number {
  return s.e2e[mi]!.unserved - s.ttft[mi]!.unserved;
}

/**
 * Whether a model met its SLO: the TTFT and TPOT at its percentile (unrounded) within the targets, and no request
 * failed after its first token — the percentiles do not see such a request (issue 45), so one alone misses the SLO.
 */
export function sloMet(slo: { ttftMs: number; tpotMs: number }, ttftAtMs: number, tpotAtMs: number, failedAfterFirst: number): boolean {
  return ttftAtMs <= slo.ttftMs && tpotAtMs <= slo.tpotMs && failedAfterFirst === 0;
}

/** WeekResult.slo over every model. */
function overallSlo(s: RunState, models: Record<string, ModelResult>): WeekResult["slo"] {
  let requests = 0;
  let met = 0;
  for (const m of Object.values(models)) {
    requests += m.slo.requests;
    met += m.slo.metRequests;
  }
  let violated = 0;
  const hours = s.sloHourly[0]?.requests.length ?? 0;
  for (let h = 0; h < hours; h++) {
    if (s.sloHourly.some((b, mi) => b.requests[h]! > 0 && b.met[h]! / b.requests[h]! < s.slo[mi]!.percentile)) violated++;
  }
  const unmetModels = Object.entries(models).filter(([, m]) => !m.slo.met).map(([name]) => name);
  return { met: unmetModels.length === 0, attainment: requests === 0 ? 1 : Math.round((met / requests) * 10_000) / 10_000, violatedHours: violated, unmetModels };
}

function round(x: number): number {
  return Math.round(x * 100) / 100;
}

function mergeHist(hs: Histogram[]): Histogram {
  const merged = new Histogram();
  for (const h of hs) {
    for (let i = 0; i < h.counts.length; i++) merged.counts[i]! += h.counts[i]!;
    merged.count += h.count;
    merged.sumMs += h.sumMs;
  }
  return merged;
}
