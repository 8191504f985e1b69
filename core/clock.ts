/**
 * The `Clock` port. Every policy in tidegate takes time from a Clock, never from `Date.now()` or timers, so the
 * same code runs live (WallClock) and in replay (VirtualClock). All times are milliseconds.
 */
import { processLoopPauses } from "./loop-pauses.js";

/** A scheduled callback that can be cancelled. Cancelling twice or after it fired is a no-op. */
export interface Timer {
  cancel(): void;
}

export interface Clock {
  /** Milliseconds since the Unix epoch (wall) or since the start of the replay (virtual). */
  now(): number;
  /** Resolves after `delayMs` (≥ 0); rejects with the signal's reason if `signal` aborts first. */
  sleep(delayMs: number, signal?: AbortSignal): Promise<void>;
  /** Runs `fn` once after `delayMs` (≥ 0). */
  after(delayMs: number, fn: () => void): Timer;
  /** Runs `fn` every `intervalMs` (> 0), first after one interval. */
  every(intervalMs: number, fn: () => void): Timer;
  /**
   * Optional: the milliseconds of [sinceMs, now()] during which this process's event loop stood still (core/loop-pauses.ts:
   * a long task, GC, a busy host, SIGSTOP). A peer's silence within them is this process's own. Absent: never (virtual time).
   */
  pausedMs?(sinceMs: number): number;
}

/**
 * How long `sinceMs` is ago in time this process was running to notice anything (now − sinceMs, less its own pauses,
 * `Clock.pausedMs`): what a stall rule holds against a peer (issue 49 item 3).
 */
export function awakeMsSince(clock: Clock, sinceMs: number): number {
  const elapsed = clock.now() - sinceMs;
  if (!(elapsed > 0)) return Math.max(0, elapsed);
  return elapsed - Math.min(elapsed, clock.pausedMs?.(sinceMs) ?? 0);
}

export function checkDelay(delayMs: number, name: string): void {
  if (!Number.isFinite(delayMs) || delayMs < 0) throw new RangeError(`${name} must be a finite number ≥ 0, got ${delayMs}`);
}

function abortReason(signal: AbortSignal): unknown {
  return signal.reason ?? new DOMException("aborted", "AbortError");
}

/**
 * `every` for the event-queue clocks: each tick re-arms itself with `after` before running `fn`; since a callback
 * reads the time it was due, the ticks stay on their grid (no drift however late a timer fires).
 */
export function everyBy(clock: Pick<Clock, "after">, intervalMs: number, fn: () => void): Timer {
  if (!(intervalMs > 0)) throw new RangeError(`intervalMs must be > 0, got ${intervalMs}`);
  let current: Timer;
  let stopped = false;
  const tick = () => {
    if (stopped) return;
    current = clock.after(intervalMs, tick);
    fn();
  };
  current = clock.after(intervalMs, tick);
  return {
    cancel: () => {
      stopped = true;
      current.cancel();
    },
  };
}

/** `sleep` for the event-queue clocks, on `after`. */
export function sleepBy(clock: Pick<Clock, "after">, delayMs: number, signal?: AbortSignal): Promise<void> {
  checkDelay(delayMs, "delayMs");
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(abortReason(signal));
    const onAbort = () => {
      timer.cancel();
      reject(abortReason(signal!));
    };
    const timer = clock.after(delayMs, () => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    });
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/** The live clock: Date.now() and Node timers; its pauses are the process's (core/loop-pauses.ts, probe started here). */
export class WallClock implements Clock {
  private readonly pauses = processLoopPauses();

  now(): number {
    return Date.now();
  }

  pausedMs(sinceMs: number): number {
    return this.pauses.pausedMs(sinceMs, Date.now());
  }

  sleep(delayMs: number, signal?: AbortSignal): Promise<void> {
    checkDelay(delayMs, "delayMs");
    return new Promise((resolve, reject) => {
      if (signal?.aborted) return reject(abortReason(signal));
      const onAbort = () => {
        clearTimeout(handle);
        reject(abortReason(signal!));
      };
      const handle = setTimeout(() => {
        signal?.removeEventListener("abort", onAbort);
        resolve();
      }, delayMs);
      signal?.addEventListener("abort", onAbort, { once: true });
    });
  }

  after(delayMs: number, fn: () => void): Timer {
    checkDelay(delayMs, "delayMs");
    const handle = setTimeout(fn, delayMs);
    return { cancel: () => clearTimeout(handle) };
  }

  every(intervalMs: number, fn: () => void): Timer {
    if (!(intervalMs > 0)) throw new RangeError(`intervalMs must be > 0, got ${intervalMs}`);
    const handle = setInterval(fn, intervalMs);
    return { cancel: () => clearInterval(handle) };
  }
}

interface VirtualEvent {
  atMs: number;
  seq: number;
  fn: () => void;
  cancelled: boolean;
}

/**
 * A discrete-event clock. Time moves only when `advanceTo`/`advanceBy`/`runUntilIdle` is called; events fire in
 * (time, insertion order). Callbacks may schedule more events, including at the current time.
 *
 * `sleep()` resolves through a promise, so code awaiting it continues on a microtask after its event fires; the
 * advance loop drains microtasks between events (`await Promise.resolve()` chains up to `microtaskTurns`), which
 * is enough for ordinary async policies. Hot replay paths should use `after()` callbacks, not promises.
 */
