/**
 * What each instance holds of which prefixes, as the gateway knows it (issue 34): per instance, a set of block hashes
 * (core/prefix.ts) fed by
 * - routing history: the blocks of every request the gateway sent there (llm-d's approximate prefix index, SGLang's
 *   cache-aware router), at most `capacityBlocks` per instance, least recently routed dropped first (the instance's
 *   KV capacity in blocks, so the index forgets at about the rate the engine's cache evicts); and
 * - the engine's KV events where it sends them (Engine.kvEvents; vLLM kv_events, engine-sim): blocks stored are
 *   added, blocks removed are dropped at once, so an eviction the history would guess late is known when it happens.
 * An instance with events counts blocks stored by the engine without the history's cap (the engine says what goes).
 */
import { PrefixSet as BlockSet, type KvEvent } from "../../../core/prefix.js";
import type { KvEventSource } from "../../../core/ports.js";

interface Entry {
  set: BlockSet;
  unsubscribe: (() => void) | undefined;
}

export class PrefixIndex {
  private readonly instances = new Map<string, Entry>();

  /** `blockTokens`: the block size prompts are hashed with; an engine whose events use another size is not subscribed. */
  constructor(readonly blockTokens: number) {}

  /**
   * Starts indexing an instance: `capacityBlocks` bounds its routing history (≥ 1); `events` subscribes to its KV
   * events when its block size matches. Idempotent per instance id (a second call replaces the first).
   */
  attach(instanceId: string, capacityBlocks: number, events: KvEventSource | undefined): void {
    this.detach(instanceId);
    const e: Entry = { set: new BlockSet(Math.max(1, Math.floor(capacityBlocks))), unsubscribe: undefined };
    if (events !== undefined && events.blockTokens === this.blockTokens) {
      e.set.cap = Number.POSITIVE_INFINITY;
      e.unsubscribe = events.subscribe((ev) => apply(e.set, ev));
    }
    this.instances.set(instanceId, e);
  }

  /** Stops indexing an instance (it left the gateway). */
  detach(instanceId: string): void {
    const e = this.instances.get(instanceId);
    e?.unsubscribe?.();
    this.instances.delete(instanceId);
  }

  /** Whether the instance's index follows its engine's KV events. */
  followsEvents(instanceId: string): boolean {
    return this.instances.get(instanceId)?.unsubscribe !== undefined;
  }

  /** A request with `hashes` was routed to the instance. */
  routed(instanceId: string, hashes: readonly number[]): void {
    if (hashes.length > 0) this.instances.get(instanceId)?.set.touch(hashes);
  }

  /** Leading blocks of `hashes` the instance is known to hold. */
  prefixBlocks(instanceId: string, hashes: readonly number[]): number {
    const e = this.instances.get(instanceId);
    if (e === undefined) return 0;
    let n = 0;
    while (n < hashes.length && e.set.has(hashes[n]!)) n++;
    return n;
  }

  /** Blocks indexed for an instance (tests, metrics). */
  size(instanceId: string): number {
    return this.instances.get(instanceId)?.set.size ?? 0;
  }

  /** Unsubscribes from every engine. */
  close(): void {
    for (const id of [...this.instances.keys()]) this.detach(id);
  }
}

function apply(set: BlockSet, ev: KvEvent): void {
  if (ev.type === "BlockStored") set.touch(ev.blockHashes);
  else if (ev.type === "BlockRemoved") set.remove(ev.blockHashes);
  else set.clear();
}
