/**
 * The `agents` Actuator adapter (DESIGN "Ports": Actuator; BlitzScale §4): instances are real engine processes that
 * node agents (`tidegate agent`, or in-process agents in `tidegate dev`) start and stop, and a scale-out moves the
 * model's parameter blocks to the new instance's node over the native data plane before its engine starts.
 *
 * Lifecycle of one instance (every transition visible at once in `instances()`, as the port requires):
 * - provision: a node with free GPU slots of the type is picked (spread: nodes not yet running the model first,
 *   then nodes already holding its blocks — an O(1) host-cache hit — then the most free slots); `provisioning`.
 * - loading: unless the node already holds a complete copy, it joins the model's next multicast plan (the region's
 *   TransferQueue batches every target of a controller pass into one plan, from the parameter pool's sources).
 * - serve while loading (a `blitzscale` loading key: liveload/live-pairs.ts): while its blocks arrive, the new
 *   instance is paired with a serving engine of the model, which shares the prefill of its queue with it layer by
 *   layer (BlitzScale §5.2), updated at every block the data plane reports; the pairing ends when it serves.
 * - serving: the agent starts the engine (engine-sim, or the configured command template); once it answers its
 *   health check within `startTimeoutMs` the gateway adds it and routes to it.
 * - drain: the gateway stops routing to it, in-flight streams finish, the engine is stopped; the instance becomes
 *   `spot` and keeps its GPU slots and blocks (the spot pool, region/spot); reclaim starts an engine on them again,
 *   redeploy loads another model onto them.
 * - failure (no source, an engine that exits or never becomes healthy, a node lost mid-way): the instance is removed
 *   (its slots are free again), the failure is logged, listed (`failures`) and reported through `onFailure` so the
 *   controller backs off. Serving instances are never touched by a failed scale-out.
 * Nodes are learnt from their agents' announcements; a node silent for `lostAfterMs` is lost: its instances go,
 * and the pool restores the invariant (one complete host copy of every hosted model) from what remains. A region
 * that restarts adopts the engines its agents still run (health-checked) instead of starting duplicates, and stops
 * the ones it cannot adopt.
 */
import type { Clock } from "../../core/clock.js";
import { TidegateError, toTidegateError } from "../../core/errors.js";
import type { Logger } from "../../core/log.js";
import type { GpuType, ModelName, RegionName } from "../../core/models.js";
import type { Engine, InstanceState } from "../../core/ports.js";
import { newId } from "../../core/ids.js";
import type { AgentHandle, EngineInfo, NodeAnnouncement } from "../agent/handle.js";
import type { Gateway } from "../gateway/gateway.js";
import { ParameterPool } from "../pool/parameter-pool.js";
import { TransferQueue } from "../pool/transfer-queue.js";
import { LinkRates } from "../pool/rates.js";
import { runTransfer, type ModelParameters, type MulticastPolicy, type TransferResult } from "../pool/transfer.js";
import { NodeRegistry } from "./nodes.js";
import { idealSeconds } from "../multicast/ideal.js";
import { LivePairs, type LivePairCounters } from "../liveload/live-pairs.js";
import type { PairScheduler } from "../liveload/pairing.js";
import type { InstanceListener, InstanceRecord, NodeListing, RuntimeActuator, ScaleFailure, ScalingHooks } from "./port.js";

export type { NodeListing, ScaleFailure } from "./port.js";

/** A model's parameters and where the region's first copy comes from ("pattern": a seeded synthetic model). */
export interface ModelSource extends ModelParameters {
  origin: "pattern" | "none";
}

/** How engines are started, checked and connected. */
export interface EngineSettings {
  /** A real engine's command template (`vllm serve {model} --port {port}`); absent = engine-sim. */
  commandTemplate?: string;
  timeScale: number;
  /** How long an engine may take to answer its health check. */
  startTimeoutMs: number;
  /** SIGTERM → SIGKILL grace when an engine is stopped. */
  stopGraceMs: number;
  /** The gateway's Engine for a started engine (live: openai-http at its URL; dev: the in-process engine). */
  connect(info: EngineInfo, instanceId: string): Promise<Engine>;
  /** Whether the engine answers its health check now. */
  healthy(info: EngineInfo): Promise<boolean>;
  /**
   * The pipeline spec (engine-sim's --pipeline JSON) of an endpoint served as a pipeline of stages (config
   * `keystage.pipelines`), else undefined. engine-sim only: a command template never gets one.
   */
  pipeline?(model: string, gpu: string): string | undefined;
}

