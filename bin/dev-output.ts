/**
 * What `tidegate dev` writes where, so that its first screen is the banner: the JSON log goes to a file (default
 * `<queue.dataDir>/dev.log`, overwritten at each start) or, with `--log-file -`, to stderr; while it goes to a file,
 * warnings and errors are also copied to stderr. Start-up progress goes to stderr too: on a terminal one line
 * rewritten in place, otherwise a plain line at the start, one every `plainEveryMs` while it waits, and one at the end.
 * The banner itself (URL, admin key) is dev's stdout.
 */
import { closeSync, mkdirSync, openSync, writeSync } from "node:fs";
import { dirname, join } from "node:path";
import type { LogLevel } from "../core/log.js";

/** The stream dev's console lines go to (process.stderr); `isTTY` picks the rewritten line. */
export interface ConsoleStream {
  write(s: string): unknown;
  isTTY?: boolean;
  columns?: number;
}

/**
 * Console lines on one stream: `line` prints a line for good; `status` (terminals only) shows a line that the next
 * `status` replaces and that any `line` clears first and redraws after.
 */
export class DevConsole {
  private shown = "";

  constructor(readonly out: ConsoleStream) {}

  get tty(): boolean {
    return this.out.isTTY === true;
  }

  line(text: string): void {
    if (this.shown !== "") this.out.write("\r\x1b[K");
    this.out.write(text + "\n");
    if (this.shown !== "") this.out.write(this.shown);
  }

  /** Replaces the status line (cut to the terminal's width); "" removes it. Ignored when the stream is not a terminal. */
  status(text: string): void {
    if (!this.tty) return;
    const width = Math.max(20, (this.out.columns || 100) - 1); // 0 or absent: a terminal that gives no size
    const cut = text.length > width ? text.slice(0, width - 1) + "…" : text;
    this.out.write("\r\x1b[K" + cut);
    this.shown = cut;
  }
}

/** Where dev's JSON log goes: `file` (undefined: stderr) and the logger's sink. */
export interface DevLogTarget {
  /** The log file, or undefined when the log goes to stderr. */
  readonly file: string | undefined;
  sink(line: string, level: LogLevel): void;
  close(): void;
}

/** The default log file of dev: `<dataDir>/dev.log`. */
export function devLogFile(dataDir: string): string {
  return join(dataDir, "dev.log");
}

/**
 * Opens dev's log: `flag` "-" is stderr (through `console`), another value a file path, undefined the default file
 * under `dataDir`. The file is created (with its folder) and truncated; a line at warn or error is also printed on
 * `console`. Throws (ENOENT, EACCES …) when the file cannot be opened, before anything starts; a later write that
 * fails (a full disk) is reported on `console` once, and the log goes on there.
 */
export function openDevLog(flag: string | undefined, dataDir: string, console: DevConsole): DevLogTarget {
  if (flag === "-") return { file: undefined, sink: (line) => console.line(line), close: () => {} };
  const file = flag ?? devLogFile(dataDir);
  mkdirSync(dirname(file), { recursive: true });
  let fd: number | undefined = openSync(file, "w");
  return {
    file,
    sink: (line, level) => {
      if (fd === undefined) return console.line(line);
      try {
        writeSync(fd, line + "\n");
      } catch (err) {
        console.line(`tidegate dev: cannot write the log to ${file} (${(err as Error).message}); the log goes to stderr from now on`);
        closeSync(fd);
        fd = undefined;
        return console.line(line);
      }
      if (level === "warn" || level === "error") console.line(line);
    },
    close: () => {
      if (fd !== undefined) closeSync(fd);
      fd = undefined;
    },
  };
}

/** Serving and wanted instances of one region during start-up. */
export interface RegionProgress {
  region: string;
  serving: number;
  wanted: number;
}

/** "12/24 instances serving after 3.2 s (us-east 4/8, us-central 4/8, us-west 4/8)" */
export function progressText(regions: readonly RegionProgress[], elapsedMs: number): string {
  const serving = regions.reduce((s, r) => s + Math.min(r.serving, r.wanted), 0);
  const wanted = regions.reduce((s, r) => s + r.wanted, 0);
  const per = regions.map((r) => `${r.region} ${Math.min(r.serving, r.wanted)}/${r.wanted}`).join(", ");
  return `${serving}/${wanted} instances serving after ${(elapsedMs / 1000).toFixed(1)} s (${per})`;
}

/**
 * Shows start-up progress on `console` until `stop()`: every `everyMs` on a terminal (the status line), every
 * `plainEveryMs` otherwise; `stop()` removes the status line. Times count from `startedAtMs` (default: now), in
 * wall-clock ms (Date.now).
 */
export function showProgress(o: { console: DevConsole; regions: () => RegionProgress[]; startedAtMs?: number; everyMs?: number; plainEveryMs?: number }): { stop(): void } {
  const now = Date.now;
  const started = o.startedAtMs ?? now();
  const c = o.console;
  const tick = () => (c.tty ? c.status(`tidegate dev: starting — ${progressText(o.regions(), now() - started)}`) : c.line(`tidegate dev: waiting — ${progressText(o.regions(), now() - started)}`));
  if (c.tty) tick();
  const timer = setInterval(tick, c.tty ? (o.everyMs ?? 200) : (o.plainEveryMs ?? 10_000));
  timer.unref();
  return {
    stop: () => {
      clearInterval(timer);
      c.status("");
    },
  };
}
