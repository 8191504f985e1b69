/**
 * What the global router knows of where each prefix lives (issue 34): per (region, model), the block hashes
 * (core/prefix.ts, the prompt with the chat template applied) of the requests it sent there — routing history, as
 * SGLang's cache-aware router keeps per worker — at most the KV the region's serving instances hold, in blocks,
 * least recently sent forgotten first. Regions do not send the router their engines' KV events; the router's own
 * history is what it has. Pure state: no clock, no I/O.
 */
import { PrefixSet, longestPrefix } from "../core/prefix.js";
import type { ModelName, RegionName } from "../core/models.js";

export class RegionPrefixes {
  private readonly sets = new Map<string, PrefixSet>();

  /** `blockTokens`: the block size prompts are hashed with (config routing.blockTokens). */
  constructor(readonly blockTokens: number) {}

  /** A request with `hashes` was sent to (region, model), whose serving instances hold `capacityBlocks` blocks (≥ 1). */
  sent(region: RegionName, model: ModelName, hashes: readonly number[], capacityBlocks: number): void {
    if (hashes.length === 0) return;
    const key = `${region}\u0000${model}`;
    let s = this.sets.get(key);
    if (s === undefined) this.sets.set(key, (s = new PrefixSet(1)));
    s.cap = Math.max(1, Math.floor(capacityBlocks));
    s.touch(hashes);
  }

  /** Leading blocks of `hashes` the router last sent to (region, model) and still remembers. */
  prefixBlocks(region: RegionName, model: ModelName, hashes: readonly number[]): number {
    const s = this.sets.get(`${region}\u0000${model}`);
    return s === undefined ? 0 : longestPrefix(hashes, (h) => s.has(h));
  }

  /** Forgets a region (its link went down: its engines may have restarted empty). */
  forget(region: RegionName): void {
    for (const k of [...this.sets.keys()]) if (k.startsWith(`${region}\u0000`)) this.sets.delete(k);
  }
}
