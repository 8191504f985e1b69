/**
 * The one strategy registry (STYLE "small plugin interfaces"): every scaling strategy, by name, with its typed
 * parameter schema. `resolveStrategy` validates a parameter object against the schema and returns a bound decision
 * function.
 */
import { ObjectReader, ValidationError } from "../../core/validate.js";
import { ltI, ltU, ltUa } from "./long-term.js";
import { reactive } from "./reactive.js";
import { reactiveHpa } from "./hpa.js";
import { ltHpa } from "./lt-hpa.js";
import { predictiveHpa } from "./predictive-hpa.js";
import { demand } from "./demand.js";
import { keystage } from "./keystage.js";
import { readParams, type Strategy, type StrategyDecision, type StrategyInput, type StrategyName } from "./types.js";

/** All strategies, in the order reports list them. */
export const STRATEGIES: Readonly<Record<StrategyName, Strategy>> = {
  reactive: reactive as unknown as Strategy,
  "reactive-hpa": reactiveHpa as unknown as Strategy,
  demand: demand as unknown as Strategy,
  "lt-i": ltI as unknown as Strategy,
  "lt-u": ltU as unknown as Strategy,
  "lt-ua": ltUa as unknown as Strategy,
  "lt-hpa": ltHpa as unknown as Strategy,
  "predictive-hpa": predictiveHpa as unknown as Strategy,
  keystage: keystage as unknown as Strategy,
};

export const STRATEGY_NAMES = Object.keys(STRATEGIES) as StrategyName[];

/**
 * A strategy with validated parameters, ready to decide. Stateless itself: one BoundStrategy serves every endpoint;
 * the caller keeps one `newState()` per endpoint and passes it to each `decide` of that endpoint (the region
 * controller does). Without `state`, a strategy that keeps state decides on a fresh one, as right after a restart
 * (for `reactive-hpa`: a sync with no history, on this one sample); the others ignore it.
 */
export interface BoundStrategy {
  name: StrategyName;
  usesForecast: boolean;
  params: Readonly<Record<string, number>>;
  /** A fresh per-endpoint state (undefined for strategies that keep none). */
  newState(): unknown;
  decide(input: StrategyInput, state?: unknown): StrategyDecision;
}

/**
 * Looks a strategy up and binds its parameters. `params` is a plain object (e.g. from a config file) checked
 * against the schema; missing keys take defaults; unknown keys and out-of-range values are ValidationErrors naming
 * `paramsPath.key` (default `path.params.key`).
 */
export function resolveStrategy(name: string, params: unknown = {}, path = "strategy", paramsPath = `${path}.params`): BoundStrategy {
  const s = (STRATEGIES as Record<string, Strategy | undefined>)[name];
  if (s === undefined) throw new ValidationError(path, `unknown strategy ${JSON.stringify(name)}; known: ${STRATEGY_NAMES.join(", ")}`);
  const bound = readParams(s.params, new ObjectReader(params, paramsPath));
  const newState = (): unknown => s.newState?.();
  return {
    name: s.name,
    usesForecast: s.usesForecast,
    params: bound,
    newState,
    decide: (input, state) => s.decide(input, bound, state === undefined ? newState() : state),
  };
}
