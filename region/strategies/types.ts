/**
 * The scaling-strategy plugin shape (SageServe §6.5.1; DESIGN "Strategies"). A strategy is a function of one
 * endpoint's observed values, the planner's hourly target, its typed parameters and (for strategies that remember,
 * like `reactive-hpa`) a per-endpoint state the caller keeps; it returns the instance count the endpoint should have
 * now. The region controller (region/controller) turns that count into one idempotent
 * actuator step per pass.
 */
import type { DemandStep } from "../../core/ports.js";
import type { ObjectReader } from "../../core/validate.js";

/** What a strategy sees about one endpoint (model, GPU type) in one region at one instant. */
export interface StrategyInput {
  /** Clock time of this decision (ms). */
  nowMs: number;
  /** Start of the planner's current decision window (ms) and its length (ms, e.g. 3_600_000). */
  windowStartMs: number;
  windowMs: number;
  /** Instances that serve or will serve: serving + provisioning + loading (draining and spot excluded). */
  current: number;
  /** Serving instances only (≤ current). */
  serving: number;
  /** The planner's target instance count for this window; undefined before the first plan. */
  target: number | undefined;
  /**
   * What the point forecast alone needs (≤ target; RegionTargets floorInstances): LT-U/LT-UA scale in toward it
   * while utilization is low. Undefined = the target.
   */
  floor?: number | undefined;
  /**
   * What the point forecast needs from now until one scale-out time ahead (the largest of the plan's `floorSteps`
   * over [now, now + the endpoint's expected scale-out]): a ramp the forecast sees is started before it arrives.
   * Undefined = `floor`.
   */
  floorAhead?: number | undefined;
  /** The same over the forecast's 90% upper bound (the plan's `upperSteps`). Undefined = `floorAhead`. */
  upperAhead?: number | undefined;
  /**
   * The forecast's demand band step by step (the plan's `demandSteps`): step k covers [startMs + k·stepMs,
   * startMs + (k+1)·stepMs), tokens/s; past the last step the last holds. Undefined without a plan or forecast steps.
   */
  forecastBand?: { startMs: number; stepMs: number; steps: readonly DemandStep[] } | undefined;
  /** The endpoint's expected scale-out time, decision to serving (ms; the actuator's figure); undefined when unknown. */
  scaleOutMs?: number | undefined;
  /** Effective memory utilization of the endpoint's serving instances (KV in use / KV capacity; may exceed 1). */
  utilization: number;
  /**
   * The same utilization smoothed over the last minute or so (the controller's exponential moving average,
   * `utilizationSmoothingMs`): whether utilization has "actually" risen (SageServe §6.5.1, LT-U) rather than
   * spiked for a second. Undefined = `utilization`.
   */
  utilizationSmoothed?: number | undefined;
  /** Tokens/s the endpoint received over the last telemetry window, and the planner's forecast for this window. */
  observedTokensPerS: number;
  forecastTokensPerS: number;
  /** Per-endpoint bounds from the fleet config; the result is always clamped to [min, max]. */
  minInstances: number;
  maxInstances: number;
  /** Time of the endpoint's last scaling action (ms), undefined if none; used for cooldowns. */
  lastActionMs: number | undefined;
}

/** A strategy's answer: the instance count wanted now, and a short machine-readable reason. */
export interface StrategyDecision {
  desired: number;
  reason: string;
}

/** Parameter schema entry: a numeric parameter with range and default (the registry's typed schema). */
export interface ParamSpec {
  help: string;
  default: number;
  min: number;
  max: number;
}

/**
 * A registered strategy: name, parameter schema and the decision function. `S` is the strategy's per-endpoint
 * memory (metric samples, recommendation history; `reactive-hpa`); a strategy with `newState` gets, on every call,
 * the state object that `newState` made for that endpoint and may update it in place. Without `newState` the
 * strategy is a pure function of its input and parameters and ignores `state`.
 */
export interface Strategy<P extends Record<string, number> = Record<string, number>, S = unknown> {
  readonly name: StrategyName;
  readonly summary: string;
  readonly params: { readonly [K in keyof P]: ParamSpec };
  /** Uses the hourly plan (LT-*) or not (reactive, reactive-hpa). */
  readonly usesForecast: boolean;
  /** A fresh, empty per-endpoint state (absent: the strategy keeps none). */
  newState?(): S;
  decide(input: StrategyInput, params: P, state: S): StrategyDecision;
}

export type StrategyName = "reactive" | "reactive-hpa" | "demand" | "lt-i" | "lt-u" | "lt-ua" | "lt-hpa" | "predictive-hpa" | "keystage";

/** Clamps an instance count to the endpoint's [min, max]. */
export function clampCount(n: number, input: Pick<StrategyInput, "minInstances" | "maxInstances">): number {
  return Math.max(input.minInstances, Math.min(input.maxInstances, n));
}

/** True while the cooldown since the last action has not elapsed. */
export function inCooldown(input: StrategyInput, cooldownMs: number): boolean {
  return input.lastActionMs !== undefined && input.nowMs - input.lastActionMs < cooldownMs;
}

/** Reads a parameter object against a schema (ObjectReader names the exact path on error). */
export function readParams<P extends Record<string, number>>(schema: { readonly [K in keyof P]: ParamSpec }, reader: ObjectReader): P {
  const out: Record<string, number> = {};
  for (const [key, spec] of Object.entries(schema) as [string, ParamSpec][]) {
    out[key] = reader.number(key, spec.default, { min: spec.min, max: spec.max });
  }
  reader.done();
  return out as P;
}
