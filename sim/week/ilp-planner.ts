/**
 * planner/ in the replay's loop: the same round the `tidegate planner` process runs every hour (planner/service.ts
 * `planRound`: forecast per (model, region) on 10-minute windows with the planner's forecaster — blend by default,
 * or ARIMA — plus the β × NIW buffer, the ILP solved by HiGHS, spot actions, the config's controller strategy, each
 * region's expected scale-out time), reading the demand history the live recorders wrote and the fleet as the
 * regions' telemetry reports it (planner/fleet.ts `liveFleet`), with the SLO the regions measured (its SloWindow:
 * correction factor and attainment). What the replay knows better than the config: its engine limits for the
 * capacity at the SLO (sim/week/capacity.ts). The loop around it (planner/loop.ts: decision ids from
 * the leader lock, targets per region by `targetsFor`, acks) is the replay's (replay.ts).
 */
import type { Forecaster } from "../../forecasts/forecaster.js";
import { DEFAULT_FORECASTER_NAME, createForecaster, type ForecasterName } from "../../forecasts/registry.js";
import type { PlannerLoopOptions } from "../../planner/loop.js";
import type { PlanReport } from "../../planner/report.js";
import { planRound } from "../../planner/service.js";
import { HighsSolver } from "../../core/solver.js";
import type { HourlyPlanner, PlannerInput } from "./planner-input.js";

export class IlpPlanner implements HourlyPlanner {
  readonly name: string;
  /** Every report, for the run's report pages (the last ones are enough for people; JSON keeps the ILP status). */
  readonly reports: { decisionId: number; solver: PlanReport["solver"]; warnings: number; unmet: number }[] = [];

  private constructor(
    private readonly forecaster: Forecaster,
    private readonly solver: HighsSolver,
    forecasterName: string,
  ) {
    this.name = `planner/ (${forecasterName} forecast + HiGHS ILP)`;
  }

  /** Loads HiGHS and builds the forecaster (the planner's default, DEFAULT_FORECASTER_NAME, or `arima`, `seasonal-naive`, ...). */
  static async create(forecaster: ForecasterName = DEFAULT_FORECASTER_NAME): Promise<IlpPlanner> {
    return new IlpPlanner(createForecaster({ name: forecaster }), await HighsSolver.create(), forecaster);
  }

  /** The same round with a forecaster of the caller's (the oracle arm, oracle.ts). */
  static async withForecaster(forecaster: Forecaster, label: string): Promise<IlpPlanner> {
    return new IlpPlanner(forecaster, await HighsSolver.create(), label);
  }

  round(input: PlannerInput): PlannerLoopOptions["plan"] {
    const { config } = input.fleet;
    const plan = planRound({ config, clock: input.clock, telemetry: input.telemetry, history: input.history, forecaster: this.forecaster, solver: this.solver, intervalMs: config.planner.intervalMs, advisory: false, tokensPerS: input.tps, sloWindow: input.sloWindow });
    return async (...args) => {
      const report = await plan(...args);
      this.reports.push({ decisionId: report.decisionId, solver: report.solver, warnings: report.warnings.length, unmet: report.unmet.length });
      return report;
    };
  }

  async close(): Promise<void> {
    await this.forecaster.close();
  }
}
