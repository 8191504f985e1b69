/**
 * Where the region's parameter blocks live on its nodes' host memory, and how they get there (BlitzScale §4): the
 * parameter pool (region/pool/parameter-pool.ts) kept in step with the agents' announced stores, the transfer queue
 * that batches every node asking for a model into its next multicast plan over the data plane
 * (region/pool/transfer-queue.ts, transfer.ts), LRU eviction to make room for a model, and the pool's invariant —
 * `minHostCopies` complete host copies of every hosted model on live nodes (§4.1's O(1) copy), restored from the
 * copies that remain, else from the model's origin.
 */
import type { Clock } from "../../core/clock.js";
import { TidegateError, toTidegateError } from "../../core/errors.js";
import type { Logger } from "../../core/log.js";
import type { ModelName, RegionName } from "../../core/models.js";
import type { NodeAnnouncement } from "../../nodes/agent/handle.js";
import { ParameterPool } from "../pool/parameter-pool.js";
import { LinkRates } from "../pool/rates.js";
import type { MulticastPlan } from "../../nodes/multicast/schedule.js";
import { TransferQueue } from "../pool/transfer-queue.js";
import { runTransfer, type ModelParameters, type MulticastPolicy, type TransferResult } from "../pool/transfer.js";
import type { NodeRegistry } from "./nodes.js";
import type { ScaleFailure } from "./port.js";

/** A model's parameters and where the region's first copy comes from ("pattern": a seeded synthetic model). */
export interface ModelSource extends ModelParameters {
  origin: "pattern" | "none";
}

export interface HostCopiesOptions {
  region: RegionName;
  clock: Clock;
  log: Logger;
  /** The parameters of every model the region hosts. */
  models: ReadonlyMap<ModelName, ModelSource>;
  policy: MulticastPolicy;
  /** Complete host copies of every hosted model the pool keeps on live nodes. */
  minHostCopies: number;
  /** The region's nodes: agents to transfer with, data addresses and topology. */
  nodes: NodeRegistry;
  /** Whether an instance on the node is loading (a transfer fills its stores; announcements do not drop them). */
  loadingOn(nodeId: string): boolean;
  /** Each block the data plane reports arriving on a node. */
  onBlock(model: ModelName, nodeId: string, block: number): void;
  /** Each multicast plan as a transfer starts it (λScale's execution pipelines: liveload/live-lambda.ts). */
  onPlan?(model: ModelName, plan: MulticastPlan): void;
  /** Each finished transfer (for logs, metrics and the bench). */
  onTransfer?(r: TransferResult): void;
  /** A failure to list and log (no source, a repair that failed). */
  fail(f: Omit<ScaleFailure, "atMs">): void;
  /** Whether a node hosts a serving prefill instance, whose KV uses its outbound link (pool/transfer.ts line 2). */
  sendsKv?(nodeId: string): boolean;
}

export class HostCopies {
  readonly pool: ParameterPool;
  /** The data plane's measured receive rate per node, ordering chain targets (pool/rates.ts). */
  readonly rates = new LinkRates();
  private readonly queue: TransferQueue;
  /** Models whose pool copy is being restored, with the work (a scale-out of that model waits for it). */
  private readonly repairing = new Map<string, Promise<void>>();
  private readonly noSourceLogged = new Set<string>();

  constructor(private readonly o: HostCopiesOptions) {
    this.pool = new ParameterPool({ minHostCopies: o.minHostCopies });
    this.queue = new TransferQueue((p, targets) =>
      runTransfer(p, targets, {
        clock: o.clock,
        log: o.log,
        pool: this.pool,
        policy: o.policy,
        agent: (n) => o.nodes.handle(n),
        dataAddress: (n) => o.nodes.dataAddress(n),
        onBlock: (node, block) => o.onBlock(p.model, node, block),
        ...(o.onPlan === undefined ? {} : { onPlan: (plan: MulticastPlan) => o.onPlan!(p.model, plan) }),
        topology: (n) => o.nodes.get(n)?.announcement,
        rates: this.rates,
        ...(o.sendsKv === undefined ? {} : { sendsKv: o.sendsKv }),
      }).then((r) => {
        o.onTransfer?.(r);
        return r;
      }),
    );
  }

  /** Asks for `params.model` on `nodeId` (joins the model's next multicast plan); resolves once the node holds it. */
  want(params: ModelParameters, nodeId: string): Promise<void> {
    return this.queue.want(params, nodeId);
  }

  /** The restore of `model`'s pool copy under way, if any (the region's first copy may be on its way from the origin). */
  repair(model: ModelName): Promise<void> | undefined {
    return this.repairing.get(model);
  }

  /** Whether `nodeId` holds a complete copy of `model`. */
  complete(nodeId: string, model: ModelName): boolean {
    return this.pool.copy(nodeId, model)?.complete === true;
  }

