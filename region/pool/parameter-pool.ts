/**
 * The global parameter pool of one region (BlitzScale §4.1, "O(1) host caching"; DESIGN "Fast in-region scaling"):
 * where every model's parameter blocks live — the host stores of the region's node agents, each either a complete,
 * checksum-verified copy or one still being filled — and how much host memory each node lends to them.
 *
 * Invariant: every model the region hosts has at least `minHostCopies` (default 1, `parameters.minHostCopies`) complete copies on live nodes, so
 * a scale-out always has a source inside the region (BlitzScale keeps O(1) copies per model in host memory rather
 * than one per host). When a node is lost, `repairs()` names, per model below the invariant, the remaining sources
 * and the live node to copy to. Other copies are kept while memory allows and evicted least recently used first
 * (`evictionsFor`) — never a copy an engine on the node is using (pinned), never one that the invariant needs.
 *
 * Pure state: the actuator feeds it (agents' announcements, finished transfers, engines started and stopped) and
 * carries out what it returns. Times are clock ms, sizes bytes.
 */

/** One model's blocks on one node. */
export interface PoolCopy {
  nodeId: string;
  model: string;
  bytes: number;
  /** Every block present and verified. */
  complete: boolean;
  /** Last time the copy was filled, read by a transfer or used to start an engine (clock ms). */
  lastUsedMs: number;
  /** Engines on the node using this copy; a pinned copy is never evicted. */
  pins: number;
}

/** One node's host memory for blocks. */
export interface PoolNode {
  nodeId: string;
  memoryBytes: number;
  live: boolean;
}

/** What restoring the invariant for one model takes: copy from `sources` to `to`; or `to` undefined when no live node has room. */
export interface Repair {
  model: string;
  /** Live nodes holding a complete copy (empty: no source left in the region). */
  sources: string[];
  to: string | undefined;
}

export class ParameterPool {
  private readonly nodes = new Map<string, PoolNode>();
  /** nodeId → model → copy. */
  private readonly copiesByNode = new Map<string, Map<string, PoolCopy>>();
  readonly minHostCopies: number;

  constructor(o: { minHostCopies?: number } = {}) {
    this.minHostCopies = o.minHostCopies ?? 1;
    if (!Number.isInteger(this.minHostCopies) || this.minHostCopies < 1) throw new RangeError(`minHostCopies must be an integer ≥ 1, got ${this.minHostCopies}`);
  }

  /** Adds or updates a node (an agent's announcement); a lost node that announces again is live again. */
  upsertNode(nodeId: string, memoryBytes: number): void {
    const n = this.nodes.get(nodeId);
    if (n === undefined) {
      this.nodes.set(nodeId, { nodeId, memoryBytes, live: true });
      this.copiesByNode.set(nodeId, new Map());
    } else {
      n.memoryBytes = memoryBytes;
      n.live = true;
    }
  }

  /** Marks a node lost: its copies are forgotten (its memory is gone with it). Returns the models it held. */
  loseNode(nodeId: string): string[] {
    const n = this.nodes.get(nodeId);
    if (n === undefined) return [];
    n.live = false;
    const held = [...(this.copiesByNode.get(nodeId)?.keys() ?? [])];
    this.copiesByNode.set(nodeId, new Map());
    return held;
  }

  node(nodeId: string): Readonly<PoolNode> | undefined {
    return this.nodes.get(nodeId);
  }

  liveNodes(): Readonly<PoolNode>[] {
    return [...this.nodes.values()].filter((n) => n.live);
  }

  /** Records that `nodeId` holds `model` (complete or being filled). Keeps pins; `nowMs` counts as a use. */
  setCopy(nodeId: string, model: string, bytes: number, complete: boolean, nowMs: number): void {
    const byModel = this.copiesByNode.get(nodeId);
    if (byModel === undefined) throw new RangeError(`unknown node ${nodeId}`);
    const prev = byModel.get(model);
    byModel.set(model, { nodeId, model, bytes, complete, lastUsedMs: Math.max(nowMs, prev?.lastUsedMs ?? nowMs), pins: prev?.pins ?? 0 });
  }

  dropCopy(nodeId: string, model: string): void {
    this.copiesByNode.get(nodeId)?.delete(model);
  }

