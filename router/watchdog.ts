/**
 * The router's stream watchdog (issue 15 item 1, issue 32 item 3): one sweep on the router's Clock over every open
 * upstream wait, so that nothing a region does — dying, freezing (SIGSTOP), a half-open TCP connection — keeps a
 * client waiting without bound, and the hot path pays an assignment per event, not a timer.
 *
 * - Before the first event: the wait is given up as soon as the region stops being available to the selector
 *   (telemetry older than `router.telemetryStaleMs`, its link reported down, or no serving instance of the model;
 *   `RegionSelector.candidate`), so the request is retried in the next region (`region_down`).
 * - After it, a stream is given up as stalled when either holds:
 *   - its region stopped reporting (telemetry older than `telemetryStaleMs`, or the link down) and the stream has sent
 *     nothing for 4 × the model's expected inter-token time (`pace.ts` tbtMs, 142 ms for llama3.2-3b on 2 × h100):
 *     the process stopped, and its streams with it (`region_stalled`). A frozen region's streams end about
 *     `telemetryStaleMs` (1.5 s) + one sweep after it stopped.
 *   - nothing for `router.streamStallMs` (10 s by default) while the region still reports (`stalled`). Not shorter: an
 *     engine short of KV memory preempts running requests and recomputes them later, so a healthy stream on a region
 *     that reports can be silent for seconds (pace.ts). An engine that stopped under a live region is the region's
 *     to detect (issue 32, item 2).
 * - Before any event: nothing for `stallMs` (`router.streamStallMs`, 10 s by default) ends the wait.
 *
 * Every silence is measured in time this process was running (issue 49 item 3; `awakeMsSince`, core/loop-pauses.ts):
 * the router's own pauses — a long task, GC, a busy host, a SIGSTOP of the router or of `tidegate dev` as a whole —
 * are taken off both a stream's silence and its region's telemetry age, so a sweep that runs first after a pause,
 * before the bytes that arrived meanwhile are read, blames nobody. And a region is stalled only when the region is
 * silent: its telemetry stale and no stream on it sent anything for the stream's region-stall bound — one late token
 * on a region whose other streams flow is not a stall.
 *
 * Each watched wait has a `stalled` promise that rejects with a TidegateError (`upstream_error`, its message saying
 * the region stalled and for how long) when a rule fires; router/relay.ts races it against the first event, and
 * afterwards aborts the upstream dispatch when it rejects (so the pending `next()` fails with this error), which costs
 * the hot path nothing per event. Sweep period: min(250 ms, stallMs / 4).
 */
import { awakeMsSince, type Clock, type Timer } from "../core/clock.js";
import { TidegateError } from "../core/errors.js";
import type { ModelName, RegionName } from "../core/models.js";
import type { TokenPace } from "./pace.js";

/** Why a wait was given up (the `reason` label of tidegate_router_watchdog_fired_total). */
export type WatchdogReason = "stalled" | "region_stalled" | "region_down";

export const WATCHDOG_REASONS: readonly WatchdogReason[] = ["stalled", "region_stalled", "region_down"];

/** A running stream whose region stopped reporting ends after this many expected inter-token times of silence. */
export const REGION_STALL_TBTS = 4;

/** One watched upstream wait. `touch()` on every event; `close()` when the stream is over. */
export interface Watched {
  /** Rejects (never resolves) when the wait is given up; a rejection nobody awaits is handled. */
  readonly stalled: Promise<never>;
  /** Records an event now (resets the stall limit). */
  touch(): void;
  /** After the first event the region's availability no longer ends the wait (its telemetry age and the stall limit do). */
  started(): void;
  /**
   * `err`, the link's own failure of this stream, restated as a stall when the stream had been silent for longer
   * than its region-stall bound before it and the region stopped reporting (e.g. the dispatch connection's
   * unanswered ping after a peer froze), so the client reads that the peer stalled; otherwise `err` itself.
   */
  explain(err: unknown): unknown;
  /** Stops watching (idempotent). */
  close(): void;
}

