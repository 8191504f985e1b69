/**
 * A pipelined instance in virtual (or wall) time: S stages, each with its own replicas and one FIFO queue. A request
 * enters stage 0 on arrival, is served by one free replica of each stage in turn (one request per replica at a
 * time: QUART §5.1 "the replica count indicates the number of requests that can be processed in parallel"), and
 * crosses the activation transfer between stages. Service times come from `Pipeline.stageMs` (the shared
 * performance model scaled by the stage's share of layers).
 *
 * This is a stage-level queue model, not the full simulated engine (engines/sim): the engine's continuous
 * batching interleaves every request's decode through all stages token by token, which has no per-stage queue to
 * scale; here each stage runs its share of a request's whole work (prefill and decode) before handing it on. See
 * README.md.
 *
 * Replicas are added (`addReplica`, ready after a start delay) and removed (`removeReplica`: a starting or idle one
 * at once, else a busy one is drained, in the order the scaler asks) by the scaler. Everything is driven by `clock.after` callbacks.
 */
import type { Clock, Timer } from "../../core/clock.js";
import { interArrivalCv } from "./cv.js";
import type { Pipeline } from "./stages.js";

/** What `StageFleet.removeReplica` took: an idle ready replica, a starting one (a wasted start), a busy one (drains). */
export type Removed = "idle" | "starting" | "busy";

/** One request through the pipeline. */
export interface PipelineRequest {
  id: number;
  arrivalMs: number;
  promptTokens: number;
  outputTokens: number;
}

interface Job {
  req: PipelineRequest;
  enqueuedMs: number;
}

/** One replica of one stage on one GPU. */
export interface Replica {
  readonly id: number;
  readonly stage: number;
  readonly server: number;
  readyAtMs: number;
  busy: Job | undefined;
  draining: boolean;
  startTimer: Timer | undefined;
}

/** What a stage saw over the observation window, and what it holds now. */
export interface StageObservation {
  /** Arrivals in the window and the window's length (ms). */
  arrivals: number;
  windowMs: number;
  /** Inter-arrival CV in the window (0 with < 3 arrivals). */
  arrivalCv: number;
  /**
   * Mean service time (ms): an exponential moving average over the last ~64 completions (undefined before the
   * first), steadier than the window's mean when request sizes vary a lot. CV over the window.
   */
  meanServiceMs: number | undefined;
  serviceCv: number;
  queue: number;
  /** Replicas serving, starting (not yet ready) and draining now. */
  serving: number;
  starting: number;
  draining: number;
  busy: number;
}

/** Wiring of a `PipelineSim`: its clock, layout, link rate, callbacks and observation window. */
export interface PipelineSimOptions {
  clock: Clock;
  pipeline: Pipeline;
  /** Data-plane rate for activation transfers (bytes/s). */
  linkBytesPerS: number;
  /** Called when a request leaves the last stage. */
  onDone?: (req: PipelineRequest, doneMs: number) => void;
  /** Called when a removed replica has stopped and its GPU is free. */
  onReplicaStopped?: (r: Replica) => void;
  /** Observation window kept for `observe` (ms). */
  windowMs: number;
}

class StageState {
  readonly queue: Job[] = [];
  queueHead = 0;
  readonly replicas: Replica[] = [];
  /** Arrival times (ms) in the window, ascending. */
  readonly arrivals: number[] = [];
  /** [end ms, service ms] of completions in the window. */
  readonly services: [number, number][] = [];
  /** ∫ queue length dt (ms·requests) and when it was last updated. */
  queueArea = 0;
  areaAtMs = 0;
  /** EWMA of service times (ms), weight 1/64 per completion. */
  serviceEwmaMs: number | undefined;

  get queued(): number {
    return this.queue.length - this.queueHead;
  }
}

/** One pipelined instance: S stages with queues and replicas, advanced by `clock.after` callbacks. */
export class PipelineSim {
  private readonly stages: StageState[];
  private nextReplicaId = 0;
  private readonly startMs: number;
  /** Ids of requests cancelled while in service or between stages: dropped when that stage ends or they arrive. */
  private readonly cancelled = new Set<number>();
  completed = 0;

