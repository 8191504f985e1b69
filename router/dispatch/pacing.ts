/**
 * The Dispatcher's paced sends (DispatcherOptions `pace`, `paceGroup`): claimed requests waiting on the Clock for
 * their send time within the first half of a report interval. stop() cancels them (their leases are given back);
 * a fencing drops those leased to the fenced owner.
 */
import type { Clock, Timer } from "../../core/clock.js";
import type { ClaimedRequest } from "../queue/types.js";

/** Pacing spreads one report's requests over at most half of this (a region that reported long ago: 1 s). */
export const MAX_PACE_WINDOW_MS = 2000;

interface Waiting {
  timer: Timer;
  c: ClaimedRequest;
  resolve: (done?: Promise<void>) => void;
}

/** Claimed requests waiting for their paced send time. */
export class Pacer {
  private readonly waiting = new Set<Waiting>();

  constructor(private readonly clock: Clock) {}

  /** Runs `send` after `delayMs`; resolves when the send it started settles (or at once when cancelled). */
  after(delayMs: number, c: ClaimedRequest, send: () => Promise<void>): Promise<void> {
    return new Promise<void>((resolve) => {
      const entry: Waiting = {
        c,
        resolve,
        timer: this.clock.after(delayMs, () => {
          this.waiting.delete(entry);
          resolve(send()); // the send's own failure reaches the caller
        }),
      };
      this.waiting.add(entry);
    });
  }

  /** Cancels every wait; returns their requests (to give their leases back). */
  cancelAll(): ClaimedRequest[] {
    const out: ClaimedRequest[] = [];
    for (const p of this.waiting) {
      p.timer.cancel();
      out.push(p.c);
      p.resolve();
    }
    this.waiting.clear();
    return out;
  }

  /** Cancels the waits of requests leased to `owner` (fenced: another dispatcher owns them now). */
  dropOwner(owner: number): void {
    for (const p of [...this.waiting]) {
      if (p.c.owner !== owner) continue;
      p.timer.cancel();
      this.waiting.delete(p);
      p.resolve();
    }
  }
}
