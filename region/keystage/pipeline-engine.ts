/**
 * A pipelined instance as an `Engine` (core/ports.ts): the stage-level pipeline (pipeline.ts) with its key-stage
 * scaler (scaler.ts), the same wiring the bench runs in virtual time (test/bench/keystage-run.ts), here serving requests on the Clock it
 * is given — WallClock in `tidegate engine-sim --pipeline` and `tidegate dev`, the replay's clock in the week replay.
 *
 * Composition with the planner (QUART §4.3 under SageServe's hourly plan): the planner decides how many instances of
 * a model a region runs and the controller paces them; each instance of a pipelined model holds its GPUs
 * (`models[].gpusPerInstance[gpu]`) as the budget its key-stage scaler splits over the stages, starting from
 * `minReplicasPerStage` replicas per stage. `mode` "key-stage" under the `keystage` controller strategy; under any other
 * strategy "whole-pipeline" (every stage scaled together, the baseline of bench:keystage).
 *
 * What a client sees: the stage model runs a request's whole work stage by stage (README.md, "The engine model"), so
 * the text exists when the last stage finishes: the tokens are emitted then (time to first token ≈ end-to-end
 * latency). Occupancy as `EngineStats`: a replica serving a request holds that request's KV for its stage's layers
 * (capacity: each replica's GPU memory × 0.9 − its stage's weights); `waiting` is stage 0's queue; `remainingTokens`
 * counts every request in the pipeline.
 */
import type { Clock, Timer } from "../../core/clock.js";
import { TidegateError } from "../../core/errors.js";
import { GPU_SPECS, kvBytesPerToken, MODEL_SPECS } from "../../core/models.js";
import { makeUsage, syntheticToken } from "../../core/openai.js";
import type { Engine, EngineEvent, EngineStats, GenerateRequest, RequestCallbacks } from "../../core/ports.js";
import { ObjectReader, ValidationError } from "../../core/validate.js";
import { DEFAULT_MEMORY_FRACTION } from "../../core/perf/model.js";
import type { PipelineSummary } from "../../engines/pipeline-summary.js";
import { seedOf } from "../../engines/sim/sim-engine.js";
import { resolveStrategy } from "../strategies/strategy-registry.js";
import { parseCluster, readLayoutFlag, type ClusterConfig, type KeystageConfig } from "./keystage-config.js";
import type { ScalingMode, StagePlan } from "./corrector.js";
import { PipelineSim, type PipelineRequest } from "./pipeline.js";
import { Cluster, KeyStageScaler, type ScalerStats } from "./scaler.js";
import { Pipeline, type PipelineLayout } from "./stages.js";
import type { KeyStageParams } from "../strategies/keystage.js";
import { contextLengthExceeded } from "../../core/openai.js";

/** What an instance of a pipelined model runs: its layout, how it scales, and the cluster model it places on. */
export interface PipelineSpec {
  layersPerStage: number[];
  profileTp: number;
  hiddenSize: number;
  mode: ScalingMode;
  params: KeyStageParams;
  cluster: ClusterConfig;
}

/** The pipeline spec of (model, gpu) from config, or undefined when that endpoint is not pipelined. */
export function pipelineSpecFor(keystage: KeystageConfig | undefined, strategy: string, model: string, gpu: string): PipelineSpec | undefined {
  const p = keystage?.pipelines.find((x) => x.model === model && x.gpu === gpu);
  if (keystage === undefined || p === undefined) return undefined;
  return {
    layersPerStage: [...p.layersPerStage],
    profileTp: p.profileTp,
    hiddenSize: p.hiddenSize,
    mode: strategy === "keystage" ? "key-stage" : "whole-pipeline",
    params: keystage.params,
    cluster: keystage.cluster,
  };
}

/**
 * EngineStartOptions.pipeline for the agents actuator: (model, gpu) → the `--pipeline` JSON of a pipelined endpoint under
 * this config's strategy, undefined for a whole-model endpoint.
 */
export function pipelineFlag(config: { keystage?: KeystageConfig | undefined; controller: { strategy: string } }): (model: string, gpu: string) => string | undefined {
  return (model, gpu) => {
    const spec = pipelineSpecFor(config.keystage, config.controller.strategy, model, gpu);
    return spec === undefined ? undefined : pipelineSpecJson(spec);
  };
}

