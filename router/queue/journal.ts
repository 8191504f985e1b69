/**
 * Reading the embedded queue's journal (`<dataDir>/queue.journal`) without ever losing data silently (issue 15,
 * item 7). Every line must be a complete JSON line (ending in a newline) holding an operation the state machine
 * accepts. The first line that is not — corrupt JSON, an unknown operation, one the state machine rejects — stops
 * the replay:
 *
 * - strict (default): `JournalCorruptError` (code `journal_corrupt`) naming the file and the line, how many lines
 *   before it are valid, and how to recover; nothing is changed on disk.
 * - recover (`queue.recoverJournal`, `--recover-journal`): the valid prefix is kept, the rest (that line and every
 *   line after it, byte for byte) is moved to `queue.journal.corrupt-N` (first free N), and the journal is rewritten
 *   as the prefix (temporary file, fsync, rename). The caller logs what moved where.
 *
 * A last line cut short (no newline at the end of the file) is a write a crash interrupted: the store appends each
 * line synchronously before the call that made it returns, so that call never answered anyone. It is dropped in both
 * modes: moved byte for byte to `queue.journal.corrupt-N` and the journal rewritten without it (`JournalReplay.torn`,
 * which the caller logs as a warning), so a router killed mid-write restarts on its own (redis-server's
 * `aof-load-truncated yes` does the same with an AOF cut short). A bad line before it still stops the replay as above.
 *
 * Compaction (one snapshot line) runs only over a journal whose every line was read: `compact` writes the snapshot
 * to a temporary file, reads it back and checks it parses before renaming it over the journal.
 */
import { closeSync, existsSync, fsyncSync, openSync, readFileSync, renameSync, writeSync } from "node:fs";
import { TidegateError } from "../../core/errors.js";

/** The replay stopped at a line it could not read. */
export class JournalCorruptError extends TidegateError {
  constructor(
    readonly file: string,
    /** 1-based line number of the first bad line. */
    readonly line: number,
    readonly reason: string,
    /** Lines in the journal from the bad one on (what recovery would move aside). */
    readonly restLines: number,
  ) {
    super(
      "journal_corrupt",
      `${file}:${line}: ${reason}. Lines 1–${line - 1} are valid; ${restLines} line(s) from line ${line} on were not read. ` +
        `Nothing was changed. To start with the valid prefix and move the rest aside (to ${file}.corrupt-N), set queue.recoverJournal ` +
        `or pass --recover-journal.`,
    );
  }
}

/** What a replay found. */
export interface JournalReplay {
  /** Operations applied (valid lines). */
  applied: number;
  /** Set when recovery moved lines aside. */
  recovered?: { fromLine: number; movedLines: number; movedTo: string; reason: string };
  /** Set when a last line cut short by a crash was moved aside (its write never returned; see the header). */
  torn?: { line: number; bytes: number; movedTo: string };
}

/** Writes `bytes` to `path` durably (temporary file, fsync, rename). */
function writeDurably(path: string, bytes: Uint8Array): void {
  const tmp = `${path}.tmp`;
  const fd = openSync(tmp, "w");
  try {
    for (let at = 0; at < bytes.length; ) at += writeSync(fd, bytes, at);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(tmp, path);
}

/**
 * Replays `path` line by line through `applyLine` (which throws on an operation it cannot take). `reset` is called
 * before a recovery re-replays the valid prefix into fresh state (a rejected operation may have half-applied).
 * Throws JournalCorruptError unless `recover`.
 */
export function replayJournal(path: string, applyLine: (op: unknown) => void, opts: { recover: boolean; reset: () => void }): JournalReplay {
  if (!existsSync(path)) return { applied: 0 };
  // Bytes, so that what is moved aside or kept is exactly what was on disk (a cut may fall inside a character).
  const raw = readFileSync(path);
  /** Bytes of the complete lines; what follows the last newline is a line cut short. */
  const whole = raw.lastIndexOf(0x0a) + 1;
  const torn = raw.subarray(whole);
  const lines = whole === 0 ? [] : raw.toString("utf8", 0, whole - 1).split("\n");
  let bad: { index: number; reason: string } | undefined;
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    let op: unknown;
    try {
      op = JSON.parse(line);
    } catch (err) {
      bad = { index: i, reason: `not valid JSON (${(err as Error).message}): ${preview(line)}` };
      break;
    }
    try {
      applyLine(op);
    } catch (err) {
      bad = { index: i, reason: `operation rejected (${(err as Error).message}): ${preview(line)}` };
      break;
    }
  }
  if (bad === undefined) {
    if (torn.length === 0) return { applied: lines.length };
    // Every complete line applied; the fragment after them is a write that never returned (see the header).
    const movedTo = freeCorruptPath(path);
    writeDurably(movedTo, torn);
    writeDurably(path, raw.subarray(0, whole));
    return { applied: lines.length, torn: { line: lines.length + 1, bytes: torn.length, movedTo } };
  }
  const restLines = lines.length - bad.index + (torn.length === 0 ? 0 : 1);
  if (!opts.recover) throw new JournalCorruptError(path, bad.index + 1, bad.reason, restLines);

  const movedTo = freeCorruptPath(path);
  const keep = lines.slice(0, bad.index);
  // The bad line starts after the bad.index-th newline.
  let at = 0;
  for (let k = 0; k < bad.index; k++) at = raw.indexOf(0x0a, at) + 1;
  writeDurably(movedTo, raw.subarray(at));
  writeDurably(path, raw.subarray(0, at));
  opts.reset();
  for (const line of keep) applyLine(JSON.parse(line));
  return { applied: keep.length, recovered: { fromLine: bad.index + 1, movedLines: restLines, movedTo, reason: bad.reason } };
}

/** `<path>.corrupt-N` for the first N not taken. */
function freeCorruptPath(path: string): string {
  let n = 1;
  while (existsSync(`${path}.corrupt-${n}`)) n++;
  return `${path}.corrupt-${n}`;
}

/** Rewrites `path` as the single line `snapshotLine`, checking the written file reads back before it replaces the journal. */
export function compactJournal(path: string, snapshotLine: string): void {
  const tmp = `${path}.compact`;
  const fd = openSync(tmp, "w");
  try {
    writeSync(fd, snapshotLine + "\n");
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  const back = readFileSync(tmp, "utf8");
  if (!back.endsWith("\n") || back.indexOf("\n") !== back.length - 1) throw new TidegateError("journal_corrupt", `${tmp}: the compacted journal did not read back as one line; the journal was left as it was`);
  JSON.parse(back);
  renameSync(tmp, path);
}

function preview(line: string): string {
  return JSON.stringify(line.length > 120 ? `${line.slice(0, 120)}…` : line);
}
