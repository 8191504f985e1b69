/**
 * One `agents` instance's engine from placement to spot (BlitzScale §4; DESIGN "Ports": Actuator):
 * - bring-up: unless its node holds a complete copy, the node joins the model's next multicast plan (host-copies.ts)
 *   and, with serve-while-loading on, the instance is paired with a serving engine of its model (BlitzScale §5.2,
 *   liveload/live-pairs.ts) until it leaves `loading`; engine-sim starts with `awaitBlocks` while the blocks arrive,
 *   a command template after them; with λScale's pipelines (a `lambdascale` loading key) the head of a formed
 *   execution pipeline serves before its blocks are all here (`servePipelined`, λScale §4.3) and switches to local
 *   mode once they are (§4.4); with serve-while-loading on and no serving engine to pair with (a cold start), the
 *   engine serves at once, each prefill behind its arriving blocks (`serveBehindBlocks`, BlitzScale §5.2 (1)–(2));
 * - serving: once the engine answers its health check within `startTimeoutMs`, the gateway routes to it and the
 *   scale-out's duration is recorded;
 * - drain: streams in flight finish, the engine stops, the instance becomes `spot` with its slots and blocks; a
 *   cancelled bring-up (a drain of a deploying instance) hands its instance to spot the same way;
 * - failure: the instance is removed (its slots are free again), listed, and `onFailure` tells the controller.
 */
import type { EngineSettings } from "../../core/engine-settings.js";
import type { Clock } from "../../core/clock.js";
import { TidegateError, toTidegateError } from "../../core/errors.js";
import type { Logger } from "../../core/log.js";
import type { ModelName, RegionName } from "../../core/models.js";
import type { Engine, PoolRole } from "../../core/ports.js";
import type { EngineInfo, EngineSpec } from "../../nodes/agent/handle.js";
import type { LivePairs } from "../liveload/live-pairs.js";
import type { AgentInstance, InstanceTable } from "./agent-instances.js";
import type { GatewayMembership } from "./gateway-membership.js";
import type { HostCopies, ModelSource } from "./host-copies.js";
import type { NodeRegistry } from "./nodes.js";
import { setRole, type ScaleFailure, type ScalingHooks } from "./port.js";
import type { ScaleOutTimes } from "./scale-out-times.js";

/** How engines are started, checked and connected. */
export interface EngineStartOptions {
  /** A real engine's command template (`vllm serve {model} --port {port}`); absent = engine-sim. */
  commandTemplate?: string;
  timeScale: number;
  /** How long an engine may take to answer its health check. */
  startTimeoutMs: number;
  /** SIGTERM → SIGKILL grace when an engine is stopped. */
  stopGraceMs: number;
  /**
   * The gateway's Engine for a started engine (live: openai-http at its URL; dev: the in-process engine), in `role`'s
   * pool (the role it was started with; undefined: colocated).
   */
  connect(info: EngineInfo, instanceId: string, role?: PoolRole): Promise<Engine>;
  /** Whether the engine answers its health check now. */
  healthy(info: EngineInfo): Promise<boolean>;
  /**
   * The prefill/decode role a running engine serves with now (engine-sim's /health settings), for an engine a restarted
   * region adopts: its instance goes back to that pool. Absent: adopted engines are colocated.
   */
  roleOf?(info: EngineInfo): Promise<string | undefined>;
  /**
   * The pipeline spec (engine-sim's --pipeline JSON) of an endpoint served as a pipeline of stages (config
   * `keystage.pipelines`), else undefined. engine-sim only: a command template never gets one.
   */
  pipeline?(model: string, gpu: string): string | undefined;
  /**
   * A simulated engine's settings for `model` (core/engine-settings.ts; build-sim-engine.ts engineSettingsOf), sent
   * as StartEngine's `settings` to engine-sim that is not a pipeline (whose stage replicas take none of them);
   * absent = the engine's defaults. Never sent with a command template (a real engine).
   */
  settings?(model: string): EngineSettings;
  /**
   * Makes an engine started with awaitBlocks serve now as the head of a λScale execution pipeline, with
   * `passOverheadMs` added to every pass (its activation hops), or, with 0, switches it to local mode (λScale
   * §4.3–4.4; engine-sim: POST /tidegate/lambda; dev: the in-process agent). Absent: pipelines never serve early.
   */
  servePipelined?(info: EngineInfo, instanceId: string, passOverheadMs: number): Promise<void>;
  /**
   * Makes an engine started with awaitBlocks serve now, each prefill behind its blocks as they arrive (a blitzscale
   * cold start with nothing to pair with; engine-sim: POST /tidegate/lambda {passOverheadMs: 0, behindBlocks: true};
   * dev: the in-process agent). Absent: such an instance serves once loaded.
   */
  serveBehindBlocks?(info: EngineInfo, instanceId: string): Promise<void>;
}

