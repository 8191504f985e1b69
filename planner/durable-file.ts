/**
 * Files the planner keeps in `tidegate dev`'s data directory (file-store.ts, file-history.ts), written so that a
 * crash never leaves a half-written file in place: the text goes to a temporary file beside the target, is fsynced,
 * renamed over the target, and the directory is fsynced (the rename itself survives a power cut). A reader sees the
 * old file or the new one, never a mix. Temporary files a crash left behind are named `.<name>.tmp-<pid>-<n>` and
 * were never part of the state: `listDurable` removes them. A file that is there but cannot be read as what it should
 * be (damaged on disk, edited by hand) is moved aside to `<name>.damaged-<n>` by `setAside`, never deleted.
 */
import { existsSync } from "node:fs";
import { open, readdir, rename, unlink } from "node:fs/promises";
import { join } from "node:path";

let tmpCounter = 0;

/** Writes `text` to `dir/name` durably (see the file comment). `dir` must exist. */
export async function writeDurably(dir: string, name: string, text: string): Promise<void> {
  const tmp = join(dir, `.${name}.tmp-${process.pid}-${++tmpCounter}`);
  const fh = await open(tmp, "w", 0o644);
  try {
    await fh.writeFile(text, "utf8");
    await fh.sync();
  } finally {
    await fh.close();
  }
  await rename(tmp, join(dir, name));
  await syncDir(dir);
}

/** Removes `dir/name` if it is there, and makes the removal durable. */
export async function removeDurably(dir: string, name: string): Promise<void> {
  try {
    await unlink(join(dir, name));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return;
    throw err;
  }
  await syncDir(dir);
}

async function syncDir(dir: string): Promise<void> {
  const d = await open(dir, "r");
  try {
    await d.sync();
  } finally {
    await d.close();
  }
}

/** The names in `dir` that end with `suffix` (sorted), after removing temporary files a crash left there. */
export async function listDurable(dir: string, suffix: string): Promise<string[]> {
  const names = await readdir(dir);
  for (const n of names) if (/^\..+\.tmp-\d+-\d+$/.test(n)) await unlink(join(dir, n));
  return names.filter((n) => !n.startsWith(".") && n.endsWith(suffix)).sort();
}

/** Moves `dir/name` to `dir/name.damaged-<n>` (the first free n); returns the new name. */
export async function setAside(dir: string, name: string): Promise<string> {
  let n = 1;
  while (existsSync(join(dir, `${name}.damaged-${n}`))) n++;
  const to = `${name}.damaged-${n}`;
  await rename(join(dir, name), join(dir, to));
  await syncDir(dir);
  return to;
}
