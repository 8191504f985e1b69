/**
 * `demand`: BlitzScale §5.3's scaling policy ("Workload monitor and scale up trigger", "Scale down"), the policy its
 * evaluation (§6) and λScale's run the loading mechanisms under. The monitor records the serving load in tokens/s and
 * the KV cache usage; when the average load per instance passes an upper bound profiled offline
 * (`instanceTokensPerS`), it allocates enough instances for the whole demand at once — ceil(load / bound) — rather
 * than one at a time; a full KV cache with the token load still under the bound adds one instance. Scale-down is
 * timeout-based: once the load per instance has stayed below `lowerFraction` × the bound for `scaleDownAfterMs`
 * (BlitzScale uses 2 s), the endpoint shrinks to what the load needs. No forecast.
 *
 * The load is the controller's observed tokens/s (prompt + max tokens entering the endpoint, its telemetry window),
 * per instance that serves or will serve (`current`): instances still loading count, so one burst is answered once.
 * State (one per endpoint): when the load last went below the lower bound.
 */
import { clampCount, type Strategy, type StrategyDecision, type StrategyInput } from "./types.js";

export interface DemandParams extends Record<string, number> {
  instanceTokensPerS: number;
  kvAbove: number;
  lowerFraction: number;
  scaleDownAfterMs: number;
}

export interface DemandState {
  /** Since when the load has been below the lower bound (undefined: it is not). */
  belowSinceMs: number | undefined;
}

export const demand: Strategy<DemandParams, DemandState> = {
  name: "demand",
  summary: "BlitzScale §5.3: scale to ceil(tokens/s ÷ per-instance bound) at once when over it; in after a short timeout below the lower bound",
  usesForecast: false,
  params: {
    instanceTokensPerS: { help: "tokens/s one instance serves within its SLO (profiled offline; prompt + output tokens)", default: 4000, min: 1, max: 1e7 },
    kvAbove: { help: "KV utilization above which one more instance is added even if the token load is under the bound", default: 0.9, min: 0, max: 2 },
    lowerFraction: { help: "scale in once the load per instance stays below this fraction of the bound", default: 0.5, min: 0, max: 1 },
    scaleDownAfterMs: { help: "how long the load must stay below the lower bound before scaling in (BlitzScale: 2 s)", default: 2000, min: 0, max: 3_600_000 },
  },
  newState: () => ({ belowSinceMs: undefined }),
  decide(input: StrategyInput, p: DemandParams, s: DemandState): StrategyDecision {
    const hold = clampCount(input.current, input);
    if (hold !== input.current) return { desired: hold, reason: "bounds" };
    const needed = Math.ceil(input.observedTokensPerS / p.instanceTokensPerS - 1e-9);
    const perInstance = input.observedTokensPerS / Math.max(1, input.current);
    if (perInstance > p.instanceTokensPerS) {
      s.belowSinceMs = undefined;
      return { desired: clampCount(Math.max(needed, input.current + 1), input), reason: "demand-above" };
    }
    if (input.utilization > p.kvAbove && input.serving === input.current) {
      s.belowSinceMs = undefined;
      return { desired: clampCount(input.current + 1, input), reason: "kv-above" };
    }
    if (perInstance < p.lowerFraction * p.instanceTokensPerS && needed < input.current && input.utilization <= p.kvAbove) {
      s.belowSinceMs ??= input.nowMs;
      if (input.nowMs - s.belowSinceMs < p.scaleDownAfterMs) return { desired: input.current, reason: "demand-below-wait" };
      s.belowSinceMs = undefined;
      return { desired: clampCount(Math.max(1, needed), input), reason: "demand-below" };
    }
    s.belowSinceMs = undefined;
    return { desired: input.current, reason: "in-band" };
  },
};