/** The spec as the JSON text `engine-sim --pipeline` and the node agents' StartEngine carry. */
export function pipelineSpecJson(spec: PipelineSpec): string {
  return JSON.stringify(spec);
}

/**
 * Parses `--pipeline` JSON for (model, gpu), every error naming `path` and the field: the same rules as the config's
 * `keystage` section, plus a budget of `gpus` that must hold `minReplicasPerStage` replicas of every stage.
 */
export function parsePipelineSpec(text: string, model: string, gpu: string, gpus: number, path = "--pipeline"): PipelineSpec {
  const { r, layout } = readLayoutFlag(text, model, gpu, path);
  const mode = r.string("mode", "key-stage", { oneOf: ["key-stage", "whole-pipeline"] }) as ScalingMode;
  const params = resolveStrategy("keystage", r.raw("params") ?? {}, path).params as KeyStageParams;
  const cluster = parseCluster(r.object("cluster"));
  r.done();
  const need = layout.layersPerStage.length * params.minReplicasPerStage;
  if (gpus < need) {
    throw new ValidationError(path, `an instance of ${gpus} GPUs cannot hold ${layout.layersPerStage.length} stages × ${params.minReplicasPerStage} replicas (minReplicasPerStage): it needs ≥ ${need}`);
  }
  return { layersPerStage: layout.layersPerStage, profileTp: layout.profileTp, hiddenSize: layout.hiddenSize, mode, params, cluster };
}

/**
 * A view of `base` on which durations are `timeScale` × longer in wall terms: the pipeline, its observation windows
 * and its scaler all run in the model's time (engine-sim's --time-scale 0.1 = ten times faster than measured).
 */
export class DilatedClock implements Clock {
  private readonly origin: number;
  constructor(
    private readonly base: Clock,
    private readonly scale: number,
  ) {
    this.origin = base.now();
  }
  now(): number {
    return this.origin + (this.base.now() - this.origin) / this.scale;
  }
  sleep(delayMs: number, signal?: AbortSignal): Promise<void> {
    return this.base.sleep(delayMs * this.scale, signal);
  }
  after(delayMs: number, fn: () => void): Timer {
    return this.base.after(delayMs * this.scale, fn);
  }
  every(intervalMs: number, fn: () => void): Timer {
    return this.base.every(intervalMs * this.scale, fn);
  }
}

/**
 * An instance's pipeline and its KV figures: KV bytes per token per layer, and each stage replica's KV capacity
 * (the GPU's memory × 0.9 − its stage's weights). Throws `invalid_config` for an unknown model or GPU.
 */
export function instancePipeline(instanceId: string, model: string, gpu: string, spec: Pick<PipelineSpec, "layersPerStage" | "profileTp" | "hiddenSize">): { pipeline: Pipeline; kvPerTokenPerLayer: number; kvCapacityPerStage: number[] } {
  const m = MODEL_SPECS[model];
  const g = GPU_SPECS[gpu];
  if (m === undefined || g === undefined) throw new TidegateError("invalid_config", `pipelined instance ${instanceId}: unknown model ${model} or GPU ${gpu}`);
  const layout: PipelineLayout = { model, gpu, layersPerStage: spec.layersPerStage, profileTp: spec.profileTp, hiddenSize: spec.hiddenSize };
  const pipeline = new Pipeline(layout);
  return { pipeline, kvPerTokenPerLayer: kvBytesPerToken(m) / m.layers, kvCapacityPerStage: pipeline.stageBytes.map((b) => Math.max(0, g.memoryBytes * DEFAULT_MEMORY_FRACTION - b)) };
}

/** Wiring of a `PipelineEngine`. */
export interface PipelineEngineOptions {
  instanceId: string;
  model: string;
  gpu: string;
  /** GPUs this instance holds: the budget its scaler splits over the stages. */
  gpus: number;
  spec: PipelineSpec;
  clock: Clock;
  /** Multiplies simulated durations (engine-sim's --time-scale). */
  timeScale?: number;
  /** As SimEngineOptions.events: "coalesced" yields the tokens as two events (first, then the rest) in replay. */
  events?: "per-token" | "coalesced";
}

/** A request in the pipeline and who waits for it. */
interface InFlight {
  req: PipelineRequest;
  done: (atMs: number) => void;
  /** The instance closed with the request inside (generate's waiter rejects with `err`). */
  fail?: (err: TidegateError) => void;
}

