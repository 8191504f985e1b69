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
    expect(c.counts()).toEqual({ requests: 3, queriedTokens: 168, hitTokens: 64, storedBlocks: 5, evictedBlocks: 0 });
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
      { type: "BlockStored", blockHashes: [1, 2], parentBlockHash: null, blockSize: 16 },
      { type: "BlockStored", blockHashes: [3, 4], parentBlockHash: null, blockSize: 16 },
      { type: "BlockStored", blockHashes: [5], parentBlockHash: null, blockSize: 16 },
      { type: "BlockRemoved", blockHashes: [4, 3] },
      { type: "BlockStored", blockHashes: [6], parentBlockHash: 1, blockSize: 16 },
      { type: "BlockRemoved", blockHashes: [2] },
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
});
