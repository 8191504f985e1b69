/**
 * The week replay (DESIGN "The one rule that keeps the simulator honest"): a seeded workload streamed in virtual
 * time through the real policies — the global router's RegionSelector (router/selector.ts, SageServe §6.2), the
 * region gateway's endpoint + JSQ pick (region/gateway), the queue manager's dispatch policy (router/dispatch,
 * §6.3) over the in-memory queue state (router/queue/memory.ts), the simulated engines' analytic core
 * (region/engines/sim), the region controllers with the selected strategy (region/controller, region/strategies)
 * and the hourly planner (`HourlyPlanner`). One VirtualClock; engines, telemetry (1 s), controllers and the NIW
 * flush are clock callbacks; the loop awaits only at hour boundaries (the planner may be async).
 */
import { VirtualClock } from "../../core/clock.js";
import { MODEL_SPECS, kvBytesPerToken } from "../../core/models.js";
import type { RegionTargets } from "../../core/ports.js";
import type { LedgerTotals } from "../../region/actuator/ledger.js";
import { resolveStrategy } from "../../region/strategies/registry.js";
import { capacitySignals, requestPriority } from "../../router/dispatch/policy.js";
import { MemoryQueueState } from "../../router/queue/memory.js";
import { RegionSelector } from "../../router/selector.js";
import { WorkloadStream, type Arrival } from "../workload/generator.js";
import type { WorkloadSpec } from "../workload/spec.js";
import { instanceTokensPerS } from "./capacity.js";
import type { FleetSpec } from "./fleet.js";
import { Histogram, HistogramSeries } from "./histogram.js";
import type { HourlyPlanner } from "./planner.js";
import { ReplayRegion } from "./region.js";
import { summarize, type WeekResult } from "./result.js";

export interface WeekOptions {
  fleet: FleetSpec;
  workload: WorkloadSpec;
  strategy: string;
  strategyParams?: Record<string, number>;
  planner: HourlyPlanner;
  /** Virtual time after the last arrival to let in-flight work finish (ms, default 1 h). */
  tailMs?: number;
  /** Called about every `progressEveryRequests` requests with the fraction done. */
  onProgress?: (p: { fraction: number; requests: number; virtualMs: number }) => void;
  progressEveryRequests?: number;
  /** Include per-minute p95 TTFT per model in the result (burst analysis). */
  minuteSeries?: boolean;
  /**
   * Days of demand history the planner has when the replay starts (default 1): the same clients' requests of the
   * preceding ServeGen day(s), generated at the same rate scale and only recorded (a running system has history;
   * without it the first hours plan from nothing).
   */
  warmupDays?: number;
}

const MINUTE = 60_000;
const HOUR = 3_600_000;

/** Mutable state of one run, shared with result.ts. */
export interface RunState {
  o: WeekOptions;
  clock: VirtualClock;
  regions: ReplayRegion[];
  models: string[];
  durationMs: number;
  ttft: Histogram[];
  e2e: Histogram[];
  ttftHourly: HistogramSeries[];
  /** Per-minute TTFT histograms, only with `minuteSeries` (empty otherwise: a week of them is ~340 MB). */
  ttftMinute: HistogramSeries[];
  /** [model][region][hour]: Σ over minute samples of active (serving + deploying) instances. */
  activeSamples: Float64Array[][];
  tokensHourly: Float64Array[];
  iw: number;
  iwUnserved: number;
  niw: { submitted: number; done: number; withinDeadline: number; late: number; pendingByDeadlineHour: Int32Array };
  plans: { hour: number; decisionId: number; acks: number; endpoints: RegionTargets["endpoints"][] }[];
  plannerMs: number;
  wallMs: number;
  /** Per region: the ledger's per-model totals at the end of the run (before the tail). */
  ledgers: Map<string, LedgerTotals>[];
  summary: WorkloadStream["summary"];
}

/** Records one interactive request's TTFT and E2E (methods, not closures: 10M requests a week). */
class IwHooks {
  constructor(
    private readonly s: RunState,
    private readonly mi: number,
    private readonly atMs: number,
  ) {}

  onFirstToken(t: number): void {
    const ms = t - this.atMs;
    this.s.ttft[this.mi]!.add(ms);
    this.s.ttftHourly[this.mi]!.add(this.atMs, ms);
    this.s.ttftMinute[this.mi]?.add(this.atMs, ms);
  }

  onDone(t: number): void {
    this.s.e2e[this.mi]!.add(t - this.atMs);
  }
}

