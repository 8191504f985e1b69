/**
 * The `agents` Actuator adapter (DESIGN "Ports": Actuator; BlitzScale §4): instances are real engine processes that
 * node agents (`tidegate agent`, or in-process agents in `tidegate dev`) start and stop, and a scale-out moves the
 * model's parameter blocks to the new instance's node over the native data plane before its engine starts.
 *
 * Lifecycle of one instance (every transition visible at once in `instances()`, as the port requires):
 * - provision: a node with free GPU slots of the type is picked (node-placement.ts: spread — nodes not yet running
 *   the model first, then nodes already holding its blocks, an O(1) host-cache hit, then the most free slots);
 *   `provisioning`.
 * - loading: unless the node already holds a complete copy, it joins the model's next multicast plan (host-copies.ts:
 *   the region's TransferQueue batches every target of a controller pass into one plan, from the parameter pool's
 *   sources).
 * - serve while loading (a `blitzscale` loading key: liveload/live-pairs.ts): while its blocks arrive, the new
 *   instance is paired with a serving engine of the model, which shares the prefill of its queue with it layer by
 *   layer (BlitzScale §5.2), updated at every block the data plane reports; the pairing ends when it serves.
 * - execute while loading (the `lambdascale` loading key with `lambda-pipelines`: liveload/live-lambda.ts): the
 *   multicast is λScale's binomial pipeline from the k complete copies; once the members of one of its execution
 *   pipelines together hold every block, one member's engine serves with the pipeline's activation hops added to
 *   every pass (λScale §4.3) and drops them when its own copy is complete (§4.4).
 * - serving: the agent starts the engine (engine-sim, or the configured command template); once it answers its
 *   health check within `startTimeoutMs` the gateway adds it and routes to it (engine-lifecycle.ts,
 *   gateway-membership.ts).
 * - drain: the gateway stops routing to it, in-flight streams finish, the engine is stopped; the instance becomes
 *   `spot` and keeps its GPU slots and blocks (the spot pool, region/spot); reclaim starts an engine on them again,
 *   redeploy loads another model onto them.
 * - failure (no source, an engine that exits or never becomes healthy, a node lost mid-way): the instance is removed
 *   (its slots are free again), the failure is logged, listed (`failures`) and reported through `onFailure` so the
 *   controller backs off. Serving instances are never touched by a failed scale-out.
 * Nodes are learnt from their agents' announcements (node-membership.ts); a node silent for `lostAfterMs` is lost:
 * its instances go, and the pool restores its invariant (`minHostCopies` complete host copies of every hosted
 * model) from what remains. A region that restarts adopts the engines its agents still run (adoption.ts: health-checked) instead of
 * starting duplicates, and stops the ones it cannot adopt.
 *
 * This class is the facade: it implements RuntimeActuator, owns the state the parts share (the instance table, the
 * node registry, the host copies) and wires the parts to each other.
 */
import type { Clock } from "../../core/clock.js";
import { TidegateError } from "../../core/errors.js";
import type { Logger } from "../../core/log.js";
import type { GpuType, ModelName, RegionName } from "../../core/models.js";
import type { PairScheduler } from "../../core/ports.js";
import type { AgentHandle, NodeAnnouncement } from "../../nodes/agent/handle.js";
import type { Gateway } from "../gateway/gateway.js";
import type { ParameterPool } from "../pool/parameter-pool.js";
import type { LinkRates } from "../pool/rates.js";
import type { MulticastPolicy, TransferResult } from "../pool/transfer.js";
import { LivePairs, type LivePairCounters } from "../liveload/live-pairs.js";
import { pipelinePassMs } from "../liveload/lambda.js";
import { LiveLambdaPipelines, type LiveLambdaCounters } from "../liveload/live-lambda.js";
import type { MulticastPlan } from "../../nodes/multicast/schedule.js";
import { EngineAdoption } from "./adoption.js";
import { InstanceTable, type AgentInstance } from "./agent-instances.js";
import { EngineLifecycle, type EngineStartOptions } from "./engine-lifecycle.js";
import { GatewayMembership } from "./gateway-membership.js";
import { HostCopies, type ModelSource } from "./host-copies.js";
import { NodeMembership } from "./node-membership.js";
import { freeGpus, freeSlots, pickNode, type PlacementView } from "./node-placement.js";
import { NodeRegistry } from "./nodes.js";
import { ScaleFailures } from "./scale-failures.js";
import { ScaleOutTimes } from "./scale-out-times.js";
import { setRole, type InstanceListener, type InstanceRecord, type NodeListing, type PoolRole, type RuntimeActuator, type ScaleFailure, type ScalingHooks } from "./port.js";