  copy(nodeId: string, model: string): Readonly<PoolCopy> | undefined {
    return this.copiesByNode.get(nodeId)?.get(model);
  }

  /** Marks a use of the copy (a transfer read it, an engine started on it). */
  touch(nodeId: string, model: string, nowMs: number): void {
    const c = this.copiesByNode.get(nodeId)?.get(model);
    if (c !== undefined) c.lastUsedMs = Math.max(c.lastUsedMs, nowMs);
  }

  /** An engine on the node starts (+1) or stops (−1) using the copy. */
  pin(nodeId: string, model: string, delta: 1 | -1): void {
    const c = this.copiesByNode.get(nodeId)?.get(model);
    if (c !== undefined) c.pins = Math.max(0, c.pins + delta);
  }

  /** Live nodes holding a complete copy of `model`, most recently used first (warm in cache), then by id. */
  sources(model: string): string[] {
    const out: PoolCopy[] = [];
    for (const [nodeId, byModel] of this.copiesByNode) {
      if (this.nodes.get(nodeId)?.live !== true) continue;
      const c = byModel.get(model);
      if (c?.complete === true) out.push(c);
    }
    return out.sort((a, b) => b.lastUsedMs - a.lastUsedMs || (a.nodeId < b.nodeId ? -1 : 1)).map((c) => c.nodeId);
  }

  /** Every copy of `model` on live nodes. */
  copies(model: string): Readonly<PoolCopy>[] {
    const out: PoolCopy[] = [];
    for (const [nodeId, byModel] of this.copiesByNode) {
      const c = byModel.get(model);
      if (c !== undefined && this.nodes.get(nodeId)?.live === true) out.push(c);
    }
    return out;
  }

  usedBytes(nodeId: string): number {
    let s = 0;
    for (const c of this.copiesByNode.get(nodeId)?.values() ?? []) s += c.bytes;
    return s;
  }

  freeBytes(nodeId: string): number {
    return (this.nodes.get(nodeId)?.memoryBytes ?? 0) - this.usedBytes(nodeId);
  }

  /**
   * The copies to evict on `nodeId` so that `bytes` more fit (LRU among copies that are unpinned, not of
   * `keepModel`, and whose model keeps ≥ minHostCopies complete copies elsewhere), or undefined when no eviction
   * makes room.
   */
  evictionsFor(nodeId: string, bytes: number, keepModel?: string): string[] | undefined {
    const node = this.nodes.get(nodeId);
    if (node === undefined || !node.live) return undefined;
    let free = this.freeBytes(nodeId);
    if (free >= bytes) return [];
    const candidates = [...(this.copiesByNode.get(nodeId)?.values() ?? [])]
      .filter((c) => c.pins === 0 && c.model !== keepModel && (!c.complete || this.sources(c.model).length > this.minHostCopies))
      .sort((a, b) => a.lastUsedMs - b.lastUsedMs || (a.model < b.model ? -1 : 1));
    const out: string[] = [];
    for (const c of candidates) {
      if (free >= bytes) break;
      out.push(c.model);
      free += c.bytes;
    }
    return free >= bytes ? out : undefined;
  }

  /**
   * Models of `hosted` below the invariant, with their remaining sources and the live node to copy to: the one with
   * the most free memory among nodes not holding a complete copy (ties by id). `bytesOf` gives each model's size.
   */
  repairs(hosted: readonly string[], bytesOf: (model: string) => number): Repair[] {
    const out: Repair[] = [];
    for (const model of hosted) {
      const sources = this.sources(model);
      if (sources.length >= this.minHostCopies) continue;
      const need = bytesOf(model);
      let to: string | undefined;
      let best = -Infinity;
      for (const n of this.liveNodes()) {
        if (sources.includes(n.nodeId)) continue;
        const free = this.freeBytes(n.nodeId) + (this.copy(n.nodeId, model)?.bytes ?? 0);
        if (free < need && this.evictionsFor(n.nodeId, need, model) === undefined) continue;
        if (free > best || (free === best && to !== undefined && n.nodeId < to)) {
          best = free;
          to = n.nodeId;
        }
      }
      out.push({ model, sources, to });
    }
    return out;
  }
}
