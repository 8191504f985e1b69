/**
 * engine-sim's prefix cache (issue 34), as vLLM's automatic prefix caching (vllm/v1/core/block_pool.py,
 * kv_cache_manager.py): KV blocks keyed by the chained hash of their tokens (core/prefix.ts), shared by every
 * request whose prompt starts with them, reference-counted while requests use them, and kept after their last user
 * ends until the memory is needed: then the least recently freed unreferenced block goes first (vLLM's free-block
 * queue; the blocks of one request are freed tail first, so a prompt's last blocks are evicted before its first).
 *
 * Memory: referenced blocks live inside the KV the engine core reserves for its running requests (core.ts keeps its
 * reservation of prompt + max tokens per request, so prefixes shared by two running requests are counted twice —
 * conservative); unreferenced cached blocks live in the KV nobody has reserved and are evicted as reservations grow
 * (`fitFree`). vLLM's design (docs.vllm.ai, design "Automatic Prefix Caching") is looser: a running request holds
 * only the blocks it has filled, a prefix shared by running requests is held once, and a freed block stays cached in
 * the free-block queue until a new block needs it. The difference is the running requests' unwritten output and their
 * doubly counted shared prefixes — a few thousand tokens of the ~1 M an instance holds in bench:prefix: evicting
 * down to the KV the referenced blocks leave free (vLLM's accounting, output ignored) changed its hit rates by less
 * than 0.001 over the first 5 minutes of both traces, so the reservation stays (it keeps admission and preemption,
 * core.ts, simple). A request's cache hit is its longest run of leading blocks present, capped at (prompt − 1) tokens as
 * vLLM (the last prompt token is always computed, it yields the first output token).
 *
 * Counters as vLLM's PrefixCacheStats (`vllm:prefix_cache_queries_total`, `vllm:prefix_cache_hits_total`: prompt
 * tokens looked up and found, counted once per request at its first admission), and KV events as vLLM's
 * `--kv-events-config` publisher (vllm/distributed/kv_events.py: BlockStored with the new blocks' hashes and their
 * parent's, BlockRemoved with the evicted ones), to listeners in the order they happen.
 *
 * Host-memory tier (`hostCapacityBlocks` > 0; off at 0), as KV offloading to CPU memory: LMCache's local CPU backend
 * (vLLM production-stack `lmcacheConfig.cpuOffloadingBufferSize`, docs.vllm.ai/projects/production-stack, "KV Cache
 * Offloading"; LMCache stores the KV of every prefill it sees — "prefill each text only once by storing the KV caches
 * of all reusable texts", docs.nvidia.com/dynamo, "LMCache Integration") and vLLM's OffloadingConnector (a CPU block
 * pool with LRU eviction; a GPU prefix miss found in CPU memory is loaded back instead of recomputed). Like LMCache's
 * default, the tier is WRITE-THROUGH: every block the GPU tier stores is stored in the host tier too (BlockStored,
 * medium "CPU"; the GPU → host copy runs beside compute and costs nothing here), so a block the GPU evicts is still in
 * host memory unless the host tier's own LRU (least recently stored or used first) dropped it (BlockRemoved, medium
 * "CPU"). A request's hit is then its GPU-cached leading blocks, continued by the leading blocks present only in the
 * host tier (loaded over PCIe by the core, core.ts, and stored back in the GPU tier), capped at (prompt − 1) tokens
 * together. GPU events carry medium "GPU". The GPU counters stay vLLM's (GPU hits only); the host tier's are
 * `hostQueriedTokens` (tokens looked up there: the prompt tokens past the GPU hit) and `hostHitTokens` (found there),
 * as LMCache's lookup counters.
 */
import type { KvEvent, KvEventListener } from "../../core/prefix.js";

export type { KvEvent, KvEventListener } from "../../core/prefix.js";

/** Counters since start (vLLM PrefixCacheStats totals). */
export interface PrefixCacheCounters {
  /** Requests looked up, prompt tokens looked up, prompt tokens found cached. */
  requests: number;
  queriedTokens: number;
  hitTokens: number;
  /** Blocks stored and evicted. */
  storedBlocks: number;
  evictedBlocks: number;
  /** Host tier: prompt tokens looked up there (past the GPU hit, first admission only), and of them found there. */
  hostQueriedTokens: number;
  hostHitTokens: number;
  /** Host tier: blocks it dropped (its own LRU). */
  hostEvictedBlocks: number;
}

/** A request's hit by tier: tokens found in GPU memory, and the tokens after them loaded from the host tier. */
export interface TieredHit {
  gpuTokens: number;
  hostTokens: number;
}

/**
 * One cached block. Unreferenced blocks are also links of the free queue (`prev`/`next`, least recently freed at the
 * head), as vLLM's FreeKVCacheBlockQueue: a doubly linked list threaded through the blocks, so taking a block out of
 * the queue on a hit and putting it back at release are O(1) pointer moves, not a second hash map's delete and insert.
 */
