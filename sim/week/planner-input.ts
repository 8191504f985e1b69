/**
 * The planner as the week replay sees it (DESIGN "Planner (per hour)"): the planner's own round (planner/service.ts
 * `planRound`, run by the planning loop planner/loop.ts once per simulated hour) over the same inputs the `tidegate
 * planner` process reads — the demand history written by the live recorders and the regions' latest telemetry.
 * Types only: ilp-planner.ts implements it, planner.ts picks one.
 */
import type { Clock } from "../../core/clock.js";
import type { RegionName } from "../../core/models.js";
import type { CapacityOverride } from "../../planner/slo-round.js";
import type { SloWindow } from "../../planner/slo-window.js";
import type { RegionTelemetry } from "../../core/ports.js";
import type { DemandHistory } from "../../forecasts/history.js";
import type { PlannerLoopOptions } from "../../planner/loop.js";
import type { FleetSpec } from "./fleet.js";

/** What the planner's round reads in the replay. */
export interface PlannerInput {
  /** The replay's clock: a round plans at its time, and its targets carry it. */
  clock: Clock;
  fleet: FleetSpec;
  /**
   * The demand history (forecasts/history.ts) the live recorders write — interactive tokens/s served per region from
   * telemetry (planner/recorder.ts), batch tokens/s dispatched per region (forecasts/niw-recorder.ts) — as seen from
   * replay time (week-wiring.ts `plannerHistory`).
   */
  history: DemandHistory;
  /** Each region's latest telemetry (the planner's live fleet: current and spot instances per endpoint). */
  telemetry: ReadonlyMap<RegionName, RegionTelemetry>;
  /** Capacity per instance at the SLO with the replay's engines (the ILP's tps(m, g); capacity.ts). */
  tps: CapacityOverride;
  /** Every region's telemetry since the last round: the SLO the regions measured (correction factor, attainment). */
  sloWindow: SloWindow;
}

/** An hourly planner: the round the planning loop runs. */
export interface HourlyPlanner {
  readonly name: string;
  /** The round over the replay's inputs (PlannerLoopOptions.plan). */
  round(input: PlannerInput): PlannerLoopOptions["plan"];
  /** Releases worker threads and the like (optional). */
  close?(): Promise<void>;
}