/** What the lifecycle reads and calls: the instance table, the host copies, the nodes' agents, the gateway. */
export interface EngineLifecycleOptions {
  region: RegionName;
  clock: Clock;
  log: Logger;
  models: ReadonlyMap<ModelName, ModelSource>;
  engines: EngineStartOptions;
  /** How often a draining instance's streams and a starting engine's health are checked (ms). */
  pollMs: number;
  table: InstanceTable;
  copies: Pick<HostCopies, "pool" | "want" | "repair" | "makeRoom">;
  nodes: Pick<NodeRegistry, "handle" | "get">;
  gateway: GatewayMembership;
  /** Live serve-while-loading pairings (undefined: stop-the-world). */
  pairs: Pick<LivePairs, "begin" | "block" | "end"> | undefined;
  times: Pick<ScaleOutTimes, "record" | "idealTransferMs">;
  fail(f: Omit<ScaleFailure, "atMs">): void;
  /** Who hears of failed scale-outs and landed instances (set by `listen`). */
  hooks(): ScalingHooks;
  /** Whether the region is shutting down. */
  closed(): boolean;
}

export class EngineLifecycle {
  /** Engines started with awaitBlocks, by instance id, while their instance waits for its blocks. */
  private readonly early = new Map<string, Promise<EngineInfo>>();
  /**
   * Instances brought to serving before their blocks are all here — λScale pipeline heads, blitzscale cold starts
   * behind their blocks: `serving` resolves true once serving.
   */
  private readonly heads = new Map<string, { kind: "pipeline" | "behind-blocks"; serving: Promise<boolean> }>();

  constructor(private readonly o: EngineLifecycleOptions) {}

