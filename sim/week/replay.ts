/**
 * The week replay's event loop (DESIGN "The one rule that keeps the simulator honest"): a seeded workload streamed
 * in virtual time through the running system's own parts — the global router's region choice with its in-flight
 * estimate (router/router-core.ts, SageServe §6.2), each region's runtime on the `sim` actuator (week-wiring.ts: gateway
 * entry `submit`, TargetsStore, controller with the selected strategy), the router's batch tier (intake and
 * Dispatcher, §6.3, over in-memory stores), and the planner's own loop and round (planner/loop.ts, planner/service.ts
 * `planRound`) every simulated hour, reading the history the live recorders write, its targets sent over each
 * region's link. One VirtualClock; engines, telemetry (1 s), controllers, the
 * dispatcher and the batch flush are clock callbacks; the loop drains microtasks every virtual second and awaits
 * the planner at hour boundaries.
 * Wiring: week-wiring.ts; books: books.ts and result.ts.
 */
import { VirtualClock } from "../../core/clock.js";
import type { GenerateRequest } from "../../core/ports.js";
import { HighsSolver } from "../../core/solver.js";
import { configNeedsSolver } from "../../region/runtime/sim-region.js";
import { resolveStrategy } from "../../region/strategies/strategy-registry.js";
import { parseRequestId } from "../../router/queue/types.js";
import { MemoryLeaderLock } from "../../planner/leader.js";
import { PlannerLoop, targetsFor } from "../../planner/loop.js";
import type { PlanReport } from "../../planner/report.js";
import { MemoryPlanStore } from "../../planner/store.js";
import { silentLogger, type Logger } from "../../core/log.js";
import { WorkloadStream, type Arrival } from "../workload/generator.js";
import { IwHooks, NiwHooks, noteNiwSubmitted, noteUnserved, openBooks, sampleActive } from "./books.js";
import { replayCapacity } from "./capacity.js";
import { SloWindow } from "../../planner/slo-window.js";
import { summarize, type WeekResult } from "./result.js";
import type { RunState, WeekOptions } from "./state.js";
import { wireWeek, type WeekWiring } from "./week-wiring.js";
import type { DemandSample } from "../../forecasts/history.js";

export type { RunState, WeekOptions } from "./state.js";

const MINUTE = 60_000;
const HOUR = 3_600_000;
const DRAIN_EVERY_MS = 1000;
/** Microtask turns per drain: a claim reaches its region in ~3, a batch's intake in ~6. */
const DRAIN_TURNS = 20;
/** Events this close before a drain second fire with it (synchronously before it, all earlier ones). */
const DRAIN_EPSILON_MS = 1e-6;

/** Lets pending promise chains (the batch tier's claims, intake, result writes) run while the clock stands still. */
export async function drainMicrotasks(): Promise<void> {
  for (let i = 0; i < DRAIN_TURNS; i++) await Promise.resolve();
}

/**
 * The replay's way of moving a VirtualClock: events fire synchronously, except those at a whole virtual second
 * (telemetry reports, controller passes, the dispatcher's maintenance), which fire one by one with microtasks
 * drained after each — as they run live — so the batch tier's async work (claims, intake, result writes) happens at
 * the instant it started, and a region's report sees what the claims of the report before it dispatched.
 * `due(t)`: whether advancing to `t` reaches such a second (else `advanceToSync` alone will do, without a promise).
 */
