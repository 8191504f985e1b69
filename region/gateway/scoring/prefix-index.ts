/**
 * What each instance holds of which prefixes, as the gateway knows it (issue 34): per instance, a set of block hashes
 * (core/prefix.ts) fed by
 * - routing history: the blocks of every request the gateway sent there (llm-d's approximate prefix index, SGLang's
 *   cache-aware router), at most `capacityBlocks` per instance, least recently routed dropped first (the instance's
 *   KV capacity in blocks, so the index forgets at about the rate the engine's cache evicts); and
 * - the engine's KV events where it sends them (Engine.kvEvents; vLLM kv_events, engine-sim): blocks stored are
 *   added, blocks removed are dropped at once, so an eviction the history would guess late is known when it happens.
 * An instance with events counts blocks stored by the engine without the history's cap (the engine says what goes),
 * plus the blocks of the requests routed there and not yet ended (`pending`, counted per request): a request waiting
 * in the engine's queue stores its prompt when admitted, so its blocks count for the next turn routed meanwhile, and
 * they stop counting when it ends — if the engine stored them they are in the events' set by then; if it never took
 * the request (it failed, or was retried elsewhere) nothing of it stays indexed there.
 * Events with medium "CPU" (an engine's host-memory KV tier: LMCache, vLLM CPU offloading, engine-sim's) feed a
 * second set per instance; a block counts if either tier holds it, with no discount for the host tier: loading a
 * block over PCIe costs a small fraction of recomputing it (engine-sim core.ts HOST_KV_LOAD_BYTES_PER_MS), so the
 * scorer treats both alike (kept simple; a discount would need the engine's load and prefill rates).
 */
import { PrefixSet as BlockSet, type KvEvent } from "../../../core/prefix.js";
import type { KvEventSource } from "../../../core/ports.js";

interface Entry {
  set: BlockSet;
  /** With events: the blocks of the engine's host KV tier (medium "CPU"). */
  host: BlockSet;
  unsubscribe: (() => void) | undefined;
  /** With events: block hash → requests in flight there that carry it. */
  pending: Map<number, number> | undefined;
}

export class PrefixIndex {
  private readonly instances = new Map<string, Entry>();

  /** `blockTokens`: the block size prompts are hashed with; an engine whose events use another size is not subscribed. */
  constructor(readonly blockTokens: number) {}

  /**
   * Starts indexing an instance: `capacityBlocks` bounds its routing history (≥ 1); `events` subscribes to its KV
   * events when its block size matches, starting from the engine's snapshot of what it caches where it gives one. Idempotent per instance id (a second call replaces the first).
   */
  attach(instanceId: string, capacityBlocks: number, events: KvEventSource | undefined): void {
    this.detach(instanceId);
    const e: Entry = { set: new BlockSet(Math.max(1, Math.floor(capacityBlocks))), host: new BlockSet(Number.POSITIVE_INFINITY), unsubscribe: undefined, pending: undefined };
    if (events !== undefined && events.blockTokens === this.blockTokens) {
      e.set.cap = Number.POSITIVE_INFINITY;
      e.pending = new Map();
      e.unsubscribe = events.subscribe((ev) => apply(e, ev));
      // What the engine cached before this subscription (an engine already serving when the gateway took it on).
      const cached = events.snapshot?.();
      if (cached !== undefined) e.set.touch(cached);
      const hosted = events.hostSnapshot?.();
      if (hosted !== undefined) e.host.touch(hosted);
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

  /**
   * A request with `hashes` was routed to the instance. Returns what to call when the request ends there (done,
   * failed or cancelled) for an instance followed by events; undefined otherwise (the history keeps what was routed).
   */
  routed(instanceId: string, hashes: readonly number[]): (() => void) | undefined {
    const e = this.instances.get(instanceId);
    if (e === undefined || hashes.length === 0) return undefined;
    const pending = e.pending;
    if (pending === undefined) {
      e.set.touch(hashes);
      return undefined;
    }
    for (const h of hashes) pending.set(h, (pending.get(h) ?? 0) + 1);
    let ended = false;
    return () => {
      if (ended) return;
      ended = true;
      for (const h of hashes) {
        const n = pending.get(h)! - 1;
        if (n > 0) pending.set(h, n);
        else pending.delete(h);
      }
    };
  }

  /** Leading blocks of `hashes` the instance is known to hold (or will, with a request routed there in flight). */
  prefixBlocks(instanceId: string, hashes: readonly number[]): number {
    const e = this.instances.get(instanceId);
    if (e === undefined) return 0;
    const pending = e.pending;
    let n = 0;
    while (n < hashes.length && (e.set.has(hashes[n]!) || e.host.has(hashes[n]!) || (pending?.has(hashes[n]!) ?? false))) n++;
    return n;
  }

  /** Blocks indexed for an instance (tests, metrics): its GPU tier's (or routing history's). */
  size(instanceId: string): number {
    return this.instances.get(instanceId)?.set.size ?? 0;
  }

  /** Blocks indexed in an instance's host KV tier (events with medium "CPU"). */
  hostSize(instanceId: string): number {
    return this.instances.get(instanceId)?.host.size ?? 0;
  }

  /** Unsubscribes from every engine. */
  close(): void {
    for (const id of [...this.instances.keys()]) this.detach(id);
  }
}

/** An event into the set of its medium (absent: GPU); AllBlocksCleared clears both. */
function apply(e: Entry, ev: KvEvent): void {
  if (ev.type === "AllBlocksCleared") {
    e.set.clear();
    e.host.clear();
  } else if (ev.type === "BlockStored") (ev.medium === "CPU" ? e.host : e.set).touch(ev.blockHashes);
  else (ev.medium === "CPU" ? e.host : e.set).remove(ev.blockHashes);
}