  /** Brings `inst` (provisioning or loading) to serving; on failure removes it and tells `onFailure`. Never throws. */
  async bringUp(inst: AgentInstance): Promise<void> {
    const { table, copies } = this.o;
    const model = inst.model;
    try {
      const params = this.o.models.get(model);
      if (params === undefined) throw new TidegateError("invalid_config", `no parameters configured for ${model} in ${this.o.region}`);
      // Where the parameters come from (issue 33): the node's own copy, a peer's (multicast), else the origin.
      inst.loadSource = copies.pool.copy(inst.node, model)?.complete === true ? "host" : copies.pool.sources(model).length > 0 ? "peer" : "origin";
      if (copies.pool.copy(inst.node, model)?.complete !== true) {
        // The region's first copy may still be on its way from the origin: the transfer needs it as its source.
        if (copies.pool.sources(model).length === 0) await copies.repair(model)?.catch(() => undefined);
        this.checkAlive(inst);
      }
      const handle = this.o.nodes.handle(inst.node);
      if (handle === undefined) throw new TidegateError("upstream_error", `node ${inst.node} is gone`);
      const e = this.o.engines;
      // An instance of a prefill or decode pool is a whole-model engine-sim with its role (never a pipeline of stages).
      const pipeline = e.commandTemplate === undefined && inst.role === undefined ? e.pipeline?.(model, inst.gpu) : undefined;
      const spec = { instanceId: inst.id, model, gpu: inst.gpu, gpus: inst.gpus, timeScale: e.timeScale, startTimeoutMs: e.startTimeoutMs, ...(e.commandTemplate === undefined ? {} : { commandTemplate: e.commandTemplate }), ...(pipeline === undefined ? {} : { pipeline }), ...(e.commandTemplate === undefined && pipeline === undefined && (e.settings !== undefined || inst.role !== undefined) ? { settings: { ...e.settings?.(model), ...(inst.role === undefined ? {} : { role: inst.role }) } } : {}) };
      if (copies.pool.copy(inst.node, model)?.complete !== true) {
        copies.makeRoom(inst.node, params);
        if (inst.state === "provisioning") table.transition(inst, "loading", "waiting for blocks");
        else inst.detail = "waiting for blocks";
        const blocks = copies.want(params, inst.node);
        // A pipelined instance neither pairs nor is paired: its engine has no layerwise control (engine-sim answers
        // 404), so it starts whole, as under stop-the-world.
        // Nor does an instance of a prefill or decode pool: a pairing would serve its requests with a partner of
        // either role, so it serves once loaded.
        const paired = pipeline === undefined && inst.role === undefined ? this.o.pairs?.begin(inst.id, model, inst.gpu, params.blockCount, this.o.times.idealTransferMs(params)) : undefined;
        // engine-sim starts while the blocks arrive (its process start overlaps the transfer) and turns healthy once
        // they are all here; a real engine (a command template) starts after them.
        const early = e.commandTemplate === undefined ? handle.startEngine({ ...spec, awaitBlocks: true }) : undefined;
        // Awaited below, after the blocks; a refusal that comes first (the agent has no free slot) must not be an
        // unhandled rejection meanwhile, which ends the region process.
        early?.catch(() => undefined);
        if (early !== undefined) this.early.set(inst.id, early);
        // Serve while loading with no serving engine to pair with (a cold start): behind its own arriving blocks.
        if (paired === false) this.serveBehindBlocks(inst);
        try {
          await blocks;
          this.checkAlive(inst);
        } catch (err) {
          this.early.delete(inst.id);
          this.heads.delete(inst.id);
          const started = await early?.catch(() => undefined);
          if (started !== undefined) inst.engine = started;
          throw err;
        } finally {
          this.early.delete(inst.id);
        }
        const head = this.heads.get(inst.id);
        this.heads.delete(inst.id);
        if (head?.kind === "behind-blocks" && (await head.serving)) {
          // It has served behind its blocks since its load started; they are all here now (the engine saw it too).
          this.checkAlive(inst);
          copies.pool.touch(inst.node, model, this.o.clock.now());
          return;
        }
        if (head !== undefined && (await head.serving)) {
          // It has served as a λScale pipeline head since its pipeline formed: its own copy is complete now, so it
          // switches to local mode (λScale §4.4), without the activation hops. (Drained meanwhile: nothing to switch.)
          this.checkAlive(inst);
          if (inst.state !== "serving" || inst.engine === undefined) return;
          // engine-sim also switches by itself once its node's store is complete: a failed call costs nothing more.
          await e.servePipelined!(inst.engine, inst.id, 0).then(
            () => this.o.log.info("λScale pipeline head switched to local mode", { instanceId: inst.id, model, node: inst.node }),
            (err: unknown) => this.o.log.warn("switching a λScale pipeline head to local mode failed", { instanceId: inst.id, err: toTidegateError(err).message }),
          );
          copies.pool.touch(inst.node, model, this.o.clock.now());
          return;
        }
        if (early !== undefined) inst.engine = await early;
      }
      if (inst.state === "provisioning") table.transition(inst, "loading", "starting engine");
      inst.detail = "starting engine";
      inst.engine ??= await handle.startEngine(spec);
      copies.pool.pin(inst.node, model, 1);
      copies.pool.touch(inst.node, model, this.o.clock.now());
      this.checkAlive(inst);
      await this.serveWhenHealthy(inst);
    } catch (err) {
      if (table.isCancelled(inst.id)) return this.toSpotAfterCancel(inst);
      const te = toTidegateError(err);
      this.remove(inst, te.message);
      this.o.hooks().onFailure?.(model, inst.gpu, te.message, inst.role);
    }
  }

  /**
   * A λScale execution pipeline formed (liveload/live-lambda.ts): its members' nodes together hold every block of
   * `p.model`. The member instance holding the most blocks whose engine was started with awaitBlocks becomes the
   * head: its engine serves now with `passOverheadMs` per pass (λScale §4.3), enters the gateway and the instance
   * turns `serving`; bringUp switches it to local mode once its blocks are all here. Any failure is logged and
   * leaves the instance to serve once loaded, as under stop-the-world. Never throws.
   */
  servePipelined(p: { model: ModelName; nodes: readonly string[]; held: readonly number[]; hops: number }, passOverheadMs: number): void {
    const set = this.o.engines.servePipelined;
    if (set === undefined) return;
    const members = p.nodes
      .map((node, k) => ({ inst: this.o.table.list().find((i) => i.node === node && i.model === p.model && i.state === "loading"), held: p.held[k] ?? 0 }))
      .filter((m) => m.inst !== undefined && this.early.has(m.inst.id) && !this.heads.has(m.inst.id))
      .sort((a, b) => b.held - a.held);
    const inst = members[0]?.inst;
    if (inst === undefined) {
      this.o.log.info("a λScale execution pipeline formed with no loading member to serve it: its members load whole", { model: p.model, nodes: p.nodes });
      return;
    }
    this.serveEarly(inst, "pipeline", (info) => set(info, inst.id, passOverheadMs), () => this.o.log.info("λScale execution pipeline serving while it loads", { instanceId: inst.id, model: p.model, nodes: p.nodes, hops: p.hops, passOverheadMs, heldBlocks: p.held }));
  }