/** Prompt and output lengths the scaler expects before it has observed a completion (its μ estimate, §5.1). */
export const EXPECTED_PROMPT_TOKENS = 512;
export const EXPECTED_OUTPUT_TOKENS = 128;

/**
 * What GET /tidegate/keystage reports: the split over stages now and the scaler's counters (a PipelineSummary,
 * engines/pipeline-summary.ts, with each stage's layers and busy replicas and every scaler counter).
 */
export interface PipelineStatus {
  mode: ScalingMode;
  budgetGpus: number;
  heldGpus: number;
  stages: { layers: number; replicas: number; starting: number; queue: number; busy: number; key: boolean }[];
  scaler: ScalerStats;
  completed: number;
}

/** One pipelined instance behind the Engine port. */
export class PipelineEngine implements Engine {
  readonly instanceId: string;
  readonly model: string;
  readonly pipeline: Pipeline;
  readonly scaler: KeyStageScaler;
  private readonly sim: PipelineSim;
  private readonly clock: Clock;
  private readonly inFlight = new Map<number, InFlight>();
  private readonly kvPerTokenPerLayer: number;
  private readonly kvCapacityPerStage: number[];
  private readonly coalesced: boolean;
  private nextId = 1;
  private generated = 0;
  private closed = false;

  constructor(private readonly opts: PipelineEngineOptions) {
    this.instanceId = opts.instanceId;
    this.model = opts.model;
    this.coalesced = opts.events === "coalesced";
    ({ pipeline: this.pipeline, kvPerTokenPerLayer: this.kvPerTokenPerLayer, kvCapacityPerStage: this.kvCapacityPerStage } = instancePipeline(opts.instanceId, opts.model, opts.gpu, opts.spec));
    const scale = opts.timeScale ?? 1;
    if (!(scale > 0)) throw new RangeError(`timeScale must be > 0, got ${scale}`);
    this.clock = scale === 1 ? opts.clock : new DilatedClock(opts.clock, scale);
    // The budget on servers of cluster.gpusPerServer GPUs: full servers, then the remainder on a last one.
    const per = opts.spec.cluster.gpusPerServer;
    const occupied = Array.from({ length: Math.ceil(opts.gpus / per) }, (_, i) => Math.max(0, per - Math.min(per, opts.gpus - i * per)));
    let scaler: KeyStageScaler | undefined;
    this.sim = new PipelineSim({
      clock: this.clock,
      pipeline: this.pipeline,
      linkBytesPerS: opts.spec.cluster.networkBytesPerS,
      windowMs: opts.spec.params.windowMs,
      onDone: (req, doneMs) => {
        const f = this.inFlight.get(req.id);
        if (f === undefined) return;
        this.inFlight.delete(req.id);
        this.generated += req.outputTokens;
        f.done(doneMs);
      },
      onReplicaStopped: (r) => scaler!.onReplicaStopped(r),
    });
    try {
      scaler = new KeyStageScaler({
        clock: this.clock,
        sim: this.sim,
        pipeline: this.pipeline,
        cluster: new Cluster(opts.spec.cluster, occupied),
        params: opts.spec.params,
        mode: opts.spec.mode,
        budgetGpus: opts.gpus,
        expectedServiceMs: this.pipeline.layout.layersPerStage.map((_, s) => this.pipeline.stageMs(s, EXPECTED_PROMPT_TOKENS, EXPECTED_OUTPUT_TOKENS)),
        cacheKey: opts.model,
      });
    } catch (err) {
      throw new TidegateError("invalid_config", `pipelined instance ${opts.instanceId}: ${(err as Error).message}`);
    }
    this.scaler = scaler;
    scaler.deployInitial();
    scaler.start();
  }

  /** Puts a request into the pipeline; `done` runs when it leaves the last stage. Returns its pipeline id. */
  private enter(req: GenerateRequest, done: (atMs: number) => void, fail?: (err: TidegateError) => void): number {
    if (this.closed) throw new TidegateError("upstream_error", `instance ${this.instanceId} is closed`);
    if (req.model !== this.model) throw new TidegateError("model_not_found", `this engine serves ${this.model}, not ${req.model}`, { param: "model" });
    const max = MODEL_SPECS[this.model]!.maxContextTokens;
    if (req.promptTokens + req.maxTokens > max) throw contextLengthExceeded(req.kind, max, req.promptTokens, req.maxTokens);
    const id = this.nextId++;
    const preq: PipelineRequest = { id, arrivalMs: this.clock.now(), promptTokens: req.promptTokens, outputTokens: req.maxTokens };
    this.inFlight.set(id, { req: preq, done, ...(fail === undefined ? {} : { fail }) });
    this.sim.submit(preq);
    return id;
  }