/** Runs one strategy over the workload; resolves with the run's figures. */
export async function runWeek(o: WeekOptions): Promise<WeekResult> {
  const wallStart = performance.now();
  const { fleet, workload } = o;
  const cfg = fleet.config;
  const clock = new VirtualClock(0);
  const strategy = resolveStrategy(o.strategy, o.strategyParams ?? {});
  const regions = cfg.regions.map((_, i) => new ReplayRegion(clock, fleet, i, strategy, workload.seed));
  const regionIndex = new Map(regions.map((r, i) => [r.name, i]));
  const models = workload.models.map((m) => m.name);
  const durationMs = workload.days * 24 * HOUR;
  const minutes = Math.ceil(durationMs / MINUTE) + 1;
  const hours = Math.ceil(durationMs / HOUR) + 1;
  const stream = new WorkloadStream(workload);
  const selector = new RegionSelector({
    clock,
    regions: cfg.regions.map((r) => ({ name: r.name, proximity: r.proximity, models: [...new Set(r.endpoints.map((e) => e.model))] })),
    memoryThreshold: cfg.router.memoryThreshold,
    telemetryStaleMs: cfg.router.telemetryStaleMs,
    instanceKvBytes: (model) => regions[0]!.instanceKvBytes(model),
  });
  const s: RunState = {
    o, clock, regions, models, durationMs,
    ttft: models.map(() => new Histogram()),
    e2e: models.map(() => new Histogram()),
    ttftHourly: models.map(() => new HistogramSeries(hours, HOUR)),
    ttftMinute: o.minuteSeries === true ? models.map(() => new HistogramSeries(minutes, MINUTE)) : [],
    activeSamples: models.map(() => regions.map(() => new Float64Array(hours))),
    tokensHourly: models.map(() => new Float64Array(hours)),
    iw: 0, iwUnserved: 0,
    niw: { submitted: 0, done: 0, withinDeadline: 0, late: 0, pendingByDeadlineHour: new Int32Array(hours + Math.ceil(workload.niwDeadlineMs / HOUR) + 2) },
    plans: [], plannerMs: 0, wallMs: 0, summary: stream.summary, ledgers: [],
  };
  const kvPerToken = models.map((m) => kvBytesPerToken(MODEL_SPECS[m]!));
  // Planner inputs: interactive demand per (model, client region) per minute, batch tokens per (model, hour).
  const warmupDays = Math.max(0, Math.min(o.warmupDays ?? 1, workload.startDay));
  const warm = Math.round(warmupDays * 1440);
  const demand = models.map(() => workload.regions.map(() => new Float64Array(warm + minutes)));
  const niwTokensHour = models.map(() => new Float64Array(hours));
  const niwDemand = models.map(() => workload.regions.map(() => new Float64Array(warm + minutes)));
  if (warm > 0) {
    const before = new WorkloadStream({ ...workload, startDay: workload.startDay - warmupDays, days: warmupDays, bursts: [] }, stream.summary.rateScale);
    for (let a = before.next(); a !== undefined; a = before.next()) {
      const k = Math.floor(a.atMs / MINUTE);
      (a.niw ? niwDemand : demand)[a.model]![a.region]![k]! += (a.promptTokens + a.outputTokens) / 60;
    }
  }
  const tps = new Map<string, number>();
  models.forEach((m, mi) => {
    const mc = cfg.models.find((x) => x.name === m)!;
    for (const [gpu, tp] of Object.entries(mc.gpusPerInstance)) tps.set(`${m}/${gpu}`, instanceTokensPerS(m, gpu, tp, fleet.engines[m]!, stream.summary.meanPromptTokens[mi]!, stream.summary.meanOutputTokens[mi]!, fleet.plannedUtilization));
  });

  // Queue manager: NIW arrivals are flushed each minute as one batch per model into the queue state.
  const queue = new MemoryQueueState();
  const niwBuffer: Arrival[][] = models.map(() => []);
  let batchSeq = 0;
  const flushNiw = () => {
    const now = clock.now();
    niwBuffer.forEach((buf, mi) => {
      if (buf.length === 0) return;
      const id = `batch_${batchSeq++}`;
      queue.createBatch({ id, endpoint: "/v1/chat/completions", inputFileId: "replay", completionWindow: "24h", metadata: null, createdAtMs: now, expiresAtMs: now + workload.niwDeadlineMs });
      queue.stage(id, buf.map((a, index) => ({ index, payload: `${a.promptTokens},${a.outputTokens},${a.deadlineMs}` })));
      queue.activate(id, models[mi]!, buf.length, now);
      buf.length = 0;
    });
  };
  const queued = new Set(models);
  const thresholds = { dispatchOneBelow: cfg.queue.dispatchOneBelow, dispatchTwoBelow: cfg.queue.dispatchTwoBelow };
  const dispatchNiw = (ri: number) => {
    const region = regions[ri]!;
    const t = region.last!;
    const now = clock.now();
    for (const sig of capacitySignals(t, queued, thresholds)) {
      for (const c of queue.claim(sig.model, sig.slots, now, cfg.queue.leaseMs)) {
        const [p, out, deadline] = c.payload.split(",").map(Number) as [number, number, number];
        const deadlineHour = Math.floor(deadline / HOUR);
        const ok = region.submit(sig.model, p, out, requestPriority(c.enqueuedAtMs, now, cfg.queue.promoteAfterMs), {
          onFirstToken: () => undefined,
          onDone: (atMs) => {
            queue.complete(c.requestId, { ok: true, line: "" }, atMs);
            s.niw.done++;
            s.niw.pendingByDeadlineHour[deadlineHour]!--;
            if (atMs <= deadline) s.niw.withinDeadline++;
            else s.niw.late++;
          },
        });
        if (!ok) throw new Error(`capacity signal from ${region.name} for ${sig.model} without a serving instance`);
      }
    }
  };

  // Telemetry every second: the router's selector and the queue manager read it; the controller reads region.last.
  const telemetryMs = 1000;
  regions.forEach((r, ri) => {
    selector.onTelemetry(r.telemetry());
    clock.every(telemetryMs, () => {
      selector.onTelemetry(r.telemetry());
      dispatchNiw(ri);
    });
    r.controller.start(cfg.controller.reconcileIntervalMs);
  });
  clock.every(MINUTE, () => {
    flushNiw();
    const h = Math.floor(clock.now() / HOUR);
    regions.forEach((r, ri) => {
      const counts = r.counts();
      models.forEach((m, mi) => {
        const c = counts.get(m);
        if (c !== undefined) s.activeSamples[mi]![ri]![h]! += c.serving + c.provisioning + c.loading + c.draining;
      });
    });
  });

  const plan = async (hour: number) => {
    const t0 = performance.now();
    const now = clock.now();
    const minute = Math.floor(now / MINUTE);
    const targets = await o.planner.plan({
      nowMs: now,
      decisionId: hour + 1,
      fleet,
      history: (model, region) => demand[models.indexOf(model)]![workload.regions.findIndex((r) => r.name === region)]?.subarray(0, warm + minute) ?? new Float64Array(0),
      niwTokensPerSLastHour: (model) => (hour > 0 ? niwTokensHour[models.indexOf(model)]![hour - 1]! / 3600 : 0),
      niwHistory: (model, region) => niwDemand[models.indexOf(model)]?.[workload.regions.findIndex((r) => r.name === region)]?.subarray(0, warm + minute) ?? new Float64Array(0),
      historyStartMs: -warm * MINUTE,
      current: (model, region, gpu) => {
        const r = regions[regionIndex.get(region)!]!;
        return r.actuator.instances().filter((i) => i.model === model && i.gpu === gpu && (i.state === "serving" || i.state === "provisioning" || i.state === "loading")).length;
      },
      spot: (model, region, gpu) => regions[regionIndex.get(region)!]!.actuator.instances().filter((i) => i.model === model && i.gpu === gpu && i.state === "spot").length,
      tps: (model, gpu) => tps.get(`${model}/${gpu}`)!,
    });
    s.plannerMs += performance.now() - t0;
    let acks = 0;
    for (const t of targets) {
      const r = regions[regionIndex.get(t.region)!]!;
      if (r.gateway.acceptTargets(t).accepted) acks++;
    }
    s.plans.push({ hour, decisionId: hour + 1, acks, endpoints: targets.map((t) => t.endpoints) });
  };

  const every = o.progressEveryRequests ?? 50_000;
  let nextHourMs = 0;
  let n = 0;
  for (;;) {
    const a = stream.next();
    const at = a?.atMs ?? durationMs;
    while (nextHourMs <= at && nextHourMs < durationMs) {
      clock.advanceToSync(nextHourMs);
      await plan(Math.round(nextHourMs / HOUR));
      nextHourMs += HOUR;
    }
    clock.advanceToSync(at);
    if (a === undefined) break;
    n++;
    if (o.onProgress !== undefined && n % every === 0) o.onProgress({ fraction: at / durationMs, requests: n, virtualMs: at });
    const mi = a.model;
    const tokens = a.promptTokens + a.outputTokens;
    const hour = Math.floor(at / HOUR);
    if (a.niw) {
      niwBuffer[mi]!.push(a);
      niwTokensHour[mi]![hour]! += tokens;
      niwDemand[mi]![a.region]![warm + Math.floor(at / MINUTE)]! += tokens / 60;
      s.niw.submitted++;
      s.niw.pendingByDeadlineHour[Math.floor(a.deadlineMs / HOUR)]!++;
      continue;
    }
    s.iw++;
    demand[mi]![a.region]![warm + Math.floor(at / MINUTE)]! += tokens / 60;
    s.tokensHourly[mi]![hour]! += tokens;
    const model = models[mi]!;
    const sel = selector.select(model, workload.regions[a.region]!.name);
    const region = sel === undefined ? undefined : regions[regionIndex.get(sel.region)!];
    if (region === undefined) {
      s.iwUnserved++;
      continue;
    }
    selector.noteDispatch(region.name, model, a.promptTokens * kvPerToken[mi]!);
    const ok = region.submit(model, a.promptTokens, a.outputTokens, 0, new IwHooks(s, mi, at));
    if (!ok) s.iwUnserved++;
  }
  flushNiw();
  // GPU time is charged over [0, duration); the tail only lets in-flight requests finish (no scaling).
  for (const r of regions) {
    r.controller.stop();
    r.ledger.closeAt(durationMs);
  }
  s.ledgers = regions.map((r) => structuredClone(r.ledger.byModel));
  clock.advanceToSync(durationMs + (o.tailMs ?? HOUR));
  s.wallMs = performance.now() - wallStart;
  return summarize(s);
}
