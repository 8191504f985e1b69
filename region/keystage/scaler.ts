/**
 * The key-stage scaler: every `intervalMs` on its Clock it observes a pipelined instance, runs one correct-and-smooth
 * pass (corrector.ts) within the GPU budget, and acts — new replicas are placed (placement.ts) and start from a
 * server's host-memory stage cache or, on a miss, through the data plane (cache.ts); removed replicas return their
 * GPU when they stop. Idempotent per pass: it compares desired counts with the live ones and closes the gap.
 *
 * `Cluster` is the region's servers as this scaler sees them: GPUs (some held by other tenants) and one
 * `StageCache` per server.
 */
import type { Clock, Timer } from "../../core/clock.js";
import { StageCache, diskStartMs, startMs } from "./cache.js";
import type { ClusterConfig } from "./keystage-config.js";
import { correctAndSmooth, type ScalingMode, type StagePlan } from "./corrector.js";
import { Pid } from "./pid.js";
import type { Removed, Replica, StageObservation } from "./pipeline.js";
import { placeReplica } from "./placement.js";
import type { Pipeline } from "./stages.js";
import type { KeyStageParams } from "../strategies/keystage.js";

/** The servers of a region: free GPUs and host caches. */
export class Cluster {
  readonly free: number[];
  readonly caches: StageCache[];
  /** Key-stage replicas of this pipeline per server (for dispersed placement). */
  readonly keyReplicas: number[];

  constructor(
    readonly config: ClusterConfig,
    /** GPUs other tenants hold on each server (its length is the server count). */
    occupied: readonly number[],
  ) {
    this.free = occupied.map((o) => {
      if (!(Number.isInteger(o) && o >= 0 && o <= config.gpusPerServer)) throw new RangeError(`occupied GPUs must be integers in [0, ${config.gpusPerServer}], got ${o}`);
      return config.gpusPerServer - o;
    });
    this.caches = occupied.map(() => new StageCache({ hostMemoryBytes: config.hostMemoryBytes, evictAbove: config.evictAbove }));
    this.keyReplicas = occupied.map(() => 0);
  }

  /** Puts stage `stage` of `cacheKey` (bytes) in server `server`'s host memory before any replica runs (a warm cache). */
  preload(server: number, cacheKey: string, stage: number, bytes: number, nowMs: number): void {
    this.caches[server]!.preload(`${cacheKey}/${stage}`, bytes, nowMs);
  }
}

/**
 * The replicas a scaler acts on: `PipelineSim` (one process simulates every stage), or `ProcessStageFleet`
 * (stage-fleet.ts: each replica a stage process on a node agent).
 */
export interface StageFleet {
  /** Each stage's observation over the window. */
  observe(): StageObservation[];
  /** Replicas of `stage` that are not draining (serving or starting). */
  replicas(stage: number): readonly unknown[];
  /**
   * Removes one replica of `stage`. `startingFirst`: a starting one (its start is given up), else an idle ready one
   * (stopped at once), else a busy one (it drains: stops after its request). Otherwise: an idle ready one, else a
   * busy one, else a starting one. Says which, or undefined when none is left.
   */
  removeReplica(stage: number, startingFirst: boolean): Removed | undefined;
  /** Adds a replica of `stage` on server `server` that serves after `delayMs`. */
  addReplica(stage: number, server: number, delayMs: number): { readonly id: number };
}


/**
 * Takes `stage` of `fleet` down to the plan's `desired` replicas (`ready`: its serving replicas now). A starting
 * replica is removed only when the stage is over its need after that start: its ready replicas alone meet what the
 * smoother keeps (`keep`, QUART §5.2 Algorithm 1); then it goes first — the start is surplus, giving it up frees its
 * GPU at once for a key stage (§4.3: key stages scale in seconds) and the stage keeps its ready capacity. Otherwise
 * the start is needed: idle ready replicas go first, then busy ones drain (their request finishes), and a starting one
 * only when nothing else is left. Before this rule a starting replica was always removed first, so a plan that took
 * a GPU from a stage still below its need threw a process start away (issue 35).
 */
export function shrinkStage(fleet: StageFleet, stage: number, plan: Pick<StagePlan, "desired" | "keep">, ready: number): { removed: number; starting: number } {
  let removed = 0;
  let starting = 0;
  for (let have = fleet.replicas(stage).length; have > plan.desired; have--) {
    const took = fleet.removeReplica(stage, ready >= plan.keep);
    if (took === undefined) break;
    removed++;
    if (took === "starting") starting++;
    else ready--;
  }
  return { removed, starting };
}