  constructor(readonly opts: PipelineSimOptions) {
    this.stages = Array.from({ length: opts.pipeline.stages }, () => new StageState());
    this.startMs = opts.clock.now();
    for (const s of this.stages) s.areaAtMs = this.startMs;
  }

  get stageCount(): number {
    return this.stages.length;
  }

  /** A request arrives now at stage 0. */
  submit(req: PipelineRequest): void {
    this.enqueue(0, { req, enqueuedMs: this.opts.clock.now() });
  }

  /**
   * Cancels request `id` (the client went away): a queued request leaves its queue now; one in service goes no
   * further than the stage serving it (a stage's forward pass is not interrupted), nor does one crossing to the next
   * stage. No `onDone`.
   */
  cancel(id: number): void {
    const now = this.opts.clock.now();
    for (const st of this.stages) {
      for (let i = st.queueHead; i < st.queue.length; i++) {
        if (st.queue[i]!.req.id !== id) continue;
        this.accrue(st, now);
        st.queue.splice(i, 1);
        return;
      }
    }
    this.cancelled.add(id);
  }

  /** Replicas of every stage with the request each serves (draining ones included), for occupancy figures. */
  busyReplicas(): { stage: number; req: PipelineRequest }[] {
    const out: { stage: number; req: PipelineRequest }[] = [];
    this.stages.forEach((st, stage) => {
      for (const r of st.replicas) if (r.busy !== undefined) out.push({ stage, req: r.busy.req });
    });
    return out;
  }

  /** Adds a replica of `stage` on `server` that serves after `delayMs`. */
  addReplica(stage: number, server: number, delayMs: number): Replica {
    const now = this.opts.clock.now();
    const r: Replica = { id: this.nextReplicaId++, stage, server, readyAtMs: now + delayMs, busy: undefined, draining: false, startTimer: undefined };
    this.stages[stage]!.replicas.push(r);
    if (delayMs <= 0) this.dispatch(stage);
    else r.startTimer = this.opts.clock.after(delayMs, () => {
      r.startTimer = undefined;
      this.dispatch(stage);
    });
    return r;
  }

  /**
   * Removes one replica of `stage` in the order of scaler.ts `StageFleet.removeReplica` (`startingFirst`: a starting
   * one — its start cancelled —, an idle ready one, the busy one that started most recently; otherwise idle, busy,
   * starting). An idle or starting one stops at once, a busy one drains (stops after its current request). Says
   * which, or undefined if the stage has no replica left that is not already draining.
   */
  removeReplica(stage: number, startingFirst = true): Removed | undefined {
    const st = this.stages[stage]!;
    const now = this.opts.clock.now();
    const live = st.replicas.filter((r) => !r.draining);
    const starting = live.find((r) => r.readyAtMs > now);
    const idle = live.find((r) => r.readyAtMs <= now && r.busy === undefined);
    const busy = live.filter((r) => r.readyAtMs <= now && r.busy !== undefined).at(-1);
    const pick = startingFirst ? (starting ?? idle ?? busy) : (idle ?? busy ?? starting);
    if (pick === undefined) return undefined;
    pick.draining = true;
    if (pick.busy === undefined) this.stop(pick);
    return pick === idle ? "idle" : pick === starting ? "starting" : "busy";
  }

  /** Replicas of `stage` that are not draining (serving or starting). */
  replicas(stage: number): Replica[] {
    return this.stages[stage]!.replicas.filter((r) => !r.draining);
  }

  /** Requests waiting in `stage`'s queue now. */
  queueLength(stage: number): number {
    return this.stages[stage]!.queued;
  }

