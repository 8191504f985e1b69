/**
 * The one builder of simulated engines (issue 30): every region shape — the sim actuator's engines (sim-region.ts),
 * a static region's in-process engines, the in-process agents of `tidegate dev`, `tidegate engine-sim` — makes its
 * SimEngine or PipelineEngine here, from the same settings:
 *
 * - `engines.timeScale` multiplies every simulated duration (1 in the virtual-time replays' configs);
 * - the engine settings (core/engine-settings.ts: batch cap, KV cache, preemption, batch slots beside interactive
 *   work, host KV tier) from the `engines` section, `engines.models.<m>` over them, and the prefix cache's block size
 *   from `routing.blockTokens` (`engineSettingsOf`);
 * - an endpoint listed in `keystage.pipelines` is served by a PipelineEngine (region/keystage; key-stage or
 *   whole-pipeline scaling by `controller.strategy`), which takes only the time scale: each stage replica serves
 *   one request at a time, so the engine settings do not apply (engine-sim refuses them with --pipeline).
 *
 * Engine processes get the same settings as flags (`engineSimFlags`: --time-scale, then --pipeline or --settings
 * <json>), whether a static region spawns them (region/process/spawn.ts) or a node agent does (StartEngine carries
 * `engineSettingsOf` as its `settings`, which nodes/agent/engine-supervisor.ts passes as the same flag; an
 * in-process agent builds its engine from them here).
 */
import type { Clock } from "../../core/clock.js";
import { modelEngineSettings, type TidegateConfig } from "../../core/config.js";
import type { GpuType, ModelName } from "../../core/models.js";
import type { Solver } from "../../core/solver.js";
import { getProfile } from "../../core/perf/model.js";
import { settingsArgs, type EngineSettings } from "../../core/engine-settings.js";
import { coreSettingsOf, SimEngine } from "../../engines/sim/sim-engine.js";
import { KvFabric, type KvTransferObserver } from "../../engines/sim/kv-fabric.js";
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
  /** The engine settings (core/engine-settings.ts); absent or unset fields = the engine's defaults. */
  settings?: EngineSettings;
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
  /**
   * The in-process KV fabric of a fleet whose simulated engines take prefill/decode roles (engines/sim/kv-fabric.ts):
   * with it the engine takes the settings' `role`; without it the role is the HTTP face's (engine-sim's http.ts).
   */
  kvFabric?: KvFabric;
}

/**
 * The engine settings `config` gives every simulated engine of `model` (core/engine-settings.ts): the `engines`
 * section's, `engines.models.<model>` over them, and routing.blockTokens as the prefix cache's block size (the
 * engines hash prompts with the router's block size); unset = the engine's defaults.
 */
export function engineSettingsOf(config: TidegateConfig, model: string): EngineSettings {
  return { ...modelEngineSettings(config.engines, model), ...(config.routing === undefined ? {} : { prefixBlockTokens: config.routing.blockTokens }) };
}

/** The settings `config` gives a simulated engine of (model, gpu): engines.timeScale, engineSettingsOf, keystage. */
export function simEngineParams(config: TidegateConfig, model: ModelName, gpu: GpuType): SimEngineParams {
  const pipeline = pipelineSpecFor(config.keystage, config.controller.strategy, model, gpu);
  return { timeScale: config.engines.timeScale, settings: engineSettingsOf(config, model), ...(pipeline === undefined ? {} : { pipeline }) };
}

/** A whole-model SimEngine with `params` (a pipeline spec in them is ignored: the sim actuator's loading engines). */
export function newSimEngine(inst: SimInstance, params: SimEngineParams, clock: Clock, opts: SimBuildOptions = {}): SimEngine {
  const kvScale = opts.kvScale ?? 1;
  const kv = kvScale === 1 ? params.settings?.kvCapacityTokens : Math.floor((params.settings?.kvCapacityTokens ?? getProfile(inst.model, inst.gpu, inst.tp).kvCapacityTokens) * kvScale);
  return new SimEngine({
    instanceId: inst.instanceId,
    model: inst.model,
    gpu: inst.gpu,
    tp: inst.tp,
    clock,
    timeScale: params.timeScale,
    ...coreSettingsOf({ ...params.settings, ...(kv === undefined ? {} : { kvCapacityTokens: kv }) }),
    ...(opts.events === undefined ? {} : { events: opts.events }),
    ...(opts.passOverheadMs === undefined || opts.passOverheadMs <= 0 ? {} : { passOverheadMs: opts.passOverheadMs }),
    ...(opts.solver === undefined ? {} : { solver: opts.solver }),
    ...(opts.kvFabric === undefined ? {} : { kvFabric: opts.kvFabric, ...(params.settings?.role === undefined ? {} : { role: params.settings.role }) }),
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

/** engine-sim's flags for `params` (what `newEngine` would build in process): --time-scale, then --pipeline or --settings (the flag node agents pass too). */
export function engineSimFlags(params: SimEngineParams): string[] {
  const out = ["--time-scale", String(params.timeScale)];
  if (params.pipeline !== undefined) return [...out, "--pipeline", pipelineSpecJson(params.pipeline)];
  return [...out, ...settingsArgs(params.settings)];
}

/**
 * A region's KV fabric for its in-process prefill and decode engines (engines/sim/kv-fabric.ts), made on first use:
 * `forRole(role)` is the build option an engine of that role needs (none for a colocated one). Its pulls reach
 * `observer` (the region's metrics).
 */
export function regionKvFabric(clock: Clock, observer?: Partial<KvTransferObserver>): (role: EngineSettings["role"]) => Pick<SimBuildOptions, "kvFabric"> {
  let fabric: KvFabric | undefined;
  const heard = observer?.kvPulled === undefined ? undefined : { kvPulled: observer.kvPulled.bind(observer), kvPullFailed: () => observer.kvPullFailed?.() };
  return (role) => (role === undefined || role === "both" ? {} : { kvFabric: (fabric ??= new KvFabric({ clock, ...(heard === undefined ? {} : { observer: heard }) })) });
}
