import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { PrefixCache, type KvEvent } from "./prefix-cache.js";

describe("PrefixCache (vLLM automatic prefix caching)", () => {
  it("reuses a cached prefix, caps a full hit at prompt − 1 tokens, counts queries and hits", () => {
    const c = new PrefixCache(16);
    expect(c.acquire([1, 2, 3], 50, true)).toBe(0); // cold: 50 tokens queried, 0 hit
    c.release([1, 2, 3]);
    expect(c.acquire([1, 2, 4, 5], 70, true)).toBe(32); // blocks 1, 2 cached
    // A prompt of exactly 3 blocks whose blocks are all cached: the last token is computed, so 2 blocks hit.
    expect(c.acquire([1, 2, 3], 48, true)).toBe(32);
    expect(c.counts()).toEqual({ requests: 3, queriedTokens: 168, hitTokens: 64, storedBlocks: 5, evictedBlocks: 0, hostQueriedTokens: 0, hostHitTokens: 0, hostEvictedBlocks: 0 });
    // A resumed request looks up again uncounted.
    expect(c.acquire([1, 2, 3], 50, false)).toBe(48);
    expect(c.counts().requests).toBe(3);
  });

  it("evicts only unreferenced blocks, least recently freed first and a request's tail before its head", () => {
    const c = new PrefixCache(16);
    const events: KvEvent[] = [];
    c.subscribe((e) => events.push(e));
    c.acquire([1, 2], 40, true);
    c.acquire([3, 4], 40, true);
    c.release([3, 4]); // free queue: 4, 3
    c.release([1, 2]); // free queue: 4, 3, 2, 1
    c.acquire([5], 20, true); // referenced: not evictable
    c.fitFree(2);
    expect(c.has(4)).toBe(false);
    expect(c.has(3)).toBe(false);
    expect(c.has(1) && c.has(2) && c.has(5)).toBe(true);
    c.acquire([1, 6], 40, true); // 1 reused: out of the free queue (2 stays free)
    c.fitFree(0);
    expect(c.hashes().sort()).toEqual([1, 5, 6]);
    expect(c.freeBlocks).toBe(0);
    expect(events).toEqual([
      { type: "BlockStored", blockHashes: [1, 2], parentBlockHash: null, blockSize: 16, medium: "GPU" },
      { type: "BlockStored", blockHashes: [3, 4], parentBlockHash: null, blockSize: 16, medium: "GPU" },
      { type: "BlockStored", blockHashes: [5], parentBlockHash: null, blockSize: 16, medium: "GPU" },
      { type: "BlockRemoved", blockHashes: [4, 3], medium: "GPU" },
      { type: "BlockStored", blockHashes: [6], parentBlockHash: 1, blockSize: 16, medium: "GPU" },
      { type: "BlockRemoved", blockHashes: [2], medium: "GPU" },
    ]);
    expect(c.counts().evictedBlocks).toBe(3);
  });

  it("clears: AllBlocksCleared when nothing is referenced", () => {
    const c = new PrefixCache(16);
    const events: KvEvent[] = [];
    const off = c.subscribe((e) => events.push(e));
    c.acquire([1], 20, true);
    c.release([1]);
    c.clear();
    expect(c.size).toBe(0);
    expect(events.at(-1)).toEqual({ type: "AllBlocksCleared" });
    off();
    c.acquire([2], 20, true);
    expect(events).toHaveLength(2);
  });

  it("a block reused by a hit leaves the free queue and rejoins it at the tail when released", () => {
    const c = new PrefixCache(16);
    c.acquire([1, 2, 3], 60, true);
    c.release([1, 2, 3]); // free queue: 3, 2, 1
    c.acquire([1, 2], 40, true); // 1, 2 reused: free queue 3
    expect(c.freeBlocks).toBe(1);
    c.release([1, 2]); // free queue: 3, 2, 1
    c.fitFree(2);
    expect(c.hashes().sort()).toEqual([1, 2]);
    c.fitFree(1);
    expect(c.hashes()).toEqual([1]);
    expect(c.counts().evictedBlocks).toBe(2);
  });

  it("keeps the same blocks, free count and events as a two-map reference model on random operations", () => {
    // The reference: every block in one Map, the unreferenced ones also in a second Map whose order is eviction order.
    type Op = { kind: "acquire"; blocks: number[] } | { kind: "release"; i: number } | { kind: "fit"; max: number };
    const op = fc.oneof(
      fc.record({ kind: fc.constant("acquire" as const), blocks: fc.array(fc.integer({ min: 0, max: 12 }), { minLength: 1, maxLength: 5 }) }),
      fc.record({ kind: fc.constant("release" as const), i: fc.nat() }),
      fc.record({ kind: fc.constant("fit" as const), max: fc.integer({ min: 0, max: 8 }) }),
    );
    fc.assert(
      fc.property(fc.array(op, { maxLength: 60 }), (ops: Op[]) => {
        const c = new PrefixCache(16);
        const got: KvEvent[] = [];
        c.subscribe((e) => got.push(e));
        const refs = new Map<number, number>();
        const free = new Map<number, true>();
        const want: number[][] = [];
        const held: number[][] = [];
        for (const o of ops) {
          if (o.kind === "acquire") {
            const hs = [...new Set(o.blocks)];
            c.acquire(hs, hs.length * 16 + 1, true);
            for (const h of hs) {
              free.delete(h);
              refs.set(h, (refs.get(h) ?? 0) + 1);
            }
            held.push(hs);
          } else if (o.kind === "release") {
            if (held.length === 0) continue;
            const hs = held.splice(o.i % held.length, 1)[0]!;
            c.release(hs);
            for (let k = hs.length - 1; k >= 0; k--) {
              const h = hs[k]!;
              const r = refs.get(h)! - 1;
              refs.set(h, r);
              if (r === 0) free.set(h, true);
            }
          } else {
            c.fitFree(o.max);
            const out = [...free.keys()].slice(0, Math.max(0, free.size - o.max));
            for (const h of out) {
              free.delete(h);
              refs.delete(h);
            }
            if (out.length > 0) want.push(out);
          }
          expect(c.freeBlocks).toBe(free.size);
          expect(c.hashes().sort((a, b) => a - b)).toEqual([...refs.keys()].sort((a, b) => a - b));
        }
        expect(got.filter((e) => e.type === "BlockRemoved").map((e) => (e as { blockHashes: number[] }).blockHashes)).toEqual(want);
      }),
    );
  });
});

