/**
 * What the regions' telemetry said about each model's SLO since the last plan (issue 31): an accumulator the
 * planner process feeds with every RegionTelemetry it receives (service.ts) and each planning round takes (and so
 * empties). Regions report running totals (core/ports.ts SloTelemetry); this takes each report's difference from the
 * region's previous one (the first report of a region only sets its baseline; totals that went down mean the region
 * restarted, and count from zero). Per model it keeps the interactive requests that ended and how many met the SLO, the request mix, and
 * the load per serving instance those requests saw — what the correction factor (slo-correction.ts) and the plan
 * report's attainment read. Regions that do not report `slo` add nothing.
 *
 * Weights: a report's tokens/s per serving instance counts once per request that ended since the previous report
 * (request-weighted), so the load is the one the judged requests were served at, not the hour's time average;
 * the share of each GPU type among the serving instances is weighted the same way, so the predicted capacity the
 * load is compared with (predictedPerInstance) mixes the GPU types as those requests met them.
 */
import type { GpuType, ModelName, RegionName } from "../core/models.js";
import type { RegionTelemetry, SloTelemetry } from "../core/ports.js";
import type { RequestMix } from "../core/perf/slo-capacity.js";

/** One model's SLO telemetry since the last plan, over every region. */
export interface ModelSloHour {
  /** Interactive requests that ended (finished, or failed / refused before their first token). */
  requests: number;
  /** Of those, the ones that met both targets. */
  met: number;
  /** The request mix of the finished ones (their mean prompt and output tokens); undefined when none finished. */
  mix?: RequestMix;
  /** Mean tokens/s per serving instance over the reports, each weighted by the requests that ended since the report before; undefined when no request ended while an instance served. */
  tokensPerSPerInstance?: number;
  /** Request-weighted share of each GPU type among the serving instances (sums to 1 when tokensPerSPerInstance is defined). */
  gpuShare: Record<GpuType, number>;
}

/** What a round takes: every model seen, and the span of the telemetry (the regions' clocks). */
export interface SloHour {
  fromMs: number;
  toMs: number;
  models: Map<ModelName, ModelSloHour>;
}

interface Acc {
  requests: number;
  met: number;
  mixWeight: number;
  promptSum: number;
  outputSum: number;
  loadWeight: number;
  loadSum: number;
  gpu: Map<GpuType, number>;
}

/** The accumulator (see the file comment). */
export class SloWindow {
  private acc = new Map<ModelName, Acc>();
  /** Per `region\tmodel`: the totals of the region's previous report. */
  private readonly last = new Map<string, SloTelemetry>();
  private fromMs = Infinity;
  private toMs = -Infinity;

  /** Adds what one region's report says happened since its previous one. */
  observe(t: RegionTelemetry): void {
    this.fromMs = Math.min(this.fromMs, t.atMs);
    this.toMs = Math.max(this.toMs, t.atMs);
    for (const m of t.models) {
      const totals = m.slo;
      if (totals === undefined) continue;
      const key = `${t.region}\t${m.model}`;
      const before = this.last.get(key);
      this.last.set(key, totals);
      if (before === undefined) continue;
      const s = sinceThen(totals, before);
      let a = this.acc.get(m.model);
      if (a === undefined) {
        a = { requests: 0, met: 0, mixWeight: 0, promptSum: 0, outputSum: 0, loadWeight: 0, loadSum: 0, gpu: new Map() };
        this.acc.set(m.model, a);
      }
      a.requests += s.requests;
      a.met += s.met;
      if (s.finished > 0 && s.promptTokens > 0 && s.outputTokens > 0) {
        a.mixWeight += s.finished;
        a.promptSum += s.promptTokens;
        a.outputSum += s.outputTokens;
      }
      const serving = m.endpoints.reduce((x, e) => x + e.servingInstances, 0);
      if (s.requests > 0 && serving > 0 && Number.isFinite(m.tokensPerS)) {
        a.loadWeight += s.requests;
        a.loadSum += (s.requests * m.tokensPerS) / serving;
        for (const e of m.endpoints) if (e.servingInstances > 0) a.gpu.set(e.gpu, (a.gpu.get(e.gpu) ?? 0) + (s.requests * e.servingInstances) / serving);
      }
    }
  }

  /** What was observed since the last take (undefined when nothing was), and starts over. */
  take(): SloHour | undefined {
    if (this.fromMs === Infinity) return undefined;
    const models = new Map<ModelName, ModelSloHour>();
    for (const [model, a] of this.acc) {
      models.set(model, {
        requests: a.requests,
        met: a.met,
        ...(a.mixWeight > 0 ? { mix: { promptTokens: a.promptSum / a.mixWeight, outputTokens: a.outputSum / a.mixWeight } } : {}),
        ...(a.loadWeight > 0 ? { tokensPerSPerInstance: a.loadSum / a.loadWeight } : {}),
        gpuShare: Object.fromEntries([...a.gpu].map(([g, w]) => [g, a.loadWeight > 0 ? w / a.loadWeight : 0])),
      });
    }
    const out = { fromMs: this.fromMs, toMs: this.toMs, models };
    this.acc = new Map();
    this.fromMs = Infinity;
    this.toMs = -Infinity;
    return out;
  }
}

/**
 * The request mix per model in the regions' latest telemetry (their running totals since each region started, summed
 * over regions), for a round without an hour of it (no SloWindow fed): models no region reports a finished request for
 * are absent.
 */
export function latestMix(telemetry: ReadonlyMap<RegionName, RegionTelemetry>): Map<ModelName, RequestMix> {
  const sums = new Map<ModelName, { w: number; p: number; o: number }>();
  for (const t of telemetry.values()) {
    for (const m of t.models) {
      const s = m.slo;
      if (s === undefined || !(s.finished > 0 && s.promptTokens > 0 && s.outputTokens > 0)) continue;
      const x = sums.get(m.model) ?? { w: 0, p: 0, o: 0 };
      x.w += s.finished;
      x.p += s.promptTokens;
      x.o += s.outputTokens;
      sums.set(m.model, x);
    }
  }
  return new Map([...sums].map(([m, x]) => [m, { promptTokens: x.p / x.w, outputTokens: x.o / x.w }]));
}

/** What `now`'s totals add to `before`'s; all of `now` when any total went down (the region restarted). */
function sinceThen(now: SloTelemetry, before: SloTelemetry): SloTelemetry {
  const restarted = now.requests < before.requests || now.met < before.met || now.finished < before.finished || now.promptTokens < before.promptTokens || now.outputTokens < before.outputTokens;
  if (restarted) return now;
  return { requests: now.requests - before.requests, met: now.met - before.met, finished: now.finished - before.finished, promptTokens: now.promptTokens - before.promptTokens, outputTokens: now.outputTokens - before.outputTokens };
}