export interface AgentsActuatorOptions {
  region: RegionName;
  clock: Clock;
  log: Logger;
  gateway: Gateway;
  /** The parameters of every model the region hosts. */
  models: ReadonlyMap<ModelName, ModelSource>;
  policy: MulticastPolicy;
  engines: EngineSettings;
  /** A node silent this long is lost (default 3 000 ms). */
  lostAfterMs?: number;
  /** Complete host copies of every hosted model the pool keeps on live nodes (default 1; BlitzScale's O(1)). */
  minHostCopies?: number;
  /** How often a draining instance's in-flight streams and a starting engine's health are checked (default 100 ms). */
  pollMs?: number;
  onChange?: InstanceListener;
  /**
   * Serve while loading (the region's `loading` key with a best-effort or zigzag scheduler): pair each loading
   * instance with a serving engine of its model (liveload/live-pairs.ts). Absent: new instances load stop-the-world.
   */
  layerwise?: { scheduler: PairScheduler; hopMsPerToken(model: ModelName): number; ttlMs?: number };
  /** Each finished transfer (for logs, metrics and the bench). */
  onTransfer?(r: TransferResult): void;
}

/** An instance with where it runs and what it is doing. */
export interface AgentInstance extends InstanceRecord {
  node: string;
  /** What it is doing now (e.g. "waiting for blocks", "starting engine"). */
  detail: string;
  /** The engine on the agent, once started. */
  engine?: EngineInfo;
}

const MAX_FAILURES = 50;

export class AgentsActuator implements RuntimeActuator {
  readonly kind = "agents";
  readonly region: RegionName;
  readonly pool: ParameterPool;
  readonly nodes = new NodeRegistry();
  /** The data plane's measured receive rate per node, ordering chain targets (pool/rates.ts). */
  readonly rates = new LinkRates();
  readonly failures: ScaleFailure[] = [];
  private readonly byId = new Map<string, AgentInstance>();
  private readonly queue: TransferQueue;
  private view: AgentInstance[] | undefined;
  private readonly cancelled = new Set<string>();
  /** Models whose pool copy is being restored, with the work (a scale-out of that model waits for it). */
  private readonly repairing = new Map<string, Promise<void>>();
  private readonly noSourceLogged = new Set<string>();
  private closed = false;
  /** Per endpoint `model/gpu`: the last measured scale-out, decision to serving (ms). */
  private readonly measuredScaleOutMs = new Map<string, number>();
  private hooks: ScalingHooks = {};
  /** Live serve-while-loading pairings (undefined: stop-the-world). */
  readonly pairs: LivePairs | undefined;

  constructor(private readonly o: AgentsActuatorOptions) {
    this.region = o.region;
    if (o.layerwise !== undefined)
      this.pairs = new LivePairs({
        clock: o.clock,
        log: o.log,
        scheduler: o.layerwise.scheduler,
        hopMsPerToken: (m) => o.layerwise!.hopMsPerToken(m),
        ...(o.layerwise.ttlMs === undefined ? {} : { ttlMs: o.layerwise.ttlMs }),
        serving: (model, gpu) =>
          o.gateway
            .instances()
            .filter((i) => i.model === model && i.gpu === gpu && i.state === "serving")
            .flatMap((i) => {
              const engine = o.gateway.engine(i.instanceId);
              return engine === undefined ? [] : [{ instanceId: i.instanceId, engine, inFlight: i.inFlight }];
            }),
      });
    this.pool = new ParameterPool({ minHostCopies: o.minHostCopies ?? 1 });
    this.queue = new TransferQueue((p, targets) =>
      runTransfer(p, targets, {
        clock: o.clock,
        log: o.log,
        pool: this.pool,
        policy: o.policy,
        agent: (n) => this.nodes.handle(n),
        dataAddress: (n) => this.nodes.dataAddress(n),
        onBlock: (node, block) => this.onBlock(p.model, node, block),
        topology: (n) => this.nodes.get(n)?.announcement,
        rates: this.rates,
      }).then((r) => {
        o.onTransfer?.(r);
        return r;
      }),
    );
  }

  // ---- the Actuator port ----

  instances(): readonly Readonly<AgentInstance>[] {
    if (this.view === undefined) this.view = [...this.byId.values()];
    return this.view;
  }

  freeGpus(gpu: GpuType): number {
    let free = 0;
    for (const n of this.nodes.live()) if (n.announcement.gpuType === gpu) free += this.freeSlots(n.nodeId);
    return free;
  }

