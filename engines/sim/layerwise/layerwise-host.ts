/**
 * Serve-while-loading across processes (issue 12 item 5; BlitzScale §5.2): the serving engine's side of a live
 * pairing. The region (the `agents` actuator, region/liveload/live-pairs.ts) tells a serving engine of the model
 * that a new instance of it is loading, then, as the data plane reports blocks arriving at the new instance, how many
 * of its layers are there and when the rest are expected. The engine runs the same LoadingPair as replay (pairing.ts) on
 * its engine core: each prefill start admits a loading episode whose batches the live scheduler (best-effort or
 * zigzag) splits between the two instances by the layers the target holds.
 *
 * What crosses the wire is `PairSpec` (JSON, `POST /tidegate/layerwise` on engine-sim; the in-process engine takes
 * it as a call): arrivals are relative (ms from now), so the region's and the engine's clocks never need to agree.
 * The layers already here keep the time the engine first heard of them; the others are re-estimated at every update.
 * The pairing ends when an update says every layer is here, when the region ends it, or by itself `ttlMs` after the
 * last update (a region that went away never leaves an engine paired).
 */
import type { Clock, Timer } from "../../../core/clock.js";
import { TidegateError } from "../../../core/errors.js";
import { ObjectReader } from "../../../core/validate.js";
import type { Solver } from "../../../core/solver.js";
import type { LayerwiseControl, PairScheduler, PairSpec, PairStatus } from "../../../core/ports.js";
import type { SimEngineCore } from "../core.js";
import { LoadingPair } from "./pairing.js";

export const PAIR_SCHEDULERS: readonly PairScheduler[] = ["best-effort", "zigzag"];
/** HiGHS time limit of one live zigzag episode (s). */
export const LIVE_SOLVE_LIMIT_S = 0.05;

/** Reads a PairSpec from a request body (every error names its field; code invalid_request). */
export function parsePairSpec(v: unknown): PairSpec {
  const r = new ObjectReader(v, "", "invalid_request");
  const peer = r.string("peer", undefined, { nonEmpty: true, maxLength: 256 });
  const scheduler = r.string("scheduler", undefined, { oneOf: PAIR_SCHEDULERS }) as PairScheduler;
  const layers = r.number("layers", undefined, { integer: true, min: 1, max: 4096 });
  const arrivedLayers = r.number("arrivedLayers", undefined, { integer: true, min: 0, max: layers });
  const expectedInMs = r.array("expectedInMs", (x, path) => {
    if (typeof x !== "number" || !Number.isFinite(x) || x < 0) throw new TidegateError("invalid_request", `${path}: expected a finite number ≥ 0`, { param: path });
    return x;
  }, undefined, { maxLength: 4096 });
  if (expectedInMs.length !== layers - arrivedLayers) r.fail("expectedInMs", `has ${expectedInMs.length} entries; the ${layers - arrivedLayers} layers not yet arrived need one each`);
  for (let k = 1; k < expectedInMs.length; k++) if (expectedInMs[k]! < expectedInMs[k - 1]!) r.fail("expectedInMs", "must be non-decreasing");
  const hopMsPerToken = r.number("hopMsPerToken", undefined, { min: 0, max: 1000 });
  const ttlMs = r.number("ttlMs", undefined, { gt: 0, max: 3_600_000 });
  r.done();
  return { peer, scheduler, layers, arrivedLayers, expectedInMs, hopMsPerToken, ttlMs };
}

interface Current {
  spec: PairSpec;
  pair: LoadingPair;
  /** When each arrived layer was first reported (clock ms). */
  arrivedAtMs: number[];
  updates: number;
  sinceMs: number;
  ttl: Timer;
}

/** A serving engine's live pairings (one at a time), over its engine core. */
export class LayerwiseHost implements LayerwiseControl {
  private current: Current | undefined;
  private solver: Promise<Solver> | undefined;
  private ended: PairStatus["ended"];
  private closed = false;
  private readonly totals = { pairs: 0, updates: 0, episodes: 0, zigzagEpisodes: 0, expired: 0 };

  constructor(
    private readonly o: {
      core: SimEngineCore;
      clock: Clock;
      /** HiGHS for zigzag, created on first use (an engine that never pairs with zigzag never loads it). */
      solver?: () => Promise<Solver>;
    },
  ) {}

