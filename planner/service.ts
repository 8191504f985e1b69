/**
 * The planner tier wired for a process: forecaster + HiGHS + the planning loop over the regions' links, recording
 * their telemetry into demand history while this replica leads, and into the SLO window each round reads (every
 * replica feeds it, so a new leader's first round judges the span since this replica started). `tidegate planner` runs it on Redis stores;
 * `tidegate dev` on files in its data directory (file-store.ts, file-history.ts). The stores, lock and links come from the caller; this file only wires.
 */
import type { Clock, Timer } from "../core/clock.js";
import type { TidegateConfig } from "../core/config.js";
import type { Logger } from "../core/log.js";
import type { RegionName } from "../core/models.js";
import type { RegionLink, RegionTelemetry, Unsubscribe } from "../core/ports.js";
import type { Solver } from "../core/solver.js";
import type { DemandHistory } from "../forecasts/history.js";
import type { Forecaster } from "../forecasts/forecaster.js";
import { createForecaster, type ForecasterName } from "../forecasts/registry.js";
import { fleetFromConfig, liveFleet } from "./fleet.js";
import { planFleet, sameFleet } from "./fingerprint.js";
import type { LeaderLock } from "./leader.js";
import { PlannerLoop, type PlannerLoopOptions } from "./loop.js";
import type { PlanReport } from "./report.js";
import { runPlan } from "./plan.js";
import { TelemetryRecorder } from "./recorder.js";
import { changedMuch, MIN_REQUESTS } from "./slo-correction.js";
import { applyCorrections, correctionsFor, sizeAtSlo, type CapacityOverride } from "./slo-round.js";
import { latestMix, SloWindow } from "./slo-window.js";
import { HighsSolver } from "../core/solver.js";
import { writePlanFiles, type PlanStore } from "./store.js";

/** Everything one planner replica needs. */
export interface PlannerServiceOptions {
  config: TidegateConfig;
  clock: Clock;
  links: readonly RegionLink[];
  history: DemandHistory;
  store: PlanStore;
  lock: LeaderLock;
  /** This replica's id in the leader lock. */
  holder: string;
  intervalMs: number;
  advisory: boolean;
  forecaster: ForecasterName;
  /** Also write each report as JSON + HTML into this folder. */
  outDir?: string;
  log: Logger;
  /** Told of every stored report (planner/metrics.ts exports it). */
  onReport?: (report: PlanReport) => void;
  /**
   * The first round waits until every link has reported telemetry once, at most this long (ms), so that it plans on
   * the regions' instances and each endpoint's expected scale-out (`tidegate dev`, which starts the planner once its
   * regions serve). Unset: the first round runs at once.
   */
  firstRoundAfterTelemetryMs?: number;
}

export interface PlannerService {
  loop: PlannerLoop;
  /** Stops the loop (releasing the lock), the telemetry subscriptions and the forecaster's workers. */
  close(): Promise<void>;
}

/** What one planning round reads (planRound). */
export interface PlanRoundOptions {
  config: TidegateConfig;
  clock: Clock;
  /** Each region's latest telemetry: current and spot instances per (model, region, GPU) come from it, not the config. */
  telemetry: ReadonlyMap<RegionName, RegionTelemetry>;
  history: DemandHistory;
  forecaster: Forecaster;
  solver: Solver;
  intervalMs: number;
  advisory: boolean;
  /**
   * One instance's capacity at the model's SLO for the round's request mix, over the config's (undefined: keep it) —
   * for a caller that knows its engines better than the config does (the week replay's simulated engines): a
   * capacityAtSlo result (its derivation goes into the report) or plain tokens/s. The correction factor applies to
   * it as to the config's.
   */
  tokensPerS?: CapacityOverride;
  /** The SLO telemetry since the last round (the caller observes every RegionTelemetry into it); each round takes it. */
  sloWindow?: SloWindow;
  /** Where a correction factor's change of more than 5% is logged. */
  log?: Logger;
  /** Also write each report as JSON + HTML into this folder. */
  outDir?: string;
}

/**
 * The planner's round, as the planning loop calls it (PlannerLoopOptions.plan): forecast → ILP → report
 * (plan.ts `runPlan`, at the clock's time, on the fleet the regions' telemetry reports, with the config's controller
 * strategy), each action given its region's expected scale-out time, the report written to `outDir` if set.
 * Capacity per instance (issue 31, slo-round.ts): each model's SLO (config `slo`) at the request mix of the SLO
 * window (when it judged ≥ MIN_REQUESTS requests; without a window, the latest telemetry's; else the default mix),
 * the caller's `tokensPerS` over it, then the correction factor from the previous report and the window.
 * `tidegate planner`, `tidegate dev` and the week replay run this same function.
 */
