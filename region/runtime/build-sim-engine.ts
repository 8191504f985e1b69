/**
 * The one builder of simulated engines (issue 30): every region shape — the sim actuator's engines (sim-region.ts),
 * a static region's in-process engines, the in-process agents of `tidegate dev`, `tidegate engine-sim` — makes its
 * SimEngine or PipelineEngine here, from the same settings:
 *
 * - `engines.timeScale` multiplies every simulated duration (1 in the virtual-time replays' configs);
 * - `engines.preemption` is how a priority 0 request takes room from running batch work (SimCoreOptions.preemption),
 *   and `engines.batchSlotsBeside` how many batch requests run beside interactive ones;
 * - `engines.models[model].maxBatch` is the running batch's cap (vLLM max_num_seqs; default the core's, 256);
 * - `engines.models[model].kvCapacityTokens`, else `engines.kvCapacityTokens`, is the KV cache in tokens (default
 *   the performance profile's: GPU memory × 0.9 − weights);
 * - an endpoint listed in `keystage.pipelines` is served by a PipelineEngine (region/keystage; key-stage or
 *   whole-pipeline scaling by `controller.strategy`), which takes only the time scale: each stage replica serves
 *   one request at a time, so a batch cap and a KV cache do not apply (engine-sim refuses them with --pipeline).
 *
 * Engine processes get the same settings as flags (`engineSimFlags`: --time-scale, --max-batch,
 * --kv-capacity-tokens, --preemption, --batch-slots-beside, --prefix-block-tokens, --host-kv-cache-gib, --pipeline),
 * whether a static region spawns them (region/process/spawn.ts) or a node agent does (StartEngine carries
 * `simBehaviourOf` as its fields, which region/agent/engine-supervisor.ts turns into the same flags; an in-process
 * agent builds its engine from them here).
 */
import type { Clock } from "../../core/clock.js";
import { instanceGpus, type TidegateConfig } from "../../core/config.js";
import type { GpuType, ModelName } from "../../core/models.js";
import type { Solver } from "../../core/solver.js";
import { getProfile } from "../../core/perf/model.js";
import { engineSimBehaviourFlags } from "../engines/sim/flags.js";
import { SimEngine } from "../engines/sim/sim-engine.js";
import { PipelineEngine, pipelineSpecFor, pipelineSpecJson, type PipelineSpec } from "../keystage/pipeline-engine.js";

/** One simulated instance: its id, model, GPU type and GPUs (tensor-parallel degree, or a pipeline's GPU budget). */
export interface SimInstance {
  instanceId: string;
  model: ModelName;
  gpu: GpuType;
  tp: number;
}

/** A simulated engine's settings, resolved from config (`simEngineParams`) or from engine-sim's flags. */
export interface SimEngineParams {
  /** > 0; 1 = as measured. */
  timeScale: number;
  /** Running-batch cap; absent = the core's default (256). */
  maxBatch?: number;
  /** KV cache in tokens; absent = the profile's. */
  kvCapacityTokens?: number;
  /** Priority preemption of batch work (SimCoreOptions.preemption); absent = the core's default ("recompute"). */
  preemption?: "recompute" | "swap" | "off";
  /** Most batch requests beside interactive ones (SimCoreOptions.batchSlotsBeside); absent = the core's default. */
  batchSlotsBeside?: number;
  /**
   * Tokens per KV block of the automatic prefix cache (issue 34; 0 = off); absent = 16. From config routing.blockTokens,
   * so the engines hash prompts with the router's block size.
   */
  prefixBlockTokens?: number;
  /** GiB of host memory for the KV tier under the prefix cache (engines.hostKvCacheGiB; 0 = off); absent = the engine's default. */
  hostKvCacheGiB?: number;
  /** Serve as a pipeline of stages (config keystage.pipelines); absent = a whole-model instance. */
  pipeline?: PipelineSpec;
}

/** How one engine is built beyond its settings (the region shape's choices, not config). */
export interface SimBuildOptions {
  /** How `generate` streams (default per token, as live; the replays coalesce). */
  events?: "coalesced" | "per-token";
  /** Added to every pass (a λScale execution pipeline's activation hops; SimEngineOptions.passOverheadMs). */
  passOverheadMs?: number;
  /** × the instance's KV capacity (a λScale execution pipeline holds its members' caches); default 1. */
  kvScale?: number;
  /** HiGHS for a live zigzag pairing (engines paired by node agents while another loads). */
  solver?: () => Promise<Solver>;
}

/** A simulated engine's settings beyond its time scale and pipeline: what StartEngine carries to engine-sim (region/agent/handle.ts EngineSpec). */
export type SimBehaviour = Pick<SimEngineParams, "maxBatch" | "kvCapacityTokens" | "preemption" | "batchSlotsBeside" | "prefixBlockTokens" | "hostKvCacheGiB">;