describe("PrefixCache host-memory tier (write-through, own LRU)", () => {
  it("keeps blocks the GPU evicts in host memory, loads them as a hit past the GPU's, counts both tiers", () => {
    const c = new PrefixCache(16, 4);
    const events: KvEvent[] = [];
    c.subscribe((e) => events.push(e));
    expect(c.acquireTiered([1, 2, 3], 50, true)).toEqual({ gpuTokens: 0, hostTokens: 0 });
    c.release([1, 2, 3]);
    c.fitFree(1); // the GPU keeps block 1 (tail first out): 3, 2 evicted; all three stay in host memory
    expect(c.hashes()).toEqual([1]);
    expect(c.hostHashes()).toEqual([1, 2, 3]);
    // 70 tokens: at most floor(69 / 16) = 4 blocks hit; block 1 on GPU, 2 and 3 in host memory, 4 nowhere.
    expect(c.acquireTiered([1, 2, 3, 4], 70, true)).toEqual({ gpuTokens: 16, hostTokens: 32 });
    expect(c.hashes().sort()).toEqual([1, 2, 3, 4]); // loaded back and stored on GPU
    expect(c.counts()).toMatchObject({ queriedTokens: 120, hitTokens: 16, hostQueriedTokens: 50 + (70 - 16), hostHitTokens: 32, hostEvictedBlocks: 0 });
    expect(events).toEqual([
      { type: "BlockStored", blockHashes: [1, 2, 3], parentBlockHash: null, blockSize: 16, medium: "GPU" },
      { type: "BlockStored", blockHashes: [1, 2, 3], parentBlockHash: null, blockSize: 16, medium: "CPU" },
      { type: "BlockRemoved", blockHashes: [3, 2], medium: "GPU" },
      { type: "BlockStored", blockHashes: [2, 3, 4], parentBlockHash: 1, blockSize: 16, medium: "GPU" },
      { type: "BlockStored", blockHashes: [4], parentBlockHash: 3, blockSize: 16, medium: "CPU" },
    ]);
    // `acquire` returns both tiers' tokens; a lookup uncounted leaves the counters.
    c.release([1, 2, 3, 4]);
    c.fitFree(0);
    expect(c.acquire([1, 2, 3, 4], 70, false)).toBe(64);
    expect(c.counts().hostHitTokens).toBe(32);
  });

  it("drops the least recently stored or used host blocks beyond its capacity (BlockRemoved, medium CPU)", () => {
    const c = new PrefixCache(16, 4);
    const events: KvEvent[] = [];
    c.acquire([1, 2], 40, true); // host LRU: 1 2
    c.acquire([3, 4], 40, true); // host LRU: 1 2 3 4
    c.acquire([1], 20, true); // 1 used: host LRU 2 3 4 1
    c.subscribe((e) => events.push(e));
    c.acquire([5, 6], 40, true); // 2 and 3 dropped
    expect(c.hostHashes()).toEqual([4, 1, 5, 6]);
    expect(events.at(-1)).toEqual({ type: "BlockRemoved", blockHashes: [2, 3], medium: "CPU" });
    expect(c.counts().hostEvictedBlocks).toBe(2);
    expect(c.hostHas(2)).toBe(false);
  });

  it("without a host tier (capacity 0) stores nothing in host memory and counts no host queries", () => {
    const c = new PrefixCache(16);
    c.acquire([1, 2], 40, true);
    expect(c.hostSize).toBe(0);
    expect(c.counts().hostQueriedTokens).toBe(0);
  });
});