  /** Starts or updates the pairing with `spec.peer`; conflict when the engine is paired with another peer. */
  async update(spec: PairSpec): Promise<PairStatus> {
    if (this.closed) throw new TidegateError("conflict", "this engine is closing; it pairs with no loading instance");
    // A pairing shares whole-prompt prefills; an engine that prefills in chunks refuses it before any state changes.
    if (this.o.core.maxNumBatchedTokens !== undefined) throw new TidegateError("invalid_request", "this engine prefills in chunks (maxNumBatchedTokens): it cannot share its prefills with a loading instance layer by layer");
    const c = this.current;
    if (c !== undefined && c.spec.peer !== spec.peer) throw new TidegateError("conflict", `this engine is paired with loading instance ${c.spec.peer}; end that pairing first`);
    if (c !== undefined && (c.spec.layers !== spec.layers || c.spec.scheduler !== spec.scheduler)) throw new TidegateError("conflict", `the pairing with ${spec.peer} has ${c.spec.layers} layers under ${c.spec.scheduler}; an update cannot change them`);
    let solver: Solver | undefined;
    if (spec.scheduler === "zigzag") {
      if (this.o.solver === undefined) throw new TidegateError("invalid_request", "this engine has no solver for zigzag; use best-effort", { param: "scheduler" });
      this.solver ??= this.o.solver();
      solver = await this.solver;
    }
    // The solver may have loaded meanwhile: read the pairing again.
    if (this.closed) throw new TidegateError("conflict", "this engine is closing; it pairs with no loading instance");
    const cur = this.current;
    if (cur !== undefined && cur.spec.peer !== spec.peer) throw new TidegateError("conflict", `this engine is paired with loading instance ${cur.spec.peer}; end that pairing first`);
    const now = this.o.clock.now();
    this.totals.updates++;
    if (spec.arrivedLayers >= spec.layers) {
      if (cur !== undefined) {
        cur.updates++;
        this.finish("loaded");
      }
      return this.status();
    }
    const arrivedAtMs = cur?.arrivedAtMs ?? [];
    for (let k = arrivedAtMs.length; k < spec.arrivedLayers; k++) arrivedAtMs.push(now);
    const arrivals: number[] = arrivedAtMs.slice(0, spec.layers);
    let prev = arrivals.length === 0 ? now : arrivals[arrivals.length - 1]!;
    for (let k = arrivals.length; k < spec.layers; k++) {
      const rest = spec.expectedInMs[k - spec.arrivedLayers];
      // A layer reported before (arrivedAtMs longer than arrivedLayers) keeps its time; the rest are not before now.
      prev = Math.max(prev, now, now + (rest ?? 0));
      arrivals.push(prev);
    }
    if (cur === undefined) {
      // The solve runs on the engine's event loop at a prefill start, delaying its streams' delivery meanwhile: 50 ms
      // bounds it (measured: 16 groups × 8 batches solve in ~52 ms at this limit and zigzag still wins most episodes;
      // ~120 ms median, 335 ms worst at replay's 0.5 s), and best effort's split is used when no solution is found.
      const pair = new LoadingPair({ scheduler: spec.scheduler, layerArrivalMs: arrivals, hopMsPerToken: spec.hopMsPerToken * this.o.core.timeScale, timeLimitS: LIVE_SOLVE_LIMIT_S, loadEndKnown: false, ...(solver === undefined ? {} : { solver }) });
      this.current = { spec, pair, arrivedAtMs, updates: 1, sinceMs: now, ttl: this.o.clock.after(spec.ttlMs, () => this.expire()) };
      this.totals.pairs++;
      this.o.core.setLayerwise(pair);
    } else {
      cur.pair.revise(arrivals, false);
      cur.spec = spec;
      cur.updates++;
      cur.ttl.cancel();
      cur.ttl = this.o.clock.after(spec.ttlMs, () => this.expire());
    }
    return this.status();
  }

  /** Ends the pairing with `peer` (the region saw it serve, or gave up on it); not_found when not paired with it. */
  async end(peer: string): Promise<PairStatus> {
    if (this.current?.spec.peer !== peer) throw new TidegateError("not_found", `this engine is not paired with ${peer}`);
    this.finish("ended by the region");
    return this.status();
  }

  status(): PairStatus {
    const c = this.current;
    return {
      ...(c === undefined
        ? {}
        : { current: { peer: c.spec.peer, scheduler: c.spec.scheduler, layers: c.spec.layers, arrivedLayers: c.arrivedAtMs.length, updates: c.updates, episodes: c.pair.episodesPlanned, zigzagEpisodes: c.pair.zigzagPlanned, sinceMs: c.sinceMs } }),
      totals: { ...this.totals, episodes: this.totals.episodes + (c?.pair.episodesPlanned ?? 0), zigzagEpisodes: this.totals.zigzagEpisodes + (c === undefined ? 0 : c.pair.zigzagPlanned) },
      ...(this.ended === undefined ? {} : { ended: { ...this.ended } }),
    };
  }

  close(): void {
    this.closed = true;
    if (this.current !== undefined) this.finish("engine closed");
  }

  private expire(): void {
    const c = this.current;
    if (c === undefined) return;
    this.totals.expired++;
    this.finish(`expired: no update for ${c.spec.ttlMs} ms`);
  }

  private finish(why: string): void {
    const c = this.current!;
    c.ttl.cancel();
    this.current = undefined;
    this.totals.episodes += c.pair.episodesPlanned;
    this.totals.zigzagEpisodes += c.pair.zigzagPlanned;
    this.ended = { peer: c.spec.peer, why, updates: c.updates, episodes: c.pair.episodesPlanned, zigzagEpisodes: c.pair.zigzagPlanned };
    this.o.core.setLayerwise(undefined);
  }
}
