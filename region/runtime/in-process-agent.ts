/**
 * The in-process `AgentHandle` (what `tidegate dev` runs): a real NodeAgent — native block stores, a loopback TCP
 * data-plane endpoint, multicast roles — in the same process as the region, with simulated engines on the region's
 * clock (a SimEngine, or a PipelineEngine when StartEngine carries a pipeline) in place of engine processes, built
 * by the region's `newEngine` from the StartEngine's fields as engine-sim reads its flags (region/runtime/agents-host.ts
 * passes the shared builder, region/runtime/build-sim-engine.ts). The rules match the agent process: an engine
 * starts only on a complete, checksum-verified block store of its model, and only in free GPU slots.
 *
 * Stage processes (config keystage.stageProcesses, region/keystage/staged-engine.ts): a StartEngine with `stage` is
 * a real `tidegate engine-sim --stage` process, spawned through `stageProcesses` (an EngineSupervisor) on one of this
 * node's GPU slots, after the same store and slot checks; the pipelined instance's head (a StartEngine with
 * `pipeline` that `newEngine` builds as a StagedPipelineEngine, `headHoldsNoGpu`) holds no slot itself.
 */
import type { Clock } from "../../core/clock.js";
import { BlockArrivals } from "../../engines/sim/layerwise/behind-blocks.js";
import { TidegateError } from "../../core/errors.js";
import type { BlockArrival, RunResult } from "../../native/index.js";
import type { Engine } from "../../core/ports.js";
import type { SimEngine } from "../../engines/sim/sim-engine.js";
import type { StagedPipelineEngine, StageNode } from "../keystage/staged-engine.js";
import { parsePipelineSpec, type PipelineEngine, type PipelineSpec } from "../keystage/pipeline-engine.js";
import type { RunCall } from "../../nodes/agent/client.js";
import type { AgentHandle, NodeEngineHost, EngineInfo, EngineSpec, NodeAnnouncement, StoreInfo } from "../../nodes/agent/handle.js";
import type { LoadSpec, NodeAgent } from "../../nodes/agent/node.js";

export interface InProcessAgentOptions {
  agent: NodeAgent;
  region: string;
  gpuType: string;
  gpuSlots: number;
  clock: Clock;
  /**
   * The engine of a StartEngine once its blocks are here: its time scale, batch cap and KV cache from the spec's
   * fields, a PipelineEngine when `pipeline` (the spec's, parsed) is set.
   */
  newEngine(spec: EngineSpec, pipeline: PipelineSpec | undefined): InProcessEngine;
  /** Runs the StartEngines that carry `stage` as real processes (file comment); absent: such a start is refused. */
  stageProcesses?: NodeEngineHost;
  /** A pipelined instance's head holds no GPU slot: its stage processes hold them (keystage.stageProcesses). */
  headHoldsNoGpu?: boolean;
}

/** What an in-process agent hosts: a simulated engine, or a pipelined instance (in one object, or the head of its stage processes). */
export type InProcessEngine = (SimEngine | PipelineEngine | StagedPipelineEngine) & Engine;

/** How often a blitzscale cold start serving behind its blocks reads its store's present count (ms). */
export const BEHIND_BLOCKS_POLL_MS = 25;

/** A NodeAgent driven directly, hosting SimEngines. */
export class InProcessAgent implements AgentHandle {
  readonly nodeId: string;
  private readonly stores = new Map<string, { blockCount: number; totalBytes: number; lastUsedMs: number }>();
  /** Engines by instance id; `engine` is undefined while one started with awaitBlocks waits for its blocks. */
  private readonly engines = new Map<string, { info: EngineInfo; engine: InProcessEngine | undefined; spec: EngineSpec; pipeline: PipelineSpec | undefined; behind?: boolean }>();

  constructor(private readonly o: InProcessAgentOptions) {
    this.nodeId = o.agent.info().nodeId;
  }

  async announcement(): Promise<NodeAnnouncement> {
    const i = this.o.agent.info();
    const stores: StoreInfo[] = [];
    for (const [model, s] of this.stores) {
      let present = 0;
      try {
        present = this.o.agent.store(model).presentCount();
      } catch {
        continue;
      }
      stores.push({ model, blockCount: s.blockCount, totalBytes: s.totalBytes, present, lastUsedMs: s.lastUsedMs });
    }
    return { ...i, grpcAddress: `in-process:${this.nodeId}`, region: this.o.region, gpuType: this.o.gpuType, gpuSlots: this.o.gpuSlots, stores, engines: [...[...this.engines.values()].map((e) => ({ ...e.info })), ...(this.o.stageProcesses?.list() ?? [])] };
  }

