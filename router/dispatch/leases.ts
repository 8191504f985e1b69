/**
 * The Dispatcher's leases (issue 32 item 4): each dispatcher incarnation opens a lease owner in the store (a fencing
 * token) and heartbeats it every `ownerTtlMs` / 5; everything it claims is leased to that owner. A dispatcher whose
 * own heartbeat answers that it was declared dead (paused or cut off from the store for longer than the TTL) aborts
 * everything it runs under the old token — the store would drop those results anyway (`Fenced`) — and opens a new
 * owner. While a request runs in a region that still reports, `renewRunning` extends its lease once less than half of
 * it is left, so a request that outlasts its lease is not sent twice; a hung region's requests get no renewals.
 */
import { setMaxListeners } from "node:events";
import type { Clock } from "../../core/clock.js";
import { TidegateError } from "../../core/errors.js";
import type { Logger } from "../../core/log.js";
import type { ClaimedRequest, QueueStore } from "../queue/types.js";
import type { QueueMetrics } from "./dispatch-metrics.js";

export interface LeaseBookOptions {
  store: QueueStore;
  clock: Clock;
  leaseMs: number;
  ownerTtlMs: number;
  log: Logger;
  metrics?: QueueMetrics | undefined;
  /** Logs a failed store call (the Dispatcher's outage-aware logging). */
  storeFailed(msg: string, fields: Record<string, unknown>, err: unknown): void;
  /** Told when `owner` was fenced, after its dispatches were aborted: drop what waits under it. */
  onFenced(owner: number): void;
  /** Whether the dispatcher has stopped (no owner is opened then, nothing claimed). */
  stopped(): boolean;
}

/** A claimed request running now: its region and the end of its lease as last set. */
interface Running {
  region: string;
  untilMs: number;
  owner: number | undefined;
}

/** Lease owner, heartbeat, fencing, claims, renewals and releases (see the file comment). */
export class LeaseBook {
  /** This incarnation's lease owner (fencing token), once opened; undefined before, and between a fencing and the next. */
  private owner: number | undefined;
  /** The openOwner call in progress. */
  private opening: Promise<number | undefined> | undefined;
  /** The heartbeat in progress (the timer and maintenance share it). */
  private beating: Promise<void> | undefined;
  /** Per owner: aborts the dispatches of requests leased to it (on stop, or when it is fenced). */
  private readonly fences = new Map<number, AbortController>();
  /** Claimed requests being run now (see Running). */
  readonly running = new Map<string, Running>();
  /** Aborted by stop(): the signal of requests with no owner's fence. */
  readonly stopSignal: AbortSignal;
  private readonly stopper = new AbortController();

  constructor(private readonly o: LeaseBookOptions) {
    // Every in-flight dispatch listens on the one stop signal.
    setMaxListeners(0, this.stopper.signal);
    this.stopSignal = this.stopper.signal;
  }

  /** This incarnation's lease owner now (undefined before it is open). */
  get current(): number | undefined {
    return this.owner;
  }

  /** Opens a new lease owner unless one is being opened; resolves to it (undefined when the store failed). */
  open(): Promise<number | undefined> {
    this.opening ??= this.o.store.openOwner(this.o.clock.now(), this.o.ownerTtlMs).then(
      (owner) => {
        if (this.o.stopped()) return undefined;
        this.owner = owner;
        const fence = new AbortController();
        setMaxListeners(0, fence.signal);
        this.fences.set(owner, fence);
        this.o.log.debug("lease owner opened", { owner });
        return owner;
      },
      (err) => {
        this.o.storeFailed("opening a lease owner failed; nothing is claimed until the next try", {}, err);
        return undefined;
      },
    ).finally(() => (this.opening = undefined));
    return this.opening;
  }

  /**
   * Heartbeats this incarnation's owner (or opens one if it has none). When the store answers that the owner was
   * declared dead, everything running under it is aborted and a new owner is opened.
   */
  beat(): Promise<void> {
    this.beating ??= (async () => {
      const owner = this.owner;
      if (this.o.stopped()) return;
      if (owner === undefined) {
        await this.open();
        return;
      }
      let live: boolean;
      try {
        live = await this.o.store.heartbeat(owner, this.o.clock.now(), this.o.ownerTtlMs);
      } catch (err) {
        return this.o.storeFailed("lease heartbeat failed; past queue.ownerTtlMs without one, this dispatcher's leases are taken back", { owner }, err);
      }
      if (live || this.owner !== owner || this.o.stopped()) return;
      this.fenced(owner);
      await this.open();
    })().finally(() => (this.beating = undefined));
    return this.beating;
  }

