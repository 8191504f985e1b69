/**
 * Serve-while-loading for simulated engines (issue 12): the `sim` actuator's ActuatorLoading over region/liveload.
 * One scale-out (every load of a (model, gpu) that starts at one instant) gets one load episode from the region's
 * loading source (sources.ts: ssd, allcache, network, blitzscale, lambdascale, and λScale's baselines faasnet-tree
 * and nccl-ring, at the configured bandwidths), and its live scheduler decides what the loading instances do before
 * they hold the whole model:
 *
 * - `stop-the-world`: nothing; an instance serves once its last layer lands (ssd, allcache, network).
 * - `best-effort`, `zigzag` (blitzscale): each new instance pairs with a distinct serving instance of the model,
 *   the most loaded first, whose engine core then shares the prefill of each loading episode with it
 *   (core.ts EpisodePlanner, pairing.ts LoadingPair; BlitzScale §5.2). The pair ends when the target serves; the
 *   requests it admitted keep the KV of the target's layers in the target's cache until they end (core.ts handOffTo).
 *   A new instance left with no serving instance to pair with (a cold start from zero, or more targets than serving
 *   instances: Eq. 1 with S_i = 0) serves from its load's start, each prefill layer by layer behind its arriving
 *   blocks (§5.2 steps (1)–(2); engines/sim/layerwise/behind-blocks.ts): its engine enters the gateway at once (the
 *   cold hold lets its held requests go to it), the instance stays `loading` until its last block lands, and then
 *   serves through that same engine (`takeEarlyEngine`).
 * - `lambda-pipelines` (lambdascale): each of λScale's execution pipelines (lambda.ts; λScale §4.3) serves as one
 *   engine in the gateway from when its members together hold every block, with each activation hop added to every
 *   pass and the KV cache of all its members (each holds the KV of the layers it runs); at the switch to local mode
 *   (§4.4: every member holds the model) the members serve on their own and the pipeline engine takes no new work,
 *   finishing what it holds.
 *
 * Parameter bytes per GPU are the model's weights over its tensor-parallel degree (each GPU loads its shard over
 * its own link, BlitzScale Table 1's per-GPU bandwidths). The `ssd` source's host cache is ServerlessLLM's 5-minute
 * keep-alive (at most `hostCacheModels` models per host, LRU): an instance's host is its record (a reclaimed or
 * redeployed spot instance is the same host); last use is when it starts serving and when it leaves for spot. The
 * network sources keep one copy per model in host memory (the parameter pool, BlitzScale §4.1): on the host of the
 * model's instance that changed state last; a target on that host loads it over PCIe, the others by multicast.
 */
import type { Clock, Timer } from "../../core/clock.js";
import { MODEL_SPECS, weightBytes, type GpuType, type ModelName } from "../../core/models.js";
import type { Solver } from "../../core/solver.js";
import type { InstanceRecord, LoadSource } from "../actuator/port.js";
import type { ActuatorLoading } from "../actuator/sim.js";
import type { SimEngine } from "../../engines/sim/sim-engine.js";
import type { Gateway } from "../gateway/gateway.js";
import { hopMsPerToken } from "../liveload/live-pairs.js";
import { pipelinePassMs } from "../liveload/lambda.js";
import { LoadingPair } from "../../engines/sim/layerwise/pairing.js";
import { KeepAliveCache, LOADING_SOURCES, TABLE1_CLUSTER_A, loadEpisode, type LiveScheduler, type LoadBandwidths, type LoadModel, type LoadingSourceName } from "../liveload/sources.js";

/** A region's loading source (config or a benchmark's choice). */
export interface SimLoadingSettings {
  source: LoadingSourceName;
  /** The live scheduler, when not the source's own (e.g. `best-effort` over blitzscale's network load). */
  scheduler?: LiveScheduler;
  bandwidths?: LoadBandwidths;
  /** Blocks a network load moves the model in (default one per layer). */
  blocksPerLayer?: number;
  keepAliveMs?: number;
  /** Models one host's memory holds at once (the host cache's LRU; default unbounded). */
  hostCacheModels?: number;
  /** HiGHS, for zigzag (BlitzScale §5.2's ILP per loading episode). */
  solver?: Solver;
}