  async load(spec: LoadSpec): Promise<{ blockBytes: number; present: number }> {
    // An engine serving behind its blocks (serveBehindBlocks) waits for this very store.
    if ([...this.engines.values()].some((e) => e.info.model === spec.model && e.engine !== undefined && e.behind !== true))
      throw new TidegateError("conflict", `node ${this.nodeId}: an engine uses ${spec.model}; its store cannot be replaced`);
    const r = await this.o.agent.load(spec);
    this.stores.set(spec.model, { blockCount: spec.blockCount, totalBytes: spec.totalBytes, lastUsedMs: this.o.clock.now() });
    return r;
  }

  run(call: RunCall, onBlock?: (a: BlockArrival) => void, signal?: AbortSignal): Promise<RunResult> {
    const s = this.stores.get(call.model);
    if (s !== undefined) s.lastUsedMs = this.o.clock.now();
    return this.o.agent.run(call, (a) => onBlock?.(a), signal);
  }

  async verify(model: string, seed: number): Promise<{ firstMismatch: number; present: number }> {
    return this.o.agent.verify(model, seed);
  }

  async drop(model: string): Promise<void> {
    if ([...this.engines.values()].some((e) => e.info.model === model && e.engine !== undefined)) throw new TidegateError("conflict", `node ${this.nodeId}: an engine uses ${model}`);
    this.o.agent.drop(model);
    this.stores.delete(model);
  }

  async startEngine(spec: EngineSpec): Promise<EngineInfo> {
    const existing = this.engines.get(spec.instanceId);
    if (existing !== undefined && existing.info.state !== "exited") return { ...existing.info };
    const store = this.stores.get(spec.model);
    const present = store === undefined ? 0 : this.o.agent.store(spec.model).presentCount();
    if (spec.awaitBlocks !== true && (store === undefined || present < store.blockCount))
      throw new TidegateError("conflict", `node ${this.nodeId}: ${spec.model}'s blocks are not all here (${present}/${store?.blockCount ?? 0}); an engine starts only on a complete store`);
    const used = this.usedSlots();
    if (used + (this.holdsNoGpu(spec) ? 0 : spec.gpus) > this.o.gpuSlots) throw new TidegateError("resource_exhausted", `node ${this.nodeId}: ${spec.gpus} GPU slots needed, ${this.o.gpuSlots - used} free`);
    if (spec.stage !== undefined) {
      if (this.o.stageProcesses === undefined) throw new TidegateError("invalid_request", `node ${this.nodeId}: engine ${spec.instanceId}: this node runs no stage processes`);
      if (spec.pipeline !== undefined) throw new TidegateError("invalid_request", `node ${this.nodeId}: engine ${spec.instanceId}: stage and pipeline exclude each other`);
      return this.o.stageProcesses.start(spec);
    }
    const info: EngineInfo = { instanceId: spec.instanceId, model: spec.model, gpu: spec.gpu, gpus: this.holdsNoGpu(spec) ? 0 : spec.gpus, url: `in-process://${this.nodeId}/${spec.instanceId}`, pid: process.pid, state: "starting", startedAtMs: this.o.clock.now(), detail: "waiting for blocks", ...(spec.settings?.role === undefined ? {} : { role: spec.settings.role }) };
    let pipeline: PipelineSpec | undefined;
    if (spec.pipeline !== undefined) {
      // What engine-sim --pipeline would refuse at start-up.
      try {
        pipeline = parsePipelineSpec(spec.pipeline, spec.model, spec.gpu, spec.gpus);
      } catch (err) {
        throw new TidegateError("invalid_request", `node ${this.nodeId}: engine ${spec.instanceId}: ${(err as Error).message}`);
      }
    }
    this.engines.set(spec.instanceId, { info, engine: undefined, spec, pipeline });
    this.engine(spec.instanceId); // ready at once when the blocks are here
    return { ...info };
  }

  async stopEngine(instanceId: string, graceMs: number): Promise<EngineInfo | undefined> {
    const e = this.engines.get(instanceId);
    if (e === undefined) return this.o.stageProcesses?.stop(instanceId, graceMs);
    await e.engine?.close();
    this.engines.delete(instanceId);
    return { ...e.info, state: "exited", detail: "stopped" };
  }

  /**
   * The engine of a started engine (dev connects the gateway to it directly), or undefined while its model's
   * store is incomplete (an engine started with awaitBlocks becomes ready the first time this finds it complete).
   */
  engine(instanceId: string): InProcessEngine | undefined {
    const e = this.engines.get(instanceId);
    if (e === undefined || e.engine !== undefined) return e?.engine;
    const store = this.stores.get(e.spec.model);
    if (store === undefined || this.o.agent.store(e.spec.model).presentCount() < store.blockCount) return undefined;
    store.lastUsedMs = this.o.clock.now();
    e.engine = this.o.newEngine(e.spec, e.pipeline);
    e.info.state = "running";
    e.info.detail = `parameters: ${store.totalBytes} bytes in ${store.blockCount} blocks`;
    return e.engine;
  }

