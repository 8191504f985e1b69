/**
 * The `keystage` strategy (QUART §5; registered in strategy-registry.ts). It composes with the planner's hourly
 * targets: the planner decides how many GPUs a pipelined (model, region) holds — `decide` paces the GPU count to that
 * target at once, like LT-I — and the key-stage scaler (region/keystage/scaler.ts) decides how those GPUs are split
 * over the pipeline's stages, every `intervalMs`, with the parameters below.
 */
import { clampCount, type Strategy, type StrategyDecision, type StrategyInput } from "./types.js";

/** Typed parameters of the key-stage scaler (ranges are checked by the registry's schema). */
export interface KeyStageParams extends Record<string, number> {
  /** PID gains of the replica corrector (Eq. 3); the error is relative (see pid.ts). */
  kp: number;
  ki: number;
  kd: number;
  /** A stage is key when its M/M/c delay exceeds this × its mean service time (T_target per stage, §5.1). */
  targetDelayFactor: number;
  /** Period of a correct/smooth pass (ms). */
  intervalMs: number;
  /** Window over which arrival rate, service rate and CV are observed (ms). */
  windowMs: number;
  /** A queue counts as extra arrivals to be served within this horizon (ms). */
  backlogHorizonMs: number;
  /** r_min of Algorithm 1: the fewest replicas a stage keeps. */
  minReplicasPerStage: number;
  /** The smoother leaves a stage alone this long after it was scaled up (ms). */
  reclaimCooldownMs: number;
  /** Most replicas moved from surplus stages to key stages in one pass (0: key stages grow only from free GPUs). */
  maxMovesPerPass: number;
  /**
   * 0: the pipeline holds its budget (surplus goes to key stages). > 0: serverless scale-in — a stage above its
   * smoothed keep that has not grown for this long gives one replica back to the region per pass (ms).
   */
  releaseAfterMs: number;
}

/** The typed parameter schema (ranges reject bad config at start-up, naming `keystage.params.<key>`). */
export const KEYSTAGE_PARAMS = {
  kp: { help: "proportional gain of the replica corrector (replicas per unit relative delay error)", default: 1, min: 0, max: 20 },
  ki: { help: "integral gain (replicas per unit error-second)", default: 0.1, min: 0, max: 10 },
  kd: { help: "derivative gain (replica-seconds per unit error)", default: 0, min: 0, max: 10 },
  targetDelayFactor: { help: "a stage is key above this multiple of its service time", default: 1.5, min: 1, max: 100 },
  intervalMs: { help: "period of one correct/smooth pass", default: 1000, min: 50, max: 60_000 },
  windowMs: { help: "observation window for rates and CV", default: 10_000, min: 500, max: 600_000 },
  backlogHorizonMs: { help: "a queue is demand to clear within this", default: 10_000, min: 100, max: 600_000 },
  minReplicasPerStage: { help: "fewest replicas a stage keeps (r_min)", default: 1, min: 1, max: 64 },
  reclaimCooldownMs: { help: "no reclaim from a stage this soon after it grew", default: 10_000, min: 0, max: 3_600_000 },
  maxMovesPerPass: { help: "most replicas moved from surplus stages to key stages in one pass", default: 8, min: 0, max: 1024 },
  releaseAfterMs: { help: "0 holds the budget; > 0 gives surplus replicas back after this long without growth (serverless scale-in)", default: 0, min: 0, max: 3_600_000 },
} as const;

/** The registry entry. */
export const keystage: Strategy<KeyStageParams> = {
  name: "keystage",
  summary: "hold the planner's GPU target; split it over pipeline stages by key-stage scaling (QUART)",
  usesForecast: true,
  params: KEYSTAGE_PARAMS,
  decide(input: StrategyInput): StrategyDecision {
    if (input.target === undefined) return { desired: clampCount(input.current, input), reason: "no-plan" };
    return { desired: clampCount(input.target, input), reason: "gpu-budget" };
  },
};
