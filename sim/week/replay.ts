/**
 * The week replay's event loop (DESIGN "The one rule that keeps the simulator honest"): a seeded workload streamed
 * in virtual time through the running system's own parts — the global router's RegionSelector with its in-flight
 * estimate (router/selector.ts, SageServe §6.2), each region's runtime on the `sim` actuator (wiring.ts: gateway
 * entry `submit`, TargetsStore, controller with the selected strategy), the queue manager's dispatch policy
 * (router/dispatch/policy.ts, §6.3) over the in-memory queue state, and the hourly planner reading the history the
 * live recorders write, its targets sent over each region's link. One VirtualClock; engines, telemetry (1 s),
 * controllers and the NIW flush are clock callbacks; the loop awaits only at hour boundaries (the planner is async).
 * Wiring: wiring.ts; books: books.ts and result.ts.
 */
import { VirtualClock } from "../../core/clock.js";
import type { GenerateRequest } from "../../core/ports.js";
import { resolveStrategy } from "../../region/strategies/registry.js";
import { capacitySignals, requestPriority } from "../../router/dispatch/policy.js";
import { MemoryQueueState } from "../../router/queue/memory.js";
import { submitWithRetry } from "../../router/relay.js";
import { WorkloadStream, type Arrival } from "../workload/generator.js";
import { IwHooks, NiwHooks, noteNiwSubmitted, openBooks, sampleActive } from "./books.js";
import { instanceTokensPerS } from "./capacity.js";
import { summarize, type WeekResult } from "./result.js";
import type { RunState, WeekOptions } from "./state.js";
import { wireWeek, type WeekWiring } from "./wiring.js";
import type { DemandSample } from "../../forecasts/history.js";

export type { RunState, WeekOptions } from "./state.js";

const MINUTE = 60_000;
const HOUR = 3_600_000;
const NO_BODY: Record<string, unknown> = Object.freeze({}) as Record<string, unknown>;

/** Runs one strategy over the workload; resolves with the run's figures. */
export async function runWeek(o: WeekOptions): Promise<WeekResult> {
  const wallStart = performance.now();
  const { fleet, workload } = o;
  const cfg = fleet.config;
  const clock = new VirtualClock(0);
  const stream = new WorkloadStream(workload);
  const models = workload.models.map((m) => m.name);
  const warmupDays = Math.max(0, Math.min(o.warmupDays ?? 1, workload.startDay));
  const w = wireWeek({ fleet, clock, strategy: resolveStrategy(o.strategy, o.strategyParams ?? {}), seed: workload.seed, models, historyShiftMs: warmupDays * 24 * HOUR });
  const s = openBooks(o, clock, stream.summary, w.regions.length);
  s.regions = w.regions;
  await warmUp(o, w, warmupDays, stream.summary.rateScale);
  const tps = new Map<string, number>();
  models.forEach((m, mi) => {
    const mc = cfg.models.find((x) => x.name === m)!;
    for (const [gpu, tp] of Object.entries(mc.gpusPerInstance)) tps.set(`${m}/${gpu}`, instanceTokensPerS(m, gpu, tp, fleet.engines[m]!, stream.summary.meanPromptTokens[mi]!, stream.summary.meanOutputTokens[mi]!, fleet.plannedUtilization));
  });
  const niw = batchQueue(s, w, models);
  clock.every(MINUTE, () => {
    niw.flush();
    w.regions.forEach((r, ri) => sampleActive(s, ri, r.sim.actuator.instances()));
  });

  const plan = async (hour: number) => {
    const t0 = performance.now();
    const targets = await o.planner.plan({ nowMs: clock.now(), decisionId: hour + 1, fleet, history: w.history, historyShiftMs: w.historyShiftMs, telemetry: w.telemetry, tps: (model, gpu) => tps.get(`${model}/${gpu}`)! });
    s.plannerMs += performance.now() - t0;
    let acks = 0;
    for (const t of targets) if ((await w.regions[w.regionIndex.get(t.region)!]!.link.sendTargets(t)).accepted) acks++;
    s.plans.push({ hour, decisionId: hour + 1, acks, endpoints: targets.map((t) => t.endpoints) });
  };

  const every = o.progressEveryRequests ?? 50_000;
  let nextHourMs = 0;
  let n = 0;
  for (;;) {
    const a = stream.next();
    const at = a?.atMs ?? s.durationMs;
    while (nextHourMs <= at && nextHourMs < s.durationMs) {
      clock.advanceToSync(nextHourMs);
      await plan(Math.round(nextHourMs / HOUR));
      nextHourMs += HOUR;
    }
    clock.advanceToSync(at);
    if (a === undefined) break;
    n++;
    if (o.onProgress !== undefined && n % every === 0) o.onProgress({ fraction: at / s.durationMs, requests: n, virtualMs: at });
    if (a.niw) niw.submit(a);
    else interactive(s, w, a, n);
  }
  niw.flush();
  // GPU time is charged over [0, duration); the tail only lets in-flight requests finish (no scaling).
  for (const r of w.regions) {
    r.sim.runtime.close();
    r.ledger.closeAt(s.durationMs);
  }
  s.ledgers = w.regions.map((r) => structuredClone(r.ledger.byModel));
  clock.advanceToSync(s.durationMs + (o.tailMs ?? HOUR));
  s.wallMs = performance.now() - wallStart;
  await w.close();
  return summarize(s);
}

/**
 * One interactive request, the way the live router sends it (router/relay.ts `submitWithRetry`, the callback shape
 * of dispatchWithRetry): the RegionSelector picks a region (SageServe §6.2) and notes the request in its in-flight
 * estimate; the region's gateway routes it (`submit`, the same books as a stream); a region with no serving
 * instance is skipped for the next choice. A request no region takes is unserved.
 */
