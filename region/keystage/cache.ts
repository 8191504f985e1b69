/**
 * The stage cache (QUART §6.1, KeysManager): stage parameters kept in one server's host memory, shared by every
 * replica forked from them (one copy per (model, stage) per server, however many GPUs serve it). A new replica of a
 * cached stage starts from host memory at PCIe speed; otherwise its parameters come from the region's parameter
 * pool over the data plane (`startMs`). When host memory in use passes the eviction threshold (85% in QUART), the
 * least recently used entries that no running replica holds are dropped until it is back at or under it.
 * Pure: times are passed in (ms on the caller's Clock).
 */
import { idealSeconds } from "../../nodes/multicast/ideal.js";

/** One cached stage. */
interface Entry {
  bytes: number;
  lastUsedMs: number;
  /** Running replicas forked from this copy (an entry in use is never evicted). */
  holders: number;
}

/** Size and eviction threshold of one server's host-memory stage cache. */
export interface StageCacheOptions {
  /** Host memory of the server (bytes, > 0). */
  hostMemoryBytes: number;
  /** Fraction of host memory above which LRU eviction runs (QUART: 0.85). */
  evictAbove: number;
  /** Host memory other tenants use (bytes, ≥ 0): counted in the threshold, never evicted. */
  otherBytes?: number;
}

/** One server's host-memory stage cache. Keys name a stage, e.g. `bloom-176b/3`. */
export class StageCache {
  private readonly entries = new Map<string, Entry>();
  private cachedBytes = 0;
  /** Keys evicted so far, oldest first (for reports and tests). */
  readonly evicted: string[] = [];

  constructor(readonly opts: StageCacheOptions) {
    if (!(opts.hostMemoryBytes > 0)) throw new RangeError(`hostMemoryBytes must be > 0, got ${opts.hostMemoryBytes}`);
    if (!(opts.evictAbove > 0 && opts.evictAbove <= 1)) throw new RangeError(`evictAbove must be in (0, 1], got ${opts.evictAbove}`);
  }

  /** Bytes in use: cached stages plus other tenants. */
  get usedBytes(): number {
    return this.cachedBytes + (this.opts.otherBytes ?? 0);
  }

  /** Used / host memory. */
  get usedFraction(): number {
    return this.usedBytes / this.opts.hostMemoryBytes;
  }

  has(key: string): boolean {
    return this.entries.has(key);
  }

  keys(): string[] {
    return [...this.entries.keys()];
  }

  /**
   * A replica of `key` starts on this server at `nowMs`: returns whether its parameters were in host memory (a hit),
   * then keeps them there (a miss loads them through host memory, as the data plane does), marks them used and
   * held, and evicts LRU entries above the threshold.
   */
  acquire(key: string, bytes: number, nowMs: number): boolean {
    const e = this.entries.get(key);
    if (e !== undefined) {
      e.lastUsedMs = nowMs;
      e.holders++;
      return true;
    }
    this.entries.set(key, { bytes, lastUsedMs: nowMs, holders: 1 });
    this.cachedBytes += bytes;
    this.evict();
    return false;
  }

  /**
   * Puts `key` in host memory with no replica holding it (a stage the server was given to cache before any
   * replica of it ran here), then evicts LRU entries above the threshold, as `acquire` does.
   */
  preload(key: string, bytes: number, nowMs: number): void {
    if (this.entries.has(key)) return;
    this.entries.set(key, { bytes, lastUsedMs: nowMs, holders: 0 });
    this.cachedBytes += bytes;
    this.evict();
  }

  /** A replica of `key` stopped at `nowMs`; its parameters stay cached (the fork's parent keeps them). */
  release(key: string, nowMs: number): void {
    const e = this.entries.get(key);
    if (e === undefined || e.holders === 0) throw new RangeError(`release of ${key} that no replica holds`);
    e.holders--;
    e.lastUsedMs = nowMs;
  }

  /** Evicts least recently used, unheld entries while host memory in use is above the threshold. */
  evict(): void {
    const limit = this.opts.evictAbove * this.opts.hostMemoryBytes;
    while (this.usedBytes > limit) {
      let victim: string | undefined;
      let oldest = Number.POSITIVE_INFINITY;
      for (const [k, e] of this.entries) {
        if (e.holders === 0 && e.lastUsedMs < oldest) {
          oldest = e.lastUsedMs;
          victim = k;
        }
      }
      if (victim === undefined) return; // everything left is in use
      this.cachedBytes -= this.entries.get(victim)!.bytes;
      this.entries.delete(victim);
      this.evicted.push(victim);
    }
  }
}

/** Link rates and block count for replica start times. */
export interface StartCost {
  /** Host → GPU copy rate (bytes/s; PCIe). */
  pcieBytesPerS: number;
  /** Data-plane link rate between servers (bytes/s). */
  networkBytesPerS: number;
  /** Blocks a transfer is cut into (λScale's elbow ≈ 16). */
  blockCount: number;
  /** Engine process start (fork, CUDA context) added to every start (ms). */
  forkMs: number;
  /**
   * Local disk read rate per stage replica (bytes/s). When set, a stage not in host memory loads from the server's
   * disk (QUART §3: "loading the model from disk to GPU typically takes several seconds", 43 GB in 45 s), not over
   * the data plane; unset, a miss fetches from the parameter pool.
   */
  diskBytesPerS?: number;
}

/**
 * Time (ms) until a new replica of a `bytes`-large stage serves: a cache hit copies host memory to the GPU; a miss
 * first fetches the parameters from a holder in the parameter pool over the data plane, at the ideal one-receiver
 * multicast time of nodes/multicast/ideal.ts (`chain` with 2 nodes = M/B plus nothing: one hop), then copies them in.
 */
export function startMs(bytes: number, hit: boolean, cost: StartCost): number {
  const copyMs = (bytes / cost.pcieBytesPerS) * 1000;
  if (hit) return cost.forkMs + copyMs;
  if (cost.diskBytesPerS !== undefined) return diskStartMs(bytes, cost);
  const fetchMs = idealSeconds("chain", { totalBytes: bytes, blockCount: cost.blockCount, nodes: 2, linkBytesPerS: cost.networkBytesPerS }) * 1000;
  return cost.forkMs + fetchMs + copyMs;
}

/**
 * Time (ms) until a replica that reads its `bytes`-large stage from the server's disk serves: the read streams
 * through host memory to the GPU, so the slower of disk and PCIe bounds it. Throws when no disk rate is configured.
 */
export function diskStartMs(bytes: number, cost: StartCost): number {
  if (cost.diskBytesPerS === undefined || !(cost.diskBytesPerS > 0)) throw new RangeError("a disk load needs diskBytesPerS > 0");
  return cost.forkMs + (bytes / Math.min(cost.diskBytesPerS, cost.pcieBytesPerS)) * 1000;
}
