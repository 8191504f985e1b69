/**
 * Fixtures for the plans site tests: a 2-region, 2-model fleet with 8 days of synthetic history, reports made by
 * the real planner (forecaster + HiGHS), a PlannerLoop over region links that record the targets they receive,
 * and the site (planner/routes.ts) with its own metrics registry and a log that keeps every line. With `dir`, the
 * reports are kept in a FilePlanStore there, and a site built again on the same `dir` (a restart) serves the plans
 * it finds instead of making new ones.
 */
import { WallClock } from "../../core/clock.js";
import { createLogger } from "../../core/log.js";
import { createRegistry, type Registry } from "../../core/metrics.js";
import type { RegionTargets, TargetsAck } from "../../core/ports.js";
import { MemoryHistory, type DemandSample } from "../../forecasts/history.js";
import { DEFAULT_FORECASTER_NAME, createForecaster } from "../../forecasts/registry.js";
import type { Forecaster } from "../../forecasts/forecaster.js";
import { FakeRegionLink } from "./fake-link.js";
import type { Fleet } from "../../planner/fleet.js";
import { MemoryLeaderLock } from "../../planner/leader.js";
import { PlannerLoop } from "../../planner/loop.js";
import { runPlan } from "../../planner/plan.js";
import type { PlanReport } from "../../planner/report.js";
import { plansSite, type PlansSite } from "../../planner/routes.js";
import { HighsSolver } from "../../core/solver.js";
import { FilePlanStore } from "../../planner/file-store.js";
import { MemoryPlanStore, type PlanStore } from "../../planner/store.js";

/** A 2-region, 2-model fleet and 8 days of per-minute history with a daily cycle, ending at `nowMs`. */
export async function samplePlanInputs(): Promise<{ fleet: Fleet; history: MemoryHistory; nowMs: number }> {
  const fleet: Fleet = {
    alpha: 0.8,
    beta: 0.2,
    currency: "USD",
    gpus: { "h100-80gb": { holdPerGpu: 5, vmStartPerGpu: 0.4 } },
    models: { "llama2-70b": { "h100-80gb": { gpusPerInstance: 4, tokensPerS: 5000, modelStartCost: 0.5 } }, "llama3.1-8b": { "h100-80gb": { gpusPerInstance: 2, tokensPerS: 18000, modelStartCost: 0.3 } } },
    regions: ["us-east", "us-west"].map((name) => ({
      name,
      capacity: { "h100-80gb": 64 },
      endpoints: [
        { model: "llama2-70b", gpu: "h100-80gb", instances: 4, minInstances: 1, maxInstances: 16, spotInstances: 1 },
        { model: "llama3.1-8b", gpu: "h100-80gb", instances: 2, minInstances: 1, maxInstances: 16, spotInstances: 0 },
      ],
    })),
  };
  const history = new MemoryHistory();
  const start = Date.UTC(2026, 10, 15, 0, 0);
  const minutes = 8 * 1440;
  const samples: DemandSample[] = [];
  for (let i = 0; i < minutes; i++) {
    const day = Math.sin((2 * Math.PI * i) / 1440);
    for (const [model, base] of [["llama2-70b", 20000], ["llama3.1-8b", 30000]] as const) {
      for (const [region, shift] of [["us-east", 0], ["us-west", 0.3]] as const) {
        samples.push({ kind: "iw", model, region, minuteMs: start + i * 60_000, tokensPerS: base * (1 + 0.5 * day + shift + 0.05 * Math.sin(i / 7)) });
        samples.push({ kind: "niw", model, region, minuteMs: start + i * 60_000, tokensPerS: base * 0.1 });
      }
    }
  }
  await history.add(samples);
  return { fleet, history, nowMs: start + minutes * 60_000 };
}

/** A region link that keeps every RegionTargets it is sent. */
export class RecordingLink extends FakeRegionLink {
  readonly sent: RegionTargets[] = [];
  override async sendTargets(targets: RegionTargets): Promise<TargetsAck> {
    this.sent.push(targets);
    return super.sendTargets(targets);
  }
}

export const ADMIN_KEY = "admin-key-for-tests-0001";
export const ADMIN_KEY_2 = "admin-key-for-tests-0002";
export const PLANNER_KEY = "planner-key-for-tests-01";

/** The site over three hourly plans (the newest advisory, awaiting review) and a loop that can act on them. */
export interface SampleSite {
  site: PlansSite;
  store: PlanStore;
  loop: PlannerLoop;
  links: RecordingLink[];
  /** Oldest first. */
  reports: PlanReport[];
  registry: Registry;
  logLines: string[];
  close(): Promise<void>;
}

/**
 * Builds `SampleSite`; plans are made at the history's end − 2 h, − 1 h and at its end (advisory) — unless `dir`
 * already holds plans (see the file comment): then `reports` are those, oldest first.
 */
export async function sampleSite(o: { loginFailDelayMs?: number; dir?: string } = {}): Promise<SampleSite> {
  const { fleet, history, nowMs } = await samplePlanInputs();
  const forecaster: Forecaster = createForecaster({ name: DEFAULT_FORECASTER_NAME });
  const solver = await HighsSolver.create();
  const store: PlanStore = o.dir === undefined ? new MemoryPlanStore() : await FilePlanStore.open(o.dir);
  const reports: PlanReport[] = (await store.list()).reverse();
  for (const [k, at] of (reports.length > 0 ? [] : [nowMs - 7_200_000, nowMs - 3_600_000, nowMs]).entries()) {
    const r = await runPlan({ fleet, history, forecaster, solver, nowMs: at, decisionId: k + 1, advisory: k === 2, strategy: "lt-ua", ...(reports.length > 0 ? { previous: reports.at(-1)! } : {}) });
    reports.push(r);
    await store.put(r);
  }
  const clock = new WallClock();
  const links = ["us-east", "us-west"].map((r) => new RecordingLink(r));
  const logLines: string[] = [];
  const log = createLogger("debug", {}, (l) => logLines.push(l));
  let decision = Math.max(3, ...reports.map((r) => r.decisionId));
  const loop = new PlannerLoop({
    clock,
    intervalMs: 3_600_000,
    lock: new MemoryLeaderLock(clock),
    holder: "test",
    advisory: true,
    links,
    store,
    log,
    plan: (id, previous, trigger) => runPlan({ fleet, history, forecaster, solver, nowMs, decisionId: Math.max(id, ++decision), advisory: true, ...(previous ? { previous } : { previous: reports.at(-1)! }), ...(trigger ? { trigger } : {}) }),
  });
  const registry = createRegistry(false);
  const site = plansSite({ store, keys: { admin: [ADMIN_KEY, ADMIN_KEY_2], planner: [PLANNER_KEY] }, actions: loop, history, clock, log, registry, loginFailDelayMs: o.loginFailDelayMs ?? 300 });
  return { site, store, loop, links, reports, registry, logLines, close: () => forecaster.close() };
}
