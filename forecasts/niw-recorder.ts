/**
 * Batch (NIW) demand history for the planner's β buffer (DESIGN "Planner — History"; SageServe §5: F(m, r) adds
 * β × last hour's NIW tokens/s). The queue manager calls `record` for every batch request it dispatches (prompt +
 * max_tokens, the tokens the region commits to it, by the region it went to); each finished minute is written per
 * (model, region) as tokens/s — zero for a minute with nothing dispatched, so a quiet hour reads as 0, not as a gap.
 * Minutes are written once the clock has left them (a timer every minute, and `stop`).
 */
import type { Clock, Timer } from "../core/clock.js";
import type { Logger } from "../core/log.js";
import { silentLogger } from "../core/log.js";
import { MINUTE_MS, type DemandHistory, type DemandSample } from "./history.js";

/** At most this many minutes are back-filled after a pause (a suspended process does not write a week of zeros). */
const MAX_BACKFILL_MINUTES = 60;

export class NiwRecorder {
  /** `model\tregion` → minute index → tokens dispatched in that minute. */
  private readonly open = new Map<string, Map<number, number>>();
  private readonly keys: { model: string; region: string; key: string }[];
  /** The first minute not yet written. */
  private nextMinute: number;
  private timer: Timer | undefined;
  private writing: Promise<void> = Promise.resolve();
  /** Samples written (for tests and logs). */
  written = 0;

  constructor(
    private readonly history: DemandHistory,
    models: readonly string[],
    regions: readonly string[],
    private readonly clock: Clock,
    private readonly log: Logger = silentLogger,
  ) {
    this.keys = models.flatMap((model) => regions.map((region) => ({ model, region, key: `${model}\t${region}` })));
    for (const k of this.keys) this.open.set(k.key, new Map());
    this.nextMinute = Math.floor(clock.now() / MINUTE_MS);
  }

  /** Counts `tokens` dispatched for `model` to `region` at `atMs`. Unknown pairs and bad values are ignored. */
  record(model: string, region: string, tokens: number, atMs: number): void {
    const m = this.open.get(`${model}\t${region}`);
    if (m === undefined || !(tokens > 0) || !Number.isFinite(atMs)) return;
    const minute = Math.max(this.nextMinute, Math.floor(atMs / MINUTE_MS));
    m.set(minute, (m.get(minute) ?? 0) + tokens);
  }

  /** Writes every whole minute before `nowMs` not yet written; resolves when they are stored. */
  flush(nowMs = this.clock.now()): Promise<void> {
    const upTo = Math.floor(nowMs / MINUTE_MS);
    if (upTo <= this.nextMinute) return this.writing;
    const from = Math.max(this.nextMinute, upTo - MAX_BACKFILL_MINUTES);
    const samples: DemandSample[] = [];
    for (const k of this.keys) {
      const m = this.open.get(k.key)!;
      for (let minute = from; minute < upTo; minute++) {
        samples.push({ kind: "niw", model: k.model, region: k.region, minuteMs: minute * MINUTE_MS, tokensPerS: (m.get(minute) ?? 0) / 60 });
      }
      for (const minute of m.keys()) if (minute < upTo) m.delete(minute);
    }
    this.nextMinute = upTo;
    this.writing = this.writing.then(async () => {
      try {
        await this.history.add(samples);
        this.written += samples.length;
      } catch (err) {
        this.log.warn("writing batch demand history failed; the planner's NIW buffer misses these minutes", { err: err instanceof Error ? err : String(err), minutes: upTo - from });
      }
    });
    return this.writing;
  }

  /** Flushes once a minute on the clock. */
  start(): void {
    this.timer ??= this.clock.every(MINUTE_MS, () => void this.flush());
  }

  /** Stops the timer and writes the minutes already over. */
  async stop(): Promise<void> {
    this.timer?.cancel();
    this.timer = undefined;
    await this.flush();
  }
}