  provision(model: ModelName, gpu: GpuType, gpus: number): InstanceRecord {
    const node = this.pickNode(model, gpu, gpus);
    const now = this.o.clock.now();
    const inst: AgentInstance = { id: this.mintId(node, model), region: this.region, gpu, gpus, model, state: "provisioning", enteredAtMs: now, actionAtMs: now, via: "vm", node, detail: "placed" };
    this.byId.set(inst.id, inst);
    this.changed(inst, undefined);
    void this.bringUp(inst);
    return { ...inst };
  }

  reclaimSpot(instanceId: string): InstanceRecord {
    const inst = this.require(instanceId, "spot");
    inst.via = "reclaim";
    inst.actionAtMs = this.o.clock.now();
    this.transition(inst, "provisioning", "reclaimed from spot");
    void this.bringUp(inst);
    return { ...inst };
  }

  /** The redeployed instance is listed under a new id naming `model` (`formerId`: the one it had); see `mintId`. */
  redeploy(instanceId: string, model: ModelName, gpus: number): InstanceRecord {
    const inst = this.require(instanceId, "spot");
    if (gpus !== inst.gpus) throw new TidegateError("conflict", `instance ${instanceId} holds ${inst.gpus} GPU slots; ${model} needs ${gpus}`);
    // A spot instance has no engine, no gateway entry, no pairing and no pending cancel: only this map knows its id.
    this.byId.delete(inst.id);
    inst.formerId = inst.id;
    inst.id = this.mintId(inst.node, model);
    this.byId.set(inst.id, inst);
    inst.via = "redeploy-local";
    inst.model = model;
    inst.actionAtMs = this.o.clock.now();
    this.transition(inst, "loading", `redeploying ${model}`);
    void this.bringUp(inst);
    return { ...inst };
  }

  drainToSpot(instanceId: string): InstanceRecord {
    const inst = this.byId.get(instanceId);
    if (inst === undefined) throw new TidegateError("not_found", `no instance ${instanceId} in ${this.region}`);
    if (inst.state === "draining" || inst.state === "spot") throw new TidegateError("conflict", `instance ${instanceId} is already ${inst.state}`);
    const wasServing = inst.state === "serving";
    inst.via = "drain";
    inst.actionAtMs = this.o.clock.now();
    if (!wasServing) this.cancelled.add(inst.id); // its bring-up stops at its next step and hands it to spot
    this.transition(inst, "draining", wasServing ? "draining in-flight streams" : "cancelling bring-up");
    if (wasServing) {
      this.o.gateway.setInstanceState(inst.id, "draining");
      void this.finishDrain(inst);
    }
    return { ...inst };
  }

  /**
   * How long the next scale-out of (model, gpu) is expected to take, decision to serving (ms): the last one measured
   * here, else the data plane's ideal time to move the model over one link (BlitzScale chain with one target: M/B at
   * the policy's link rate); undefined for a model the region does not host.
   */
  expectedScaleOutMs(model: ModelName, gpu: GpuType): number | undefined {
    const measured = this.measuredScaleOutMs.get(`${model}/${gpu}`);
    if (measured !== undefined) return measured;
    const p = this.o.models.get(model);
    if (p === undefined) return undefined;
    return this.idealTransferMs(p);
  }

  /** The data plane's ideal time to move the model over one link (BlitzScale chain, one target: M/B), ms. */
  private idealTransferMs(p: ModelParameters): number {
    return 1000 * idealSeconds("chain", { totalBytes: p.totalBytes, blockCount: p.blockCount, nodes: 2, linkBytesPerS: this.o.policy.linkBytesPerS });
  }

  /** Whether the instance's node holds `model`'s complete blocks (the controller prefers such a spot to redeploy). */
  holdsBlocks(instanceId: string, model: ModelName): boolean {
    const inst = this.byId.get(instanceId);
    return inst !== undefined && this.pool.copy(inst.node, model)?.complete === true;
  }

  /** Sets who hears of scale-outs that failed after the operation returned, and of instances that started serving. */
  listen(hooks: ScalingHooks): void {
    this.hooks = hooks;
  }

  // ---- nodes ----