export interface SimLoadingDeps {
  clock: Clock;
  gateway: Gateway;
  /** GPUs per instance of (model, gpu). */
  gpusOf(model: ModelName, gpu: GpuType): number;
  /** Engines of the serving instances of (model, gpu). */
  servingEngines(model: ModelName, gpu: GpuType): SimEngine[];
  /**
   * Serving instances of (model, gpu) a multicast may take the parameters from: those whose outbound link carries no
   * KV (BlitzScale Algorithm 1 line 2, Figure 8 d: not a prefill pool's); default the serving engines.
   */
  multicastSources?(model: ModelName, gpu: GpuType): number;
  /** The engine of instance `id` once it serves (undefined before). */
  engineOf(id: string): SimEngine | undefined;
  /** A new engine for `id` (not added to the gateway) with `passOverheadMs` per pass and `kvScale` × an instance's KV. */
  newEngine(id: string, model: ModelName, gpu: GpuType, passOverheadMs: number, kvScale: number): SimEngine;
}

/** Counters of what the loading did, for benchmarks and tests. */
export interface SimLoadingCounters {
  scaleOuts: number;
  instancesLoaded: number;
  pairs: number;
  episodes: number;
  zigzagEpisodes: number;
  pipelines: number;
  /** Loading instances that served behind their blocks, with no serving instance to pair with (issue 33). */
  behindBlocks: number;
  cacheHits: number;
  /**
   * GPU time until serving (λScale §7.3's cost measure, issue 35): instance-ms from each load's start until the
   * instance serves, summed over loaded instances — its last layer, or for a member of a λScale execution pipeline
   * that forms before its members switch to local mode, the pipeline's formation (from then its GPUs serve).
   */
  untilServingMs: number;
}

/** Counters before any load. */
export function zeroLoadingCounters(): SimLoadingCounters {
  return { scaleOuts: 0, instancesLoaded: 0, pairs: 0, episodes: 0, zigzagEpisodes: 0, pipelines: 0, behindBlocks: 0, cacheHits: 0, untilServingMs: 0 };
}

export class SimRegionLoading implements ActuatorLoading {
  readonly scheduler: LiveScheduler;
  readonly bandwidths: LoadBandwidths;
  readonly counters: SimLoadingCounters = zeroLoadingCounters();
  private readonly cache: KeepAliveCache;
  private readonly expected = new Map<string, number>();
  /** model → the host (instance id) holding the parameter pool's copy (network sources). */
  private readonly poolHost = new Map<ModelName, string>();
  /** instance id → where its last load took its parameters from. */
  private readonly sources = new Map<string, LoadSource>();
  /** target instance id → the serving engine it is paired with and the pair. */
  private readonly pairs = new Map<string, { source: SimEngine; pair: LoadingPair }>();
  /** Unpaired loading instances of best-effort/zigzag serving behind their blocks: id → their engine (in the gateway). */
  private readonly early = new Map<string, SimEngine>();
  /** Such engines whose load was cancelled: draining in the gateway until idle (`tick`). */
  private readonly retired = new Map<string, SimEngine>();
  /** pipeline engines: id → members still loading, the engine, and the timer that forms it. */
  private readonly pipelines = new Map<string, { members: Set<string>; engine?: SimEngine; timer?: Timer; retiring: boolean }>();

  constructor(
    readonly settings: SimLoadingSettings,
    private readonly d: SimLoadingDeps,
  ) {
    this.scheduler = settings.scheduler ?? LOADING_SOURCES[settings.source].scheduler;
    if ((this.scheduler === "zigzag") && settings.solver === undefined) throw new RangeError("the zigzag live scheduler needs a solver (HiGHS)");
    if (this.scheduler === "lambda-pipelines" && settings.source !== "lambdascale") throw new RangeError(`lambda-pipelines needs the lambdascale source's binomial multicast, not ${settings.source}`);
    this.bandwidths = settings.bandwidths ?? TABLE1_CLUSTER_A;
    this.cache = new KeepAliveCache(settings.keepAliveMs ?? 5 * 60_000, settings.hostCacheModels ?? Number.POSITIVE_INFINITY);
  }

  private loadModel(model: ModelName, gpu: GpuType): LoadModel {
    const spec = MODEL_SPECS[model];
    if (spec === undefined) throw new RangeError(`no model spec for ${model}`);
    return { bytes: weightBytes(spec) / this.d.gpusOf(model, gpu), layers: spec.layers, blocks: spec.layers * (this.settings.blocksPerLayer ?? 1) };
  }

  /** Activation bytes of one token crossing the link between two instances, in ms. */
  private hopMsPerToken(model: ModelName): number {
    return hopMsPerToken(model, this.bandwidths);
  }