interface Block {
  readonly hash: number;
  refs: number;
  prev: Block | undefined;
  next: Block | undefined;
}

export class PrefixCache {
  /** Tokens per block (vLLM --block-size). */
  readonly blockTokens: number;
  /** hash → block; blocks with refs 0 are also in the free queue (head = next evicted). */
  private readonly blocks = new Map<number, Block>();
  private head: Block | undefined;
  private tail: Block | undefined;
  private freeCount = 0;
  private readonly listeners = new Set<KvEventListener>();
  private readonly counters: PrefixCacheCounters = { requests: 0, queriedTokens: 0, hitTokens: 0, storedBlocks: 0, evictedBlocks: 0, hostQueriedTokens: 0, hostHitTokens: 0, hostEvictedBlocks: 0 };
  /** Host tier: its blocks in LRU order (a Map's insertion order: first = least recently stored or used). */
  private readonly host = new Map<number, true>();
  /** Host tier capacity in blocks (0: no host tier). */
  readonly hostCapacityBlocks: number;

  constructor(blockTokens: number, hostCapacityBlocks = 0) {
    if (!(Number.isInteger(blockTokens) && blockTokens >= 1)) throw new RangeError(`blockTokens must be an integer ≥ 1, got ${blockTokens}`);
    if (!(hostCapacityBlocks >= 0)) throw new RangeError(`hostCapacityBlocks must be ≥ 0, got ${hostCapacityBlocks}`);
    this.blockTokens = blockTokens;
    this.hostCapacityBlocks = Math.floor(hostCapacityBlocks);
  }

  /** Blocks in the host tier. */
  get hostSize(): number {
    return this.host.size;
  }

  /** Whether the host tier holds a block of this hash. */
  hostHas(hash: number): boolean {
    return this.host.has(hash);
  }

  /** Every host-tier block's hash (for a subscriber's initial snapshot). */
  hostHashes(): number[] {
    return [...this.host.keys()];
  }