  /**
   * Takes an agent's announcement (the agent calls the region every second; dev calls this directly). A new node
   * is added to the pool; its engines are adopted on first sight; its stores update the pool.
   */
  announce(handle: AgentHandle, a: NodeAnnouncement): void {
    if (this.closed) return;
    const now = this.o.clock.now();
    const { fresh, entry } = this.nodes.announce(handle, a, now);
    if (fresh) {
      this.o.log.info("node joined", { node: a.nodeId, gpuType: a.gpuType, gpuSlots: a.gpuSlots, memoryBytes: a.memoryBytes, data: `${a.dataHost}:${a.dataPort}`, transport: a.transport });
      if (a.gpuSlots <= 0) this.fail({ model: "-", gpu: a.gpuType, node: a.nodeId, message: `agent ${a.nodeId} announces no GPU slots; it can hold parameter blocks but host no engine` });
    }
    this.pool.upsertNode(a.nodeId, a.memoryBytes);
    for (const s of a.stores) {
      const known = this.pool.copy(a.nodeId, s.model);
      // A store being filled by a running transfer is tracked by the transfer; the announcement only adds copies.
      if (known === undefined || (s.present === s.blockCount && !known.complete)) this.pool.setCopy(a.nodeId, s.model, s.totalBytes, s.present === s.blockCount, s.lastUsedMs > 0 ? Math.min(s.lastUsedMs, now) : now);
    }
    for (const m of [...this.poolModels(a.nodeId)]) if (!a.stores.some((s) => s.model === m) && !this.transferring(a.nodeId)) this.pool.dropCopy(a.nodeId, m);
    this.reconcileEngines(entry.nodeId, a, fresh);
  }

  /** Marks silent nodes lost, drops their instances and restores the pool's invariant. Call periodically. */
  tick(): void {
    if (this.closed) return;
    for (const n of this.nodes.expire(this.o.clock.now(), this.o.lostAfterMs ?? 3000)) this.loseNode(n.nodeId, `no announcement for ${this.o.lostAfterMs ?? 3000} ms`);
    this.restoreInvariant();
  }

  /** Drops a node now (its agent is gone). */
  loseNode(nodeId: string, why: string): void {
    this.nodes.markLost(nodeId);
    this.rates.forget(nodeId);
    const models = this.pool.loseNode(nodeId);
    this.o.log.warn("node lost", { node: nodeId, why, copiesLost: models });
    for (const inst of [...this.byId.values()]) {
      if (inst.node !== nodeId) continue;
      this.cancelled.add(inst.id);
      this.removeInstance(inst, `node ${nodeId} lost: ${why}`);
    }
  }

  /** What the admin listing shows: instances, nodes with slots and stores, recent failures. */
  listing(): { instances: AgentInstance[]; nodes: NodeListing[]; failures: ScaleFailure[]; layerwise?: { counters: LivePairCounters; active: ReturnType<LivePairs["active"]> } } {
    return {
      ...(this.pairs === undefined ? {} : { layerwise: { counters: { ...this.pairs.counters }, active: this.pairs.active() } }),
      instances: [...this.byId.values()].map((i) => ({ ...i })),
      nodes: this.nodes.all().map((n) => ({
        nodeId: n.nodeId,
        lost: n.lost,
        lastSeenAtMs: n.lastSeenAtMs,
        gpuType: n.announcement.gpuType,
        gpuSlots: n.announcement.gpuSlots,
        freeSlots: n.lost ? 0 : this.freeSlots(n.nodeId),
        memoryBytes: n.announcement.memoryBytes,
        data: `${n.announcement.dataHost}:${n.announcement.dataPort}`,
        transport: n.announcement.transport,
        copies: n.lost ? [] : [...this.poolModels(n.nodeId)].map((m) => ({ model: m, complete: this.pool.copy(n.nodeId, m)?.complete === true })),
      })),
      failures: [...this.failures],
    };
  }

  /** Stops background work; engines keep running on their agents (a restarted region adopts them). */
  close(): void {
    this.closed = true;
    this.queue.close();
    this.nodes.close();
  }

  // ---- bring-up, drain ----