/**
 * The settings `config` gives every simulated engine of `model` beyond the time scale and pipeline: engines.models,
 * engines.kvCapacityTokens, engines.preemption (when not the default recompute), engines.batchSlotsBeside,
 * routing.blockTokens, engines.hostKvCacheGiB; unset = the engine's defaults.
 */
export function simBehaviourOf(config: TidegateConfig, model: string): SimBehaviour {
  const m = config.engines.models[model];
  const kv = m?.kvCapacityTokens ?? config.engines.kvCapacityTokens;
  return {
    ...(config.engines.preemption === "recompute" ? {} : { preemption: config.engines.preemption }),
    ...(config.engines.batchSlotsBeside === undefined ? {} : { batchSlotsBeside: config.engines.batchSlotsBeside }),
    ...(config.engines.hostKvCacheGiB === undefined ? {} : { hostKvCacheGiB: config.engines.hostKvCacheGiB }),
    ...(m?.maxBatch === undefined ? {} : { maxBatch: m.maxBatch }),
    ...(kv === undefined ? {} : { kvCapacityTokens: kv }),
    ...(config.routing === undefined ? {} : { prefixBlockTokens: config.routing.blockTokens }),
  };
}

/** The settings `config` gives a simulated engine of (model, gpu): engines.timeScale, simBehaviourOf, keystage. */
export function simEngineParams(config: TidegateConfig, model: ModelName, gpu: GpuType): SimEngineParams {
  const pipeline = pipelineSpecFor(config.keystage, config.controller.strategy, model, gpu);
  return { timeScale: config.engines.timeScale, ...simBehaviourOf(config, model), ...(pipeline === undefined ? {} : { pipeline }) };
}

/** A whole-model SimEngine with `params` (a pipeline spec in them is ignored: the sim actuator's loading engines). */
export function newSimEngine(inst: SimInstance, params: SimEngineParams, clock: Clock, opts: SimBuildOptions = {}): SimEngine {
  const kvScale = opts.kvScale ?? 1;
  const kv = kvScale === 1 ? params.kvCapacityTokens : Math.floor((params.kvCapacityTokens ?? getProfile(inst.model, inst.gpu, inst.tp).kvCapacityTokens) * kvScale);
  return new SimEngine({
    instanceId: inst.instanceId,
    model: inst.model,
    gpu: inst.gpu,
    tp: inst.tp,
    clock,
    timeScale: params.timeScale,
    ...(params.maxBatch === undefined ? {} : { maxBatch: params.maxBatch }),
    ...(kv === undefined ? {} : { kvCapacityTokens: kv }),
    ...(params.preemption === undefined ? {} : { preemption: params.preemption }),
    ...(params.batchSlotsBeside === undefined ? {} : { batchSlotsBeside: params.batchSlotsBeside }),
    ...(params.prefixBlockTokens === 0 ? { prefixCache: false as const } : params.prefixBlockTokens === undefined && params.hostKvCacheGiB === undefined ? {} : { prefixCache: { ...(params.prefixBlockTokens === undefined ? {} : { blockTokens: params.prefixBlockTokens }), ...(params.hostKvCacheGiB === undefined ? {} : { hostKvCacheGiB: params.hostKvCacheGiB }) } }),
    ...(opts.events === undefined ? {} : { events: opts.events }),
    ...(opts.passOverheadMs === undefined || opts.passOverheadMs <= 0 ? {} : { passOverheadMs: opts.passOverheadMs }),
    ...(opts.solver === undefined ? {} : { solver: opts.solver }),
  });
}

/** The instance's engine: a PipelineEngine when `params.pipeline` is set, else a SimEngine. */
export function newEngine(inst: SimInstance, params: SimEngineParams, clock: Clock, opts: SimBuildOptions = {}): SimEngine | PipelineEngine {
  if (params.pipeline === undefined) return newSimEngine(inst, params, clock, opts);
  return new PipelineEngine({ instanceId: inst.instanceId, model: inst.model, gpu: inst.gpu, gpus: inst.tp, spec: params.pipeline, clock, timeScale: params.timeScale, ...(opts.events === undefined ? {} : { events: opts.events }) });
}

/** `newEngine` with the config's settings for the instance's (model, gpu). */
export function buildSimEngine(config: TidegateConfig, inst: SimInstance, clock: Clock, opts: SimBuildOptions = {}): SimEngine | PipelineEngine {
  return newEngine(inst, simEngineParams(config, inst.model, inst.gpu), clock, opts);
}

/** engine-sim's flags for `params` (what `newEngine` would build in process): --time-scale, then --pipeline or the behaviour settings (flags.ts engineSimBehaviourFlags, shared with node agents). */
export function engineSimFlags(params: SimEngineParams): string[] {
  const out = ["--time-scale", String(params.timeScale)];
  if (params.pipeline !== undefined) return [...out, "--pipeline", pipelineSpecJson(params.pipeline)];
  return [...out, ...engineSimBehaviourFlags(params)];
}
