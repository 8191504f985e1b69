/**
 * Serve-while-loading in a running region (issue 12 item 5; BlitzScale §5.2): the `agents` actuator's side of a
 * live pairing. When a new instance starts receiving its model's blocks over the data plane, it is paired with a
 * serving engine of the same model and GPU — the one with the most requests in flight, not already paired, whose
 * engine has the control (Engine.layerwise: engine-sim over HTTP, the in-process engine in `tidegate dev`). Every
 * block the data plane reports arriving at the new instance updates the pairing: how many layers it holds (a
 * prefix: blocks 0..P − 1 all here hold layers 0..⌊P·L/B⌋ − 1) and when each of the rest is expected (the blocks
 * still to come at the rate measured so far, or the ideal transfer time before the first block). The serving engine
 * runs the same LoadingPair (engines/sim/layerwise/pairing.ts) as replay; the pairing ends when the last layer arrives, when the new
 * instance leaves `loading` (it serves, fails or is cancelled), or by itself on the engine `ttlMs` after the last
 * update. An engine without the control (a vLLM) or one that refuses leaves the new instance to load
 * stop-the-world; nothing else changes.
 *
 * Updates are sent one at a time per pairing (the newest state replaces any not yet sent), when the layer count
 * changes, and otherwise at least every ttlMs / 3 while blocks arrive.
 */
import type { Clock } from "../../core/clock.js";
import { TidegateError, toTidegateError } from "../../core/errors.js";
import type { Logger } from "../../core/log.js";
import { MODEL_SPECS, type GpuType, type ModelName } from "../../core/models.js";
import type { Engine, PairScheduler, PairSpec, PairStatus } from "../../core/ports.js";
import { HIDDEN_SIZE } from "../keystage/stages.js";
import { TABLE1_CLUSTER_A, type LoadBandwidths } from "./sources.js";
import { dataPlaneScheduler, type LoadingConfig } from "./liveload-config.js";

/** The model's hidden size (key-stage scaling's table), else the usual 12·layers·d² estimate from its parameters. */
export function hiddenSize(model: ModelName): number {
  const known = HIDDEN_SIZE[model];
  if (known !== undefined) return known;
  const s = MODEL_SPECS[model];
  return s === undefined ? 4096 : Math.sqrt(s.params / (12 * s.layers));
}

/** One prompt token's activations (hidden size × 2 bytes) crossing the RDMA link between two instances, in ms. */
export function hopMsPerToken(model: ModelName, bandwidths: LoadBandwidths): number {
  return ((hiddenSize(model) * 2) / (bandwidths.rdmaBitsPerS / 8)) * 1000;
}

/** Layers a loading instance holds when blocks 0..present − 1 are all here (of `blocks` for `layers` layers). */
export function layersHeld(present: number, blocks: number, layers: number): number {
  return Math.min(layers, Math.floor((present * layers) / blocks));
}

/** Blocks that must be here before layer k (0-based) can run. */
export function blocksForLayer(k: number, blocks: number, layers: number): number {
  return Math.min(blocks, Math.ceil(((k + 1) * blocks) / layers));
}

export interface LivePairsOptions {
  clock: Clock;
  log: Logger;
  scheduler: PairScheduler;
  /** The serving instances of (model, gpu) with their engines and requests in flight (the region's gateway). */
  serving(model: ModelName, gpu: GpuType): { instanceId: string; engine: Engine; inFlight: number }[];
  /** Activation transfer per prompt token between two instances of `model` (ms). */
  hopMsPerToken(model: ModelName): number;
  /** A pairing ends on the engine this long after its last update (default 10 000 ms). */
  ttlMs?: number;
}

interface Entry {
  target: string;
  model: ModelName;
  gpu: GpuType;
  source: string;
  engine: Engine;
  layers: number;
  blocks: number;
  present: Uint8Array;
  /** Blocks 0..prefix − 1 are all here. */
  prefix: number;
  startedMs: number;
  expectedMs: number;
  sentLayers: number;
  sentAtMs: number;
  sending: boolean;
  /** A newer state waits to be sent once the update in flight returns. */
  dirty: boolean;
  ended: boolean;
  last?: PairStatus;
}

/** Counters of what live pairing did (the region's listing and tests). */
export interface LivePairCounters {
  pairs: number;
  updates: number;
  /** Pairings an engine refused or that failed mid-way (the new instance then loads stop-the-world). */
  failed: number;
  /** New instances that found no serving engine to pair with. */
  unpaired: number;
  /** Loading episodes the serving engines planned, summed over ended pairings (as they last reported). */
  episodes: number;
}