export type { NodeListing, ScaleFailure } from "./port.js";
export type { AgentInstance } from "./agent-instances.js";
export type { EngineStartOptions } from "./engine-lifecycle.js";
export type { ModelSource } from "./host-copies.js";

export interface AgentsActuatorOptions {
  region: RegionName;
  clock: Clock;
  log: Logger;
  gateway: Gateway;
  /** The parameters of every model the region hosts. */
  models: ReadonlyMap<ModelName, ModelSource>;
  policy: MulticastPolicy;
  engines: EngineStartOptions;
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
  /**
   * Execute while loading (the region's `loading` key lambdascale/lambda-pipelines: liveload/live-lambda.ts): λScale's
   * execution pipelines serve while their members load. Needs `policy.algorithm` "binomial" for its pipelines and
   * `engines.servePipelined`. Absent: no pipelines.
   */
  lambda?: { hopMsPerToken(model: ModelName): number };
}

export class AgentsActuator implements RuntimeActuator {
  readonly kind = "agents";
  readonly region: RegionName;
  readonly pool: ParameterPool;
  readonly nodes = new NodeRegistry();
  /** The data plane's measured receive rate per node, ordering chain targets (pool/rates.ts). */
  readonly rates: LinkRates;
  /** Recent scaling failures, oldest first (at most 50). */
  readonly failures: ScaleFailure[];
  /** Live serve-while-loading pairings (undefined: stop-the-world). */
  readonly pairs: LivePairs | undefined;
  /** λScale's execution pipelines waiting to form (undefined: the loading key runs none). */
  readonly pipelines: LiveLambdaPipelines | undefined;
  private readonly table: InstanceTable;
  private readonly copies: HostCopies;
  private readonly nodeMembership: NodeMembership;
  private readonly lifecycle: EngineLifecycle;
  private readonly gatewayMembership: GatewayMembership;
  private readonly times: ScaleOutTimes;
  private readonly failureList: ScaleFailures;
  private closed = false;
  private hooks: ScalingHooks = {};

  constructor(private readonly o: AgentsActuatorOptions) {
    this.region = o.region;
    const { clock, log } = o;
    const gateway = (this.gatewayMembership = new GatewayMembership(o.gateway));
    if (o.layerwise !== undefined)
      this.pairs = new LivePairs({
        clock,
        log,
        scheduler: o.layerwise.scheduler,
        hopMsPerToken: (m) => o.layerwise!.hopMsPerToken(m),
        ...(o.layerwise.ttlMs === undefined ? {} : { ttlMs: o.layerwise.ttlMs }),
        serving: (model, gpu) => gateway.serving(model, gpu),
      });
    const pairs = this.pairs;
    const lambda = o.lambda;
    if (lambda !== undefined)
      this.pipelines = new LiveLambdaPipelines({ clock, onFormed: (p) => this.lifecycle.servePipelined(p, pipelinePassMs(p.hops, lambda.hopMsPerToken(p.model))) });
    const pipelines = this.pipelines;
    this.failureList = new ScaleFailures({ clock, log });
    this.failures = this.failureList.entries;
    const fail = (f: Omit<ScaleFailure, "atMs">): void => this.failureList.fail(f);
    this.times = new ScaleOutTimes(o.models, o.policy);
    this.table = new InstanceTable({ region: o.region, clock, ...(o.onChange === undefined ? {} : { onChange: o.onChange }), onLeftLoading: (id) => {
        pairs?.end(id);
        // A member that stops loading (failed, cancelled, lost) leaves its pipeline unable to form.
        const left = pipelines === undefined ? undefined : this.table.list().find((i) => i.id === id);
        if (left !== undefined) pipelines!.drop(left.model, left.node);
      },
    });
    const table = this.table;
    this.copies = new HostCopies({
      region: o.region,
      clock,
      log,
      models: o.models,
      policy: o.policy,
      minHostCopies: o.minHostCopies ?? 1,
      nodes: this.nodes,
      loadingOn: (n) => table.loadingOn(n),
      sendsKv: (n) => table.list().some((i) => i.node === n && i.role === "prefill" && i.state === "serving"),
      onBlock: (model, node, block) => {
        pipelines?.block(model, node, block);
        this.lifecycle.blockArrived(model, node, block);
      },
      ...(pipelines === undefined ? {} : { onPlan: (model: ModelName, plan: MulticastPlan) => pipelines.plan(model, plan) }),
      ...(o.onTransfer === undefined ? {} : { onTransfer: o.onTransfer }),
      fail,
    });
    this.pool = this.copies.pool;
    this.rates = this.copies.rates;
    this.lifecycle = new EngineLifecycle({
      region: o.region,
      clock,
      log,
      models: o.models,
      engines: o.engines,
      pollMs: o.pollMs ?? 100,
      table,
      copies: this.copies,
      nodes: this.nodes,
      gateway,
      pairs,
      times: this.times,
      fail,
      hooks: () => this.hooks,
      closed: () => this.closed,
    });
    const adoption = new EngineAdoption({ region: o.region, clock, log, models: o.models, stopGraceMs: o.engines.stopGraceMs, table, copies: this.copies, nodes: this.nodes, lifecycle: this.lifecycle });
    this.nodeMembership = new NodeMembership({
      clock,
      log,
      lostAfterMs: o.lostAfterMs ?? 3000,
      nodes: this.nodes,
      copies: this.copies,
      fail,
      reconcileEngines: (nodeId, a, fresh) => adoption.reconcile(nodeId, a, fresh),
      dropInstances: (nodeId, why) => {
        for (const inst of table.onNode(nodeId)) {
          table.cancel(inst.id);
          this.lifecycle.remove(inst, `node ${nodeId} lost: ${why}`);
        }
      },
    });
  }

