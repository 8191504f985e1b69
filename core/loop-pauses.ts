/**
 * This process's own pauses (issue 49 item 3): spans during which its event loop did not run — a long synchronous
 * task, a GC pause, a host too busy to schedule it, a SIGSTOP. Silence from a peer (an engine's tokens, a region's
 * telemetry) that such a span explains is this process's, not the peer's: stall rules subtract it before they blame
 * anyone (router/watchdog.ts, engines/openai-http/liveness.ts). After a pause a timer that judges silence can
 * run before the bytes that arrived meanwhile are read (Node runs due timers before it polls sockets), so the rule
 * must know about the pause it is in, not only those a probe has recorded: `pausedMs` counts the gap since the
 * probe's last tick too.
 *
 * A timer-drift probe (the technique of Node's `perf_hooks.monitorEventLoopDelay` and of every "event loop lag"
 * monitor, kept here as spans in time rather than a histogram, since a rule needs to know when the loop stood still):
 * a tick is due every `probeMs`; a tick `lag` ms late means the loop stood still for those ms. Lags of `minPauseMs`
 * or more are kept as spans for `horizonMs` (at most `maxSpans`).
 *
 * `LoopPauseLedger` is pure (fed ticks with their times; tests drive it on any clock); `processLoopPauses()` is the
 * one probe of this process, on Node's timers and Date.now (WallClock's time), started on first use and unref'd.
 */

/** A span [startMs, endMs) during which the event loop did not run. */
export interface PauseSpan {
  startMs: number;
  endMs: number;
}

export interface LoopPauseOptions {
  /** How often a tick is due (ms, > 0). */
  probeMs: number;
  /** A tick at least this late records a pause (ms, ≥ 0): smaller lags are ordinary scheduling noise. */
  minPauseMs: number;
  /** Spans older than this are forgotten (ms): longer than any silence a rule judges. */
  horizonMs: number;
  /** At most this many spans are kept (oldest dropped first). */
  maxSpans: number;
}

/** The process probe's settings: a tick every 50 ms; lags of 20 ms or more; two minutes of spans. */
export const PROCESS_PAUSE_OPTIONS: LoopPauseOptions = { probeMs: 50, minPauseMs: 20, horizonMs: 120_000, maxSpans: 8192 };

/** The pauses a probe's ticks reveal (see the file comment). Pure: times come with the calls. */
export class LoopPauseLedger {
  private readonly spans: PauseSpan[] = [];
  private lastTickMs: number;
  /** Total paused ms recorded so far (for metrics and logs). */
  totalPausedMs = 0;
  /** The longest pause recorded so far (ms). */
  longestMs = 0;

  constructor(
    private readonly o: LoopPauseOptions,
    startMs: number,
  ) {
    if (!(o.probeMs > 0) || !(o.minPauseMs >= 0) || !(o.horizonMs > 0) || !(o.maxSpans >= 1)) throw new RangeError(`loop pause ledger: bad options ${JSON.stringify(o)}`);
    this.lastTickMs = startMs;
  }

  /** The probe's tick ran at `nowMs`: a tick later than due records the lag as a pause. */
  tick(nowMs: number): void {
    const span = this.gap(nowMs);
    this.lastTickMs = Math.max(this.lastTickMs, nowMs);
    if (span === undefined) return;
    this.spans.push(span);
    const len = span.endMs - span.startMs;
    this.totalPausedMs += len;
    if (len > this.longestMs) this.longestMs = len;
    const horizon = nowMs - this.o.horizonMs;
    let drop = 0;
    while (drop < this.spans.length && (this.spans[drop]!.endMs < horizon || this.spans.length - drop > this.o.maxSpans)) drop++;
    if (drop > 0) this.spans.splice(0, drop);
  }

  /**
   * Milliseconds of [sinceMs, nowMs] during which the loop stood still: the recorded spans, and the pause under way
   * when the probe's tick is overdue by `minPauseMs` or more (the caller runs first after a pause).
   */
  pausedMs(sinceMs: number, nowMs: number): number {
    if (!(nowMs > sinceMs)) return 0;
    let sum = overlap(this.gap(nowMs), sinceMs, nowMs);
    for (let i = this.spans.length - 1; i >= 0; i--) {
      const s = this.spans[i]!;
      if (s.endMs <= sinceMs) break;
      sum += overlap(s, sinceMs, nowMs);
    }
    return Math.min(sum, nowMs - sinceMs);
  }

  /** The recorded spans, oldest first (tests, logs). */
  recorded(): readonly PauseSpan[] {
    return this.spans;
  }

  /** The pause the tick due after the last one reveals at `nowMs`, if it is late enough to count. */
  private gap(nowMs: number): PauseSpan | undefined {
    const dueMs = this.lastTickMs + this.o.probeMs;
    return nowMs - dueMs >= this.o.minPauseMs && nowMs - dueMs > 0 ? { startMs: dueMs, endMs: nowMs } : undefined;
  }
}

function overlap(s: PauseSpan | undefined, fromMs: number, toMs: number): number {
  if (s === undefined) return 0;
  return Math.max(0, Math.min(s.endMs, toMs) - Math.max(s.startMs, fromMs));
}

let processLedger: LoopPauseLedger | undefined;

/**
 * This process's pause ledger on Date.now (WallClock's time), its probe started on the first call: one interval timer
 * per process, unref'd (it never keeps the process alive). The event loop is the process's, so every WallClock shares it.
 */
export function processLoopPauses(): LoopPauseLedger {
  if (processLedger === undefined) {
    const ledger = new LoopPauseLedger(PROCESS_PAUSE_OPTIONS, Date.now());
    setInterval(() => ledger.tick(Date.now()), PROCESS_PAUSE_OPTIONS.probeMs).unref();
    processLedger = ledger;
  }
  return processLedger;
}
