/**
 * Demand history kept on disk, for `tidegate dev` (`<queue.dataDir>/planner/history/`): the same behaviour as
 * forecasts/history.ts MemoryHistory (it is one, inside), with every hour that an `add` touched rewritten as one
 * file, `YYYY-MM-DDTHH.json` (UTC), durably (durable-file.ts) before `add` resolves. A restart therefore forecasts
 * from the load recorded before it, and a plan's page still overlays the actual load of its hour. An hour file holds
 * the minutes of every series in that hour:
 *
 *   {"format":"tidegate-history-hour-1","hourMs":…,"series":[{"kind":"iw","model":…,"region":…,"tokensPerS":[60 × number|null]}]}
 *
 * (null = a minute nobody recorded). Hours older than the retention (from `nowMs` at open, then from the newest
 * minute) are deleted. A damaged hour file is moved aside to `<name>.damaged-N` and named in `opened.setAside`;
 * every other hour is loaded — the valid part is kept, and the damaged hour reads as a gap.
 */
import { mkdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { DEFAULT_RETENTION_MS, MINUTE_MS, MemoryHistory, type DemandHistory, type DemandKind, type DemandSample, type SeriesKey } from "../forecasts/history.js";
import { listDurable, removeDurably, setAside, writeDurably } from "./durable-file.js";

const HOUR_MS = 3_600_000;
const FORMAT = "tidegate-history-hour-1";

/** `2026-11-27T05.json` for the hour starting at `hourMs` (UTC). */
export function hourFileName(hourMs: number): string {
  return `${new Date(hourMs).toISOString().slice(0, 13)}.json`;
}

/** The hour a file name stands for, or undefined when it is not an hour file's name. */
function hourOfName(name: string): number | undefined {
  const m = /^(\d{4}-\d{2}-\d{2}T\d{2})\.json$/.exec(name);
  if (m === null) return undefined;
  const ms = Date.parse(`${m[1]}:00:00Z`);
  return Number.isFinite(ms) ? ms : undefined;
}

/** The samples of one hour file, or why it cannot be read. */
function parseHour(text: string, hourMs: number): DemandSample[] | string {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch (err) {
    return `not JSON (${(err as Error).message})`;
  }
  const o = v as { format?: unknown; hourMs?: unknown; series?: unknown };
  if (typeof v !== "object" || v === null || o.format !== FORMAT) return `not a ${FORMAT} file`;
  if (o.hourMs !== hourMs) return `its hourMs ${JSON.stringify(o.hourMs)} is not the hour its name says`;
  if (!Array.isArray(o.series)) return "series is not an array";
  const out: DemandSample[] = [];
  for (const [i, s] of (o.series as unknown[]).entries()) {
    const x = s as { kind?: unknown; model?: unknown; region?: unknown; tokensPerS?: unknown };
    if (typeof s !== "object" || s === null || (x.kind !== "iw" && x.kind !== "niw") || typeof x.model !== "string" || typeof x.region !== "string") return `series[${i}] is not {kind, model, region, tokensPerS}`;
    if (!Array.isArray(x.tokensPerS) || x.tokensPerS.length !== 60) return `series[${i}].tokensPerS is not 60 minutes`;
    for (const [m, t] of (x.tokensPerS as unknown[]).entries()) {
      if (t === null) continue;
      if (typeof t !== "number" || !Number.isFinite(t) || t < 0) return `series[${i}].tokensPerS[${m}] is not a number ≥ 0 or null`;
      out.push({ kind: x.kind as DemandKind, model: x.model, region: x.region, minuteMs: hourMs + m * MINUTE_MS, tokensPerS: t });
    }
  }
  return out;
}

/** What `FileHistory.open` found in its directory. */
export interface OpenedHistory {
  dir: string;
  /** Hour files loaded, and the minutes (of every series) they held. */
  hours: number;
  minutes: number;
  /** Hour files older than the retention, deleted. */
  expired: number;
  /** Files that could not be read as hours: where each was moved and why. */
  setAside: { file: string; movedTo: string; why: string }[];
}

/** The file-backed DemandHistory (see the file comment). Open it with `FileHistory.open`. */
export class FileHistory implements DemandHistory {
  /** Hour files on disk. */
  private readonly onDisk = new Set<number>();
  private newestHour = -Infinity;
  /** Writes run one at a time; each rewrites its hours from the state when it runs. */
  private writes: Promise<void> = Promise.resolve();

  private constructor(readonly dir: string, private readonly inner: MemoryHistory, readonly opened: OpenedHistory) {}

  get retentionMs(): number {
    return this.inner.retentionMs;
  }

  /** Opens `dir` (created if missing) and loads the hours within `retentionMs` (default 8 days) of `nowMs`. */
  static async open(dir: string, o: { nowMs: number; retentionMs?: number }): Promise<FileHistory> {
    const inner = new MemoryHistory(o.retentionMs ?? DEFAULT_RETENTION_MS);
    await mkdir(dir, { recursive: true });
    const opened: OpenedHistory = { dir, hours: 0, minutes: 0, expired: 0, setAside: [] };
    const h = new FileHistory(dir, inner, opened);
    const samples: DemandSample[] = [];
    for (const name of await listDurable(dir, ".json")) {
      const hourMs = hourOfName(name);
      if (hourMs === undefined) {
        opened.setAside.push({ file: name, movedTo: await setAside(dir, name), why: "not an hour file's name (YYYY-MM-DDTHH.json)" });
        continue;
      }
      if (hourMs + HOUR_MS <= o.nowMs - inner.retentionMs) {
        await removeDurably(dir, name);
        opened.expired++;
        continue;
      }
      const got = parseHour(await readFile(join(dir, name), "utf8"), hourMs);
      if (typeof got === "string") {
        opened.setAside.push({ file: name, movedTo: await setAside(dir, name), why: got });
        continue;
      }
      samples.push(...got);
      h.onDisk.add(hourMs);
      h.newestHour = Math.max(h.newestHour, hourMs);
      opened.hours++;
      opened.minutes += got.length;
    }
    await inner.add(samples);
    return h;
  }

  /** Adds `samples` (as MemoryHistory does) and resolves once every hour they touched is on disk. */
  async add(samples: readonly DemandSample[]): Promise<void> {
    await this.inner.add(samples);
    const hours = new Set(samples.map((s) => Math.floor(s.minuteMs / HOUR_MS) * HOUR_MS));
    const write = this.writes.then(() => this.persist(hours));
    // A failed write fails this add (the caller sees it); later adds still run.
    this.writes = write.catch(() => undefined);
    await write;
  }

  /** Rewrites each hour from the in-memory state, then deletes hour files past the retention. */
  private async persist(hours: ReadonlySet<number>): Promise<void> {
    const keys = await this.inner.keys();
    for (const hourMs of [...hours].sort((a, b) => a - b)) {
      const series: { kind: DemandKind; model: string; region: string; tokensPerS: (number | null)[] }[] = [];
      for (const k of keys) {
        const minutes = await this.inner.series(k, hourMs, hourMs + HOUR_MS);
        if (minutes.some(Number.isFinite)) series.push({ kind: k.kind, model: k.model, region: k.region, tokensPerS: minutes.map((v) => (Number.isFinite(v) ? v : null)) });
      }
      if (series.length === 0) continue; // every minute was trimmed already
      await writeDurably(this.dir, hourFileName(hourMs), JSON.stringify({ format: FORMAT, hourMs, series }));
      this.onDisk.add(hourMs);
      this.newestHour = Math.max(this.newestHour, hourMs);
    }
    for (const hourMs of [...this.onDisk]) {
      if (hourMs + HOUR_MS > this.newestHour - this.inner.retentionMs) continue;
      await removeDurably(this.dir, hourFileName(hourMs));
      this.onDisk.delete(hourMs);
    }
  }

  series(key: SeriesKey, fromMs: number, toMs: number): Promise<number[]> {
    return this.inner.series(key, fromMs, toMs);
  }

  keys(): Promise<SeriesKey[]> {
    return this.inner.keys();
  }

  /** Resolves once every write so far is on disk. */
  async close(): Promise<void> {
    await this.writes;
  }
}
