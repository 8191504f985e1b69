/**
 * The node agent's state and operations, independent of gRPC: one data-plane Endpoint (TCP, or verbs where a device
 * exists), one BlockStore per model, and optionally an NodeEngineHost that runs engines on this node's GPU slots. A run
 * validates the plan (validatePlan, with this node's memory) and its addresses before any byte moves, then runs this
 * node's role. One run at a time per agent (one data port). An engine starts only on a complete store and free slots.
 */
import { checkEngineSettings, refuseEngineSettings } from "../../core/engine-settings.js";
import { totalmem } from "node:os";
import { TidegateError } from "../../core/errors.js";
import { DataPlaneError } from "../../native/errors.js";
import { BlockStore, Endpoint, type DataRefusal, type BlockArrival, type RunResult, type TransportPreference } from "../../native/index.js";
import type { Logger } from "../../core/log.js";
import { roleFor } from "../multicast/role.js";
import { planNodes } from "../multicast/schedule.js";
import { validatePlan } from "../multicast/validate.js";
import type { AgentInfo, NodeEngineHost, EngineInfo, EngineSpec, LoadSpec, NodeAnnouncement, RunCall, StoreInfo } from "./handle.js";

export type { AgentInfo, LoadSpec } from "./handle.js";
import { parseCommandTemplate } from "./template.js";

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
  /** The region this node belongs to ("" = not said). */
  region?: string;
  /** GPU type of this node (default "h100-80gb"). */
  gpuType?: string;
  /** GPUs engines may use, integer ≥ 0 (default 0: no engine fits). */
  gpuSlots?: number;
  /** Runs engines; without one, StartEngine is refused (conflict) and Info lists no engines. */
  engines?: NodeEngineHost;
  /** The NVLink domain this node's GPUs share with other nodes' (announced; handle.ts AgentInfo). */
  nvlinkDomain?: string;
  /** This node's network link rate, bytes/s (announced; handle.ts AgentInfo). */
  linkBytesPerS?: number;
  /**
   * Paces this node's sends at this many bytes/s (native RoleSpec.paceBytesPerS, TCP only): in-process nodes share
   * one host's CPUs, so their transfers run at whatever rate the scheduler gives each; a pace below that makes the
   * emulated link the bottleneck, as on a cluster. Default: unpaced.
   */
  paceBytesPerS?: number;
}

/** What Info reports. `fallback` says why verbs was not used ("" when it was, or TCP was asked for). */
/** One run: model, plan, run id, data addresses of every plan node, optional liveness settings (the wire's RunCall). */
export type RunSpecInput = RunCall;

/** One node's blocks and data-plane endpoint; one run at a time. */
export class NodeAgent {
  private readonly stores = new Map<string, BlockStore>();
  private readonly lastUsedMs = new Map<string, number>();
  /** Engines started with await_blocks (their model's store may be replaced while it is incomplete). */
  private readonly awaiting = new Set<string>();
  private readonly endpoint: Endpoint;
  private grpcAddress = "";

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

  /** What the data port refused since the last call (Endpoint.takeRefusals; [] once closed). */
  dataRefusals(): DataRefusal[] {
    return this.endpoint.takeRefusals();
  }

  info(): AgentInfo {
    return {
      nodeId: this.o.nodeId,
      dataHost: this.o.dataHost,
      dataPort: this.endpoint.port,
      transport: this.endpoint.transport,
      fallback: this.endpoint.fallback,
      memoryBytes: this.memoryBytes,
      ...(this.o.nvlinkDomain === undefined || this.o.nvlinkDomain === "" ? {} : { nvlinkDomain: this.o.nvlinkDomain }),
      ...(this.o.linkBytesPerS === undefined || this.o.linkBytesPerS <= 0 ? {} : { linkBytesPerS: this.o.linkBytesPerS }),
    };
  }

  /** Records the gRPC address the agent serves on (host:port), reported in announcements and given to engine-sim. */
  setGrpcAddress(address: string): void {
    this.grpcAddress = address;
  }

  /** The gRPC address set by setGrpcAddress ("" before the server is bound). */
  get address(): string {
    return this.grpcAddress;
  }