export class LivePairs {
  readonly counters: LivePairCounters = { pairs: 0, updates: 0, failed: 0, unpaired: 0, episodes: 0 };
  private readonly byTarget = new Map<string, Entry>();
  private readonly ttlMs: number;

  constructor(private readonly o: LivePairsOptions) {
    this.ttlMs = o.ttlMs ?? 10_000;
  }

  /** Pairings now: target → source. */
  active(): { target: string; source: string; layersHeld: number; layers: number }[] {
    return [...this.byTarget.values()].map((e) => ({ target: e.target, source: e.source, layersHeld: layersHeld(e.prefix, e.blocks, e.layers), layers: e.layers }));
  }

  /**
   * A new instance starts receiving `blocks` blocks of `model` (expected to take `expectedMs`): pair it with a
   * serving engine, if one can take it; whether it is paired (false: nothing to pair with).
   */
  begin(target: string, model: ModelName, gpu: GpuType, blocks: number, expectedMs: number): boolean {
    return this.pair(target, model, gpu, blocks, expectedMs);
  }

  /** Pairs `target` with a free serving engine; `from` carries the blocks already here (a re-pairing). Whether it is paired. */
  private pair(target: string, model: ModelName, gpu: GpuType, blocks: number, expectedMs: number, from?: Pick<Entry, "present" | "prefix" | "startedMs">): boolean {
    if (this.byTarget.has(target)) return true;
    if (blocks < 1) return false;
    const busy = new Set([...this.byTarget.values()].map((e) => e.source));
    const serving = this.o.serving(model, gpu);
    const candidates = serving.filter((s) => s.engine.layerwise !== undefined && !busy.has(s.instanceId)).sort((a, b) => b.inFlight - a.inFlight || (a.instanceId < b.instanceId ? -1 : 1));
    const src = candidates[0];
    if (src === undefined) {
      this.counters.unpaired++;
      // The first deployment has nothing serving yet: worth a line only when serving engines exist but none can pair.
      const fields = { instanceId: target, model, gpu, serving: serving.length, paired: serving.filter((s) => busy.has(s.instanceId)).length };
      if (serving.length === 0) this.o.log.debug("no serving engine to pair a loading instance with: it loads on its own (behind its arriving blocks where its engine can serve so)", fields);
      else this.o.log.info("no serving engine to pair a loading instance with: it loads on its own (behind its arriving blocks where its engine can serve so)", fields);
      return false;
    }
    const layers = MODEL_SPECS[model]?.layers ?? blocks;
    const now = this.o.clock.now();
    const e: Entry = { target, model, gpu, source: src.instanceId, engine: src.engine, layers, blocks, present: from?.present ?? new Uint8Array(blocks), prefix: from?.prefix ?? 0, startedMs: from?.startedMs ?? now, expectedMs: Math.max(1, expectedMs), sentLayers: -1, sentAtMs: now, sending: false, dirty: false, ended: false };
    this.byTarget.set(target, e);
    this.counters.pairs++;
    this.o.log.info("pairing a loading instance with a serving one (serve while loading)", { instanceId: target, source: src.instanceId, scheduler: this.o.scheduler, layers, blocks });
    this.send(e);
    return true;
  }

  /**
   * The data plane reports block `block` arrived at `target`'s node. A source that stopped serving (drained, lost)
   * is let go, and the target pairs with another serving engine if one is free.
   */
  block(target: string, block: number): void {
    const e = this.byTarget.get(target);
    if (e === undefined || e.ended || block < 0 || block >= e.blocks) return;
    e.present[block] = 1;
    while (e.prefix < e.blocks && e.present[e.prefix] === 1) e.prefix++;
    if (!this.o.serving(e.model, e.gpu).some((s) => s.instanceId === e.source)) {
      this.byTarget.delete(target);
      e.ended = true;
      this.o.log.info("the serving engine paired with a loading instance stopped serving: pairing again", { instanceId: target, source: e.source });
      // It may still finish its in-flight requests: its pairing ends now rather than at its ttl.
      if (!e.sending) void e.engine.layerwise!.end(target).then((s) => this.finished(e, s, "the serving engine stopped serving"), () => undefined);
      // The new pairing starts from what is here already, at the rate measured so far.
      this.pair(target, e.model, e.gpu, e.blocks, e.expectedMs, e);
      return;
    }
    const held = layersHeld(e.prefix, e.blocks, e.layers);
    if (held !== e.sentLayers || this.o.clock.now() - e.sentAtMs >= this.ttlMs / 3) this.send(e);
  }

