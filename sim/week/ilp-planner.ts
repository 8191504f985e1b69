/**
 * planner/ in the replay's loop: the same `runPlan` the `tidegate planner` process runs every hour (forecast per
 * (model, region) on 10-minute windows with the planner's forecaster — blend by default, or ARIMA — plus the
 * β × NIW buffer, the ILP solved by HiGHS, spot actions), fed from the replay's own demand history through the
 * planner's `DemandHistory` port (forecasts/history.ts MemoryHistory). The planner's fleet comes from the config
 * (`fleetFromConfig`) with what the replay knows better: current and spot instances per endpoint, and tps(m, g)
 * for the replay's engine settings (sim/week/capacity.ts). Targets per region: planner/loop.ts `targetsFor`.
 */
import type { RegionTargets } from "../../core/ports.js";
import { MemoryHistory, type DemandSample } from "../../forecasts/history.js";
import type { Forecaster } from "../../forecasts/forecaster.js";
import { createForecaster, type ForecasterName } from "../../forecasts/registry.js";
import { fleetFromConfig } from "../../planner/fleet.js";
import { targetsFor } from "../../planner/loop.js";
import { runPlan } from "../../planner/plan.js";
import type { PlanReport } from "../../planner/report.js";
import { HighsSolver } from "../../planner/solver.js";
import type { FleetSpec } from "./fleet.js";
import type { HourlyPlanner, PlannerInput } from "./planner.js";

const MINUTE = 60_000;

export class IlpPlanner implements HourlyPlanner {
  readonly name: string;
  private readonly history = new MemoryHistory();
  private ingestedMinutes = 0;
  private previous: PlanReport | undefined;
  /** Every report, for the run's report pages (the last ones are enough for people; JSON keeps the ILP status). */
  readonly reports: { decisionId: number; solver: PlanReport["solver"]; warnings: number; unmet: number }[] = [];

  private constructor(
    private readonly forecaster: Forecaster,
    private readonly solver: HighsSolver,
    forecasterName: string,
  ) {
    this.name = `planner/ (${forecasterName} forecast + HiGHS ILP)`;
  }

  /** Loads HiGHS and builds the forecaster (`blend`, the planner's default, or `arima`, `seasonal-naive`, ...). */
  static async create(forecaster: ForecasterName = "blend"): Promise<IlpPlanner> {
    return new IlpPlanner(createForecaster({ name: forecaster }), await HighsSolver.create(), forecaster);
  }

  async plan(input: PlannerInput): Promise<RegionTargets[]> {
    const { config } = input.fleet;
    await this.ingest(input);
    const fleet = fleetFromConfig(config);
    for (const [model, byGpu] of Object.entries(fleet.models)) for (const [gpu, m] of Object.entries(byGpu)) m.tokensPerS = input.tps(model, gpu);
    for (const r of fleet.regions) {
      for (const e of r.endpoints) {
        e.instances = Math.max(e.minInstances, Math.min(e.maxInstances, input.current(e.model, r.name, e.gpu)));
        e.spotInstances = input.spot(e.model, r.name, e.gpu);
      }
    }
    // The planner's history port takes times ≥ 0, so its clock runs `−historyStartMs` ahead of the replay's.
    const shiftMs = -input.historyStartMs;
    const report = await runPlan({ fleet, history: this.history, forecaster: this.forecaster, solver: this.solver, nowMs: input.nowMs + shiftMs, decisionId: input.decisionId, intervalMs: config.planner.intervalMs, ...(this.previous === undefined ? {} : { previous: this.previous }) });
    this.previous = report;
    this.reports.push({ decisionId: report.decisionId, solver: report.solver, warnings: report.warnings.length, unmet: report.unmet.length });
    return config.regions.map((r) => ({ ...targetsFor(report, r.name), madeAtMs: input.nowMs }));
  }

  async close(): Promise<void> {
    await this.forecaster.close();
    await this.history.close();
  }

  /** Adds the minutes recorded since the last plan (interactive and batch demand per (model, region)). */
  private async ingest(input: PlannerInput): Promise<void> {
    const samples: DemandSample[] = [];
    let upTo = this.ingestedMinutes;
    for (const m of input.fleet.config.models) {
      for (const r of input.fleet.config.regions) {
        const iw = input.history(m.name, r.name);
        const niw = input.niwHistory(m.name, r.name);
        upTo = Math.max(upTo, iw.length);
        for (let k = this.ingestedMinutes; k < iw.length; k++) {
          samples.push({ kind: "iw", model: m.name, region: r.name, minuteMs: k * MINUTE, tokensPerS: iw[k]! });
          samples.push({ kind: "niw", model: m.name, region: r.name, minuteMs: k * MINUTE, tokensPerS: niw[k] ?? 0 });
        }
      }
    }
    if (samples.length > 0) await this.history.add(samples);
    this.ingestedMinutes = upTo;
  }
}