interface Entry {
  region: RegionName;
  model: ModelName;
  lastAtMs: number;
  started: boolean;
  /** Silence before the first event after which the wait is stalled (ms): stallMs, plus a cold start's hold. */
  firstLimitMs: number;
  /** Silence after which a started stream on a region that stopped reporting is stalled (ms). */
  regionQuietMs: number;
  /** Silence after which a started stream is stalled regardless (ms). */
  limitMs: number;
  reject: (err: TidegateError) => void;
}

export interface WatchdogOptions {
  clock: Clock;
  /** Nothing from upstream for longer than this ends any wait (ms, > 0; `router.streamStallMs`, the ceiling). */
  stallMs: number;
  /** Whether (region, model) can still be chosen now; false gives up a wait for the first event. */
  available: (region: RegionName, model: ModelName) => boolean;
  /** Milliseconds since the region's last telemetry; undefined when it has none (never reported, or its link is down). */
  telemetryAgeMs?: (region: RegionName) => number | undefined;
  /** Telemetry older than this means the region stopped reporting (`router.telemetryStaleMs`, > 0). Needed with `telemetryAgeMs`. */
  telemetryStaleMs?: number;
  /**
   * Extra time a wait for the first event may take on (region, model) when watched (ms): a region that holds the
   * request while it scales the model from zero (issue 33) answers after its hold (`controller.scaleToZero.holdMs`)
   * at the latest. Absent or 0: `stallMs`.
   */
  firstEventExtraMs?: (region: RegionName, model: ModelName) => number;
  /** The model's token pace (pace.ts); undefined for a model without one. Absent: `stallMs` alone limits a started stream. */
  pace?: (model: ModelName) => TokenPace | undefined;
}

export class StreamWatchdog {
  private readonly entries = new Set<Entry>();
  private timer: Timer | undefined;
  private readonly sweepMs: number;
  private readonly limits = new Map<ModelName, { regionQuietMs: number; limitMs: number }>();
  /** Waits given up so far, by reason (for tests and metrics). */
  readonly fired = { stalled: 0, regionStalled: 0, regionDown: 0 };
  /** Called once per given-up wait (metrics). */
  onFire: ((region: RegionName, model: ModelName, reason: WatchdogReason) => void) | undefined;

  constructor(private readonly opts: WatchdogOptions) {
    if (!(opts.stallMs > 0)) throw new RangeError(`stallMs must be > 0, got ${opts.stallMs}`);
    if (opts.telemetryAgeMs !== undefined && !((opts.telemetryStaleMs ?? 0) > 0)) throw new RangeError(`telemetryStaleMs must be > 0 with telemetryAgeMs, got ${opts.telemetryStaleMs}`);
    this.sweepMs = Math.max(1, Math.min(250, Math.floor(opts.stallMs / 4)));
  }

  /** Watched waits now. */
  get size(): number {
    return this.entries.size;
  }

  /**
   * The silences (ms) after which a started stream of `model` is stalled: `regionQuietMs` once its region stopped
   * reporting, `limitMs` in any case. See the file's header.
   */
  limitsFor(model: ModelName): { regionQuietMs: number; limitMs: number } {
    let l = this.limits.get(model);
    if (l === undefined) {
      const pace = this.opts.pace?.(model);
      const staleMs = this.opts.telemetryStaleMs ?? this.opts.stallMs;
      l = pace === undefined
        ? { regionQuietMs: staleMs, limitMs: this.opts.stallMs }
        : { regionQuietMs: REGION_STALL_TBTS * pace.tbtMs, limitMs: this.opts.stallMs };
      this.limits.set(model, l);
    }
    return l;
  }