  /** One new instance's load, no host cache hit (read every telemetry pass: kept per model, gpu and source count). */
  expectedLoadMs(model: ModelName, gpu: GpuType): number {
    const servingSources = Math.max(1, this.d.servingEngines(model, gpu).length);
    const key = `${model}/${gpu}/${servingSources}`;
    let ms = this.expected.get(key);
    if (ms === undefined) {
      const ep = loadEpisode(this.settings.source, this.loadModel(model, gpu), { targets: 1, hostCached: [false], servingSources }, this.bandwidths);
      ms = Math.max(...ep.arrivals[0]!);
      this.expected.set(key, ms);
    }
    return ms;
  }

  begin(model: ModelName, gpu: GpuType, targets: readonly Readonly<InstanceRecord>[]): number[] {
    const now = this.d.clock.now();
    const serving = this.d.servingEngines(model, gpu);
    // Whose host memory holds the model: ssd, the keep-alive cache; allcache, every host; the network sources, the
    // host of the pool's one copy (the last host that held an instance of the model: BlitzScale §4.1's O(1) copy, kept
    // when the instance goes). A hit loads from the host (PCIe); a miss from the SSD (ssd) or a peer (network).
    const src = this.settings.source;
    const hostCached = targets.map((t) => this.holdsCopy(t.id, model, now));
    targets.forEach((t, i) => this.sources.set(t.id, hostCached[i] ? "host" : src === "ssd" ? "origin" : "peer"));
    this.counters.scaleOuts++;
    this.counters.instancesLoaded += targets.length;
    this.counters.cacheHits += hostCached.filter(Boolean).length;
    const ep = loadEpisode(this.settings.source, this.loadModel(model, gpu), { targets: targets.length, hostCached, servingSources: Math.max(1, this.d.multicastSources?.(model, gpu) ?? serving.length) }, this.bandwidths);
    const ready = ep.arrivals.map((a) => Math.max(...a));
    // When each target's GPUs start serving: its last layer, unless a λScale pipeline it is in serves earlier (below).
    const serves = [...ready];
    // An instance of a prefill or decode pool (issue 48) serves once loaded: no pairing, no serving behind its
    // blocks or in a λScale pipeline (they serve colocated). The actuator groups loads by pool, so all targets share it.
    const colocated = targets.every((t) => t.role === undefined);
    if (colocated && (this.scheduler === "best-effort" || this.scheduler === "zigzag")) {
      // The most loaded serving instances first (BlitzScale pairs the new instance with an overloaded one).
      const load = (e: SimEngine) => {
        const s = e.core.stats();
        return s.waiting + s.running;
      };
      const free = serving.filter((e) => !e.core.paired).sort((a, b) => load(b) - load(a));
      targets.forEach((t, i) => {
        const source = free[i];
        if (source === undefined) {
          // Nothing to pair with: it serves now, behind its blocks (file comment).
          this.removeRetired(t.id);
          const engine = this.d.newEngine(t.id, model, gpu, 0, 1);
          engine.core.setBlockArrivals(ep.arrivals[i]!.map((a) => now + a));
          this.d.gateway.addInstance(gpu, engine, "serving");
          this.early.set(t.id, engine);
          serves[i] = 0;
          this.counters.behindBlocks++;
          return;
        }
        const pair = new LoadingPair({
          scheduler: this.scheduler as "best-effort" | "zigzag",
          layerArrivalMs: ep.arrivals[i]!.map((a) => now + a),
          hopMsPerToken: this.hopMsPerToken(model),
          ...(this.settings.solver === undefined ? {} : { solver: this.settings.solver }),
        });
        source.core.setLayerwise(pair);
        this.pairs.set(t.id, { source, pair });
        this.counters.pairs++;
      });
    } else if (colocated && this.scheduler === "lambda-pipelines" && ep.pipelines !== undefined) {
      for (const p of ep.pipelines) {
        const members = p.nodes.map((n) => targets[Number(n.slice(1))]!.id);
        // every member switches to local mode together (§4.4)
        for (const m of members) ready[targets.findIndex((t) => t.id === m)] = p.localMs;
        if (!(p.formedMs < p.localMs) || members.length < 2) {
          for (const m of members) serves[targets.findIndex((t) => t.id === m)] = p.localMs;
          continue;
        }
        for (const m of members) serves[targets.findIndex((t) => t.id === m)] = p.formedMs;
        const id = `${members[0]}/pipeline`;
        const entry: { members: Set<string>; engine?: SimEngine; timer?: Timer; retiring: boolean } = { members: new Set(members), retiring: false };
        const passMs = pipelinePassMs(p.hops, this.hopMsPerToken(model));
        entry.timer = this.d.clock.after(p.formedMs, () => {
          entry.timer = undefined;
          if (entry.retiring) return;
          entry.engine = this.d.newEngine(id, model, gpu, passMs, members.length);
          this.d.gateway.addInstance(gpu, entry.engine, "serving");
          this.counters.pipelines++;
        });
        this.pipelines.set(id, entry);
      }
    }
    this.counters.untilServingMs += serves.reduce((a, x) => a + x, 0);
    return ready;
  }

