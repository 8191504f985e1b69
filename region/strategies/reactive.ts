/**
 * The reactive baseline (SageServe §4 "unified reactive heuristic", §7.2): scale out by one instance when the
 * endpoint's effective memory utilization is above 70%, in by one when below 30%, at most one scaling event per
 * 15 s cooldown, no forecast. Pure.
 */
import { clampCount, inCooldown, type Strategy, type StrategyDecision, type StrategyInput } from "./types.js";

/** Parameters of the reactive strategy (utilization thresholds in [0, 1], cooldown in ms). */
export interface ReactiveParams extends Record<string, number> {
  outAbove: number;
  inBelow: number;
  cooldownMs: number;
}

export const reactive: Strategy<ReactiveParams> = {
  name: "reactive",
  summary: "thresholds only: +1 above outAbove, -1 below inBelow, one step per cooldown, no forecast",
  usesForecast: false,
  params: {
    outAbove: { help: "scale out above this effective memory utilization", default: 0.7, min: 0, max: 2 },
    inBelow: { help: "scale in below this effective memory utilization", default: 0.3, min: 0, max: 1 },
    cooldownMs: { help: "minimum time between two scaling events of an endpoint", default: 15_000, min: 0, max: 3_600_000 },
  },
  decide(input: StrategyInput, p: ReactiveParams): StrategyDecision {
    const hold = clampCount(input.current, input);
    if (hold !== input.current) return { desired: hold, reason: "bounds" };
    if (inCooldown(input, p.cooldownMs)) return { desired: input.current, reason: "cooldown" };
    if (input.utilization > p.outAbove) return { desired: clampCount(input.current + 1, input), reason: "util-above" };
    if (input.utilization < p.inBelow) return { desired: clampCount(input.current - 1, input), reason: "util-below" };
    return { desired: input.current, reason: "in-band" };
  },
};
