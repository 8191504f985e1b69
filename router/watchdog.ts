/**
 * The router's stream watchdog (issue 15, item 1): one sweep on the router's Clock over every open upstream wait,
 * so that nothing a region does — dying, freezing (SIGSTOP), a half-open TCP connection — keeps a client waiting
 * without bound, and the hot path pays an assignment per event, not a timer.
 *
 * - Before the first event: the wait is given up as soon as the region stops being available to the selector
 *   (telemetry stale or its link reported down; see `RegionSelector.candidate`), so the request is retried in the
 *   next region within the staleness bound (`router.telemetryStaleMs`, 2 s by default), not after the stall limit.
 * - Before any event: nothing received for `stallMs` (`router.streamStallMs`, 10 s by default) ends the wait.
 *
 * Each watched wait has a `stalled` promise that rejects with a TidegateError (`upstream_error`) when either
 * fires; router/relay.ts races it against the first event, and afterwards aborts the upstream dispatch when it
 * rejects (so the pending `next()` fails with this error), which costs the hot path nothing per event.
 * Sweep period: min(250 ms, stallMs / 4).
 */
import type { Clock, Timer } from "../core/clock.js";
import { TidegateError } from "../core/errors.js";
import type { ModelName, RegionName } from "../core/models.js";

/** One watched upstream wait. `touch()` on every event; `close()` when the stream is over. */
export interface Watched {
  /** Rejects (never resolves) when the wait is given up; a rejection nobody awaits is handled. */
  readonly stalled: Promise<never>;
  /** Records an event now (resets the stall limit). */
  touch(): void;
  /** After the first event the region's availability no longer ends the wait (only the stall limit does). */
  started(): void;
  /** Stops watching (idempotent). */
  close(): void;
}

interface Entry {
  region: RegionName;
  model: ModelName;
  lastAtMs: number;
  started: boolean;
  reject: (err: TidegateError) => void;
}

export interface WatchdogOptions {
  clock: Clock;
  /** Nothing from upstream for longer than this ends the wait (ms, > 0). */
  stallMs: number;
  /** Whether (region, model) can still be chosen now; false gives up a wait for the first event. */
  available: (region: RegionName, model: ModelName) => boolean;
}

export class StreamWatchdog {
  private readonly entries = new Set<Entry>();
  private timer: Timer | undefined;
  private readonly sweepMs: number;
  /** Waits given up so far, by reason (for tests and metrics). */
  readonly fired = { stalled: 0, regionDown: 0 };
  /** Called once per given-up wait (metrics). */
  onFire: ((region: RegionName, model: ModelName, reason: "stalled" | "region_down") => void) | undefined;

  constructor(private readonly opts: WatchdogOptions) {
    if (!(opts.stallMs > 0)) throw new RangeError(`stallMs must be > 0, got ${opts.stallMs}`);
    this.sweepMs = Math.max(1, Math.min(250, Math.floor(opts.stallMs / 4)));
  }

  /** Watched waits now. */
  get size(): number {
    return this.entries.size;
  }

  /** Starts watching a wait on (region, model). */
  watch(region: RegionName, model: ModelName): Watched {
    let reject!: (err: TidegateError) => void;
    const stalled = new Promise<never>((_, rej) => (reject = rej));
    stalled.catch(() => undefined);
    const e: Entry = { region, model, lastAtMs: this.opts.clock.now(), started: false, reject };
    this.entries.add(e);
    if (this.timer === undefined) this.timer = this.opts.clock.every(this.sweepMs, () => this.sweep());
    const clock = this.opts.clock;
    return {
      stalled,
      touch: () => {
        e.lastAtMs = clock.now();
      },
      started: () => {
        e.started = true;
      },
      close: () => this.remove(e),
    };
  }

  /** Stops the sweep; open waits are left as they are. */
  close(): void {
    this.timer?.cancel();
    this.timer = undefined;
    this.entries.clear();
  }

  private remove(e: Entry): void {
    if (!this.entries.delete(e)) return;
    if (this.entries.size === 0) {
      this.timer?.cancel();
      this.timer = undefined;
    }
  }

  /** One pass: gives up the waits whose region went away (before the first event) or that stalled. */
  sweep(): void {
    const now = this.opts.clock.now();
    for (const e of [...this.entries]) {
      if (now - e.lastAtMs > this.opts.stallMs) {
        this.remove(e);
        this.fired.stalled++;
        this.onFire?.(e.region, e.model, "stalled");
        e.reject(new TidegateError("upstream_error", `region ${e.region} sent nothing for ${now - e.lastAtMs} ms (stall limit ${this.opts.stallMs} ms)`));
      } else if (!e.started && !this.opts.available(e.region, e.model)) {
        this.remove(e);
        this.fired.regionDown++;
        this.onFire?.(e.region, e.model, "region_down");
        e.reject(new TidegateError("upstream_error", `region ${e.region} went dark before the first token (telemetry stale or link down)`));
      }
    }
  }
}
