/**
 * Which planner the week replay runs every simulated hour: planner/ — the forecast + HiGHS ILP the `tidegate
 * planner` process runs — with its default forecaster (blend) or with ARIMA. There is no second planner: the replay
 * plans the way production does (ilp-planner.ts); the oracle arm differs only in its forecaster.
 */
import type { FleetSpec } from "./fleet.js";
import type { HourlyPlanner } from "./planner-input.js";
import type { WorkloadSpec } from "../workload/spec.js";
import { DEFAULT_FORECASTER_NAME } from "../../forecasts/registry.js";

export type { HourlyPlanner, PlannerInput } from "./planner-input.js";

/** Planner choices of the replay. */
export const PLANNER_NAMES = ["ilp", "ilp-arima", "ilp-oracle"] as const;
export type PlannerName = (typeof PLANNER_NAMES)[number];

/**
 * The planner the replay runs every simulated hour (default: planner/ with the blend forecaster). `ilp-oracle`
 * gives the same planner the workload's true demand of each coming hour (oracle.ts; it needs the workload).
 */
export async function createPlanner(_fleet: FleetSpec, name: PlannerName = "ilp", workload?: WorkloadSpec): Promise<HourlyPlanner> {
  const { IlpPlanner } = await import("./ilp-planner.js");
  if (name === "ilp-oracle") {
    if (workload === undefined) throw new Error("the oracle planner needs the workload it plans for");
    const { OracleForecaster, trueDemand } = await import("./oracle.js");
    return IlpPlanner.withForecaster(new OracleForecaster(trueDemand(workload)), "oracle");
  }
  return IlpPlanner.create(name === "ilp-arima" ? "arima" : DEFAULT_FORECASTER_NAME);
}