  /**
   * A blitzscale cold start with no serving engine to pair with (BlitzScale §5.2 steps (1)–(2) with S_i = 0;
   * engines/sim/layerwise/behind-blocks.ts): its engine, started with awaitBlocks, serves now with each prefill behind
   * its blocks as they arrive, enters the gateway (a cold hold lets its requests go to it) and the instance turns
   * `serving`. Any failure is logged and leaves the instance to serve once loaded. Never throws.
   */
  private serveBehindBlocks(inst: AgentInstance): void {
    const set = this.o.engines.serveBehindBlocks;
    if (set === undefined || !this.early.has(inst.id) || this.heads.has(inst.id)) return;
    this.serveEarly(inst, "behind-blocks", (info) => set(info, inst.id), () => this.o.log.info("blitzscale cold start serving behind its arriving blocks", { instanceId: inst.id, model: inst.model, node: inst.node }));
  }

  /** Makes `inst`'s early engine serve while it loads (`kind`), once `set` tells the engine; `heads` holds the outcome. */
  private serveEarly(inst: AgentInstance, kind: "pipeline" | "behind-blocks", set: (info: EngineInfo) => Promise<void>, logServing: () => void): void {
    const early = this.early.get(inst.id)!;
    const run = (async (): Promise<boolean> => {
      try {
        const info = await early;
        this.checkAlive(inst);
        if (inst.state !== "loading") return false;
        await set(info);
        inst.engine = info;
        this.o.copies.pool.pin(inst.node, inst.model, 1);
        logServing();
        try {
          await this.serveWhenHealthy(inst);
        } catch (err) {
          this.o.copies.pool.pin(inst.node, inst.model, -1);
          delete inst.engine;
          throw err;
        }
        return true;
      } catch (err) {
        if (!this.o.closed()) this.o.log.warn(kind === "pipeline" ? "a λScale pipeline head could not serve while loading: it serves once loaded" : "a blitzscale cold start could not serve behind its blocks: it serves once loaded", { instanceId: inst.id, model: inst.model, err: toTidegateError(err).message });
        return false;
      }
    })();
    this.heads.set(inst.id, { kind, serving: run });
  }

  /**
   * Health-checks the started engine until `startTimeoutMs`, then adds it to the gateway; throws why not. `adopted`:
   * an engine a restarted region found running, whose pool is the role it serves with now (`roleOf`).
   */
  async serveWhenHealthy(inst: AgentInstance, adopted = false): Promise<void> {
    const info = inst.engine!;
    const e = this.o.engines;
    inst.detail = `waiting for ${info.url || "the engine"} to answer its health check`;
    const deadline = this.o.clock.now() + e.startTimeoutMs;
    for (;;) {
      this.checkAlive(inst);
      if (info.state === "exited") throw new TidegateError("upstream_error", `engine of ${inst.id} exited: ${info.detail || "no detail"}`);
      if (await e.healthy(info).catch(() => false)) break;
      const exited = this.o.nodes.get(inst.node)?.announcement.engines.find((x) => x.instanceId === inst.id && x.state === "exited");
      if (exited !== undefined) throw new TidegateError("upstream_error", `engine of ${inst.id} exited: ${exited.detail || "no detail"}`);
      if (this.o.clock.now() >= deadline) throw new TidegateError("timeout", `engine of ${inst.id} on ${inst.node} did not answer its health check within ${e.startTimeoutMs} ms (engines.startTimeoutMs)`);
      await this.o.clock.sleep(this.o.pollMs);
    }
    this.checkAlive(inst);
    if (adopted && e.roleOf !== undefined) {
      // The role it serves with now; when that cannot be read, the role its agent announced stands.
      const now = await e.roleOf(info).then((role) => ({ role }), (err: unknown) => {
        this.o.log.warn("adopted engine's role unreadable; keeping the role its agent announced", { instanceId: inst.id, role: inst.role ?? "none", err: err instanceof Error ? err.message : String(err) });
        return undefined;
      });
      if (now !== undefined) setRole(inst, now.role === "prefill" || now.role === "decode" ? now.role : undefined);
    }
    const engine = await e.connect(info, inst.id, inst.role);
    if (this.o.table.isCancelled(inst.id) || !this.o.table.current(inst)) {
      await engine.close();
      this.checkAlive(inst);
    }
    this.o.gateway.add(inst.gpu, engine);
    this.o.table.transition(inst, "serving", `serving at ${info.url}`);
    const tookMs = this.o.clock.now() - (inst.actionAtMs ?? inst.enteredAtMs);
    if (inst.via !== undefined) this.o.times.record(inst.model, inst.gpu, tookMs);
    this.o.log.info("instance serving", { instanceId: inst.id, model: inst.model, node: inst.node, url: info.url, sinceActionMs: Math.round(tookMs) });
    this.o.hooks().onLanded?.(inst.model, inst.gpu, inst.id, inst.loadSource);
  }

