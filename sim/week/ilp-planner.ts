/**
 * planner/ in the replay's loop: the same `runPlan` the `tidegate planner` process runs every hour (forecast per
 * (model, region) on 10-minute windows with the planner's forecaster — blend by default, or ARIMA — plus the
 * β × NIW buffer, the ILP solved by HiGHS, spot actions), reading the demand history the live recorders wrote and
 * the fleet as the regions' telemetry reports it (planner/fleet.ts `liveFleet`, as planner/service.ts). What the
 * replay knows better than the config: tps(m, g) for its engine settings (sim/week/capacity.ts). Targets per
 * region: planner/loop.ts `targetsFor`.
 */
import type { RegionTargets } from "../../core/ports.js";
import type { Forecaster } from "../../forecasts/forecaster.js";
import { createForecaster, type ForecasterName } from "../../forecasts/registry.js";
import { fleetFromConfig, liveFleet } from "../../planner/fleet.js";
import { targetsFor } from "../../planner/loop.js";
import { runPlan } from "../../planner/plan.js";
import type { PlanReport } from "../../planner/report.js";
import { HighsSolver } from "../../core/solver.js";
import type { FleetSpec } from "./fleet.js";
import type { HourlyPlanner, PlannerInput } from "./planner-input.js";

export class IlpPlanner implements HourlyPlanner {
  readonly name: string;
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
    const fleet = liveFleet(fleetFromConfig(config), input.telemetry, config.planner.intervalMs);
    for (const [model, byGpu] of Object.entries(fleet.models)) for (const [gpu, m] of Object.entries(byGpu)) m.tokensPerS = input.tps(model, gpu);
    const report = await runPlan({ fleet, history: input.history, forecaster: this.forecaster, solver: this.solver, nowMs: input.nowMs + input.historyShiftMs, decisionId: input.decisionId, intervalMs: config.planner.intervalMs, ...(this.previous === undefined ? {} : { previous: this.previous }) });
    this.previous = report;
    this.reports.push({ decisionId: report.decisionId, solver: report.solver, warnings: report.warnings.length, unmet: report.unmet.length });
    return config.regions.map((r) => ({ ...targetsFor(report, r.name), madeAtMs: input.nowMs }));
  }

  async close(): Promise<void> {
    await this.forecaster.close();
  }
}