  /** Adds a KV-event listener; returns its removal. */
  subscribe(listener: KvEventListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Blocks held (referenced or not), and of them unreferenced (evictable). */
  get size(): number {
    return this.blocks.size;
  }
  get freeBlocks(): number {
    return this.freeCount;
  }

  /** Whether a block of this hash is cached. */
  has(hash: number): boolean {
    return this.blocks.has(hash);
  }

  /** Every cached block's hash (for a subscriber's initial snapshot and tests). */
  hashes(): number[] {
    return [...this.blocks.keys()];
  }

  counts(): PrefixCacheCounters {
    return { ...this.counters };
  }

  /** Leading blocks of `hashes` cached now, at most `maxBlocks`. */
  cachedPrefix(hashes: readonly number[], maxBlocks = hashes.length): number {
    const limit = Math.min(maxBlocks, hashes.length);
    let n = 0;
    while (n < limit && this.blocks.has(hashes[n]!)) n++;
    return n;
  }

  /**
   * The prompt tokens a request of `hashes` would find cached now, GPU and host tiers together (at most
   * promptTokens − 1, as `acquire` counts them), without touching the cache: the engine's estimate of a waiting
   * request's cached prefix (core.ts remainingTokens).
   */
  peek(hashes: readonly number[], promptTokens: number): number {
    const maxHit = Math.floor(Math.max(0, promptTokens - 1) / this.blockTokens);
    let n = this.cachedPrefix(hashes, maxHit);
    if (this.hostCapacityBlocks > 0) while (n < maxHit && this.host.has(hashes[n]!)) n++;
    return n * this.blockTokens;
  }

  /**
   * A request is admitted with `hashes` (its prompt's full blocks) and `promptTokens`: its cached prefix is reused
   * (referenced, out of the eviction queue), its other blocks are stored (referenced; BlockStored). Returns the prompt
   * tokens it need not compute: cached blocks × blockTokens, at most promptTokens − 1 (GPU and host tiers together;
   * `acquireTiered` splits them). `count`: add it to the counters (its first admission; a resumed request looks up
   * again uncounted).
   */
  acquire(hashes: readonly number[], promptTokens: number, count: boolean): number {
    const hit = this.acquireTiered(hashes, promptTokens, count);
    return hit.gpuTokens + hit.hostTokens;
  }

  /**
   * `acquire`, with the hit split by tier: the leading blocks in GPU memory, then the leading blocks after them that
   * only the host tier holds (stored in the GPU tier again: BlockStored medium "GPU"). Every block of the request is
   * then in the host tier too, most recently used (write-through).
   */
  acquireTiered(hashes: readonly number[], promptTokens: number, count: boolean): TieredHit {
    const maxHit = Math.floor(Math.max(0, promptTokens - 1) / this.blockTokens);
    const hit = this.cachedPrefix(hashes, maxHit);
    let hostHit = 0;
    if (this.hostCapacityBlocks > 0) while (hit + hostHit < maxHit && this.host.has(hashes[hit + hostHit]!)) hostHit++;
    if (count) {
      this.counters.requests++;
      this.counters.queriedTokens += promptTokens;
      this.counters.hitTokens += hit * this.blockTokens;
      if (this.hostCapacityBlocks > 0) {
        this.counters.hostQueriedTokens += promptTokens - hit * this.blockTokens;
        this.counters.hostHitTokens += hostHit * this.blockTokens;
      }
    }
    let stored: number[] | undefined;
    let parent: number | null = null;
    for (let i = 0; i < hashes.length; i++) {
      const h = hashes[i]!;
      const b = this.blocks.get(h);
      if (b !== undefined) {
        if (b.refs === 0) this.unlink(b);
        b.refs++;
        if (stored === undefined) parent = h;
        continue;
      }
      this.blocks.set(h, { hash: h, refs: 1, prev: undefined, next: undefined });
      (stored ??= []).push(h);
    }
    if (stored !== undefined) {
      this.counters.storedBlocks += stored.length;
      this.emit({ type: "BlockStored", blockHashes: stored, parentBlockHash: parent, blockSize: this.blockTokens, medium: "GPU" });
    }
    if (this.hostCapacityBlocks > 0) this.storeHost(hashes);
    return { gpuTokens: hit * this.blockTokens, hostTokens: hostHit * this.blockTokens };
  }

  /** Write-through: `hashes` into the host tier (new ones BlockStored medium "CPU"), then its LRU down to capacity. */
  private storeHost(hashes: readonly number[]): void {
    let stored: number[] | undefined;
    let parent: number | null = null;
    for (const h of hashes) {
      if (this.host.delete(h)) {
        if (stored === undefined) parent = h;
      } else (stored ??= []).push(h);
      this.host.set(h, true);
    }
    if (stored !== undefined) this.emit({ type: "BlockStored", blockHashes: stored, parentBlockHash: parent, blockSize: this.blockTokens, medium: "CPU" });
    const excess = this.host.size - this.hostCapacityBlocks;
    if (excess <= 0) return;
    const removed: number[] = [];
    for (const h of this.host.keys()) {
      if (removed.length >= excess) break;
      removed.push(h);
    }
    for (const h of removed) this.host.delete(h);
    this.counters.hostEvictedBlocks += removed.length;
    this.emit({ type: "BlockRemoved", blockHashes: removed, medium: "CPU" });
  }

  /** A request that acquired `hashes` ended (or was preempted): its blocks lose a reference; tail first to the queue. */
  release(hashes: readonly number[]): void {
    for (let i = hashes.length - 1; i >= 0; i--) {
      const b = this.blocks.get(hashes[i]!);
      if (b === undefined || b.refs === 0) continue;
      b.refs--;
      if (b.refs === 0) this.append(b);
    }
  }

  /** Evicts unreferenced blocks, least recently freed first, until at most `maxFreeBlocks` remain (BlockRemoved). */
  fitFree(maxFreeBlocks: number): void {
    const excess = this.freeCount - Math.max(0, Math.floor(maxFreeBlocks));
    if (excess <= 0) return;
    const removed = new Array<number>(excess);
    for (let i = 0; i < excess; i++) {
      const b = this.head!;
      this.unlink(b);
      this.blocks.delete(b.hash);
      removed[i] = b.hash;
    }
    this.counters.evictedBlocks += excess;
    this.emit({ type: "BlockRemoved", blockHashes: removed, medium: "GPU" });
  }

  /**
   * Drops every unreferenced block (vLLM reset_prefix_cache) and the whole host tier: AllBlocksCleared (every tier)
   * when nothing is referenced, else BlockRemoved per tier.
   */
  clear(): void {
    if (this.freeCount === this.blocks.size) {
      this.blocks.clear();
      this.head = this.tail = undefined;
      this.freeCount = 0;
      this.counters.hostEvictedBlocks += this.host.size;
      this.host.clear();
      this.emit({ type: "AllBlocksCleared" });
      return;
    }
    this.fitFree(0);
    if (this.host.size === 0) return;
    const removed = [...this.host.keys()];
    this.host.clear();
    this.counters.hostEvictedBlocks += removed.length;
    this.emit({ type: "BlockRemoved", blockHashes: removed, medium: "CPU" });
  }

  /** Puts an unreferenced block at the free queue's tail (evicted last). */
  private append(b: Block): void {
    b.prev = this.tail;
    b.next = undefined;
    if (this.tail === undefined) this.head = b;
    else this.tail.next = b;
    this.tail = b;
    this.freeCount++;
  }

  /** Takes a block out of the free queue (reused by a hit, or evicted). */
  private unlink(b: Block): void {
    if (b.prev === undefined) this.head = b.next;
    else b.prev.next = b.next;
    if (b.next === undefined) this.tail = b.prev;
    else b.next.prev = b.prev;
    b.prev = b.next = undefined;
    this.freeCount--;
  }

  private emit(ev: KvEvent): void {
    for (const l of this.listeners) l(ev);
  }
}
