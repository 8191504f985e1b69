/**
 * Issue 15 item 7 at the process level: `tidegate dev` on an embedded queue whose journal has a corrupt line refuses
 * to start, naming the file and the line, and leaves the journal as it was; with --recover-journal it starts with the
 * valid prefix, moves the rest to queue.journal.corrupt-1 and says so in its log. A last line cut short (a crash
 * mid-append) needs no flag: dev starts without it, moves it aside and warns.
 */
import { appendFileSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { DEFAULT_CONFIG_JSON } from "../../core/config.js";
import { EmbeddedQueueStore } from "../../router/queue/embedded.js";
import { spawnTidegate, stopAll } from "../e2e/procs.js";

const dir = mkdtempSync(join(tmpdir(), "tidegate-journal-"));
afterAll(async () => {
  await stopAll();
  rmSync(dir, { recursive: true, force: true });
});

describe("tidegate dev with a corrupt queue journal", () => {
  it("refuses to start naming the file and line; --recover-journal starts with the valid prefix and moves the rest aside", async () => {
    const dataDir = join(dir, "data");
    const store = new EmbeddedQueueStore(dataDir);
    await store.createBatch({ id: "batch_kept", endpoint: "/v1/completions", inputFileId: "f", completionWindow: "24h", metadata: null, createdAtMs: 0, expiresAtMs: 1e15 });
    await store.createBatch({ id: "batch_lost", endpoint: "/v1/completions", inputFileId: "f", completionWindow: "24h", metadata: null, createdAtMs: 0, expiresAtMs: 1e15 });
    const journal = join(dataDir, "queue.journal");
    const lines = readFileSync(journal, "utf8").trimEnd().split("\n");
    expect(lines).toHaveLength(2);
    const corrupted = `${lines[0]}\n{"garbage\n${lines[1]}\n`;
    writeFileSync(journal, corrupted);
    const base = DEFAULT_CONFIG_JSON as Record<string, unknown>;
    const file = join(dir, "config.json");
    writeFileSync(file, JSON.stringify({ ...base, queue: { ...(base.queue as object), dataDir } }));

    await expect(spawnTidegate("dev", ["dev", "--config", file, "--port", "0", "--log-level", "warn"], /serving (http:\/\/\S+)/, 60_000)).rejects.toThrow(new RegExp(`${journal.replace(/[.]/g, "\\.")}:2: not valid JSON`));
    expect(readFileSync(journal, "utf8")).toBe(corrupted);
    expect(existsSync(`${journal}.corrupt-1`)).toBe(false);

    const dev = await spawnTidegate("dev", ["dev", "--config", file, "--port", "0", "--log-level", "warn", "--recover-journal"], /serving (http:\/\/\S+)/, 60_000);
    expect(dev.output()).toMatch(/queue journal recovered/);
    expect(readFileSync(`${journal}.corrupt-1`, "utf8")).toBe(`{"garbage\n${lines[1]}\n`);
    const kept = (await (await fetch(`${dev.match[1]}/v1/batches/batch_kept`)).json()) as { id?: string };
    expect(kept.id).toBe("batch_kept");
    expect((await fetch(`${dev.match[1]}/v1/batches/batch_lost`)).status).toBe(404);
    await dev.stop();
  }, 120_000);

  it("starts on its own after a crash cut the last line short, moving the fragment aside with a warning", async () => {
    const dataDir = join(dir, "data-torn");
    const store = new EmbeddedQueueStore(dataDir);
    await store.createBatch({ id: "batch_kept", endpoint: "/v1/completions", inputFileId: "f", completionWindow: "24h", metadata: null, createdAtMs: 0, expiresAtMs: 1e15 });
    const journal = join(dataDir, "queue.journal");
    const whole = readFileSync(journal, "utf8");
    appendFileSync(journal, '["createBatch",{"id":"batch_cut","endpoi');
    const base = DEFAULT_CONFIG_JSON as Record<string, unknown>;
    const file = join(dir, "config-torn.json");
    writeFileSync(file, JSON.stringify({ ...base, queue: { ...(base.queue as object), dataDir } }));

    const dev = await spawnTidegate("dev", ["dev", "--config", file, "--port", "0", "--log-level", "warn", "--log-file", "-"], /serving (http:\/\/\S+)/, 60_000);
    expect(dev.output()).toMatch(/queue journal: dropped a last line cut short by a crash/);
    expect(readFileSync(`${journal}.corrupt-1`, "utf8")).toBe('["createBatch",{"id":"batch_cut","endpoi');
    // The journal is the lines before the fragment, then whole lines this incarnation appended (its lease owner,
    // the batch's validation): nothing of the fragment.
    const now = readFileSync(journal, "utf8");
    expect(now.startsWith(whole)).toBe(true);
    const appended = now.slice(whole.length);
    expect(appended).toMatch(/^\["openOwner",/);
    expect(appended.endsWith("\n")).toBe(true);
    for (const line of appended.trimEnd().split("\n")) expect(() => JSON.parse(line)).not.toThrow();
    expect(appended).not.toContain("batch_cut");
    expect((await fetch(`${dev.match[1]}/v1/batches/batch_kept`)).status).toBe(200);
    await dev.stop();
  }, 120_000);
});