  /** Waits for a draining instance's streams to finish, stops its engine and moves it to spot (unless it went meanwhile). */
  async finishDrain(inst: AgentInstance): Promise<void> {
    const { table } = this.o;
    for (;;) {
      const inFlight = this.o.gateway.inFlight(inst.id);
      if (inFlight === undefined || inFlight === 0) break;
      if (!table.current(inst) || inst.state !== "draining") return;
      await this.o.clock.sleep(this.o.pollMs);
    }
    if (!table.current(inst) || inst.state !== "draining") return;
    await this.stopEngine(inst);
    table.transition(inst, "spot", "slots in the spot pool; blocks kept");
  }

  /** Removes `inst` (stopping its engine) and lists why, unless the region is shutting down. */
  remove(inst: AgentInstance, why: string): void {
    if (!this.o.table.current(inst)) return;
    void this.stopEngine(inst);
    this.o.table.delete(inst);
    this.o.pairs?.end(inst.id);
    if (!this.o.closed()) this.o.fail({ model: inst.model, gpu: inst.gpu, node: inst.node, instanceId: inst.id, message: why });
  }

  /** A block of `model` arrived on `nodeId`: the loading instances there say so, and their pairings learn it. */
  blockArrived(model: ModelName, nodeId: string, block: number): void {
    for (const i of this.o.table.list()) {
      if (i.node !== nodeId || i.model !== model || i.state !== "loading") continue;
      i.detail = `receiving blocks (last: ${block})`;
      this.o.pairs?.block(i.id, block);
    }
  }

  private async toSpotAfterCancel(inst: AgentInstance): Promise<void> {
    this.o.table.clearCancel(inst.id);
    if (!this.o.table.current(inst)) return;
    await this.stopEngine(inst);
    this.o.table.transition(inst, "spot", "bring-up cancelled; slots in the spot pool");
  }

  /** Stops the instance's engine on its agent (if any) and takes it out of the gateway. */
  private async stopEngine(inst: AgentInstance): Promise<void> {
    if (this.o.gateway.has(inst.id)) await this.o.gateway.remove(inst.id);
    if (inst.engine !== undefined) {
      this.o.copies.pool.pin(inst.node, inst.model, -1);
      await this.o.nodes
        .handle(inst.node)
        ?.stopEngine(inst.id, this.o.engines.stopGraceMs)
        .catch((err: unknown) => this.o.log.warn("stopping an engine failed", { instanceId: inst.id, err }));
      delete inst.engine;
    }
  }

  /** Throws when the instance was cancelled, removed or its node was lost while it was being brought up. */
  private checkAlive(inst: AgentInstance): void {
    if (this.o.closed()) throw new TidegateError("cancelled", "the region is shutting down");
    if (this.o.table.isCancelled(inst.id)) throw new TidegateError("cancelled", `bring-up of ${inst.id} cancelled`);
    if (!this.o.table.current(inst)) throw new TidegateError("cancelled", `${inst.id} was removed`);
  }
}
