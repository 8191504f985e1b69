/**
 * ScaledClock: a test clock (test/e2e/live-vs-replay.test.ts runs real processes on it), kept under test/ since no
 * production command runs on it (core/clock.ts has the Clock port, WallClock and VirtualClock).
 */
import { VirtualClock, checkDelay, everyBy, sleepBy, type Clock, type Timer } from "../../core/clock.js";

/**
 * Scaled live time (the live-versus-replay test): the wall clock run `speed` times faster from `originMs`, its
 * timers real Node timers. It keeps one discrete-event queue (a VirtualClock) and fires one due
 * event per macrotask, so promise continuations run between events as they do under real timers. Two rules make
 * timer lateness (which the speed multiplies) invisible to policies without hiding real time:
 * - inside a timer callback, and in the promise continuations it sets off in the same turn of the event loop, `now()`
 *   is the time the callback was due (the rule SimEngineCore already applies to a late arrival: "the time it
 *   meant"), so periodic loops — controller passes, telemetry, engine phases — read the same instants live as in
 *   replay;
 * - outside callbacks (socket I/O: an HTTP request, a gRPC message) `now()` is the scaled wall time, except that it
 *   never passes a timer that is due and has not fired yet: while one is late, time stands at the last fired event.
 * Time never goes backwards. Callback exceptions propagate as under WallClock (after the next event is armed).
 * Keep `originMs` small (0, as a replay starts): policies compute absolute due times, and near an epoch-sized origin
 * (≈1.8e12 ms, where one float step is 2.4e-4 ms) a time computed elsewhere can round a hair past the callback's
 * nominal time, which under the first rule never catches up — the simulated engine's token loop then re-arms at
 * the same instant forever. Under WallClock real time moves on and hides that rounding; this is why `tidegate dev`
 * has no speed flag yet.
 */
export class ScaledClock implements Clock {
  private readonly events: VirtualClock;
  /** performance.now() when the clock started; undefined while it is held at `originMs` (see `start`). */
  private wall0: number | undefined;
  private last: number;
  private firing = false;
  private handle: ReturnType<typeof setTimeout> | undefined;
  private immediate: ReturnType<typeof setImmediate> | undefined;
  private armedForMs: number | undefined;

  /**
   * `held`: time stays at `originMs` until `start()` — a process can build everything it schedules at the origin
   * (periodic loops then tick on the same grid as a replay starting there) before time begins to run.
   */
  constructor(
    readonly speed = 1,
    readonly originMs = 0,
    opts: { held?: boolean } = {},
  ) {
    if (!(speed > 0 && Number.isFinite(speed))) throw new RangeError(`speed must be a finite number > 0, got ${speed}`);
    checkDelay(originMs, "originMs");
    this.events = new VirtualClock(originMs);
    this.last = originMs;
    if (opts.held !== true) this.wall0 = performance.now();
  }

  /** Lets a held clock run (no-op otherwise). */
  start(): void {
    if (this.wall0 !== undefined) return;
    this.wall0 = performance.now();
    this.arm();
  }

  now(): number {
    if (this.firing) return this.events.now();
    const next = this.events.nextEventMs();
    const wall = this.wallMs();
    const t = next !== undefined && wall >= next ? this.events.now() : wall;
    if (t > this.last) this.last = t;
    return this.last;
  }

  after(delayMs: number, fn: () => void): Timer {
    checkDelay(delayMs, "delayMs");
    return this.at(this.now() + delayMs, fn);
  }

  /** Runs `fn` at clock time `atMs` (clamped to now). */
  at(atMs: number, fn: () => void): Timer {
    const t = this.events.at(Math.max(atMs, this.now()), fn);
    this.arm();
    return {
      cancel: () => {
        t.cancel();
        // A cancelled head would only wake the pump early; it re-arms for the next live event then.
      },
    };
  }

  every(intervalMs: number, fn: () => void): Timer {
    return everyBy(this, intervalMs, fn);
  }

  sleep(delayMs: number, signal?: AbortSignal): Promise<void> {
    return sleepBy(this, delayMs, signal);
  }

  /** Stops the pump (pending events never fire). */
  close(): void {
    if (this.handle !== undefined) clearTimeout(this.handle);
    if (this.immediate !== undefined) clearImmediate(this.immediate);
    this.handle = undefined;
    this.immediate = undefined;
    this.armedForMs = undefined;
  }

  private wallMs(): number {
    return this.wall0 === undefined ? this.originMs : this.originMs + (performance.now() - this.wall0) * this.speed;
  }

  /** One Node timer, for the earliest pending event. */
  private arm(): void {
    // Held, or inside an event's turn (its release arms the next one).
    if (this.wall0 === undefined || this.firing) return;
    const next = this.events.nextEventMs();
    if (next === undefined) return this.close();
    if ((this.handle !== undefined || this.immediate !== undefined) && this.armedForMs !== undefined && this.armedForMs <= next) return;
    this.close();
    this.armedForMs = next;
    this.handle = setTimeout(() => this.pump(), Math.max(0, (next - this.wallMs()) / this.speed));
  }

  /**
   * Fires one due event. Until the next check phase of the event loop (setImmediate) time stays at its due time, so
   * the promise continuations it sets off read that time too; then the next due event fires, or the timer is armed.
   */
  private pump(): void {
    this.close();
    const next = this.events.nextEventMs();
    if (next === undefined) return;
    if (next > this.wallMs()) return this.arm();
    this.firing = true;
    try {
      this.events.step();
    } finally {
      if (this.events.now() > this.last) this.last = this.events.now();
      this.immediate = setImmediate(() => {
        this.immediate = undefined;
        this.firing = false;
        const following = this.events.nextEventMs();
        if (following !== undefined && following <= this.wallMs()) this.pump();
        else this.arm();
      });
    }
  }
}