  /** How many hosted models other than `except` have their only complete live copy on `nodeId`. */
  soleCopies(nodeId: string, except: ModelName): number {
    let n = 0;
    for (const m of this.o.models.keys()) {
      if (m === except || !this.complete(nodeId, m)) continue;
      const sources = this.pool.sources(m);
      if (sources.length === 1 && sources[0] === nodeId) n++;
    }
    return n;
  }

  /** The hosted models with a copy (complete or being filled) on `nodeId`. */
  modelsOn(nodeId: string): string[] {
    return [...this.o.models.keys()].filter((m) => this.pool.copy(nodeId, m) !== undefined);
  }

  /**
   * Takes a node's announced stores: the node's memory, copies the pool did not know (or now complete), and drops
   * copies the node no longer holds — unless a transfer is filling the node (it tracks its own stores).
   */
  syncStores(a: NodeAnnouncement, nowMs: number): void {
    this.pool.upsertNode(a.nodeId, a.memoryBytes);
    for (const s of a.stores) {
      const known = this.pool.copy(a.nodeId, s.model);
      // A store being filled by a running transfer is tracked by the transfer; the announcement only adds copies.
      if (known === undefined || (s.present === s.blockCount && !known.complete)) this.pool.setCopy(a.nodeId, s.model, s.totalBytes, s.present === s.blockCount, s.lastUsedMs > 0 ? Math.min(s.lastUsedMs, nowMs) : nowMs);
    }
    for (const m of this.modelsOn(a.nodeId)) if (!a.stores.some((s) => s.model === m) && !this.o.loadingOn(a.nodeId)) this.pool.dropCopy(a.nodeId, m);
  }

  /** Forgets a lost node's link rate and copies; returns the models it held. */
  loseNode(nodeId: string): string[] {
    this.rates.forget(nodeId);
    return this.pool.loseNode(nodeId);
  }

  /** Evicts least recently used copies on `nodeId` so `params` fits; throws when nothing evictable makes room. */
  makeRoom(nodeId: string, params: ModelParameters): void {
    const have = this.pool.copy(nodeId, params.model)?.bytes ?? 0;
    const evict = this.pool.evictionsFor(nodeId, params.totalBytes - have, params.model);
    if (evict === undefined)
      throw new TidegateError("payload_too_large", `node ${nodeId} has no host memory for ${params.model} (${params.totalBytes} bytes; ${this.pool.freeBytes(nodeId)} free, the rest held by copies in use or needed by the pool's invariant)`);
    for (const m of evict) {
      this.pool.dropCopy(nodeId, m);
      this.o.log.info("evicting a cached copy (LRU)", { node: nodeId, model: m, for: params.model });
      void this.o.nodes.handle(nodeId)?.drop(m).catch(() => undefined);
    }
  }

  /** Re-establishes `minHostCopies` complete host copies of every hosted model (BlitzScale §4.1): from the pool, else the origin. */
  restoreInvariant(): void {
    const hosted = [...this.o.models.keys()];
    for (const r of this.pool.repairs(hosted, (m) => this.o.models.get(m)!.totalBytes)) {
      if (this.repairing.has(r.model)) continue;
      const params = this.o.models.get(r.model)!;
      if (r.to === undefined) {
        if (this.o.nodes.live().length > 0) this.noSource(r.model, `no live node has host memory for a copy of ${r.model}`);
        continue;
      }
      if (r.sources.length === 0 && params.origin === "none") {
        this.noSource(r.model, `no source of ${r.model} anywhere in ${this.o.region}: no agent holds a complete copy and the model has no origin (parameters.models.${r.model}.origin)`);
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
            this.o.fail({ model: r.model, gpu: "-", node: to, message: `restoring a host copy of ${r.model} failed: ${toTidegateError(err).message}` });
            throw err;
          })
          .finally(() => this.repairing.delete(r.model)),
      );
      this.repairing.get(r.model)!.catch(() => undefined);
    }
  }

  /** Rejects every transfer still waiting; a running one finishes. */
  close(): void {
    this.queue.close();
  }

  /** The first copy of a model in the region, from its origin (a seeded synthetic model: the stand-in for storage). */
  private async loadOrigin(p: ModelSource, nodeId: string): Promise<void> {
    const h = this.o.nodes.handle(nodeId);
    if (h === undefined) throw new TidegateError("upstream_error", `node ${nodeId} is gone`);
    this.makeRoom(nodeId, p);
    this.pool.setCopy(nodeId, p.model, p.totalBytes, false, this.o.clock.now());
    await h.load({ model: p.model, totalBytes: p.totalBytes, blockCount: p.blockCount, fill: "pattern", seed: p.seed ?? 0 });
    this.pool.setCopy(nodeId, p.model, p.totalBytes, true, this.o.clock.now());
  }

  /** Lists a model without a source once, until a source appears again. */
  private noSource(model: string, message: string): void {
    if (this.noSourceLogged.has(model)) return;
    this.noSourceLogged.add(model);
    this.o.fail({ model, gpu: "-", message });
  }
}
