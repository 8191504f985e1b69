/** The `planner` section: the hourly planner's interval, cover factors and prices (DESIGN planner section). */
import { GPU_SPECS } from "../models.js";
import type { ObjectReader } from "../validate.js";

export interface PlannerConfig {
  intervalMs: number;
  advisory: boolean;
  /** Per-region cover factor α and NIW buffer factor β (DESIGN planner section). */
  alpha: number;
  beta: number;
  /**
   * Which point of each (model, region)'s peak forecast the ILP covers: "upper" (default) = the forecaster's 90%
   * upper bound, so an hour whose peak comes in above the point forecast still has planned capacity; LT-U/LT-UA
   * spend it only while utilization asks for it, and scale back in to the point forecast's count (the target's
   * floor) when it does not. "mean" = the point forecast (the floor is then the target).
   */
  provisionFor: "upper" | "mean";
  /** Currency of every cost the planner reports (a label, e.g. "USD"). */
  currency: string;
  /** Price of holding one GPU for an hour, per GPU type, in `currency` (default: planner/fleet DEFAULT_GPU_COST). */
  gpuHourPrices: Record<string, number>;
}

/** Reads the `planner` object; `gpuHourPrices` keys must be known GPU types. */
export function parsePlanner(pr: ObjectReader): PlannerConfig {
  const planner: PlannerConfig = {
    intervalMs: pr.number("intervalMs", 3600_000, { gt: 0 }),
    advisory: pr.boolean("advisory", false),
    alpha: pr.number("alpha", 0.8, { gt: 0, max: 1 }),
    beta: pr.number("beta", 0.2, { min: 0, max: 10 }),
    provisionFor: pr.string("provisionFor", "upper", { oneOf: ["upper", "mean"] }) as PlannerConfig["provisionFor"],
    currency: pr.string("currency", "USD"),
    gpuHourPrices: {},
  };
  const gp = pr.object("gpuHourPrices");
  for (const g of Object.keys(gp.value)) {
    if (GPU_SPECS[g] === undefined) gp.fail(g, `unknown GPU type; known: ${Object.keys(GPU_SPECS).join(", ")}`);
    planner.gpuHourPrices[g] = gp.number(g, undefined, { min: 0 });
  }
  gp.done();
  pr.done();
  return planner;
}
