/**
 * `lt-hpa` (issue 31): the forecast as a floor under the autoscaler operators run. Kubernetes HPA semantics
 * (hpa.ts: windowed utilization, ratio to target, tolerance, 5-minute scale-down stabilization, rate policies) with
 * its minReplicas raised, at every pass, to what the planner's point forecast needs over the next scale-out time:
 *
 *  - plan the point forecast as the floor: the planner's `floorSteps` (planner/loop.ts targetsFor) follow the
 *    forecast path through the hour, step by step (10 minutes), so the floor is not the hour's peak held for an hour;
 *  - pre-scale ahead of a forecast ramp by the startup time the data plane measures: the controller passes the
 *    largest step over [now, now + the endpoint's expected scale-out] (`floorAhead`, region/controller); the HPA moves
 *    to a raised minimum at once, without its rate policies, as it moves to minReplicas;
 *  - cover demand above the forecast by the HPA's proportional scale-out (ceil(ratio × ready)), which network loading
 *    makes land in seconds;
 *  - scale in through the hour by the HPA's proportional rule, never below the floor.
 *
 * This is SageServe §6.5.1's split (the long-term plan sets the level, a short-term rule paces the rest) with the
 * HPA as the short-term rule instead of §6.5.1's fixed thresholds, and the shape of NVIDIA Dynamo's SLA planner
 * (predicted load ÷ profiled per-replica capacity at the TTFT/ITL targets, plus a correction for what the forecast
 * misses). `floorBand` places the floor in the forecast's band (0: the point forecast; 1: its 90% upper bound, the
 * plan's `upperSteps`); `floorFraction` scales it (0 = plain HPA); the HPA's target
 * utilization is the knob an operator tunes, as for `reactive-hpa`. Before the first plan it is plain HPA.
 */
import { reactiveHpa, type HpaParams, type HpaState } from "./hpa.js";
import type { Strategy, StrategyDecision, StrategyInput } from "./types.js";

export interface LtHpaParams extends HpaParams {
  floorFraction: number;
  floorBand: number;
}

export const ltHpa: Strategy<LtHpaParams, HpaState> = {
  name: "lt-hpa",
  summary: "HPA on utilization above a floor that follows the planner's point forecast, pre-scaled by the scale-out time",
  usesForecast: true,
  params: {
    ...reactiveHpa.params,
    floorFraction: { help: "share of the forecast's instance count held as the floor (0 = plain HPA)", default: 1, min: 0, max: 2 },
    floorBand: { help: "where in the forecast's band the floor sits: 0 = the point forecast, 1 = its 90% upper bound", default: 0, min: 0, max: 1 },
  },
  newState: reactiveHpa.newState!,
  decide(input: StrategyInput, p: LtHpaParams, st: HpaState): StrategyDecision {
    const point = input.floorAhead ?? input.floor ?? input.target ?? 0;
    const upper = input.upperAhead ?? point;
    const forecast = input.target === undefined ? 0 : point + p.floorBand * Math.max(0, upper - point);
    const floor = Math.min(input.maxInstances, Math.ceil(p.floorFraction * forecast - 1e-9));
    if (floor <= input.minInstances) return reactiveHpa.decide(input, p, st);
    const d = reactiveHpa.decide({ ...input, minInstances: floor }, p, st);
    return d.desired === floor && d.desired > input.current ? { desired: d.desired, reason: "forecast-floor" } : d;
  },
};
