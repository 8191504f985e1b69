/**
 * Heads of pipelined instances served by stage processes (config `keystage.stageProcesses`) for `tidegate region`
 * over agent processes (agents-host.ts `agentsOverGrpc`). The agents actuator starts an instance by sending its node's
 * agent a StartEngine; for a pipelined instance under `stageProcesses` that StartEngine never leaves the region: the
 * head (`StagedPipelineEngine`, region/keystage/staged-engine.ts) is built here, in the region's process, where the
 * actuator and the gateway reach it directly, and it is listed as an engine of the node the actuator picked for it
 * (so the actuator's health, listing and vanished-engine checks see it like any engine). Its stage processes are
 * started on the agents over gRPC (StartEngine with `stage`; `tidegate agent` runs `engine-sim --stage` after its
 * store and slot checks) wherever the head's key-stage scaler places them (QUART §4.3, §6.2).
 *
 * What the head sees of a node comes from the node's last announcement (every second): its GPU slots, the slots its
 * agent's engines hold (stage processes included), and whether its agent holds the model's complete block store —
 * the stage cache is the agent's host copy (§6.1). A head holds no GPU itself: its instance's GPUs are its stage
 * processes' budget, booked on their own nodes (region/actuator/node-placement.ts counts announced stage processes).
 *
 * A head lives as long as the region process: on a region restart its stage processes are not adopted (their engine
 * ids, `stage/<instance>/…`, are not the region's instance ids); README "Stage processes" says what that leaves.
 */
import type { Clock } from "../../core/clock.js";
import type { Engine } from "../../core/ports.js";
import type { Logger } from "../../core/log.js";
import type { TidegateConfig } from "../../core/config.js";
import type { AgentHandle, EngineInfo, EngineSpec, NodeAnnouncement } from "../../nodes/agent/handle.js";
import { parsePipelineSpec } from "../keystage/pipeline-engine.js";
import { StagedPipelineEngine, type StageNode } from "../keystage/staged-engine.js";

/** The URL scheme of a head's EngineInfo: not an HTTP engine, the region holds the object. */
const HEAD_URL = "in-region://";

/** GPU slots the node's agent's engines hold now (every engine not exited, stage processes included). */
export function heldSlots(a: NodeAnnouncement): number {
  let used = 0;
  for (const e of a.engines) if (e.state !== "exited") used += e.gpus;
  return used;
}

/** The node as a head's placement sees it, from its last announcement (module comment). */
export function stageNodeOf(host: AgentHandle, a: NodeAnnouncement, model: string): StageNode {
  const store = a.stores.find((s) => s.model === model);
  return { host, slots: a.gpuSlots, freeSlots: Math.max(0, a.gpuSlots - heldSlots(a)), holdsModel: store !== undefined && store.blockCount > 0 && store.present >= store.blockCount };
}

/** The heads of one region; see the module comment. */
export class StageHeads {
  private readonly nodes = new Map<string, { handle: AgentHandle; a: NodeAnnouncement }>();
  private readonly heads = new Map<string, { node: string; info: EngineInfo; engine: StagedPipelineEngine }>();
  private readonly wrapped = new WeakMap<AgentHandle, AgentHandle>();

  constructor(private readonly o: { config: TidegateConfig; clock: Clock; log: Logger }) {}

  /** Records a node's announcement (the head's view of it) and returns it with the heads placed on that node listed as its engines. */
  announce(handle: AgentHandle, a: NodeAnnouncement): NodeAnnouncement {
    this.nodes.set(a.nodeId, { handle, a });
    const mine = [...this.heads.values()].filter((h) => h.node === a.nodeId).map((h) => ({ ...h.info }));
    return mine.length === 0 ? a : { ...a, engines: [...a.engines, ...mine] };
  }

  /**
   * The agent handle the actuator drives: StartEngine of a pipelined instance builds a head here; everything else goes
   * to the agent. One wrapper per agent handle (the actuator's node registry closes a handle that changes).
   */
  wrap(handle: AgentHandle): AgentHandle {
    let w = this.wrapped.get(handle);
    if (w === undefined) this.wrapped.set(handle, (w = this.newWrapper(handle)));
    return w;
  }