  private async bringUp(inst: AgentInstance): Promise<void> {
    const model = inst.model;
    try {
      const params = this.o.models.get(model);
      if (params === undefined) throw new TidegateError("invalid_config", `no parameters configured for ${model} in ${this.region}`);
      if (this.pool.copy(inst.node, model)?.complete !== true) {
        // The region's first copy may still be on its way from the origin: the transfer needs it as its source.
        if (this.pool.sources(model).length === 0) await this.repairing.get(model)?.catch(() => undefined);
        this.checkAlive(inst);
      }
      const handle = this.nodes.handle(inst.node);
      if (handle === undefined) throw new TidegateError("upstream_error", `node ${inst.node} is gone`);
      const e = this.o.engines;
      const pipeline = e.commandTemplate === undefined ? e.pipeline?.(model, inst.gpu) : undefined;
      const spec = { instanceId: inst.id, model, gpu: inst.gpu, gpus: inst.gpus, timeScale: e.timeScale, startTimeoutMs: e.startTimeoutMs, ...(e.commandTemplate === undefined ? {} : { commandTemplate: e.commandTemplate }), ...(pipeline === undefined ? {} : { pipeline }) };
      if (this.pool.copy(inst.node, model)?.complete !== true) {
        this.makeRoom(inst.node, params);
        if (inst.state === "provisioning") this.transition(inst, "loading", "waiting for blocks");
        else inst.detail = "waiting for blocks";
        const blocks = this.queue.want(params, inst.node);
        // A pipelined instance neither pairs nor is paired: its engine has no layerwise control (engine-sim answers
        // 404), so it starts whole, as under stop-the-world.
        if (pipeline === undefined) this.pairs?.begin(inst.id, model, inst.gpu, params.blockCount, this.idealTransferMs(params));
        // engine-sim starts while the blocks arrive (its process start overlaps the transfer) and turns healthy once
        // they are all here; a real engine (a command template) starts after them.
        const early = e.commandTemplate === undefined ? handle.startEngine({ ...spec, awaitBlocks: true }) : undefined;
        // Awaited below, after the blocks; a refusal that comes first (the agent has no free slot) must not be an
        // unhandled rejection meanwhile, which ends the region process.
        early?.catch(() => undefined);
        try {
          await blocks;
          this.checkAlive(inst);
        } catch (err) {
          const started = await early?.catch(() => undefined);
          if (started !== undefined) inst.engine = started;
          throw err;
        }
        if (early !== undefined) inst.engine = await early;
      }
      if (inst.state === "provisioning") this.transition(inst, "loading", "starting engine");
      inst.detail = "starting engine";
      inst.engine ??= await handle.startEngine(spec);
      this.pool.pin(inst.node, model, 1);
      this.pool.touch(inst.node, model, this.o.clock.now());
      this.checkAlive(inst);
      await this.serveWhenHealthy(inst);
    } catch (err) {
      if (this.cancelled.has(inst.id)) return this.toSpotAfterCancel(inst);
      const te = toTidegateError(err);
      this.removeInstance(inst, te.message);
      this.hooks.onFailure?.(model, inst.gpu, te.message);
    }
  }

  /** Health-checks the started engine until `startTimeoutMs`, then adds it to the gateway. */
  private async serveWhenHealthy(inst: AgentInstance): Promise<void> {
    const info = inst.engine!;
    const e = this.o.engines;
    inst.detail = `waiting for ${info.url || "the engine"} to answer its health check`;
    const deadline = this.o.clock.now() + e.startTimeoutMs;
    for (;;) {
      this.checkAlive(inst);
      if (info.state === "exited") throw new TidegateError("upstream_error", `engine of ${inst.id} exited: ${info.detail || "no detail"}`);
      if (await e.healthy(info).catch(() => false)) break;
      const exited = this.nodes.get(inst.node)?.announcement.engines.find((x) => x.instanceId === inst.id && x.state === "exited");
      if (exited !== undefined) throw new TidegateError("upstream_error", `engine of ${inst.id} exited: ${exited.detail || "no detail"}`);
      if (this.o.clock.now() >= deadline) throw new TidegateError("timeout", `engine of ${inst.id} on ${inst.node} did not answer its health check within ${e.startTimeoutMs} ms (engines.startTimeoutMs)`);
      await this.o.clock.sleep(this.o.pollMs ?? 100);
    }
    this.checkAlive(inst);
    const engine = await e.connect(info, inst.id);
    if (this.cancelled.has(inst.id) || this.byId.get(inst.id) !== inst) {
      await engine.close();
      this.checkAlive(inst);
    }
    this.o.gateway.addInstance(inst.gpu, engine, "serving");
    this.transition(inst, "serving", `serving at ${info.url}`);
    const tookMs = this.o.clock.now() - (inst.actionAtMs ?? inst.enteredAtMs);
    // A host-cache hit with an engine in this process can serve within the clock's millisecond: it took under 1 ms,
    // not 0 (which the region's telemetry reads as "nothing measured").
    if (inst.via !== undefined) this.measuredScaleOutMs.set(`${inst.model}/${inst.gpu}`, Math.max(1, tookMs));
    this.o.log.info("instance serving", { instanceId: inst.id, model: inst.model, node: inst.node, url: info.url, sinceActionMs: Math.round(tookMs) });
    this.hooks.onLanded?.(inst.model, inst.gpu, inst.id);
  }