  /** Everything Info and Announce report: identity, node, stores (with last use) and engines. */
  announcement(): NodeAnnouncement {
    const stores: StoreInfo[] = [...this.stores].map(([model, s]) => ({ model, blockCount: s.blockCount, totalBytes: s.totalBytes, present: s.presentCount(), lastUsedMs: this.lastUsedMs.get(model) ?? 0 }));
    return {
      ...this.info(),
      grpcAddress: this.grpcAddress,
      region: this.o.region ?? "",
      gpuType: this.o.gpuType ?? "h100-80gb",
      gpuSlots: this.o.gpuSlots ?? 0,
      stores,
      engines: this.o.engines?.list() ?? [],
    };
  }

  /**
   * Starts an engine on this node. Refuses with invalid_request (bad spec or template), conflict (no engine host;
   * the model's store missing or incomplete; the instance id running another model), resource_exhausted (gpus
   * above the free slots: gpuSlots − Σ gpus of engines not exited). The same instance id while it has not exited
   * returns the existing engine.
   */
  startEngine(spec: EngineSpec): Promise<EngineInfo> {
    const node = this.o.nodeId;
    if (!/^[A-Za-z0-9_.:/-]{1,128}$/.test(spec.instanceId)) throw new TidegateError("invalid_request", `instance_id must be 1-128 of [A-Za-z0-9_.:/-], got ${JSON.stringify(spec.instanceId)}`, { param: "instance_id" });
    if (spec.model === "") throw new TidegateError("invalid_request", "model must not be empty", { param: "model" });
    if (spec.gpu === "") throw new TidegateError("invalid_request", "gpu must not be empty", { param: "gpu" });
    if (!Number.isInteger(spec.gpus) || spec.gpus < 1) throw new TidegateError("invalid_request", `gpus must be an integer ≥ 1, got ${spec.gpus}`, { param: "gpus" });
    if (spec.timeScale !== undefined && !(spec.timeScale > 0 && spec.timeScale <= 1000)) throw new TidegateError("invalid_request", `time_scale must be in (0, 1000], got ${spec.timeScale}`, { param: "time_scale" });
    if (spec.settings !== undefined) checkEngineSettings(spec.settings, "settings");
    if (spec.pipeline !== undefined || spec.stage !== undefined) refuseEngineSettings(spec.settings, "do not apply to a pipeline or a stage process (a stage replica serves one request at a time)");
    if ((spec.commandTemplate ?? "") !== "") refuseEngineSettings(spec.settings, "are engine-sim settings: not with command_template");
    if (spec.stage !== undefined && (spec.pipeline !== undefined || (spec.commandTemplate ?? "") !== "" || spec.awaitBlocks === true)) throw new TidegateError("invalid_request", "a stage process is engine-sim on a complete store: not with pipeline, command_template or await_blocks", { param: "stage" });
    if (spec.commandTemplate !== undefined && spec.commandTemplate !== "") parseCommandTemplate(spec.commandTemplate);
    const host = this.o.engines;
    if (host === undefined) throw new TidegateError("conflict", `node ${node} runs no engines (no engine host)`);
    const live = host.list().filter((e) => e.state !== "exited");
    const same = live.find((e) => e.instanceId === spec.instanceId);
    if (same !== undefined) {
      if (same.model !== spec.model || same.gpus !== spec.gpus || same.gpu !== spec.gpu)
        throw new TidegateError("conflict", `instance ${spec.instanceId} already runs on node ${node} as ${same.model} on ${same.gpus} × ${same.gpu}; stop it first`);
      return Promise.resolve(same);
    }
    const gpuType = this.o.gpuType ?? "h100-80gb";
    if (spec.gpu !== gpuType) throw new TidegateError("conflict", `cannot start ${spec.instanceId}: it asks for ${spec.gpu} GPUs and node ${node} has ${gpuType}`);
    const store = this.stores.get(spec.model);
    if (spec.awaitBlocks !== true) {
      if (store === undefined) throw new TidegateError("conflict", `cannot start ${spec.instanceId}: model ${spec.model} has no block store on node ${node} (Load it and transfer its blocks first)`);
      const present = store.presentCount();
      if (present < store.blockCount) throw new TidegateError("conflict", `cannot start ${spec.instanceId}: model ${spec.model} on node ${node} has ${present} of ${store.blockCount} blocks; an engine starts only on complete, verified blocks`);
    } else if (spec.commandTemplate !== undefined && spec.commandTemplate !== "") {
      // A real engine cannot be told to wait for its blocks: it starts only on a complete store.
      throw new TidegateError("invalid_request", `cannot start ${spec.instanceId} before its blocks arrived: await_blocks works with engine-sim only`, { param: "await_blocks" });
    }
    this.awaiting.add(spec.instanceId);
    const slots = this.o.gpuSlots ?? 0;
    const used = live.reduce((a, e) => a + e.gpus, 0);
    if (spec.gpus > slots - used)
      throw new TidegateError("resource_exhausted", `cannot start ${spec.instanceId}: it needs ${spec.gpus} GPU(s) and node ${node} has ${slots - used} of ${slots} free (${live.map((e) => `${e.instanceId}: ${e.gpus}`).join(", ") || "no engines"})`);
    this.lastUsedMs.set(spec.model, Date.now());
    this.o.log.info("engine starting", { instanceId: spec.instanceId, model: spec.model, gpus: spec.gpus, template: spec.commandTemplate ?? "" });
    return host.start(spec);
  }

