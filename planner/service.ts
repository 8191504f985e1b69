/**
 * The planner tier wired for a process: forecaster + HiGHS + the planning loop over the regions' links, recording
 * their telemetry into demand history while this replica leads. `tidegate planner` runs it on Redis stores;
 * `tidegate dev` on files in its data directory (file-store.ts, file-history.ts). The stores, lock and links come from the caller; this file only wires.
 */
import type { Clock } from "../core/clock.js";
import type { TidegateConfig } from "../core/config.js";
import type { Logger } from "../core/log.js";
import type { RegionLink, RegionTelemetry, Unsubscribe } from "../core/ports.js";
import type { DemandHistory } from "../forecasts/history.js";
import { createForecaster, type ForecasterName } from "../forecasts/registry.js";
import { fleetFromConfig, liveFleet } from "./fleet.js";
import type { LeaderLock } from "./leader.js";
import { PlannerLoop } from "./loop.js";
import type { PlanReport } from "./report.js";
import { runPlan } from "./plan.js";
import { TelemetryRecorder } from "./recorder.js";
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
}

export interface PlannerService {
  loop: PlannerLoop;
  /** Stops the loop (releasing the lock), the telemetry subscriptions and the forecaster's workers. */
  close(): Promise<void>;
}

/** Starts the loop (first round at once, then every intervalMs) and the telemetry recording. */
export async function startPlannerService(o: PlannerServiceOptions): Promise<PlannerService> {
  const fleet = fleetFromConfig(o.config);
  // Current and spot instances per (model, region, GPU) come from the regions' telemetry, not the config file.
  const latest = new Map<string, RegionTelemetry>();
  const forecaster = createForecaster({ name: o.forecaster });
  const solver = await HighsSolver.create();
  const recorder = new TelemetryRecorder(o.history);
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
    plan: async (decisionId, previous, trigger, recent) => {
      const report = await runPlan({
        fleet: liveFleet(fleet, latest, o.intervalMs),
        history: o.history,
        forecaster,
        solver,
        nowMs: o.clock.now(),
        decisionId,
        intervalMs: o.intervalMs,
        advisory: o.advisory,
        strategy: o.config.controller.strategy,
        ...(previous === undefined ? {} : { previous }),
        ...(recent === undefined ? {} : { recent }),
        ...(trigger === undefined ? {} : { trigger }),
      });
      withExpectedScaleOut(report, latest);
      if (o.outDir !== undefined) writePlanFiles(o.outDir, report);
      return report;
    },
  });
  const unsubs: Unsubscribe[] = o.links.map((l) =>
    l.subscribe((t) => {
      latest.set(t.region, t);
      if (!loop.leading) return;
      recorder.observe(t).catch((err: unknown) => o.log.warn("history write failed", { err: err instanceof Error ? err : String(err) }));
    }),
  );
  loop.start();
  void loop.tick();
  return {
    loop,
    close: async () => {
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