  private async finishDrain(inst: AgentInstance): Promise<void> {
    for (;;) {
      const v = this.o.gateway.instances().find((i) => i.instanceId === inst.id);
      if (v === undefined || v.inFlight === 0) break;
      if (this.byId.get(inst.id) !== inst || inst.state !== "draining") return;
      await this.o.clock.sleep(this.o.pollMs ?? 100);
    }
    if (this.byId.get(inst.id) !== inst || inst.state !== "draining") return;
    await this.stopEngine(inst);
    this.transition(inst, "spot", "slots in the spot pool; blocks kept");
  }

  private async toSpotAfterCancel(inst: AgentInstance): Promise<void> {
    this.cancelled.delete(inst.id);
    if (this.byId.get(inst.id) !== inst) return;
    await this.stopEngine(inst);
    this.transition(inst, "spot", "bring-up cancelled; slots in the spot pool");
  }

  /** Stops the instance's engine on its agent (if any) and takes it out of the gateway. */
  private async stopEngine(inst: AgentInstance): Promise<void> {
    if (this.o.gateway.instances().some((i) => i.instanceId === inst.id)) await this.o.gateway.removeInstance(inst.id).close().catch(() => undefined);
    if (inst.engine !== undefined) {
      this.pool.pin(inst.node, inst.model, -1);
      await this.nodes
        .handle(inst.node)
        ?.stopEngine(inst.id, this.o.engines.stopGraceMs)
        .catch((err: unknown) => this.o.log.warn("stopping an engine failed", { instanceId: inst.id, err }));
      delete inst.engine;
    }
  }

  /** Throws when the instance was cancelled, removed or its node was lost while it was being brought up. */
  private checkAlive(inst: AgentInstance): void {
    if (this.closed) throw new TidegateError("cancelled", "the region is shutting down");
    if (this.cancelled.has(inst.id)) throw new TidegateError("cancelled", `bring-up of ${inst.id} cancelled`);
    if (this.byId.get(inst.id) !== inst) throw new TidegateError("cancelled", `${inst.id} was removed`);
  }

  private removeInstance(inst: AgentInstance, why: string): void {
    if (this.byId.get(inst.id) !== inst) return;
    void this.stopEngine(inst);
    this.byId.delete(inst.id);
    this.pairs?.end(inst.id);
    // No bring-up is under way for a serving or spot instance: nothing will read its cancel mark.
    if (inst.state === "serving" || inst.state === "spot") this.cancelled.delete(inst.id);
    this.view = undefined;
    if (!this.closed) this.fail({ model: inst.model, gpu: inst.gpu, node: inst.node, instanceId: inst.id, message: why });
  }

  // ---- engines the agents run ----

  /** Adopts engines found on a node's first announcement; drops instances whose engine the agent no longer runs. */
  private reconcileEngines(nodeId: string, a: NodeAnnouncement, fresh: boolean): void {
    const ours = `${this.region}/`;
    if (fresh) {
      for (const e of a.engines) {
        if (!e.instanceId.startsWith(ours) || this.byId.has(e.instanceId)) continue;
        if (e.state === "exited") continue;
        if (!this.o.models.has(e.model)) {
          void this.nodes.handle(nodeId)?.stopEngine(e.instanceId, this.o.engines.stopGraceMs);
          continue;
        }
        const now = this.o.clock.now();
        const inst: AgentInstance = { id: e.instanceId, region: this.region, gpu: e.gpu, gpus: e.gpus, model: e.model, state: "provisioning", enteredAtMs: now, actionAtMs: now, node: nodeId, detail: "adopting a running engine", engine: e };
        this.byId.set(inst.id, inst);
        this.changed(inst, undefined);
        this.pool.pin(nodeId, e.model, 1);
        this.o.log.info("adopting engine", { instanceId: e.instanceId, node: nodeId, url: e.url, pid: e.pid });
        void (async () => {
          // An engine started while its blocks were arriving, whose transfer died with the previous region process:
          // the blocks are asked for again (it turns healthy once they are all here).
          const params = this.o.models.get(e.model)!;
          if (e.state !== "exited" && this.pool.copy(nodeId, e.model)?.complete !== true) {
            this.transition(inst, "loading", "adopted engine waits for blocks");
            await this.queue.want(params, nodeId);
          }
          await this.serveWhenHealthy(inst);
        })().catch((err: unknown) => {
          // Not adoptable (unhealthy): stop it rather than leave an orphan.
          this.removeInstance(inst, `adoption failed: ${toTidegateError(err).message}`);
        });
      }
      return;
    }
    for (const inst of [...this.byId.values()]) {
      if (inst.node !== nodeId || inst.state !== "serving" || inst.engine === undefined) continue;
      const e = a.engines.find((x) => x.instanceId === inst.id);
      if (e === undefined || e.state === "exited") this.removeInstance(inst, `engine of ${inst.id} is no longer running on ${nodeId}${e?.detail ? `: ${e.detail}` : ""}`);
    }
  }

