/**
 * Which planner the week replay runs every simulated hour: planner/ — the forecast + HiGHS ILP the `tidegate
 * planner` process runs — with its default forecaster (blend) or with ARIMA. There is no second planner: the replay
 * plans the way production does (ilp-planner.ts).
 */
import type { FleetSpec } from "./fleet.js";
import type { HourlyPlanner } from "./planner-input.js";

export type { HourlyPlanner, PlannerInput } from "./planner-input.js";

/** Planner choices of the replay. */
export const PLANNER_NAMES = ["ilp", "ilp-arima"] as const;
export type PlannerName = (typeof PLANNER_NAMES)[number];

/** The planner the replay runs every simulated hour (default: planner/ with the blend forecaster). */
export async function createPlanner(_fleet: FleetSpec, name: PlannerName = "ilp"): Promise<HourlyPlanner> {
  const { IlpPlanner } = await import("./ilp-planner.js");
  return IlpPlanner.create(name === "ilp-arima" ? "arima" : "blend");
}