  /** Starts watching a wait on (region, model). */
  watch(region: RegionName, model: ModelName): Watched {
    let reject!: (err: TidegateError) => void;
    const stalled = new Promise<never>((_, rej) => (reject = rej));
    stalled.catch(() => undefined);
    const firstLimitMs = this.opts.stallMs + Math.max(0, this.opts.firstEventExtraMs?.(region, model) ?? 0);
    const e: Entry = { region, model, lastAtMs: this.opts.clock.now(), started: false, firstLimitMs, ...this.limitsFor(model), reject };
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
      explain: (err) => {
        const quietMs = awakeMsSince(clock, e.lastAtMs);
        // A region that still reports is alive: its failure (e.g. "instance … stopped answering") is its own word.
        if (!e.started || quietMs <= e.regionQuietMs || !this.silentRegion(region).silent) return err;
        const why = err instanceof Error ? err.message : String(err);
        return new TidegateError("upstream_error", `region ${region} stalled: nothing on this stream for ${Math.round(quietMs)} ms, then its link failed (${why})`, { cause: err });
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

  /**
   * Whether `region` stopped reporting: its telemetry, aged in time this process was running (less its own pauses),
   * is older than telemetryStaleMs, or it has none. `ownPause`: stale by the wall clock but not once this process's
   * pauses are taken off (its telemetry waits unread behind the pause).
   */
  private silentRegion(region: RegionName): { silent: boolean; ageMs: number | undefined; ownPause: boolean } {
    if (this.opts.telemetryAgeMs === undefined) return { silent: false, ageMs: undefined, ownPause: false };
    const rawMs = this.opts.telemetryAgeMs(region);
    if (rawMs === undefined) return { silent: true, ageMs: undefined, ownPause: false };
    const ageMs = awakeMsSince(this.opts.clock, this.opts.clock.now() - rawMs);
    const stale = this.opts.telemetryStaleMs!;
    return { silent: ageMs > stale, ageMs, ownPause: rawMs > stale && ageMs <= stale };
  }

  private fire(e: Entry, reason: WatchdogReason, message: string): void {
    this.remove(e);
    if (reason === "stalled") this.fired.stalled++;
    else if (reason === "region_stalled") this.fired.regionStalled++;
    else this.fired.regionDown++;
    this.onFire?.(e.region, e.model, reason);
    e.reject(new TidegateError("upstream_error", message));
  }

  /** One pass: gives up the waits whose region went away (before the first event) or that stalled. */
  sweep(): void {
    const clock = this.opts.clock;
    // Each region's last sign of life on a stream: a region one of whose streams flows is not stalled.
    const lastEventMs = new Map<RegionName, number>();
    for (const e of this.entries) if (e.started && e.lastAtMs > (lastEventMs.get(e.region) ?? Number.NEGATIVE_INFINITY)) lastEventMs.set(e.region, e.lastAtMs);
    for (const e of [...this.entries]) {
      const quietMs = awakeMsSince(clock, e.lastAtMs);
      if (!e.started) {
        if (quietMs > e.firstLimitMs) {
          this.fire(e, "stalled", `region ${e.region} stalled: no first event for ${Math.round(quietMs)} ms (stall limit ${e.firstLimitMs} ms)`);
        } else if (!this.opts.available(e.region, e.model)) {
          const { ageMs, ownPause } = this.silentRegion(e.region);
          // Unavailable only because this process stood still: its telemetry is read once the loop polls again.
          if (ownPause) continue;
          const detail = ageMs === undefined ? "no telemetry (link down)" : `telemetry ${Math.round(ageMs)} ms old, or no serving instance of ${e.model}`;
          this.fire(e, "region_down", `region ${e.region} stalled or went dark before the first token (${detail})`);
        }
        continue;
      }
      if (quietMs > e.limitMs) {
        this.fire(e, "stalled", `region ${e.region} stalled: no token for ${Math.round(quietMs)} ms while it still reports (stall limit ${e.limitMs} ms)`);
        continue;
      }
      if (quietMs > e.regionQuietMs && awakeMsSince(clock, lastEventMs.get(e.region) ?? e.lastAtMs) > e.regionQuietMs) {
        const { silent, ageMs } = this.silentRegion(e.region);
        if (silent) {
          const telemetry = ageMs === undefined ? "its link is down" : `no telemetry for ${Math.round(ageMs)} ms`;
          this.fire(e, "region_stalled", `region ${e.region} stalled: no token for ${Math.round(quietMs)} ms (expected one every ~${Math.round(e.regionQuietMs / REGION_STALL_TBTS)} ms) and ${telemetry}`);
        }
      }
    }
  }
}
