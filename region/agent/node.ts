/**
 * The node agent's state and operations, independent of gRPC: one data-plane Endpoint (TCP, or verbs where a device
 * exists) and one BlockStore per model. A run validates the plan (validatePlan, with this node's memory) and its
 * addresses before any byte moves, then runs this node's role. One run at a time per agent (one data port).
 */
import { totalmem } from "node:os";
import { DataPlaneError } from "../../native/errors.js";
import { BlockStore, Endpoint, type BlockArrival, type RunResult, type TransportPreference } from "../../native/index.js";
import type { Logger } from "../../core/log.js";
import { roleFor } from "../multicast/role.js";
import { planNodes, type MulticastPlan } from "../multicast/schedule.js";
import { validatePlan } from "../multicast/validate.js";

/** How an agent starts: its node id, data-plane bind address, transport preference and memory budget. */
export interface NodeAgentOptions {
  nodeId: string;
  /** Address other nodes dial for blocks (also the bind host). */
  dataHost: string;
  /** 0 = any free port. */
  dataPort?: number;
  transport?: TransportPreference;
  /** Memory the agent may use for blocks (default: physical memory). */
  memoryBytes?: number;
  log: Logger;
}

/** What Info reports. `fallback` says why verbs was not used ("" when it was, or TCP was asked for). */
export interface AgentInfo {
  nodeId: string;
  dataHost: string;
  dataPort: number;
  transport: string;
  fallback: string;
  memoryBytes: number;
}

/** How to fill a model's store: "empty" (a target), "file" (a packed model, exactly totalBytes) or "pattern" (seed). */
export interface LoadSpec {
  model: string;
  totalBytes: number;
  blockCount: number;
  fill: "empty" | "file" | "pattern";
  filePath?: string;
  seed?: number;
}

/** One run: model, plan, run id, data addresses of every plan node, optional liveness settings. */
export interface RunSpecInput {
  model: string;
  plan: MulticastPlan;
  runId: number;
  addresses: Record<string, { host: string; port: number }>;
  stallMs?: number;
  connectMs?: number;
}

/** One node's blocks and data-plane endpoint; one run at a time. */
export class NodeAgent {
  private readonly stores = new Map<string, BlockStore>();
  private readonly endpoint: Endpoint;

  private constructor(
    private readonly o: NodeAgentOptions,
    private readonly memoryBytes: number,
  ) {
    this.endpoint = Endpoint.open({ host: o.dataHost, port: o.dataPort ?? 0, transport: o.transport ?? "auto", log: (line) => o.log.warn(line) });
  }

  /** Binds the data port; throws DataPlaneError io when it cannot. */
  static open(o: NodeAgentOptions): NodeAgent {
    return new NodeAgent(o, o.memoryBytes ?? totalmem());
  }

  info(): AgentInfo {
    return { nodeId: this.o.nodeId, dataHost: this.o.dataHost, dataPort: this.endpoint.port, transport: this.endpoint.transport, fallback: this.endpoint.fallback, memoryBytes: this.memoryBytes };
  }

  /** Creates (or replaces) the store of `spec.model`. */
  load(spec: LoadSpec): { blockBytes: number; present: number } {
    this.drop(spec.model);
    let store: BlockStore;
    if (spec.fill === "file") {
      if (spec.filePath === undefined || spec.filePath === "") throw new DataPlaneError("invalid_plan", "fill \"file\" needs file_path");
      store = BlockStore.fromFile(spec.filePath, spec.totalBytes, spec.blockCount, this.memoryBytes);
    } else {
      store = BlockStore.forModel(spec.totalBytes, spec.blockCount, this.memoryBytes);
      if (spec.fill === "pattern") store.fillPattern(spec.seed ?? 0);
    }
    this.stores.set(spec.model, store);
    this.o.log.info("model loaded", { model: spec.model, fill: spec.fill, totalBytes: spec.totalBytes, blockCount: spec.blockCount });
    return { blockBytes: store.blockBytes, present: store.presentCount() };
  }

  store(model: string): BlockStore {
    const s = this.stores.get(model);
    if (s === undefined) throw new DataPlaneError("invalid_plan", `model ${model} is not loaded on node ${this.o.nodeId} (call Load first)`);
    return s;
  }

  /** Runs this node's role in `spec.plan`; every check happens before the first byte moves. */
  async run(spec: RunSpecInput, onBlock: (a: BlockArrival) => void, signal?: AbortSignal): Promise<RunResult> {
    const plan = validatePlan(spec.plan, [{ id: this.o.nodeId, memoryBytes: this.memoryBytes }]);
    if (!planNodes(plan).includes(this.o.nodeId)) throw new DataPlaneError("invalid_plan", `node ${this.o.nodeId} is not part of this plan`);
    const store = this.store(spec.model);
    if (store.blockCount !== plan.blockCount || store.totalBytes !== plan.totalBytes || store.blockBytes !== plan.blockBytes)
      throw new DataPlaneError("invalid_plan", `model ${spec.model} on ${this.o.nodeId} has ${store.blockCount} blocks of ${store.blockBytes} bytes (${store.totalBytes}); the plan says ${plan.blockCount} of ${plan.blockBytes} (${plan.totalBytes})`);
    const role = roleFor(plan, this.o.nodeId, spec.addresses, spec.runId, { stallMs: spec.stallMs, connectMs: spec.connectMs });
    const log = this.o.log.child({ model: spec.model, runId: spec.runId, algorithm: plan.algorithm });
    log.info("run started", { sends: role.sends.length, receives: role.expect.reduce((a, e) => a + e.length, 0) });
    try {
      const r = await this.endpoint.run(role, store, { onBlock, signal });
      log.info("run finished", { elapsedMs: Math.round(r.elapsedMs), bytesSent: r.bytesSent, bytesReceived: r.bytesReceived });
      return r;
    } catch (err) {
      log.warn("run failed", { err });
      throw err;
    }
  }

  verify(model: string, seed: number): { firstMismatch: number; present: number } {
    const s = this.store(model);
    return { firstMismatch: s.verifyPattern(seed), present: s.presentCount() };
  }

  drop(model: string): void {
    const s = this.stores.get(model);
    if (s === undefined) return;
    s.close();
    this.stores.delete(model);
  }

  /** Cancels a running transfer, waits for it, frees every store and the data port. */
  async close(): Promise<void> {
    if (this.endpoint.running) {
      this.endpoint.cancel();
      for (let i = 0; i < 200 && this.endpoint.running; i++) await new Promise((r) => setTimeout(r, 10));
    }
    for (const m of [...this.stores.keys()]) this.drop(m);
    if (!this.endpoint.running && !this.endpoint.closed) this.endpoint.close();
  }
}