/** Counters a run reports. */
export interface ScalerStats {
  passes: number;
  added: number;
  removed: number;
  /** Of `removed`, replicas removed while starting (their start wasted). */
  removedStarting: number;
  cacheHits: number;
  cacheMisses: number;
  /** Replicas started by reading their stage from disk, bypassing the stage cache (`loadFrom: "disk"`). */
  diskLoads: number;
  /** Most GPUs held at once (≤ budget). */
  peakGpus: number;
  /** ∫ GPUs held dt (GPU·ms). */
  gpuMs: number;
}

/** Wiring of a `KeyStageScaler`. */
export interface KeyStageScalerOptions {
  clock: Clock;
  sim: StageFleet;
  pipeline: Pipeline;
  cluster: Cluster;
  params: KeyStageParams;
  mode: ScalingMode;
  budgetGpus: number;
  /** Mean service time per stage expected from the performance model (ms), before any is observed. */
  expectedServiceMs: number[];
  /** Stage-cache key prefix (one pipeline per model). */
  cacheKey: string;
  /**
   * Where a new replica's parameters come from: "stage-cache" (QUART §6.1: host memory, else a miss as cache.ts
   * `startMs` says) or "disk" — the baselines of QUART §8 (INFless, InferLine, Cocktail), which keep no stage cache
   * and load every new replica from its server's disk (`diskStartMs`). Default "stage-cache".
   */
  loadFrom?: "stage-cache" | "disk";
}

/** The periodic correct-and-smooth loop of one pipeline and the actions it takes. */
export class KeyStageScaler {
  readonly stats: ScalerStats = { passes: 0, added: 0, removed: 0, removedStarting: 0, cacheHits: 0, cacheMisses: 0, diskLoads: 0, peakGpus: 0, gpuMs: 0 };
  /** Replicas that hold a stage-cache entry (released when they stop). */
  private readonly holdsCache = new Set<number>();
  private readonly pids: Pid[];
  private readonly lastGrowMs: (number | undefined)[];
  /** Per stage: when its latest grown replica should serve (added + its start time). */
  private readonly readyByMs: (number | undefined)[];
  /** Replicas placed as key-stage replicas (counted in Cluster.keyReplicas until they stop). */
  private readonly placedAsKey = new Set<number>();
  private held = 0;
  private heldSinceMs: number;
  private timer: Timer | undefined;
  private lastPassMs: number | undefined;
  /** Plans of the last pass (for reports). */
  lastPlans: StagePlan[] = [];

  constructor(readonly opts: KeyStageScalerOptions) {
    const n = opts.pipeline.stages;
    if (opts.budgetGpus < n * opts.params.minReplicasPerStage) {
      throw new RangeError(`a budget of ${opts.budgetGpus} GPUs cannot hold ${n} stages × ${opts.params.minReplicasPerStage} replicas`);
    }
    this.pids = Array.from({ length: n }, () => new Pid({ kp: opts.params.kp, ki: opts.params.ki, kd: opts.params.kd }));
    this.lastGrowMs = Array.from({ length: n }, () => undefined);
    this.readyByMs = Array.from({ length: n }, () => undefined);
    this.heldSinceMs = opts.clock.now();
  }

  /** GPUs this pipeline holds now (serving, starting and draining replicas). */
  get heldGpus(): number {
    return this.held;
  }

  /**
   * Places `minReplicasPerStage` replicas of every stage (their parameters already in those servers' caches): ready
   * at once, or with `timed` after the start time a scaling action's replica would take (stage processes).
   */
  deployInitial(timed = false): void {
    for (let s = 0; s < this.opts.pipeline.stages; s++) {
      for (let k = 0; k < this.opts.params.minReplicasPerStage; k++) this.add(s, false, true, timed);
    }
  }

  /** Starts the periodic pass. */
  start(): void {
    this.timer = this.opts.clock.every(this.opts.params.intervalMs, () => this.pass());
  }

  stop(): void {
    this.timer?.cancel();
    this.timer = undefined;
    this.account();
  }