export function drainedAdvance(clock: VirtualClock): { advance(to: number): Promise<void>; due(to: number): boolean } {
  let nextDrainMs = 0;
  return {
    due: (to) => to >= nextDrainMs,
    advance: async (to) => {
      while (nextDrainMs <= to) {
        clock.advanceToSync(nextDrainMs - DRAIN_EPSILON_MS);
        await clock.advanceTo(nextDrainMs, DRAIN_TURNS);
        nextDrainMs += DRAIN_EVERY_MS;
      }
      clock.advanceToSync(to);
    },
  };
}

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
  // A fleet whose loading runs zigzag (controller.loading) plans each loading episode with HiGHS.
  const solver = configNeedsSolver(cfg) ? await HighsSolver.create() : undefined;
  const w = wireWeek({ fleet, clock, strategy: resolveStrategy(o.strategy, o.strategyParams ?? {}), seed: workload.seed, historyShiftMs: warmupDays * 24 * HOUR, ...(solver === undefined ? {} : { solver }) });
  const s = openBooks(o, clock, stream.summary, w.regions.length);
  s.regions = w.regions;
  await warmUp(o, w, warmupDays, stream.summary.rateScale);
  const niw = batchSide(s, w, models);
  clock.every(MINUTE, () => {
    niw.flush();
    w.regions.forEach((r, ri) => sampleActive(s, ri, r.sim.actuator.instances()));
  });

  const plan = plannerLoop(o, w, clock);
  const planHour = async (hour: number) => {
    const t0 = performance.now();
    const report = await plan();
    s.plannerMs += performance.now() - t0;
    const acks = report.acks.filter((a) => a.accepted).length;
    s.plans.push({ hour, decisionId: report.decisionId, acks, endpoints: cfg.regions.map((r) => targetsFor(report, r.name).endpoints) });
  };

  const { advance, due } = drainedAdvance(clock);
  const every = o.progressEveryRequests ?? 50_000;
  let nextHourMs = 0;
  let n = 0;
  for (;;) {
    const a = stream.next();
    const at = a?.atMs ?? s.durationMs;
    while (nextHourMs <= at && nextHourMs < s.durationMs) {
      await advance(nextHourMs);
      await planHour(Math.round(nextHourMs / HOUR));
      nextHourMs += HOUR;
    }
    if (due(at)) await advance(at);
    else clock.advanceToSync(at);
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
  await advance(s.durationMs + (o.tailMs ?? HOUR));
  s.wallMs = performance.now() - wallStart;
  await w.close();
  return summarize(s);
}

/**
 * The planning loop the `tidegate planner` process runs (planner/loop.ts: leader lock, decision ids, targets to
 * every region's link by `targetsFor`, acks, the report stored), with the planner's round (planner-input.ts), its
 * rounds run by the replay at each simulated hour instead of on a timer. Resolves with the round's report; a failed
 * round fails the run.
 */
function plannerLoop(o: WeekOptions, w: WeekWiring, clock: VirtualClock): () => Promise<PlanReport> {
  // The SLO the regions measure, fed as `tidegate planner` feeds it: every telemetry report of every region.
  const sloWindow = new SloWindow();
  w.onTelemetry((_ri, t) => sloWindow.observe(t));
  let report: PlanReport | undefined;
  let failure: unknown;
  const log: Logger = { ...silentLogger, error: (_msg, fields) => void (failure = fields?.err ?? _msg) };
  const loop = new PlannerLoop({
    clock,
    intervalMs: o.fleet.config.planner.intervalMs,
    lock: new MemoryLeaderLock(clock),
    holder: "replay",
    advisory: false,
    links: w.regions.map((r) => r.link),
    store: new MemoryPlanStore(),
    plan: o.planner.round({ clock, fleet: o.fleet, history: w.plannerHistory, telemetry: w.telemetry, tps: replayCapacity(o.fleet), sloWindow }),
    log,
    onReport: (r) => void (report = r),
  });
  return async () => {
    report = undefined;
    failure = undefined;
    await loop.tick();
    if (report === undefined) throw new Error(`planning round failed: ${failure instanceof Error ? failure.message : String(failure)}`, { cause: failure });
    return report;
  };
}

/**
 * One interactive request, the way the live router sends it (router/router-core.ts `RouterCore.submit`, the
 * callback shape of dispatchWithRetry over the same walk): the selector picks a region (SageServe §6.2) and notes the
 * request in its in-flight estimate; the region's gateway routes it (the link's `submit`, the same books as a
 * stream); a region with no serving instance refuses and is skipped for the next choice. A request no region takes
 * is unserved.
 */