  /** Stops an engine (SIGTERM, SIGKILL after graceMs); undefined when this node has no such engine. */
  async stopEngine(instanceId: string, graceMs: number): Promise<EngineInfo | undefined> {
    return this.o.engines?.stop(instanceId, graceMs);
  }

  /**
   * Creates (or replaces) the store of `spec.model`; conflict while an engine of that model has not exited. Resolves
   * once its pages are in memory (prefaulted off the event loop: the agent keeps announcing meanwhile), so a
   * transfer into it never waits on page faults.
   */
  async load(spec: LoadSpec): Promise<{ blockBytes: number; present: number }> {
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
    this.lastUsedMs.set(spec.model, Date.now());
    const reply = { blockBytes: store.blockBytes, present: store.presentCount() };
    await store.whenPrefaulted();
    this.o.log.info("model loaded", { model: spec.model, fill: spec.fill, totalBytes: spec.totalBytes, blockCount: spec.blockCount });
    return reply;
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
    this.lastUsedMs.set(spec.model, Date.now());
    try {
      const r = await this.endpoint.run(this.o.paceBytesPerS === undefined ? role : { ...role, paceBytesPerS: this.o.paceBytesPerS }, store, { onBlock, signal });
      this.lastUsedMs.set(spec.model, Date.now());
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

  /** Frees a model's store; conflict while an engine of that model has not exited (stop it first). */
  drop(model: string): void {
    // An engine started with await_blocks waits for a store still being filled: replacing that store (a transfer
    // re-planned after a failure) is allowed; a complete store an engine may serve from is not.
    const store = this.stores.get(model);
    const incomplete = store === undefined || store.presentCount() < store.blockCount;
    const serving = (this.o.engines?.list() ?? []).filter((e) => e.model === model && e.state !== "exited" && !(incomplete && this.awaiting.has(e.instanceId)));
    if (serving.length > 0)
      throw new TidegateError("conflict", `model ${model} on node ${this.o.nodeId} serves engine(s) ${serving.map((e) => e.instanceId).join(", ")}; stop them before replacing or dropping its blocks`);
    this.free(model);
  }

  private free(model: string): void {
    const s = this.stores.get(model);
    if (s === undefined) return;
    s.close();
    this.stores.delete(model);
    this.lastUsedMs.delete(model);
  }

  /** Stops every engine, cancels a running transfer, waits for it, frees every store and the data port. */
  async close(): Promise<void> {
    await this.o.engines?.close();
    if (this.endpoint.running) {
      this.endpoint.cancel();
      for (let i = 0; i < 200 && this.endpoint.running; i++) await new Promise((r) => setTimeout(r, 10));
    }
    for (const m of [...this.stores.keys()]) this.free(m);
    if (!this.endpoint.running && !this.endpoint.closed) this.endpoint.close();
  }
}