  // ---- the Actuator port ----

  instances(): readonly Readonly<AgentInstance>[] {
    return this.table.list();
  }

  freeGpus(gpu: GpuType): number {
    return freeGpus(this.placement(), gpu);
  }

  provision(model: ModelName, gpu: GpuType, gpus: number, role?: PoolRole): InstanceRecord {
    const node = pickNode(this.region, this.placement(), model, gpu, gpus);
    const now = this.o.clock.now();
    const inst: AgentInstance = { id: this.table.mintId(node, model), region: this.region, gpu, gpus, model, state: "provisioning", enteredAtMs: now, actionAtMs: now, via: "vm", node, detail: "placed", ...(role === undefined ? {} : { role }) };
    this.table.add(inst);
    void this.lifecycle.bringUp(inst);
    return { ...inst };
  }

  reclaimSpot(instanceId: string, role?: PoolRole): InstanceRecord {
    const inst = this.table.require(instanceId, "spot");
    setRole(inst, role);
    inst.via = "reclaim";
    inst.actionAtMs = this.o.clock.now();
    this.table.transition(inst, "provisioning", "reclaimed from spot");
    void this.lifecycle.bringUp(inst);
    return { ...inst };
  }

  /** The redeployed instance is listed under a new id naming `model` (`formerId`: the one it had); see `InstanceTable.mintId`. */
  redeploy(instanceId: string, model: ModelName, gpus: number, role?: PoolRole): InstanceRecord {
    const inst = this.table.require(instanceId, "spot");
    if (gpus !== inst.gpus) throw new TidegateError("conflict", `instance ${instanceId} holds ${inst.gpus} GPU slots; ${model} needs ${gpus}`);
    this.table.rename(inst, model);
    setRole(inst, role);
    inst.via = "redeploy-local";
    inst.model = model;
    inst.actionAtMs = this.o.clock.now();
    this.table.transition(inst, "loading", `redeploying ${model}`);
    void this.lifecycle.bringUp(inst);
    return { ...inst };
  }

  /** Actuator.switchRole: the pool changes now; the engine is told (in process at once, engine-sim over HTTP). */
  switchRole(instanceId: string, role: PoolRole): InstanceRecord {
    const inst = this.table.require(instanceId, "serving");
    const engine = this.o.gateway.engine(instanceId);
    if (inst.role === undefined || engine?.switchRole === undefined) throw new TidegateError("conflict", `instance ${instanceId} cannot switch to ${role}: ${inst.role === undefined ? "it is colocated" : "its engine cannot switch"}`);
    const was = inst.role;
    setRole(inst, role);
    inst.actionAtMs = this.o.clock.now();
    inst.detail = `switched from ${was} to ${role}`;
    void engine.switchRole(role).catch((err: unknown) => {
      // Back in its pool: the engine still has its old role.
      if (!this.table.current(inst)) return;
      setRole(inst, was);
      const message = `switching ${instanceId} to ${role} failed: ${err instanceof Error ? err.message : String(err)}`;
      this.report({ model: inst.model, gpu: inst.gpu, node: inst.node, instanceId, message });
      this.hooks.onFailure?.(inst.model, inst.gpu, message, role);
    });
    return { ...inst };
  }