  /** One correct-and-smooth pass and its actions. */
  pass(): StagePlan[] {
    const now = this.opts.clock.now();
    const dtS = this.lastPassMs === undefined ? this.opts.params.intervalMs / 1000 : Math.max(1e-3, (now - this.lastPassMs) / 1000);
    this.lastPassMs = now;
    const sim = this.opts.sim;
    const obs = sim.observe();
    const plans = correctAndSmooth({
      stages: obs.map((o, i) => ({ obs: o, replicas: o.serving + o.starting, lastGrowMs: this.grownAt(i, o, now), expectedServiceMs: this.opts.expectedServiceMs[i]! })),
      pids: this.pids,
      params: this.opts.params,
      mode: this.opts.mode,
      budgetGpus: this.opts.budgetGpus,
      nowMs: now,
      dtS,
    });
    this.stats.passes++;
    // Shrink first so freed GPUs can serve the stages that grow in the same pass.
    plans.forEach((pl, s) => this.shrink(s, pl, obs[s]!));
    plans.forEach((pl, s) => {
      for (let have = sim.replicas(s).length; have < pl.desired; have++) {
        const startMs = this.held >= this.opts.budgetGpus ? undefined : this.add(s, pl.key, false);
        if (startMs === undefined) break;
        this.lastGrowMs[s] = now;
        this.readyByMs[s] = Math.max(this.readyByMs[s] ?? 0, now + startMs);
      }
    });
    this.lastPlans = plans;
    return plans;
  }

  private shrink(stage: number, pl: StagePlan, o: StageObservation): void {
    const r = shrinkStage(this.opts.sim, stage, pl, o.serving);
    this.stats.removed += r.removed;
    this.stats.removedStarting += r.starting;
  }

  /**
   * When stage `i` last grew, for the reclaim cooldown and the scale-in wait (corrector.ts): when its newest replica
   * was added — or now, while a replica is still starting after the start time the scaler gave it (`startMs`). A stage
   * process can take longer to start than the model says (a real process on a loaded node, at a time scale of 0.1 a
   * second of wall time is 10 s of model time); until it serves, its growth has not taken effect, so the stage is
   * neither a donor nor scaled in and the start is not thrown away (issue 35: the scaler removed replicas still
   * starting). In PipelineSim every replica serves at its start time, so this never applies there.
   */
  private grownAt(i: number, o: StageObservation, now: number): number | undefined {
    const by = this.readyByMs[i];
    return o.starting > 0 && by !== undefined && now >= by ? now : this.lastGrowMs[i];
  }

  /** Called by the pipeline when a removed replica stopped: its GPU goes back to its server. */
  onReplicaStopped(r: Pick<Replica, "id" | "stage" | "server">): void {
    this.account();
    const c = this.opts.cluster;
    c.free[r.server]!++;
    if (this.holdsCache.delete(r.id)) c.caches[r.server]!.release(`${this.opts.cacheKey}/${r.stage}`, this.opts.clock.now());
    if (this.placedAsKey.delete(r.id)) c.keyReplicas[r.server]!--;
    this.held--;
  }

  /** Places and starts one replica of `stage`; its start time (ms until it serves), or undefined when no server has a free GPU. */
  private add(stage: number, key: boolean, initial: boolean, timed = false): number | undefined {
    const c = this.opts.cluster;
    const cacheKey = `${this.opts.cacheKey}/${stage}`;
    const j = placeReplica(
      c.free.map((f, i) => ({ freeGpus: f, keyReplicas: c.keyReplicas[i]!, cached: c.caches[i]!.has(cacheKey) })),
      { key, plentifulFreeGpus: Math.ceil(c.config.gpusPerServer / 2) },
    );
    if (j < 0) return undefined;
    this.account();
    const now = this.opts.clock.now();
    const bytes = this.opts.pipeline.stageBytes[stage]!;
    const fromDisk = this.opts.loadFrom === "disk";
    const hit = !fromDisk && c.caches[j]!.acquire(cacheKey, bytes, now);
    if (!initial) {
      if (fromDisk) this.stats.diskLoads++;
      else if (hit) this.stats.cacheHits++;
      else this.stats.cacheMisses++;
    }
    c.free[j]!--;
    if (key) c.keyReplicas[j]!++; // a key replica counts where it runs until it stops
    this.held++;
    this.stats.peakGpus = Math.max(this.stats.peakGpus, this.held);
    const delayMs = initial && !timed ? 0 : fromDisk ? diskStartMs(bytes, c.config) : startMs(bytes, hit, c.config);
    const r = this.opts.sim.addReplica(stage, j, delayMs);
    if (!fromDisk) this.holdsCache.add(r.id);
    if (key) this.placedAsKey.add(r.id);
    if (!initial) this.stats.added++;
    return delayMs;
  }

  private account(): void {
    const now = this.opts.clock.now();
    this.stats.gpuMs += this.held * (now - this.heldSinceMs);
    this.heldSinceMs = now;
  }
}