  /** Each stage's observation over the last `windowMs`. */
  observe(): StageObservation[] {
    const now = this.opts.clock.now();
    const from = now - this.opts.windowMs;
    return this.stages.map((st) => {
      trimBefore(st.arrivals, from);
      while (st.services.length > 0 && st.services[0]![0] < from) st.services.shift();
      const n = st.services.length;
      let sum = 0;
      let sumSq = 0;
      for (const [, d] of st.services) {
        sum += d;
        sumSq += d * d;
      }
      const mean = n === 0 ? undefined : sum / n;
      const serviceCv = n < 2 || mean === undefined || mean <= 0 ? 0 : Math.sqrt(Math.max(0, sumSq / n - mean * mean)) / mean;
      const live = st.replicas.filter((r) => !r.draining);
      return {
        arrivals: st.arrivals.length,
        windowMs: Math.min(this.opts.windowMs, now - this.startMs),
        arrivalCv: interArrivalCv(st.arrivals),
        meanServiceMs: st.serviceEwmaMs,
        serviceCv,
        queue: st.queued,
        serving: live.filter((r) => r.readyAtMs <= now).length,
        starting: live.filter((r) => r.readyAtMs > now).length,
        draining: st.replicas.length - live.length,
        busy: st.replicas.filter((r) => r.busy !== undefined).length,
      };
    });
  }

  /** Time-average queue length of each stage since the start (requests). */
  averageQueues(): number[] {
    const now = this.opts.clock.now();
    return this.stages.map((st) => {
      this.accrue(st, now);
      return now > this.startMs ? st.queueArea / (now - this.startMs) : 0;
    });
  }

  private accrue(st: StageState, now: number): void {
    st.queueArea += st.queued * (now - st.areaAtMs);
    st.areaAtMs = now;
  }

  private enqueue(stage: number, job: Job): void {
    const st = this.stages[stage]!;
    const now = this.opts.clock.now();
    this.accrue(st, now);
    st.arrivals.push(now);
    st.queue.push(job);
    this.dispatch(stage);
  }

  /** Starts queued jobs on the stage's free, ready replicas. */
  private dispatch(stage: number): void {
    const st = this.stages[stage]!;
    const now = this.opts.clock.now();
    for (const r of st.replicas) {
      if (st.queued === 0) break;
      if (r.busy !== undefined || r.draining || r.readyAtMs > now) continue;
      this.accrue(st, now);
      const job = this.nextJob(st);
      if (job === undefined) break;
      r.busy = job;
      const serviceMs = this.opts.pipeline.stageMs(stage, job.req.promptTokens, job.req.outputTokens);
      this.opts.clock.after(serviceMs, () => this.finish(r, serviceMs));
    }
  }

  /** Takes the queue's head, skipping cancelled requests (they leave the pipeline here). */
  private nextJob(st: StageState): Job | undefined {
    while (st.queued > 0) {
      const job = st.queue[st.queueHead++]!;
      if (st.queueHead > 1024 && st.queueHead * 2 > st.queue.length) {
        st.queue.splice(0, st.queueHead);
        st.queueHead = 0;
      }
      if (!this.cancelled.delete(job.req.id)) return job;
    }
    return undefined;
  }

  private finish(r: Replica, serviceMs: number): void {
    const job = r.busy!;
    r.busy = undefined;
    const now = this.opts.clock.now();
    const st = this.stages[r.stage]!;
    st.services.push([now, serviceMs]);
    st.serviceEwmaMs = st.serviceEwmaMs === undefined ? serviceMs : st.serviceEwmaMs + (serviceMs - st.serviceEwmaMs) / 64;
    if (r.draining) this.stop(r);
    else this.dispatch(r.stage);
    const next = r.stage + 1;
    if (this.cancelled.delete(job.req.id)) return;
    if (next === this.stages.length) {
      this.completed++;
      this.opts.onDone?.(job.req, now);
      return;
    }
    const p = this.opts.pipeline;
    const transferMs = (p.activationBytes(job.req.promptTokens, job.req.outputTokens) / this.opts.linkBytesPerS) * 1000;
    this.opts.clock.after(transferMs, () => this.enqueue(next, { req: job.req, enqueuedMs: this.opts.clock.now() }));
  }

  private stop(r: Replica): void {
    r.startTimer?.cancel();
    const st = this.stages[r.stage]!;
    st.replicas.splice(st.replicas.indexOf(r), 1);
    this.opts.onReplicaStopped?.(r);
  }
}

function trimBefore(xs: number[], from: number): void {
  let i = 0;
  while (i < xs.length && xs[i]! < from) i++;
  if (i > 0) xs.splice(0, i);
}
