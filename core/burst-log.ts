/**
 * One log line per burst of like events (issue 49 item 3): a region that stalls ends every stream on it at once, and a
 * line per stream (84 warnings for one burst, measured) hides the one fact an operator needs. `note` counts an event
 * under a key (e.g. the region and the error code) and keeps the first one's fields as an example; the burst ends
 * once no event came for `quietMs` (or `maxMs` after it began, so a storm still reports), and then one line is logged
 * at `level` with `count`, `byKey`, `first` (the first event's fields) and `spanMs` (first to last event). Pure over
 * a Clock; one timer while a burst is open.
 */
import type { Clock, Timer } from "./clock.js";
import type { Logger } from "./log.js";

export interface BurstLogOptions {
  clock: Clock;
  log: Logger;
  /** The summary line's message, e.g. "router: streams failed after their first token". */
  msg: string;
  level?: "info" | "warn" | "error";
  /** The burst ends after this long without an event (ms, > 0; default 1000). */
  quietMs?: number;
  /** …or this long after it began, whatever comes (ms, ≥ quietMs; default 10 000). */
  maxMs?: number;
}

/** See the file comment. */
export class BurstLog {
  private count = 0;
  private byKey = new Map<string, number>();
  private first: Record<string, unknown> | undefined;
  private startMs = 0;
  private lastMs = 0;
  private timer: Timer | undefined;
  private readonly quietMs: number;
  private readonly maxMs: number;

  constructor(private readonly o: BurstLogOptions) {
    this.quietMs = o.quietMs ?? 1000;
    this.maxMs = o.maxMs ?? 10_000;
    if (!(this.quietMs > 0) || !(this.maxMs >= this.quietMs)) throw new RangeError(`burst log: need 0 < quietMs ≤ maxMs, got ${this.quietMs}, ${this.maxMs}`);
  }

  /** One event under `key`; `fields` describe it (kept for the summary when it is the burst's first). */
  note(key: string, fields: Record<string, unknown>): void {
    const now = this.o.clock.now();
    if (this.count === 0) {
      this.startMs = now;
      this.first = fields;
      this.timer = this.o.clock.after(this.quietMs, () => this.check());
    }
    this.count++;
    this.lastMs = now;
    this.byKey.set(key, (this.byKey.get(key) ?? 0) + 1);
  }

  /** Logs the open burst now, if any (on close). */
  flush(): void {
    this.timer?.cancel();
    this.timer = undefined;
    if (this.count === 0) return;
    const line = { count: this.count, byKey: Object.fromEntries(this.byKey), first: this.first, spanMs: Math.round(this.lastMs - this.startMs) };
    this.count = 0;
    this.byKey = new Map();
    this.first = undefined;
    this.o.log[this.o.level ?? "warn"](this.o.msg, line);
  }

  private check(): void {
    this.timer = undefined;
    const now = this.o.clock.now();
    const quietFor = now - this.lastMs;
    if (quietFor >= this.quietMs || now - this.startMs >= this.maxMs) return this.flush();
    this.timer = this.o.clock.after(Math.min(this.quietMs - quietFor, this.startMs + this.maxMs - now), () => this.check());
  }
}