  private cancel(id: number): void {
    if (this.inFlight.delete(id)) this.sim.cancel(id);
  }

  /** Callback form (Engine.submit): first token and done both when the last stage finishes. */
  submit(req: GenerateRequest, callbacks: RequestCallbacks): void {
    this.enter(req, (atMs) => {
      callbacks.onFirstToken?.(atMs);
      callbacks.onDone?.(atMs, req.maxTokens);
    });
  }

  /**
   * Streams one generation: when the request leaves the last stage, its `maxTokens` synthetic tokens (one event
   * each, or two events when coalesced), then `done`. Aborting `signal` takes it out of the pipeline.
   */
  async *generate(req: GenerateRequest, signal?: AbortSignal): AsyncIterable<EngineEvent> {
    signal?.throwIfAborted();
    let finished = false;
    let failed: TidegateError | undefined;
    let wake: (() => void) | undefined;
    const id = this.enter(
      req,
      () => {
        finished = true;
        wake?.();
      },
      (err) => {
        failed = err;
        wake?.();
      },
    );
    const onAbort = () => {
      this.cancel(id);
      wake?.();
    };
    signal?.addEventListener("abort", onAbort, { once: true });
    try {
      if (!finished && failed === undefined && signal?.aborted !== true) await new Promise<void>((resolve) => (wake = resolve));
      if (signal?.aborted) throw signal.reason ?? new TidegateError("cancelled", "request cancelled");
      if (failed !== undefined) throw failed;
      if (this.coalesced) {
        yield { type: "token", text: "", tokens: 1 };
        if (req.maxTokens > 1) yield { type: "token", text: "", tokens: req.maxTokens - 1 };
      } else {
        const seed = seedOf(req.id);
        for (let i = 0; i < req.maxTokens; i++) yield { type: "token", text: syntheticToken(seed, i), tokens: 1 };
      }
      yield { type: "done", finishReason: "length", usage: makeUsage(req.promptTokens, req.maxTokens) };
    } finally {
      signal?.removeEventListener("abort", onAbort);
      if (!finished) this.cancel(id);
    }
  }

  stats(): EngineStats {
    let kvUsed = 0;
    for (const { stage, req } of this.sim.busyReplicas()) {
      kvUsed += (req.promptTokens + req.outputTokens) * this.kvPerTokenPerLayer * this.pipeline.layout.layersPerStage[stage]!;
    }
    let kvCap = 0;
    for (let s = 0; s < this.pipeline.stages; s++) kvCap += this.sim.replicas(s).length * this.kvCapacityPerStage[s]!;
    let remaining = 0;
    for (const f of this.inFlight.values()) remaining += f.req.promptTokens + f.req.outputTokens;
    const waiting = this.sim.queueLength(0);
    return { kvBytesUsed: kvUsed, kvBytesCapacity: kvCap, running: this.inFlight.size - waiting, waiting, remainingTokens: remaining, generatedTokensTotal: this.generated };
  }

  /** The split for the region's listing (region/runtime/runtime.ts). */
  pipelineSummary(): PipelineSummary {
    return this.status();
  }

  /** The split over stages now, and the scaler's counters (GET /tidegate/keystage). */
  status(): PipelineStatus {
    const obs = this.sim.observe();
    const plans: StagePlan[] = this.scaler.lastPlans;
    return {
      mode: this.opts.spec.mode,
      budgetGpus: this.opts.gpus,
      heldGpus: this.scaler.heldGpus,
      stages: obs.map((o, s) => ({ layers: this.pipeline.layout.layersPerStage[s]!, replicas: o.serving, starting: o.starting, queue: o.queue, busy: o.busy, key: plans[s]?.key ?? false })),
      scaler: { ...this.scaler.stats },
      completed: this.sim.completed,
    };
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.scaler.stop();
    const err = new TidegateError("upstream_error", `instance ${this.instanceId} closed with the request in its pipeline`);
    for (const [id, f] of [...this.inFlight]) {
      this.cancel(id);
      f.fail?.(err);
    }
  }
}