  /** Whether host `id`'s memory holds `model` now (see `begin`). */
  holdsCopy(id: string, model: ModelName, nowMs = this.d.clock.now()): boolean {
    const src = this.settings.source;
    return src === "allcache" ? true : src === "ssd" ? this.cache.holds(id, model, nowMs) : this.poolHost.get(model) === id;
  }

  /**
   * How many models other than `except` have the parameter pool's one copy on host `id` (network sources; 0 for ssd
   * and allcache, whose host caches are no pool: ServerlessLLM's placement reads only `holdsCopy`).
   */
  soleCopies(id: string, except: ModelName): number {
    if (this.settings.source === "ssd" || this.settings.source === "allcache") return 0;
    let n = 0;
    for (const [m, host] of this.poolHost) if (host === id && m !== except) n++;
    return n;
  }

  /** Where instance `id`'s last load took its parameters from. */
  sourceOf(id: string): LoadSource | undefined {
    return this.sources.get(id);
  }

  /**
   * The engine that has served instance `id` behind its blocks since its load started, taken once it serves (the
   * region serves it through this engine, already in the gateway); undefined when it had none.
   */
  takeEarlyEngine(id: string): SimEngine | undefined {
    const e = this.early.get(id);
    this.early.delete(id);
    return e;
  }

  /** The actuator's state changes: pairs and pipelines end when their loading instances serve (or leave). */
  onChange(inst: Readonly<InstanceRecord>): void {
    const now = this.d.clock.now();
    const early = this.early.get(inst.id);
    if (early !== undefined && inst.state !== "loading" && inst.state !== "serving") {
      // Its load was cancelled: the engine that served behind the blocks drains like a serving one.
      this.early.delete(inst.id);
      this.d.gateway.setInstanceState(inst.id, "draining");
      this.retired.set(inst.id, early);
    }
    if (inst.state === "serving" || inst.state === "spot" || inst.state === "draining") {
      this.cache.touch(inst.id, inst.model, now);
      this.poolHost.set(inst.model, inst.id);
    }
    if (inst.state === "loading") return;
    const p = this.pairs.get(inst.id);
    if (p !== undefined) {
      this.pairs.delete(inst.id);
      this.counters.episodes += p.pair.episodesPlanned;
      this.counters.zigzagEpisodes += p.pair.zigzagPlanned;
      p.source.core.setLayerwise(undefined);
      // The requests the pair admitted keep the KV of the layers the target ran on it until they end.
      const target = inst.state === "serving" ? this.d.engineOf(inst.id) : undefined;
      if (target !== undefined) p.source.core.handOffTo(target.core);
    }
    for (const [id, e] of this.pipelines) {
      if (!e.members.delete(inst.id) || e.members.size > 0) continue;
      e.retiring = true;
      e.timer?.cancel();
      if (e.engine === undefined) this.pipelines.delete(id);
      else this.d.gateway.setInstanceState(id, "draining");
    }
  }

  private removeRetired(id: string): void {
    const e = this.retired.get(id);
    if (e === undefined) return;
    this.retired.delete(id);
    this.d.gateway.removeInstance(id);
    void e.close();
  }

  /** Removes retired pipeline engines and cancelled loads' engines once they hold no more work (called periodically). */
  tick(): void {
    for (const [id, e] of this.retired) {
      const s = e.core.stats();
      if (s.running === 0 && s.waiting === 0) this.removeRetired(id);
    }
    for (const [id, e] of this.pipelines) {
      if (!e.retiring || e.engine === undefined) continue;
      const s = e.engine.core.stats();
      if (s.running > 0 || s.waiting > 0) continue;
      this.d.gateway.removeInstance(id);
      void e.engine.close();
      this.pipelines.delete(id);
    }
  }

  close(): void {
    for (const e of this.pipelines.values()) e.timer?.cancel();
    for (const e of [...this.early.values(), ...this.retired.values()]) void e.close();
  }
}