  drainToSpot(instanceId: string): InstanceRecord {
    const inst = this.table.get(instanceId);
    if (inst === undefined) throw new TidegateError("not_found", `no instance ${instanceId} in ${this.region}`);
    if (inst.state === "draining" || inst.state === "spot") throw new TidegateError("conflict", `instance ${instanceId} is already ${inst.state}`);
    const wasServing = inst.state === "serving";
    inst.via = "drain";
    inst.actionAtMs = this.o.clock.now();
    if (!wasServing) this.table.cancel(inst.id); // its bring-up stops at its next step and hands it to spot
    this.table.transition(inst, "draining", wasServing ? "draining in-flight streams" : "cancelling bring-up");
    if (wasServing) {
      this.gatewayMembership.drain(inst.id);
      void this.lifecycle.finishDrain(inst);
    }
    return { ...inst };
  }

  /**
   * How long the next scale-out of (model, gpu) is expected to take, decision to serving (ms): the last one measured
   * here, else the data plane's ideal time to move the model over one link (BlitzScale chain with one target: M/B at
   * the policy's link rate); undefined for a model the region does not host.
   */
  expectedScaleOutMs(model: ModelName, gpu: GpuType): number | undefined {
    return this.times.expected(model, gpu);
  }

  /** Whether the instance's node holds `model`'s complete blocks (the controller prefers such a spot to redeploy). */
  holdsBlocks(instanceId: string, model: ModelName): boolean {
    const inst = this.table.get(instanceId);
    return inst !== undefined && this.copies.complete(inst.node, model);
  }

  /** How many other models have their only complete host copy on the instance's node (a donor holding fewer is given first). */
  soleCopies(instanceId: string, except: ModelName): number {
    const inst = this.table.get(instanceId);
    return inst === undefined ? 0 : this.copies.soleCopies(inst.node, except);
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
    this.nodeMembership.announce(handle, a);
  }

  /** Marks silent nodes lost, drops their instances and restores the pool's invariant. Call periodically. */
  tick(): void {
    if (this.closed) return;
    this.nodeMembership.expire();
    this.copies.restoreInvariant();
  }

  /** Drops a node now (its agent is gone). */
  loseNode(nodeId: string, why: string): void {
    this.nodeMembership.lose(nodeId, why);
  }

  /** What the admin listing shows: instances, nodes with slots and stores, recent failures. */
  listing(): { instances: AgentInstance[]; nodes: NodeListing[]; failures: ScaleFailure[]; layerwise?: { counters: LivePairCounters; active: ReturnType<LivePairs["active"]> }; lambda?: { counters: LiveLambdaCounters; pending: ReturnType<LiveLambdaPipelines["pending"]> } } {
    const instances = this.table.list();
    return {
      ...(this.pairs === undefined ? {} : { layerwise: { counters: { ...this.pairs.counters }, active: this.pairs.active() } }),
      ...(this.pipelines === undefined ? {} : { lambda: { counters: { ...this.pipelines.counters }, pending: this.pipelines.pending() } }),
      instances: instances.map((i) => ({ ...i })),
      nodes: this.nodes.all().map((n) => ({
        nodeId: n.nodeId,
        lost: n.lost,
        lastSeenAtMs: n.lastSeenAtMs,
        gpuType: n.announcement.gpuType,
        gpuSlots: n.announcement.gpuSlots,
        freeSlots: n.lost ? 0 : freeSlots(n, instances),
        memoryBytes: n.announcement.memoryBytes,
        data: `${n.announcement.dataHost}:${n.announcement.dataPort}`,
        transport: n.announcement.transport,
        copies: n.lost ? [] : this.copies.modelsOn(n.nodeId).map((m) => ({ model: m, complete: this.copies.complete(n.nodeId, m) })),
      })),
      failures: [...this.failures],
    };
  }

  /** Lists a scaling problem found elsewhere (e.g. the controller has nowhere to put an instance). */
  report(f: Omit<ScaleFailure, "atMs">): void {
    this.failureList.report(f);
  }

  /** Stops background work; engines keep running on their agents (a restarted region adopts them). */
  close(): void {
    this.closed = true;
    this.copies.close();
    this.nodes.close();
  }

  /** What placement reads: the live nodes, every instance, the host copies. */
  private placement(): PlacementView {
    return { live: this.nodes.live(), instances: this.table.list(), copy: (n, m) => this.copies.pool.copy(n, m) };
  }
}