function interactive(s: RunState, w: WeekWiring, a: Arrival, n: number): void {
  s.iw++;
  const mi = a.model;
  const model = s.models[mi]!;
  s.tokensHourly[mi]![Math.floor(a.atMs / HOUR)]! += a.promptTokens + a.outputTokens;
  const req = request(w, model, a, n, 0);
  if (submitWithRetry(w.selector, (region) => w.regions[w.regionIndex.get(region)!]?.sim.gateway, req, s.o.workload.regions[a.region]!.name, new IwHooks(s, mi, a.atMs)) === undefined) s.iwUnserved++;
}

/** The request of an arrival, cut to fit one instance's KV capacity (a property of the synthetic workload). */
function request(w: WeekWiring, model: string, a: Arrival, n: number, priority: 0 | 1): GenerateRequest {
  let promptTokens = a.promptTokens;
  let maxTokens = a.outputTokens;
  const cap = w.capacityTokens(model);
  if (promptTokens + maxTokens > cap) {
    maxTokens = Math.min(maxTokens, cap >> 1);
    promptTokens = cap - maxTokens;
  }
  return { id: String(n), model, kind: "chat", promptTokens, maxTokens, priority, body: NO_BODY };
}

/**
 * The batch side: arrivals are flushed each minute as one batch per model into the queue state; each region's
 * telemetry is a capacity signal (SageServe §6.3, router/dispatch/policy.ts) that claims requests with a lease and
 * sends them to the region's gateway at priority 1 (0 once older than promoteAfterMs); each dispatch is recorded
 * for the planner's NIW history as the live queue manager records it.
 */
function batchQueue(s: RunState, w: WeekWiring, models: string[]): { submit(a: Arrival): void; flush(): void } {
  const cfg = s.o.fleet.config;
  const queue = new MemoryQueueState();
  const buffer: Arrival[][] = models.map(() => []);
  const queued = new Set(models);
  const thresholds = { dispatchOneBelow: cfg.queue.dispatchOneBelow, dispatchTwoBelow: cfg.queue.dispatchTwoBelow };
  let batchSeq = 0;
  let reqSeq = 0;
  w.onTelemetry((ri, t) => {
    const region = w.regions[ri]!;
    const now = s.clock.now();
    for (const sig of capacitySignals(t, queued, thresholds)) {
      for (const c of queue.claim(sig.model, sig.slots, now, cfg.queue.leaseMs)) {
        const [p, out, deadline] = c.payload.split(",").map(Number) as [number, number, number];
        const priority = requestPriority(c.enqueuedAtMs, now, cfg.queue.promoteAfterMs);
        const req = request(w, sig.model, { atMs: now, model: 0, region: 0, promptTokens: p, outputTokens: out, niw: true, deadlineMs: deadline }, --reqSeq, priority);
        const hooks = new NiwHooks(s, deadline, (atMs) => queue.complete(c.requestId, { ok: true, line: "" }, atMs));
        if (region.sim.gateway.submit(req, hooks) === undefined) throw new Error(`capacity signal from ${region.name} for ${sig.model} without a serving instance`);
        w.niwRecorder.record(sig.model, region.name, req.promptTokens + req.maxTokens, now);
      }
    }
  });
  return {
    submit: (a) => {
      buffer[a.model]!.push(a);
      noteNiwSubmitted(s, a.deadlineMs);
    },
    flush: () => {
      const now = s.clock.now();
      buffer.forEach((buf, mi) => {
        if (buf.length === 0) return;
        const id = `batch_${batchSeq++}`;
        queue.createBatch({ id, endpoint: "/v1/chat/completions", inputFileId: "replay", completionWindow: "24h", metadata: null, createdAtMs: now, expiresAtMs: now + s.o.workload.niwDeadlineMs });
        queue.stage(id, buf.map((a, index) => ({ index, payload: `${a.promptTokens},${a.outputTokens},${a.deadlineMs}` })));
        queue.activate(id, models[mi]!, buf.length, now);
        buf.length = 0;
      });
    },
  };
}

/**
 * The planner's history before the replay starts: the same clients' requests of the preceding ServeGen day(s),
 * recorded per client region (interactive tokens/s and batch tokens/s per minute) — what the recorders would have
 * written had those days run here.
 */
async function warmUp(o: WeekOptions, w: WeekWiring, days: number, rateScale: number[]): Promise<void> {
  if (days <= 0) return;
  const workload = o.workload;
  const before = new WorkloadStream({ ...workload, startDay: workload.startDay - days, days, bursts: [] }, rateScale);
  const minutes = Math.round(days * 1440);
  const models = workload.models.map((m) => m.name);
  const iw = models.map(() => workload.regions.map(() => new Float64Array(minutes)));
  const niw = models.map(() => workload.regions.map(() => new Float64Array(minutes)));
  for (let a = before.next(); a !== undefined; a = before.next()) {
    const k = Math.floor(a.atMs / MINUTE);
    if (k < minutes) (a.niw ? niw : iw)[a.model]![a.region]![k]! += (a.promptTokens + a.outputTokens) / 60;
  }
  const samples: DemandSample[] = [];
  models.forEach((model, mi) =>
    workload.regions.forEach((r, ri) => {
      for (let k = 0; k < minutes; k++) {
        samples.push({ kind: "iw", model, region: r.name, minuteMs: k * MINUTE, tokensPerS: iw[mi]![ri]![k]! });
        samples.push({ kind: "niw", model, region: r.name, minuteMs: k * MINUTE, tokensPerS: niw[mi]![ri]![k]! });
      }
    }),
  );
  await w.history.add(samples);
}
