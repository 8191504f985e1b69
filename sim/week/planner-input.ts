/**
 * The planner as the week replay sees it (DESIGN "Planner (per hour)"): once per simulated hour, the same inputs
 * the `tidegate planner` process reads — the demand history written by the live recorders and the regions' latest
 * telemetry — in, one `RegionTargets` per region out. Types only: ilp-planner.ts implements it, planner.ts picks one.
 */
import type { GpuType, ModelName, RegionName } from "../../core/models.js";
import type { RegionTargets, RegionTelemetry } from "../../core/ports.js";
import type { DemandHistory } from "../../forecasts/history.js";
import type { FleetSpec } from "./fleet.js";

/** What the planner sees at the top of an hour. */
export interface PlannerInput {
  nowMs: number;
  decisionId: number;
  fleet: FleetSpec;
  /**
   * The demand history (forecasts/history.ts) the live recorders write: interactive tokens/s served per region from
   * telemetry (planner/recorder.ts), batch tokens/s dispatched per region (forecasts/niw-recorder.ts). Its clock
   * runs `historyShiftMs` ahead of the replay's: the port takes times ≥ 0 and warm-up days precede the replay.
   */
  history: DemandHistory;
  historyShiftMs: number;
  /** Each region's latest telemetry (the planner's live fleet: current and spot instances per endpoint). */
  telemetry: ReadonlyMap<RegionName, RegionTelemetry>;
  /** Prompt + output tokens/s one instance serves at the SLO (the ILP's tps(m, g)) with the replay's engines. */
  tps(model: ModelName, gpu: GpuType): number;
}

/** An hourly planner. May be async (worker threads, WASM solver). */
export interface HourlyPlanner {
  readonly name: string;
  plan(input: PlannerInput): RegionTargets[] | Promise<RegionTargets[]>;
  /** Releases worker threads and the like (optional). */
  close?(): Promise<void>;
}