  // ---- placement, memory, the pool's invariant ----

  private freeSlots(nodeId: string): number {
    const n = this.nodes.get(nodeId);
    if (n === undefined || n.lost) return 0;
    let used = 0;
    for (const i of this.byId.values()) if (i.node === nodeId) used += i.gpus;
    return n.announcement.gpuSlots - used;
  }

  private pickNode(model: ModelName, gpu: GpuType, gpus: number): string {
    let best: { id: string; score: [number, number, number] } | undefined;
    const candidates = this.nodes.live().filter((n) => n.announcement.gpuType === gpu);
    if (candidates.length === 0) throw new TidegateError("conflict", `${this.region}: no live node agent with ${gpu} GPUs has announced itself`);
    for (const n of candidates) {
      const free = this.freeSlots(n.nodeId);
      if (free < gpus) continue;
      const runsModel = [...this.byId.values()].some((i) => i.node === n.nodeId && i.model === model && i.state !== "spot") ? 0 : 1;
      // A complete copy is an O(1) host-cache hit; one being filled (the pool's first copy arriving from the origin)
      // will be one by the time the engine needs it.
      const copy = this.pool.copy(n.nodeId, model);
      const cached = copy === undefined ? 0 : copy.complete ? 2 : 1;
      const score: [number, number, number] = [runsModel, cached, free];
      if (best === undefined || score[0] > best.score[0] || (score[0] === best.score[0] && (score[1] > best.score[1] || (score[1] === best.score[1] && (score[2] > best.score[2] || (score[2] === best.score[2] && n.nodeId < best.id)))))) best = { id: n.nodeId, score };
    }
    if (best === undefined) {
      const slots = candidates.map((n) => `${n.nodeId} ${this.freeSlots(n.nodeId)}/${n.announcement.gpuSlots}`).join(", ");
      throw new TidegateError("conflict", `${this.region}: no node has ${gpus} free ${gpu} slots for ${model} (free/total: ${slots})`);
    }
    return best.id;
  }

  /** Evicts least recently used copies on `nodeId` so `params` fits; throws when nothing evictable makes room. */
  private makeRoom(nodeId: string, params: ModelParameters): void {
    const have = this.pool.copy(nodeId, params.model)?.bytes ?? 0;
    const evict = this.pool.evictionsFor(nodeId, params.totalBytes - have, params.model);
    if (evict === undefined)
      throw new TidegateError("payload_too_large", `node ${nodeId} has no host memory for ${params.model} (${params.totalBytes} bytes; ${this.pool.freeBytes(nodeId)} free, the rest held by copies in use or needed by the pool's invariant)`);
    for (const m of evict) {
      this.pool.dropCopy(nodeId, m);
      this.o.log.info("evicting a cached copy (LRU)", { node: nodeId, model: m, for: params.model });
      void this.nodes.handle(nodeId)?.drop(m).catch(() => undefined);
    }
  }