  private newWrapper(handle: AgentHandle): AgentHandle {
    return {
      nodeId: handle.nodeId,
      announcement: async () => this.announce(handle, await handle.announcement()),
      load: (s) => handle.load(s),
      run: (c, b, sig) => handle.run(c, b, sig),
      verify: (m, s) => handle.verify(m, s),
      drop: (m) => handle.drop(m),
      startEngine: async (spec) => (spec.pipeline === undefined ? handle.startEngine(spec) : this.startHead(handle.nodeId, spec)),
      stopEngine: async (id, grace) => (this.heads.has(id) ? this.stopHead(id) : handle.stopEngine(id, grace)),
      close: () => handle.close(),
    };
  }

  /** The head of `instanceId`, if it is one (the actuator's connect returns it instead of an HTTP adapter). */
  head(instanceId: string): Engine | undefined {
    return this.heads.get(instanceId)?.engine;
  }

  private startHead(nodeId: string, spec: EngineSpec): EngineInfo {
    const existing = this.heads.get(spec.instanceId);
    if (existing !== undefined) return { ...existing.info };
    const pipeline = parsePipelineSpec(spec.pipeline!, spec.model, spec.gpu, spec.gpus);
    const { clock, log } = this.o;
    const engine = new StagedPipelineEngine({
      instanceId: spec.instanceId,
      model: spec.model,
      gpu: spec.gpu,
      gpus: spec.gpus,
      spec: pipeline,
      clock,
      timeScale: spec.timeScale ?? this.o.config.engines.timeScale,
      // Nodes of the instance's GPU type, in the order they announced themselves (a fixed order: the head reads
      // the list at every pass and places on the first ones it saw at start).
      nodes: () => [...this.nodes.values()].filter((n) => n.a.gpuType === spec.gpu).map((n) => stageNodeOf(n.handle, n.a, spec.model)),
      log,
    });
    // gpus 0: the head holds no slot (its stage processes hold the instance's GPUs, each on its own node).
    const info: EngineInfo = { instanceId: spec.instanceId, model: spec.model, gpu: spec.gpu, gpus: 0, url: `${HEAD_URL}${nodeId}/${spec.instanceId}`, pid: process.pid, state: "running", startedAtMs: clock.now(), detail: "pipeline head over stage processes" };
    this.heads.set(spec.instanceId, { node: nodeId, info, engine });
    log.info("pipeline head started", { instanceId: spec.instanceId, node: nodeId, stages: pipeline.layersPerStage.length, gpus: spec.gpus });
    return { ...info };
  }

  private async stopHead(instanceId: string): Promise<EngineInfo | undefined> {
    const h = this.heads.get(instanceId)!;
    this.heads.delete(instanceId);
    await h.engine.close();
    return { ...h.info, state: "exited", detail: "stopped" };
  }

  /** True for a head's EngineInfo (healthy once built: it waits for its stage processes per request, staged-engine.ts). */
  isHead(info: EngineInfo): boolean {
    return info.url.startsWith(HEAD_URL) && this.heads.has(info.instanceId);
  }

  /**
   * Closes the heads whose instance the actuator no longer runs (`live`: its instance ids not spot). The actuator
   * stops an engine through its node's handle, which a lost node no longer has: a head whose node was lost would
   * otherwise keep its stage processes on the other nodes.
   */
  prune(live: ReadonlySet<string>): void {
    for (const [id, h] of this.heads) {
      if (live.has(id)) continue;
      this.o.log.info("pipeline head closed: its instance is gone", { instanceId: id, node: h.node });
      void this.stopHead(id);
    }
  }

  /** Closes every head (its stage processes are stopped on their agents). */
  async close(): Promise<void> {
    const ids = [...this.heads.keys()];
    await Promise.all(ids.map((id) => this.stopHead(id)));
  }
}
