/**
 * A loading instance paired with a serving one (BlitzScale §5.2), as the engine core's EpisodePlanner: while the
 * target (new instance) receives layers, the source (serving instance, the whole model) shares the prefill of its
 * queue with it. At each prefill start the source's engine core admits a loading episode of up to a few batches;
 * this planner turns them into a §5.2 episode and rehearses the chosen live scheduler (zigzag.ts):
 *
 * - layers are taken in `groups` (default 16) equal groups, so one ILP per episode stays well under a second;
 *   group g reaches the target when the last layer in it does;
 * - the time unit is one layer group's computation for the episode's mean batch (prefill time is about linear in
 *   batched tokens: §5.2 "Coping with LLM", the regulation parameter);
 * - `best-effort` runs as many groups on the target as it holds when it takes a batch up, at most half;
 *   `zigzag` solves Eq. 1 with HiGHS (the project's adapter) and rehearses the configuration; should the rehearsal
 *   come out worse than best effort's (the ILP is solved under a time limit), best effort's is used: the
 *   scheduler checks both rehearsals before committing, which costs microseconds; a one-batch episode needs no
 *   solve (its latency is L layer-times under any split, which best effort's reaches), so it uses best effort's;
 * - a batch split between the two instances pays one activation hop: its tokens × hidden size × 2 bytes over the
 *   link between them (`hopMsPerToken`).
 * - the pair's KV: a split batch keeps the KV of each layer where that layer runs, so while paired the source's
 *   cache reaches G/(G − T) times as many tokens (T: groups the target holds, at most half; `kvScale`).
 * The pairing is active until the target holds every layer; from then the target serves on its own.
 */
import type { PairScheduler } from "../../../core/ports.js";
import type { Solver } from "../../../core/solver.js";
import type { EpisodePlanner } from "../core.js";
import { bestEffort, rehearse, zigzagConfiguration, type Episode, type Rehearsal } from "./zigzag.js";

export interface PairOptions {
  scheduler: PairScheduler;
  /** When each layer reaches the target, clock ms (non-decreasing). */
  layerArrivalMs: readonly number[];
  /** Activation transfer per prompt token of a split batch (ms). */
  hopMsPerToken: number;
  /** HiGHS, for zigzag. */
  solver?: Solver;
  groups?: number;
  /** HiGHS time limit per episode (s, default 0.5; a live engine uses less: the solve runs on its event loop). */
  timeLimitS?: number;
  maxEpisodeBatches?: number;
  /**
   * Whether the last arrival is when the load ends (default true: replay's plan). False live: the pairing stays
   * active until a revision with `final` says so (revise below).
   */
  loadEndKnown?: boolean;
}

/** What one planned episode came to, for tests and counters. */
export interface EpisodeRecord {
  startMs: number;
  targetGroups: number[];
  ends: number[];
  /** Which rehearsal was used (zigzag may fall back to best effort's). */
  used: PairScheduler;
}

export class LoadingPair implements EpisodePlanner {
  readonly maxEpisodeBatches: number;
  private readonly groups: number;
  private groupArrivalMs: number[] = [];
  /** When the target holds every layer: the pairing ends then (Infinity while a live load's end is not known). */
  loadedAtMs = Number.POSITIVE_INFINITY;
  /** Every episode planned (bounded: the last 1,000). */
  readonly episodes: EpisodeRecord[] = [];
  episodesPlanned = 0;
  /** Episodes whose zigzag configuration was used (not best effort's fallback). */
  zigzagPlanned = 0;
  /** Zigzag solves that found no configuration in time (best effort's was used). */
  solveFailures = 0;

  constructor(private readonly o: PairOptions) {
    const L = o.layerArrivalMs.length;
    if (L < 1) throw new RangeError("a loading pair needs at least one layer");
    if (o.scheduler === "zigzag" && o.solver === undefined) throw new RangeError("zigzag needs a solver");
    this.groups = Math.max(1, Math.min(L, o.groups ?? 16));
    this.revise(o.layerArrivalMs, o.loadEndKnown ?? true);
    this.maxEpisodeBatches = o.maxEpisodeBatches ?? 8;
  }