export class VirtualClock implements Clock {
  private nowMs: number;
  private seq = 0;
  private readonly heap: VirtualEvent[] = [];
  /** Number of events fired so far (for replay statistics). */
  firedEvents = 0;

  constructor(startMs = 0) {
    checkDelay(startMs, "startMs");
    this.nowMs = startMs;
  }

  now(): number {
    return this.nowMs;
  }

  /** Number of pending (not yet fired, possibly cancelled) events. */
  get pending(): number {
    return this.heap.length;
  }

  /** Time of the next pending event, or undefined. */
  nextEventMs(): number | undefined {
    this.dropCancelledTop();
    return this.heap[0]?.atMs;
  }

  after(delayMs: number, fn: () => void): Timer {
    checkDelay(delayMs, "delayMs");
    return this.at(this.nowMs + delayMs, fn);
  }

  /** Schedules `fn` at absolute virtual time `atMs` (clamped to now). */
  at(atMs: number, fn: () => void): Timer {
    const ev: VirtualEvent = { atMs: Math.max(atMs, this.nowMs), seq: this.seq++, fn, cancelled: false };
    this.push(ev);
    return { cancel: () => void (ev.cancelled = true) };
  }

  every(intervalMs: number, fn: () => void): Timer {
    return everyBy(this, intervalMs, fn);
  }

  sleep(delayMs: number, signal?: AbortSignal): Promise<void> {
    return sleepBy(this, delayMs, signal);
  }

  /**
   * Fires every event with time ≤ `targetMs` synchronously (no microtask draining) and leaves the clock at
   * `targetMs`. Use for callback-driven code; returns the number of events fired.
   */
  advanceToSync(targetMs: number): number {
    let fired = 0;
    while (this.fireNext(targetMs)) fired++;
    return this.settle(targetMs, fired);
  }

  /** Like advanceToSync, but drains pending microtasks after each event so awaiting code makes progress. */
  async advanceTo(targetMs: number, microtaskTurns = 20): Promise<number> {
    let fired = 0;
    await drain(microtaskTurns);
    while (this.fireNext(targetMs)) {
      fired++;
      await drain(microtaskTurns);
    }
    return this.settle(targetMs, fired);
  }

  /** Fires the earliest live event due at or before `targetMs`, moving the clock to it; false when there is none. */
  private fireNext(targetMs: number): boolean {
    this.dropCancelledTop();
    const top = this.heap[0];
    if (top === undefined || top.atMs > targetMs) return false;
    this.pop();
    this.nowMs = top.atMs;
    top.fn();
    return true;
  }

  /** Leaves the clock at `targetMs` (never back) after `fired` events; returns `fired`. */
  private settle(targetMs: number, fired: number): number {
    if (targetMs > this.nowMs) this.nowMs = targetMs;
    this.firedEvents += fired;
    return fired;
  }

  advanceBy(deltaMs: number, microtaskTurns = 20): Promise<number> {
    checkDelay(deltaMs, "deltaMs");
    return this.advanceTo(this.nowMs + deltaMs, microtaskTurns);
  }

  /** Fires the next pending event alone (the clock moves to its time); false when none is pending. */
  step(): boolean {
    this.dropCancelledTop();
    const top = this.pop();
    if (top === undefined) return false;
    this.nowMs = top.atMs;
    this.firedEvents++;
    top.fn();
    return true;
  }

  /** Runs events until none is left or `limitMs` is reached; returns the number fired. */
  runUntilIdleSync(limitMs = Number.POSITIVE_INFINITY): number {
    let fired = 0;
    for (;;) {
      const next = this.nextEventMs();
      if (next === undefined || next > limitMs) break;
      fired += this.advanceToSync(next);
    }
    return fired;
  }

  private dropCancelledTop(): void {
    while (this.heap.length > 0 && this.heap[0]!.cancelled) this.pop();
  }

  private less(a: VirtualEvent, b: VirtualEvent): boolean {
    return a.atMs < b.atMs || (a.atMs === b.atMs && a.seq < b.seq);
  }

  private push(ev: VirtualEvent): void {
    const h = this.heap;
    h.push(ev);
    let i = h.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!this.less(h[i]!, h[parent]!)) break;
      [h[i], h[parent]] = [h[parent]!, h[i]!];
      i = parent;
    }
  }

  private pop(): VirtualEvent | undefined {
    const h = this.heap;
    const top = h[0];
    const last = h.pop();
    if (h.length > 0 && last !== undefined) {
      h[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < h.length && this.less(h[l]!, h[m]!)) m = l;
        if (r < h.length && this.less(h[r]!, h[m]!)) m = r;
        if (m === i) break;
        [h[i], h[m]] = [h[m]!, h[i]!];
        i = m;
      }
    }
    return top;
  }
}

async function drain(turns: number): Promise<void> {
  for (let i = 0; i < turns; i++) await Promise.resolve();
}
