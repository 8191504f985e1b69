/**
 * The long-term (forecast-aware) pacing strategies of SageServe §6.5.1, which pace the endpoint toward the
 * planner's hourly ILP target:
 *  - LT-I (immediate): jump to the target at the start of the window.
 *  - LT-U (utilization): step toward the target only while utilization breaches the threshold in that direction
 *    (> 70% to scale out, < 30% to scale in); never past the target. "Utilization actually starts increasing"
 *    (§6.5.1) is read on the controller's smoothed utilization (a ~1-minute moving average), so a one-second
 *    spike of bursty traffic does not ratchet the count up for the rest of the hour. When the plan covers the
 *    forecast's upper bound (planner provisionFor "upper"), the target is the ceiling of what the hour may need
 *    and `floor` what the point forecast needs: LT-U also steps in toward the floor while utilization is low, so
 *    capacity bought for a peak that did not come is returned within the hour.
 *  - LT-UA (utilization + ARIMA gap): LT-U, and during the last 20 minutes of the window, once the target is
 *    reached, keep scaling out while observed tokens/s is well above the forecast (§7.3.4 uses 5×) and
 *    utilization is still above the out threshold; keep scaling in while observed tokens/s is well below it and
 *    utilization is under the in threshold. SageServe describes this as switching from a memory-based to a
 *    traffic-based rule; requiring the utilization breach too stops the traffic rule from adding instances once a
 *    burst is absorbed.
 * All are pure; with no plan yet (target undefined) they hold the current count.
 */
import { clampCount, inCooldown, type Strategy, type StrategyDecision, type StrategyInput } from "./types.js";

/** LT-I parameters: none beyond the per-step cooldown (0 = one step per reconcile pass). */
export interface LtIParams extends Record<string, number> {
  cooldownMs: number;
}

/** LT-U parameters: thresholds in [0, 1] and cooldown between steps (ms). */
export interface LtUParams extends Record<string, number> {
  outAbove: number;
  inBelow: number;
  cooldownMs: number;
}

/** LT-UA parameters: LT-U's plus the adaptive tail window and the traffic ratios against the forecast. */
export interface LtUaParams extends LtUParams {
  tailMs: number;
  aboveForecastFactor: number;
  belowForecastFactor: number;
}

const thresholdParams = {
  outAbove: { help: "step out while effective memory utilization is above this", default: 0.7, min: 0, max: 2 },
  inBelow: { help: "step in while effective memory utilization is below this", default: 0.3, min: 0, max: 1 },
  cooldownMs: { help: "minimum time between two steps of an endpoint", default: 15_000, min: 0, max: 3_600_000 },
} as const;

export const ltI: Strategy<LtIParams> = {
  name: "lt-i",
  summary: "go to the hourly target at once",
  usesForecast: true,
  params: { cooldownMs: { help: "minimum time between two steps of an endpoint", default: 0, min: 0, max: 3_600_000 } },
  decide(input: StrategyInput): StrategyDecision {
    if (input.target === undefined) return { desired: clampCount(input.current, input), reason: "no-plan" };
    return { desired: clampCount(input.target, input), reason: "target" };
  },
};

/** The utilization LT-U and LT-UA act on: the smoothed one when the controller provides it. */
function trend(input: StrategyInput): number {
  return input.utilizationSmoothed ?? input.utilization;
}

/** LT-U's decision, shared by LT-UA. */
function ltUDecide(input: StrategyInput, p: LtUParams): StrategyDecision {
  const hold = clampCount(input.current, input);
  if (hold !== input.current) return { desired: hold, reason: "bounds" };
  if (input.target === undefined) return { desired: input.current, reason: "no-plan" };
  const target = clampCount(input.target, input);
  const floor = clampCount(Math.min(input.floor ?? target, target), input);
  if (inCooldown(input, p.cooldownMs)) return { desired: input.current, reason: "cooldown" };
  const u = trend(input);
  if (target > input.current && u > p.outAbove) return { desired: input.current + 1, reason: "toward-target-out" };
  // floor ≤ target, so this also steps in toward a target below the current count.
  if (floor < input.current && u < p.inBelow) return { desired: input.current - 1, reason: target < input.current ? "toward-target-in" : "toward-floor-in" };
  return { desired: input.current, reason: target === input.current ? "at-target" : "waiting-for-utilization" };
}

export const ltU: Strategy<LtUParams> = {
  name: "lt-u",
  summary: "step toward the hourly target only while utilization breaches 70% (out) / 30% (in)",
  usesForecast: true,
  params: thresholdParams,
  decide: ltUDecide,
};

export const ltUa: Strategy<LtUaParams> = {
  name: "lt-ua",
  summary: "LT-U, plus past-target scaling in the last 20 min when observed tokens/s is far from the forecast",
  usesForecast: true,
  params: {
    ...thresholdParams,
    tailMs: { help: "length of the adaptive tail at the end of each window", default: 20 * 60_000, min: 0, max: 3_600_000 },
    aboveForecastFactor: { help: "scale past the target when observed ≥ this × forecast (SageServe §7.3.4: 5)", default: 5, min: 1, max: 100 },
    belowForecastFactor: { help: "scale below the target when observed ≤ this × forecast", default: 0.2, min: 0, max: 1 },
  },
  decide(input: StrategyInput, p: LtUaParams): StrategyDecision {
    const base = ltUDecide(input, p);
    if (base.desired !== input.current || input.target === undefined || base.reason === "cooldown") return base;
    const inTail = input.nowMs - input.windowStartMs >= input.windowMs - p.tailMs;
    if (!inTail) return base;
    const target = clampCount(input.target, input);
    const forecast = input.forecastTokensPerS;
    const u = trend(input);
    if (input.current >= target && u > p.outAbove && input.observedTokensPerS >= p.aboveForecastFactor * forecast) {
      return { desired: clampCount(input.current + 1, input), reason: "tail-above-forecast" };
    }
    if (input.current <= target && u < p.inBelow && input.observedTokensPerS <= p.belowForecastFactor * forecast) {
      return { desired: clampCount(input.current - 1, input), reason: "tail-below-forecast" };
    }
    return base;
  },
};