function interactive(s: RunState, w: WeekWiring, a: Arrival, n: number): void {
  s.iw++;
  const mi = a.model;
  const model = s.models[mi]!;
  s.tokensHourly[mi]![Math.floor(a.atMs / HOUR)]! += a.promptTokens + a.outputTokens;
  const req = request(w, model, a, n, 0);
  if (w.router.submit(req, s.o.workload.regions[a.region]!.name, new IwHooks(s, mi, a.atMs, req.maxTokens)) === undefined) noteUnserved(s, mi, a.atMs);
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
 * The batch side, as a Batch API user and the router's batch tier see it: each minute's arrivals of a model become
 * one input file and one batch (what `POST /v1/files` and `POST /v1/batches` store, expiring after the workload's
 * deadline), taken in by the Dispatcher's intake and dispatched by it (router/dispatch/dispatcher.ts: capacity
 * signals from every region's telemetry, SageServe §6.3, with the config's fill policy, leases, maintenance,
 * expiry and finalization) over the regions' links. Requests are completions whose prompt is 4 characters per
 * token (the intake's estimate). The books hear each request finish through the links; files older than two
 * minutes are deleted, as a client that fetched its results would.
 */
function batchSide(s: RunState, w: WeekWiring, models: string[]): { submit(a: Arrival): void; flush(): void } {
  const { store, files } = w.batch;
  const buffer: Arrival[][] = models.map(() => []);
  /** Per batch: each request's deadline, by index, and whether it finished (a lease that ran out sends it again). */
  const deadlines = new Map<string, { deadlineMs: Float64Array; done: Uint8Array }>();
  let seq = 0;
  for (const r of w.regions) {
    r.link.onDone = (req, atMs) => {
      const { batchId, index } = parseRequestId(req.id);
      const d = deadlines.get(batchId);
      if (d === undefined) return;
      if (d.done[index] === 1) {
        s.niw.duplicates++;
        return;
      }
      d.done[index] = 1;
      new NiwHooks(s, d.deadlineMs[index]!, () => undefined).onDone(atMs);
    };
  }
  const create = async (model: string, batch: Arrival[], now: number) => {
    const id = `replay${seq++}`;
    const lines = batch.map((a, i) => {
      const req = request(w, model, a, i, 1);
      return JSON.stringify({ custom_id: `r${i}`, method: "POST", url: "/v1/completions", body: { model, prompt: "a".repeat(4 * req.promptTokens), max_tokens: req.maxTokens } });
    });
    const content = Buffer.from(lines.join("\n"));
    await files.put({ id: `file_${id}`, bytes: content.length, createdAtMs: now, filename: `${id}.jsonl`, purpose: "batch" }, content);
    deadlines.set(`batch_${id}`, { deadlineMs: Float64Array.from(batch, (a) => a.deadlineMs), done: new Uint8Array(batch.length) });
    await store.createBatch({ id: `batch_${id}`, endpoint: "/v1/completions", inputFileId: `file_${id}`, completionWindow: "24h", metadata: null, createdAtMs: now, expiresAtMs: now + s.o.workload.niwDeadlineMs });
    w.batch.dispatcher!.startIntake((await store.getBatch(`batch_${id}`))!);
  };
  const sweep = async (now: number) => {
    for (const f of await files.list()) if (f.createdAtMs <= now - 120_000) await files.delete(f.id);
    for (const id of deadlines.keys()) {
      const b = await store.getBatch(id);
      if (b === undefined || b.status === "completed" || b.status === "expired" || b.status === "failed" || b.status === "cancelled") deadlines.delete(id);
    }
  };
  return {
    submit: (a) => {
      buffer[a.model]!.push(a);
      noteNiwSubmitted(s, a.deadlineMs);
    },
    flush: () => {
      const now = s.clock.now();
      buffer.forEach((buf, mi) => {
        if (buf.length === 0) return;
        void create(models[mi]!, buf.splice(0), now);
      });
      void sweep(now);
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