  /** Re-establishes one complete host copy of every hosted model (BlitzScale §4.1): from the pool, else the origin. */
  private restoreInvariant(): void {
    const hosted = [...this.o.models.keys()];
    for (const r of this.pool.repairs(hosted, (m) => this.o.models.get(m)!.totalBytes)) {
      if (this.repairing.has(r.model)) continue;
      const params = this.o.models.get(r.model)!;
      if (r.to === undefined) {
        if (this.nodes.live().length > 0) this.noSource(r.model, `no live node has host memory for a copy of ${r.model}`);
        continue;
      }
      if (r.sources.length === 0 && params.origin === "none") {
        this.noSource(r.model, `no source of ${r.model} anywhere in ${this.region}: no agent holds a complete copy and the model has no origin (parameters.models.${r.model}.origin)`);
        continue;
      }
      this.noSourceLogged.delete(r.model);
      const to = r.to;
      const work = r.sources.length > 0 ? this.queue.want(params, to) : this.loadOrigin(params, to);
      this.o.log.info("restoring the pool's invariant", { model: r.model, to, from: r.sources.length > 0 ? r.sources : "origin" });
      this.repairing.set(
        r.model,
        work
          .then(() => this.o.log.info("pool copy ready", { model: r.model, node: to }))
          .catch((err: unknown) => {
            this.fail({ model: r.model, gpu: "-", node: to, message: `restoring a host copy of ${r.model} failed: ${toTidegateError(err).message}` });
            throw err;
          })
          .finally(() => this.repairing.delete(r.model)),
      );
      this.repairing.get(r.model)!.catch(() => undefined);
    }
  }

  /** The first copy of a model in the region, from its origin (a seeded synthetic model: the stand-in for storage). */
  private async loadOrigin(p: ModelSource, nodeId: string): Promise<void> {
    const h = this.nodes.handle(nodeId);
    if (h === undefined) throw new TidegateError("upstream_error", `node ${nodeId} is gone`);
    this.makeRoom(nodeId, p);
    this.pool.setCopy(nodeId, p.model, p.totalBytes, false, this.o.clock.now());
    await h.load({ model: p.model, totalBytes: p.totalBytes, blockCount: p.blockCount, fill: "pattern", seed: p.seed ?? 0 });
    this.pool.setCopy(nodeId, p.model, p.totalBytes, true, this.o.clock.now());
  }

  private noSource(model: string, message: string): void {
    if (this.noSourceLogged.has(model)) return;
    this.noSourceLogged.add(model);
    this.fail({ model, gpu: "-", message });
  }

  private transferring(nodeId: string): boolean {
    return [...this.byId.values()].some((i) => i.node === nodeId && i.state === "loading");
  }

  private *poolModels(nodeId: string): Iterable<string> {
    for (const m of this.o.models.keys()) if (this.pool.copy(nodeId, m) !== undefined) yield m;
  }

  private onBlock(model: string, node: string, block: number): void {
    for (const i of this.byId.values()) {
      if (i.node !== node || i.model !== model || i.state !== "loading") continue;
      i.detail = `receiving blocks (last: ${block})`;
      this.pairs?.block(i.id, block);
    }
  }

  /** Lists a scaling problem found elsewhere (e.g. the controller has nowhere to put an instance). */
  report(f: Omit<ScaleFailure, "atMs">): void {
    const entry: ScaleFailure = { atMs: this.o.clock.now(), ...f };
    this.failures.push(entry);
    if (this.failures.length > MAX_FAILURES) this.failures.shift();
  }

  private fail(f: Omit<ScaleFailure, "atMs">): void {
    const entry: ScaleFailure = { atMs: this.o.clock.now(), ...f };
    this.failures.push(entry);
    if (this.failures.length > MAX_FAILURES) this.failures.shift();
    this.o.log.error("scaling failed", { ...f });
  }

  // ---- state ----

  /**
   * A new instance id, `<region>/<node>/<model>/<8 random letters and digits>` (e.g. `us-east/us-east-h100-80gb-0/llama3.2-3b/1f0c9a2b`):
   * it names the model the instance holds, so a redeploy mints a new one.
   */
  private mintId(node: string, model: ModelName): string {
    return `${this.region}/${node}/${model}/${newId("").slice(-8)}`;
  }

  private require(id: string, state: InstanceState): AgentInstance {
    const inst = this.byId.get(id);
    if (inst === undefined) throw new TidegateError("not_found", `no instance ${id} in ${this.region}`);
    if (inst.state !== state) throw new TidegateError("conflict", `instance ${id} is ${inst.state}, not ${state}`);
    return inst;
  }

  private transition(inst: AgentInstance, to: InstanceState, detail: string): void {
    const from = inst.state;
    inst.state = to;
    inst.detail = detail;
    inst.enteredAtMs = this.o.clock.now();
    this.changed(inst, from);
  }

  private changed(inst: AgentInstance, from: InstanceState | undefined): void {
    this.view = undefined;
    if (from === "loading" && inst.state !== "loading") this.pairs?.end(inst.id);
    this.o.onChange?.(inst, from);
  }
}

/** One node in the admin listing. */