  /** This node as a stage-process head places on it (region/keystage/staged-engine.ts StageNode). */
  stageNode(model: string): StageNode {
    const store = this.stores.get(model);
    let present = 0;
    try {
      present = store === undefined ? 0 : this.o.agent.store(model).presentCount();
    } catch {
      present = 0;
    }
    return { host: this, slots: this.o.gpuSlots, freeSlots: Math.max(0, this.o.gpuSlots - this.usedSlots()), holdsModel: store !== undefined && present >= store.blockCount };
  }

  /** GPU slots held: engines not exited (a stage-process head none), and stage processes not exited. */
  private usedSlots(): number {
    let used = 0;
    for (const e of this.engines.values()) if (e.info.state !== "exited" && !this.holdsNoGpu(e.spec)) used += e.info.gpus;
    for (const p of this.o.stageProcesses?.list() ?? []) if (p.state !== "exited") used += p.gpus;
    return used;
  }

  private holdsNoGpu(spec: EngineSpec): boolean {
    return spec.pipeline !== undefined && this.o.headHoldsNoGpu === true;
  }

  /** Closes the stage-process heads hosted here (their scalers stop) and stops this node's stage processes (SIGTERM, SIGKILL after 3 s). */
  async closeProcesses(): Promise<void> {
    await Promise.all([...this.engines.values()].filter((e) => this.holdsNoGpu(e.spec)).map((e) => e.engine?.close()));
    await this.o.stageProcesses?.close();
  }

  /**
   * λScale's execute-while-load (region/liveload/live-lambda.ts): an engine started with awaitBlocks serves now as an
   * execution pipeline's head, with `passOverheadMs` added to every pass (λScale §4.3); 0 switches it to local mode
   * (§4.4). What engine-sim's POST /tidegate/lambda does. Refuses a pipelined-by-stages engine (conflict).
   */
  async servePipelined(instanceId: string, passOverheadMs: number): Promise<void> {
    const e = this.engines.get(instanceId);
    if (e === undefined || e.info.state === "exited") throw new TidegateError("not_found", `node ${this.nodeId}: no engine ${instanceId}`);
    if (e.pipeline !== undefined) throw new TidegateError("conflict", `node ${this.nodeId}: engine ${instanceId} is pipelined by stages and takes no λScale pipeline`);
    if (e.engine === undefined) {
      e.engine = this.o.newEngine(e.spec, undefined);
      e.info.state = "running";
      e.info.detail = "serving as a λScale execution pipeline's head while its blocks arrive";
    }
    (e.engine as SimEngine).setPassOverheadMs(passOverheadMs);
  }

  /**
   * A blitzscale cold start with nothing to pair with (BlitzScale §5.2 steps (1)–(2); engines/sim/layerwise/behind-blocks.ts):
   * an engine started with awaitBlocks serves now, each prefill behind its store's blocks as they arrive (this node's
   * present count, read every `BEHIND_BLOCKS_POLL_MS` as engine-sim's wait loop reads its agent's) until they are all
   * here. What engine-sim's POST /tidegate/lambda {"passOverheadMs": 0, "behindBlocks": true} does.
   */
  async serveBehindBlocks(instanceId: string): Promise<void> {
    const e = this.engines.get(instanceId);
    if (e === undefined || e.info.state === "exited") throw new TidegateError("not_found", `node ${this.nodeId}: no engine ${instanceId}`);
    if (e.pipeline !== undefined) throw new TidegateError("conflict", `node ${this.nodeId}: engine ${instanceId} is pipelined by stages and cannot serve behind its blocks`);
    if (e.engine !== undefined) throw new TidegateError("conflict", `node ${this.nodeId}: engine ${instanceId} holds its whole model already`);
    const engine = this.o.newEngine(e.spec, undefined) as SimEngine;
    // The store appears when the transfer starts: until then no block is known to come. An engine that cannot serve
    // behind its blocks (chunked prefill) refuses here, before it takes the instance's place.
    try {
      engine.setBlockArrivals([Number.POSITIVE_INFINITY]);
    } catch (err) {
      await engine.close();
      throw err;
    }
    e.engine = engine;
    e.info.state = "running";
    e.info.detail = "serving behind its blocks while they arrive (blitzscale cold start)";
    let arrivals: BlockArrivals | undefined;
    const observe = (): boolean => {
      const store = this.stores.get(e.spec.model);
      if (store === undefined) return false;
      let present = 0;
      try {
        present = this.o.agent.store(e.spec.model).presentCount();
      } catch {
        return false;
      }
      if (arrivals?.blockCount !== store.blockCount) arrivals = new BlockArrivals(store.blockCount);
      engine.setBlockArrivals(arrivals.observe(present, this.o.clock.now()));
      e.behind = present < store.blockCount;
      return !e.behind;
    };
    e.behind = true;
    if (observe()) return;
    const poll = this.o.clock.every(BEHIND_BLOCKS_POLL_MS, () => {
      if (this.engines.get(instanceId)?.engine !== engine || observe()) poll.cancel();
    });
  }

  close(): void {
    // The NodeAgent is closed by whoever opened it (dev's stack); stage processes by closeProcesses.
  }
}