  /** `owner` was declared dead (its leases taken back): stop everything leased to it. */
  private fenced(owner: number): void {
    this.o.log.warn("this dispatcher's leases were taken back (its heartbeat had run out: paused or cut off from the queue for over queue.ownerTtlMs); aborting what it runs under them and starting again as a new owner", { owner, running: [...this.running.values()].filter((r) => r.owner === owner).length });
    this.o.metrics?.ownersFenced.inc();
    this.owner = undefined;
    this.fences.get(owner)?.abort(new TidegateError("cancelled", `lease owner ${owner} was fenced`));
    this.fences.delete(owner);
    this.o.onFenced(owner);
  }

  /** Leases up to `max` of `model`'s oldest requests to this incarnation's owner (none while it has none). */
  claim(model: string, max: number): Promise<ClaimedRequest[]> {
    const run = (owner: number | undefined) => (owner === undefined || this.o.stopped() ? [] : this.o.store.claim(model, max, this.o.clock.now(), this.o.leaseMs, owner));
    return this.owner !== undefined ? Promise.resolve(run(this.owner)) : this.open().then(run);
  }

  /** The signal that aborts `c`'s dispatch: its owner's fence (stop or fencing), else stop's. */
  signalFor(c: ClaimedRequest): AbortSignal {
    return (c.owner === undefined ? undefined : this.fences.get(c.owner)?.signal) ?? this.stopSignal;
  }

  /** Gives back `requests`' leases, each under the owner it was claimed for. Returns how many were requeued. */
  async release(requests: readonly ClaimedRequest[], nowMs: number): Promise<number> {
    const byOwner = new Map<number | undefined, string[]>();
    for (const c of requests) {
      const ids = byOwner.get(c.owner) ?? [];
      ids.push(c.requestId);
      byOwner.set(c.owner, ids);
    }
    let n = 0;
    for (const [owner, ids] of byOwner) n += await this.o.store.release(ids, nowMs, owner);
    return n;
  }

  /**
   * Extends, by one lease from now, the leases of running requests that end within half a lease (QueueStore.renew),
   * so a request that runs longer than its lease is not requeued and sent again — only in regions that reported
   * within the last half lease (`lastReportMs`): a hung region's requests are left to run out and go elsewhere.
   */
  async renewRunning(lastReportMs: ReadonlyMap<string, number>): Promise<void> {
    const now = this.o.clock.now();
    const due: string[] = [];
    const byOwner = new Map<number | undefined, string[]>();
    for (const [rid, r] of this.running) {
      if (r.untilMs - now >= this.o.leaseMs / 2) continue;
      if (now - (lastReportMs.get(r.region) ?? -Infinity) > this.o.leaseMs / 2) continue;
      due.push(rid);
      const ids = byOwner.get(r.owner) ?? [];
      ids.push(rid);
      byOwner.set(r.owner, ids);
    }
    if (due.length === 0) return;
    const untilMs = now + this.o.leaseMs;
    try {
      for (const [owner, ids] of byOwner) await this.o.store.renew(ids, untilMs, owner);
    } catch (err) {
      // The rest of the maintenance pass still runs; the next pass tries again.
      return this.o.storeFailed("renewing leases failed; they may run out and their requests run again", { requests: due.length }, err);
    }
    for (const rid of due) {
      const r = this.running.get(rid);
      if (r !== undefined) r.untilMs = untilMs;
    }
  }

  /** Aborts every dispatch (stop). */
  abortAll(): void {
    this.stopper.abort();
    for (const f of this.fences.values()) f.abort();
  }

  /** The heartbeat and owner opening in progress, if any (stop waits for them). */
  pending(): Promise<unknown>[] {
    const out: Promise<unknown>[] = [];
    if (this.beating !== undefined) out.push(this.beating);
    if (this.opening !== undefined) out.push(this.opening);
    return out;
  }
}
