/**
 * Groups results that finish close together into one `QueueStore.completeMany` call (one Lua script for the group),
 * waiting at most `lingerMs` on the injected Clock or until `maxGroup` results are pending. Each result is still
 * written exactly once by request id; a failed store call is retried for the whole group (idempotent), then each
 * caller's promise rejects and the request's lease returns it to the queue. While the store is unavailable (Redis
 * down: `queue_unavailable`) the group keeps retrying for up to `unavailableRetryMs`, so a short outage costs no
 * finished work.
 */
import type { Clock, Timer } from "../../core/clock.js";
import { isTidegateError } from "../../core/errors.js";
import type { QueueCode, QueueStore, RequestResult } from "../queue/types.js";

export interface ResultWriterOptions {
  store: QueueStore;
  clock: Clock;
  /** Longest a result waits for company (≥ 0; 0 = only results written in the same turn); default 2 ms. */
  lingerMs?: number;
  /** Results per store call (≥ 1); default 32 (bounds how long one script holds Redis). */
  maxGroup?: number;
  /** Store attempts per group (≥ 1); default 4, with 100·2^k ms between them. */
  attempts?: number;
  /** How long a group keeps retrying while the store is unavailable (≥ 0), every 250 ms to 2 s; default 60 000 ms. */
  unavailableRetryMs?: number;
}

interface Pending {
  requestId: string;
  result: RequestResult;
  owner: number | undefined;
  resolve(code: QueueCode): void;
  reject(err: unknown): void;
}

export class ResultWriter {
  private pending: Pending[] = [];
  private timer: Timer | undefined;
  private readonly lingerMs: number;
  private readonly maxGroup: number;
  private readonly attempts: number;
  private readonly unavailableRetryMs: number;
  private readonly inflight = new Set<Promise<void>>();

  constructor(private readonly o: ResultWriterOptions) {
    this.lingerMs = o.lingerMs ?? 2;
    this.maxGroup = o.maxGroup ?? 32;
    this.attempts = o.attempts ?? 4;
    this.unavailableRetryMs = o.unavailableRetryMs ?? 60_000;
    if (!(this.lingerMs >= 0) || !(this.maxGroup >= 1) || !(this.attempts >= 1) || !(this.unavailableRetryMs >= 0)) {
      throw new RangeError("lingerMs ≥ 0, maxGroup ≥ 1, attempts ≥ 1, unavailableRetryMs ≥ 0");
    }
  }

  /** Queues one result (written under lease owner `owner`, when given: QueueStore fencing); resolves to its code once written. */
  write(requestId: string, result: RequestResult, owner?: number): Promise<QueueCode> {
    return new Promise((resolve, reject) => {
      this.pending.push({ requestId, result, owner, resolve, reject });
      if (this.pending.length >= this.maxGroup) this.flush();
      else if (this.lingerMs === 0) {
        // No linger: group only what is written in this same turn (no timer, so a paused VirtualClock is fine).
        if (this.pending.length === 1) queueMicrotask(() => this.flush());
      } else this.timer ??= this.o.clock.after(this.lingerMs, () => this.flush());
    });
  }

  /** Sends what is pending now. */
  flush(): void {
    this.timer?.cancel();
    this.timer = undefined;
    if (this.pending.length === 0) return;
    const group = this.pending;
    this.pending = [];
    const p = this.send(group).finally(() => this.inflight.delete(p));
    this.inflight.add(p);
  }

  /** Flushes and waits for every group in flight. */
  async drain(): Promise<void> {
    this.flush();
    while (this.inflight.size > 0) await Promise.allSettled([...this.inflight]);
  }

  private async send(group: Pending[]): Promise<void> {
    const started = this.o.clock.now();
    let waitMs = 250;
    for (let attempt = 1; ; ) {
      try {
        const codes = await this.o.store.completeMany(group.map((g) => ({ requestId: g.requestId, result: g.result, ...(g.owner === undefined ? {} : { owner: g.owner }) })), this.o.clock.now());
        group.forEach((g, i) => g.resolve(codes[i]!));
        return;
      } catch (err) {
        if (isTidegateError(err, "queue_unavailable") && this.o.clock.now() - started < this.unavailableRetryMs) {
          // An outage does not use up the attempts meant for errors the store answers with.
          await this.o.clock.sleep(waitMs);
          waitMs = Math.min(2 * waitMs, 2000);
          continue;
        }
        if (attempt >= this.attempts) {
          for (const g of group) g.reject(err);
          return;
        }
        await this.o.clock.sleep(100 * 2 ** (attempt - 1));
        attempt++;
      }
    }
  }
}