  /**
   * New arrival times for the layers (same count as at construction, clock ms, non-decreasing): live, the layers
   * already here carry their measured arrival and the rest an estimate (layerwise-host.ts). `final` says the
   * last entry is when the load ends; otherwise the pairing stays active until a revision says so, however late the
   * estimate turns out.
   */
  revise(layerArrivalMs: readonly number[], final: boolean): void {
    const L = layerArrivalMs.length;
    if (L !== this.o.layerArrivalMs.length) throw new RangeError(`a loading pair of ${this.o.layerArrivalMs.length} layers got ${L} arrival times`);
    for (let k = 0; k < L; k++)
      if (!Number.isFinite(layerArrivalMs[k]) || (k > 0 && layerArrivalMs[k]! < layerArrivalMs[k - 1]!)) throw new RangeError("layer arrival times must be finite and non-decreasing");
    const G = this.groups;
    this.groupArrivalMs = Array.from({ length: G }, (_, g) => layerArrivalMs[Math.ceil(((g + 1) * L) / G) - 1]!);
    this.loadedAtMs = final ? layerArrivalMs[L - 1]! : Number.POSITIVE_INFINITY;
  }

  active(atMs: number): boolean {
    return atMs < this.loadedAtMs;
  }

  /**
   * The KV reach of the pair at `atMs` (core.ts EpisodePlanner.kvScale): the target keeps the KV of the layer groups
   * it runs, at most half (best effort's split), so the source's cache holds G/(G − T) times the tokens.
   */
  kvScale(atMs: number): number {
    const G = this.groupArrivalMs.length;
    let loaded = 0;
    while (loaded < G && this.groupArrivalMs[loaded]! <= atMs) loaded++;
    const t = Math.min(loaded, Math.floor(G / 2));
    return G / (G - t);
  }

  plan(startMs: number, batches: readonly { tokens: number; aloneMs: number }[]): readonly number[] {
    const G = this.groupArrivalMs.length;
    const mean = batches.reduce((s, b) => s + b.aloneMs, 0) / batches.length;
    const unit = mean / G;
    if (!(unit > 0)) return batches.map(() => startMs);
    const e: Episode = { layers: G, batches: batches.length, layerArrival: this.groupArrivalMs.map((a) => Math.max(0, (a - startMs) / unit)) };
    let r: Rehearsal = bestEffort(e);
    let used: PairScheduler = "best-effort";
    // One batch: its latency is at least L layer-times however the layers split (they run one after another), and
    // best effort's split (layers the target already holds) reaches L, so the ILP cannot do better: no solve.
    if (this.o.scheduler === "zigzag" && batches.length > 1) {
      // No solution within the time limit (or a solver error) leaves best effort's rehearsal: an episode is never lost.
      let config: number[] | undefined;
      try {
        config = zigzagConfiguration(e, this.o.solver!, this.o.timeLimitS ?? 0.5);
      } catch {
        this.solveFailures++;
      }
      const z = config === undefined ? undefined : rehearse(e, (i) => config[i]!);
      if (z !== undefined && z.mean <= r.mean) {
        r = z;
        used = "zigzag";
      }
    }
    const ends = r.latency.map((l, i) => {
      const t = r.targetLayers[i]!;
      return startMs + l * unit + (t > 0 && t < G ? batches[i]!.tokens * this.o.hopMsPerToken : 0);
    });
    this.episodesPlanned++;
    if (used === "zigzag") this.zigzagPlanned++;
    this.episodes.push({ startMs, targetGroups: r.targetLayers, ends, used });
    if (this.episodes.length > 1000) this.episodes.shift();
    return ends;
  }
}