  /** `target` left loading (serving, failed, cancelled): the pairing ends. */
  end(target: string): void {
    const e = this.byTarget.get(target);
    if (e === undefined) return;
    this.byTarget.delete(target);
    if (e.ended) return;
    e.ended = true;
    // An update in flight is answered first (the engine could otherwise see it after the end and pair again).
    if (!e.sending) this.sendEnd(e);
  }

  private sendEnd(e: Entry): void {
    void e.engine.layerwise!.end(e.target).then(
      (s) => this.finished(e, s, "the loading instance left loading"),
      () => this.finished(e, undefined, "the loading instance left loading"),
    );
  }

  /** The update for `e`'s state now. */
  private spec(e: Entry): PairSpec {
    const now = this.o.clock.now();
    const held = layersHeld(e.prefix, e.blocks, e.layers);
    const elapsed = now - e.startedMs;
    // The blocks still to come at the rate measured so far; before the first, at the expected transfer time.
    const perBlockMs = e.prefix > 0 ? elapsed / e.prefix : e.expectedMs / e.blocks;
    const expectedInMs: number[] = [];
    for (let k = held; k < e.layers; k++) expectedInMs.push(Math.max(0, (blocksForLayer(k, e.blocks, e.layers) - e.prefix) * perBlockMs));
    return { peer: e.target, scheduler: this.o.scheduler, layers: e.layers, arrivedLayers: held, expectedInMs, hopMsPerToken: this.o.hopMsPerToken(e.model), ttlMs: this.ttlMs };
  }

  private send(e: Entry): void {
    if (e.sending) {
      e.dirty = true;
      return;
    }
    const spec = this.spec(e);
    e.sending = true;
    e.dirty = false;
    e.sentLayers = spec.arrivedLayers;
    e.sentAtMs = this.o.clock.now();
    this.counters.updates++;
    e.engine.layerwise!.update(spec).then(
      (s) => {
        e.sending = false;
        e.last = s;
        if (spec.arrivedLayers >= e.layers) {
          if (this.byTarget.get(e.target) === e) this.byTarget.delete(e.target);
          e.ended = true;
          this.finished(e, s, "every layer arrived");
          return;
        }
        if (e.ended) this.sendEnd(e);
        else if (e.dirty) this.send(e);
      },
      (err: unknown) => {
        e.sending = false;
        this.counters.failed++;
        if (this.byTarget.get(e.target) === e) this.byTarget.delete(e.target);
        e.ended = true;
        this.o.log.warn("a serving engine did not take the pairing: the loading instance loads stop-the-world", { instanceId: e.target, source: e.source, err: toTidegateError(err).message });
      },
    );
  }

  private finished(e: Entry, s: PairStatus | undefined, why: string): void {
    const episodes = s?.ended?.peer === e.target ? s.ended.episodes : (e.last?.current?.episodes ?? 0);
    this.counters.episodes += episodes;
    this.o.log.info("serve-while-loading pairing ended", { instanceId: e.target, source: e.source, why, layersHeld: layersHeld(e.prefix, e.blocks, e.layers), layers: e.layers, episodes });
  }
}

/**
 * The agents actuator's `layerwise` option for a region's loading key: undefined for stop-the-world (and no key) and
 * for λScale's pipelines (live-lambda.ts agentsLambda),
 * else the scheduler and the activation hop over the key's RDMA bandwidth. Throws for keys the agents actuator
 * cannot run (liveload-config.ts dataPlaneScheduler), and for pairing with real engines (`engines.commandTemplate`: a vLLM
 * has no layer-wise control, so every pairing would fail).
 */
export function agentsLayerwise(region: string, loading: LoadingConfig | undefined, commandTemplate?: string): { scheduler: PairScheduler; hopMsPerToken(model: ModelName): number } | undefined {
  const scheduler = dataPlaneScheduler(region, loading);
  if (scheduler === "stop-the-world" || scheduler === "lambda-pipelines") return undefined;
  if (commandTemplate !== undefined)
    throw new TidegateError("invalid_config", `region ${region}: loading ${loading!.source}/${scheduler} pairs loading instances with serving engine-sim engines; engines.commandTemplate runs real engines, which have no layer-wise control (use scheduler "stop-the-world", or drop engines.commandTemplate)`);
  const bw = loading?.bandwidths ?? TABLE1_CLUSTER_A;
  return { scheduler, hopMsPerToken: (m) => hopMsPerToken(m, bw) };
}
