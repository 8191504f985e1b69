/**
 * The Dispatcher's parking: requests of batches kept within regions (the creating API key's `regions`, data
 * residency) that a report from another region claimed wait here, oldest first per model, for a report from a region
 * they allow — so a restricted request at the head of a model's queue never blocks the requests behind it. Past half
 * their lease, or beyond `MAX_PARKED` per model, they are released back to the queue. Each batch's allowed regions
 * are read from the store once.
 */
import type { ClaimedRequest, QueueStore } from "../queue/types.js";

/** Parked requests per model before further ones are released at once. */
export const MAX_PARKED = 1024;

interface Parked {
  c: ClaimedRequest;
  allowed: ReadonlySet<string>;
  sinceMs: number;
}

/** Parked requests and the batches' allowed regions (see the file comment). */
export class Parking {
  private readonly parked = new Map<string, Parked[]>();
  /** Each active batch's allowed regions (null = any), read once per batch. */
  private readonly batchRegions = new Map<string, Promise<ReadonlySet<string> | null>>();

  constructor(
    private readonly store: QueueStore,
    private readonly leaseMs: number,
  ) {}

  /** The regions `batchId` may be served in (null = any), read once per batch. */
  regionsOf(batchId: string): Promise<ReadonlySet<string> | null> {
    let r = this.batchRegions.get(batchId);
    if (r === undefined) {
      r = this.store.getBatch(batchId).then((b) => (b?.allowedRegions === undefined ? null : new Set(b.allowedRegions)));
      // A failed read is not cached: the next claim of this batch asks again.
      r.catch(() => this.batchRegions.delete(batchId));
      this.batchRegions.set(batchId, r);
    }
    return r;
  }

  /** Forgets the allowed regions of batches no longer active. */
  forgetBatchesBut(active: readonly string[]): void {
    for (const id of this.batchRegions.keys()) if (!active.includes(id)) this.batchRegions.delete(id);
  }

  /** Parks `c` (allowed only in `allowed`) at `nowMs`; false when its model's list is full (release it instead). */
  park(c: ClaimedRequest, allowed: ReadonlySet<string>, nowMs: number): boolean {
    const list = this.parked.get(c.model) ?? [];
    this.parked.set(c.model, list);
    if (list.length >= MAX_PARKED) return false;
    list.push({ c, allowed, sinceMs: nowMs });
    return true;
  }

  /** Takes out, oldest first, at most `slots` parked requests of `model` that `region` may serve. */
  take(region: string, model: string, slots: number): ClaimedRequest[] {
    const list = this.parked.get(model);
    const out: ClaimedRequest[] = [];
    if (list === undefined || list.length === 0) return out;
    for (let i = 0; i < list.length && out.length < slots; ) {
      if (!list[i]!.allowed.has(region)) {
        i++;
        continue;
      }
      out.push(list.splice(i, 1)[0]!.c);
    }
    return out;
  }

  /** Takes out the requests that have waited half their lease by `nowMs` (every one when `all`). */
  expired(all: boolean, nowMs: number): ClaimedRequest[] {
    const out: ClaimedRequest[] = [];
    for (const [model, list] of this.parked) {
      const keep = list.filter((p) => !all && nowMs - p.sinceMs < this.leaseMs / 2);
      for (const p of list) if (!keep.includes(p)) out.push(p.c);
      if (keep.length === 0) this.parked.delete(model);
      else this.parked.set(model, keep);
    }
    return out;
  }

  /** Drops the requests leased to `owner` (fenced: its leases are another dispatcher's now). */
  dropOwner(owner: number): void {
    for (const [model, list] of this.parked) {
      const keep = list.filter((p) => p.c.owner !== owner);
      if (keep.length === 0) this.parked.delete(model);
      else this.parked.set(model, keep);
    }
  }
}