export function planRound(o: PlanRoundOptions): PlannerLoopOptions["plan"] {
  const fleet = fleetFromConfig(o.config);
  const made = planFleet(o.config);
  return async (decisionId, newest, trigger, all) => {
    // Earlier plans of another configuration (one data directory, another config file) are not this fleet's past.
    const recent = all?.filter((r) => sameFleet(r, made.fingerprint));
    const previous = (recent ?? (newest === undefined ? [] : [newest])).find((r) => sameFleet(r, made.fingerprint));
    const hour = o.sloWindow?.take();
    const live = liveFleet(fleet, o.telemetry, o.intervalMs);
    const latest = hour === undefined && o.sloWindow === undefined ? latestMix(o.telemetry) : new Map();
    const mixes = new Map(
      Object.keys(live.models).flatMap((m) => {
        const h = hour?.models.get(m);
        const mix = h !== undefined && h.requests >= MIN_REQUESTS ? h.mix : latest.get(m);
        return mix === undefined ? [] : [[m, mix] as const];
      }),
    );
    const sized = sizeAtSlo(live, { mixes, ...(o.tokensPerS === undefined ? {} : { override: o.tokensPerS }) });
    const corrections = correctionsFor(sized.fleet, previous, hour);
    for (const [model, c] of corrections) if (changedMuch(c)) o.log?.info("capacity correction changed", { model, from: c.previous, to: c.factor, rule: c.rule, why: c.why });
    const report = await runPlan({
      fleet: applyCorrections(sized.fleet, corrections),
      slo: { ...(hour === undefined ? {} : { hour }), corrections, warnings: sized.warnings },
      history: o.history,
      forecaster: o.forecaster,
      solver: o.solver,
      nowMs: o.clock.now(),
      decisionId,
      intervalMs: o.intervalMs,
      advisory: o.advisory,
      strategy: o.config.controller.strategy,
      ...(previous === undefined ? {} : { previous }),
      ...(recent === undefined ? {} : { recent }),
      ...(trigger === undefined ? {} : { trigger }),
    });
    withExpectedScaleOut(report, o.telemetry);
    report.fleet = made;
    if (o.outDir !== undefined) writePlanFiles(o.outDir, report);
    return report;
  };
}

/** Starts the loop (first round at once, or after the regions' first telemetry; then every intervalMs) and the telemetry recording. */
export async function startPlannerService(o: PlannerServiceOptions): Promise<PlannerService> {
  // Current and spot instances per (model, region, GPU) come from the regions' telemetry, not the config file.
  const latest = new Map<string, RegionTelemetry>();
  const forecaster = createForecaster({ name: o.forecaster });
  const solver = await HighsSolver.create();
  const recorder = new TelemetryRecorder(o.history);
  const sloWindow = new SloWindow();
  const loop = new PlannerLoop({
    clock: o.clock,
    intervalMs: o.intervalMs,
    lock: o.lock,
    holder: o.holder,
    advisory: o.advisory,
    links: o.links,
    store: o.store,
    log: o.log,
    ...(o.onReport === undefined ? {} : { onReport: o.onReport }),
    plan: planRound({ config: o.config, clock: o.clock, telemetry: latest, history: o.history, forecaster, solver, intervalMs: o.intervalMs, advisory: o.advisory, sloWindow, log: o.log, ...(o.outDir === undefined ? {} : { outDir: o.outDir }) }),
  });
  let heardAll: () => void = () => undefined;
  const allReported = new Promise<void>((resolve) => (heardAll = resolve));
  const unsubs: Unsubscribe[] = o.links.map((l) =>
    l.subscribe((t) => {
      latest.set(t.region, t);
      if (latest.size >= o.links.length) heardAll();
      sloWindow.observe(t);
      if (!loop.leading) return;
      recorder.observe(t).catch((err: unknown) => o.log.warn("history write failed", { err: err instanceof Error ? err : String(err) }));
    }),
  );
  loop.start();
  let waiting: Timer | undefined;
  let closed = false;
  if (o.firstRoundAfterTelemetryMs === undefined) void loop.tick();
  else {
    const bound = new Promise<void>((resolve) => (waiting = o.clock.after(o.firstRoundAfterTelemetryMs!, resolve)));
    void Promise.race([allReported, bound]).then(() => {
      waiting?.cancel();
      if (!closed) void loop.tick();
    });
  }
  return {
    loop,
    close: async () => {
      closed = true;
      waiting?.cancel();
      for (const u of unsubs) u();
      await loop.stop();
      await forecaster.close();
    },
  };
}

/**
 * Copies each endpoint's expected scale-out time (decision to serving, as its region reports it from the data plane:
 * the last measured scale-out, else the model's ideal transfer time) into the report's actions, for the plan page.
 */
export function withExpectedScaleOut(report: PlanReport, telemetry: ReadonlyMap<string, RegionTelemetry>): void {
  for (const a of report.actions) {
    const ms = telemetry.get(a.region)?.models.find((m) => m.model === a.model)?.endpoints.find((e) => e.gpu === a.gpu)?.expectedScaleOutMs;
    if (ms !== undefined) a.expectedScaleOutMs = ms;
  }
}
