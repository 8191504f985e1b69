import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { appendFileSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Redis } from "ioredis";
import { queueConformance } from "../../test/helpers/queue-conformance.js";
import { silentLogger } from "../../core/log.js";
import { EmbeddedQueueStore } from "./embedded.js";
import { JournalCorruptError } from "./journal.js";
import { DirFileStore } from "./dir-files.js";
import { RedisFileStore, RedisQueueStore } from "./redis.js";
import { ScriptRunner, loadScripts, packageVersion } from "./scripts.js";
import { QueueCode } from "./types.js";
import { cleanupPrefix, startTestRedis, testPrefix, type TestRedis } from "../../test/helpers/redis.js";

queueConformance("embedded (memory)", async () => ({ queue: new EmbeddedQueueStore(null), files: new DirFileStore(null), dispose: async () => {} }));

queueConformance("embedded (journal + data dir)", async () => {
  const dir = mkdtempSync(join(tmpdir(), "tidegate-q-"));
  // Journal written on every change (replay itself is tested in "embedded journal" below).
  return { queue: new EmbeddedQueueStore(dir), files: new DirFileStore(dir), dispose: async () => rmSync(dir, { recursive: true, force: true }) };
});

let redis: TestRedis;
const clients: Redis[] = [];
beforeAll(async () => {
  redis = await startTestRedis();
});
afterAll(async () => {
  for (const c of clients) c.disconnect();
  await redis.stop();
});

queueConformance("redis", async () => {
  const client = new Redis(redis.url);
  clients.push(client);
  const prefix = testPrefix("queue");
  return {
    queue: new RedisQueueStore(client, prefix),
    files: new RedisFileStore(client, prefix),
    dispose: async () => {
      await cleanupPrefix(redis.url, prefix);
      client.disconnect();
    },
  };
});

describe("embedded journal", () => {
  /** A journal with 5 operations: a batch of 3, two claimed, one completed. */
  async function fiveOps(dir: string): Promise<void> {
    const a = new EmbeddedQueueStore(dir);
    await a.createBatch({ id: "b", endpoint: "/v1/completions", inputFileId: "f", completionWindow: "24h", metadata: null, createdAtMs: 0, expiresAtMs: 1e9 });
    await a.stage("b", [0, 1, 2].map((i) => ({ index: i, payload: `p${i}` })));
    await a.activate("b", "m", 3, 1);
    await a.claim("m", 2, 2, 100);
    await a.complete("b:000000", { ok: true, line: "r0" }, 3);
  }

  it("rebuilds batches, leases and results after a restart", async () => {
    const dir = mkdtempSync(join(tmpdir(), "tidegate-q-"));
    try {
      await fiveOps(dir);
      const b = new EmbeddedQueueStore(dir);
      expect(b.replayedOps).toBe(5);
      expect(await b.getBatch("b")).toMatchObject({ status: "in_progress", completed: 1, leased: 1 });
      expect(await b.requeueExpired(1000, 10)).toEqual({ expiredLeases: 1, requeued: 1 });
      expect((await b.claim("m", 5, 1001, 100)).map((r) => r.requestId)).toEqual(["b:000001", "b:000002"]);
      expect((await b.results("b")).get(0)).toEqual({ ok: true, line: "r0" });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("a batch's output tokens by capacity survive a restart and a compaction (issue 37)", async () => {
    const dir = mkdtempSync(join(tmpdir(), "tidegate-q-"));
    try {
      await fiveOps(dir);
      const a = new EmbeddedQueueStore(dir);
      await a.requeueExpired(1000, 10);
      const c = await a.claim("m", 2, 1001, 100);
      expect(await a.complete(c[0]!.requestId, { ok: true, line: "r1", spareTokens: 48 }, 1002)).toBe(QueueCode.Ok);
      expect(await a.complete(c[1]!.requestId, { ok: true, line: "r2", dedicatedTokens: 16 }, 1003)).toBe(QueueCode.Finalizing);
      const b = new EmbeddedQueueStore(dir);
      expect(await b.getBatch("b")).toMatchObject({ completed: 3, spareTokens: 48, dedicatedTokens: 16 });
      const compacted = new EmbeddedQueueStore(dir, { compactAfterOps: 1 });
      expect(await compacted.getBatch("b")).toMatchObject({ spareTokens: 48, dedicatedTokens: 16 });
      expect(readFileSync(join(dir, "queue.journal"), "utf8").trim().split("\n")).toHaveLength(1);
      expect(await new EmbeddedQueueStore(dir).getBatch("b")).toMatchObject({ spareTokens: 48, dedicatedTokens: 16 });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("lease owners survive a restart: tokens keep counting, heartbeats are not journaled, a crashed owner's leases come back", async () => {
    const dir = mkdtempSync(join(tmpdir(), "tidegate-q-"));
    try {
      const a = new EmbeddedQueueStore(dir);
      await a.createBatch({ id: "b", endpoint: "/v1/completions", inputFileId: "f", completionWindow: "24h", metadata: null, createdAtMs: 0, expiresAtMs: 1e9 });
      await a.stage("b", [0, 1, 2].map((i) => ({ index: i, payload: `p${i}` })));
      await a.activate("b", "m", 3, 1);
      const o1 = await a.openOwner(10, 5000); // deadline 5010 in the journal
      expect(await a.claim("m", 2, 20, 600_000, o1)).toHaveLength(2);
      const path = join(dir, "queue.journal");
      const lines = readFileSync(path, "utf8");
      expect(await a.heartbeat(o1, 4000, 5000)).toBe(true); // 9000, in memory only
      expect(readFileSync(path, "utf8")).toBe(lines);
      // The live store does not declare o1 dead at 6000 (its heartbeat holds it to 9000), and journals nothing.
      expect(await a.reclaimDead(6000)).toEqual({ owners: 0, leases: 0, requeued: 0 });
      expect(readFileSync(path, "utf8")).toBe(lines);
      // "Crash" and restart: the replay knows o1's journaled deadline only, so the new incarnation takes its leases
      // back at once, and the new token follows the old ones.
      const b = new EmbeddedQueueStore(dir);
      expect(await b.getBatch("b")).toMatchObject({ leased: 2 });
      expect(await b.reclaimDead(6000)).toEqual({ owners: 1, leases: 2, requeued: 2 });
      const o2 = await b.openOwner(6000, 5000);
      expect(o2).toBe(o1 + 1);
      expect((await b.claim("m", 5, 6001, 600_000, o2)).map((c) => [c.index, c.owner])).toEqual([[0, o2], [1, o2], [2, o2]]);
      expect(await b.complete("b:000000", { ok: true, line: "late" }, 6002, o1)).toBe(QueueCode.Fenced);
      expect(await b.complete("b:000000", { ok: true, line: "r0" }, 6003, o2)).toBe(QueueCode.Ok);
      // A second replay reaches the same state: the reclaim decision was journaled, o1 stays dead.
      const c = new EmbeddedQueueStore(dir);
      expect(await c.getBatch("b")).toMatchObject({ leased: 2, completed: 1 });
      expect(await c.heartbeat(o1, 6004, 5000)).toBe(false);
      expect(await c.heartbeat(o2, 6004, 5000)).toBe(true);
      expect(await c.openOwner(6005, 5000)).toBe(o2 + 1);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("compaction keeps lease owners: the snapshot holds live owners, the next token and each lease's owner", async () => {
    const dir = mkdtempSync(join(tmpdir(), "tidegate-q-"));
    try {
      const a = new EmbeddedQueueStore(dir);
      await a.createBatch({ id: "b", endpoint: "/v1/completions", inputFileId: "f", completionWindow: "24h", metadata: null, createdAtMs: 0, expiresAtMs: 1e9 });
      await a.stage("b", [0, 1].map((i) => ({ index: i, payload: `p${i}` })));
      await a.activate("b", "m", 2, 1);
      const o1 = await a.openOwner(10, 5000);
      await a.claim("m", 1, 20, 600_000, o1);
      const b = new EmbeddedQueueStore(dir, { compactAfterOps: 1 });
      expect(readFileSync(join(dir, "queue.journal"), "utf8").split("\n").filter((l) => l !== "")).toHaveLength(1);
      const c = new EmbeddedQueueStore(dir);
      expect(await c.complete("b:000000", { ok: true, line: "x" }, 30, o1 + 1)).toBe(QueueCode.Fenced);
      expect(await c.heartbeat(o1, 30, 5000)).toBe(true);
      expect(await c.openOwner(31, 5000)).toBe(o1 + 1);
      expect(await c.complete("b:000000", { ok: true, line: "x" }, 32, o1)).toBe(QueueCode.Ok);
      expect(await b.getBatch("b")).toMatchObject({ leased: 1 });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("a claim that finds nothing and a requeue with no lease due leave the journal as it was", async () => {
    const dir = mkdtempSync(join(tmpdir(), "tidegate-q-"));
    try {
      await fiveOps(dir);
      const path = join(dir, "queue.journal");
      const before = readFileSync(path, "utf8");
      const b = new EmbeddedQueueStore(dir);
      expect(await b.claim("other-model", 5, 4, 100)).toEqual([]);
      expect(await b.requeueExpired(5, 10)).toEqual({ expiredLeases: 0, requeued: 0 });
      expect(readFileSync(path, "utf8")).toBe(before);
      // A claim that takes something is journalled, and a restart sees it.
      expect(await b.claim("m", 5, 6, 100)).toHaveLength(1);
      expect(new EmbeddedQueueStore(dir).replayedOps).toBe(6);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("a last line cut short by a crash is dropped with a warning and moved aside; the store opens on the lines before it", async () => {
    const dir = mkdtempSync(join(tmpdir(), "tidegate-q-"));
    try {
      await fiveOps(dir);
      const path = join(dir, "queue.journal");
      const whole = readFileSync(path, "utf8");
      appendFileSync(path, '["complete","b:000001",{"ok":tr');
      const warnings: { msg: string; fields: Record<string, unknown> | undefined }[] = [];
      const log = { ...silentLogger, warn: (msg: string, fields?: Record<string, unknown>) => void warnings.push({ msg, fields }) };
      // Strict mode (the default) opens: the cut line's append never returned, so nothing it stood for was answered.
      const r = new EmbeddedQueueStore(dir, { log });
      expect(r.replayedOps).toBe(5);
      expect(r.replay.recovered).toBeUndefined();
      expect(r.replay.torn).toEqual({ line: 6, bytes: 31, movedTo: `${path}.corrupt-1` });
      expect(warnings).toHaveLength(1);
      expect(warnings[0]!.msg).toMatch(/cut short by a crash/);
      expect(warnings[0]!.fields).toMatchObject({ file: path, line: 6, movedTo: `${path}.corrupt-1` });
      expect(readFileSync(`${path}.corrupt-1`, "utf8")).toBe('["complete","b:000001",{"ok":tr');
      expect(readFileSync(path, "utf8")).toBe(whole);
      expect(await r.getBatch("b")).toMatchObject({ status: "in_progress", completed: 1, leased: 1 });
      // The journal is the valid prefix again, and appends after it are read back.
      await r.complete("b:000001", { ok: true, line: "r1" }, 4);
      const again = new EmbeddedQueueStore(dir);
      expect(again.replayedOps).toBe(6);
      expect(again.replay.torn).toBeUndefined();
      expect((await again.results("b")).get(1)).toEqual({ ok: true, line: "r1" });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("a cut inside a character moves the fragment's bytes as they were", async () => {
    const dir = mkdtempSync(join(tmpdir(), "tidegate-q-"));
    try {
      await fiveOps(dir);
      const path = join(dir, "queue.journal");
      const whole = readFileSync(path);
      const full = Buffer.from('["complete","b:000001",{"ok":true,"line":"é', "utf8");
      const cut = full.subarray(0, full.length - 1); // the first byte of "é" only
      appendFileSync(path, cut);
      const r = new EmbeddedQueueStore(dir);
      expect(r.replay.torn).toMatchObject({ line: 6, bytes: cut.length });
      expect(readFileSync(`${path}.corrupt-1`).equals(cut)).toBe(true);
      expect(readFileSync(path).equals(whole)).toBe(true);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("a bad line before a cut-short last one still stops the open; recovery moves both, byte for byte", async () => {
    const dir = mkdtempSync(join(tmpdir(), "tidegate-q-"));
    try {
      await fiveOps(dir);
      const path = join(dir, "queue.journal");
      const lines = readFileSync(path, "utf8").trimEnd().split("\n");
      const text = [...lines.slice(0, 4), "{not json", lines[4]!].join("\n") + "\n" + '["compl';
      writeFileSync(path, text);
      let err: unknown;
      try {
        new EmbeddedQueueStore(dir);
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(JournalCorruptError);
      expect((err as JournalCorruptError).line).toBe(5);
      expect((err as JournalCorruptError).restLines).toBe(3);
      expect(readFileSync(path, "utf8")).toBe(text);
      const r = new EmbeddedQueueStore(dir, { recover: true });
      expect(r.replayedOps).toBe(4);
      expect(r.replay.recovered).toMatchObject({ fromLine: 5, movedLines: 3, movedTo: `${path}.corrupt-1` });
      expect(readFileSync(`${path}.corrupt-1`, "utf8")).toBe(["{not json", lines[4]!].join("\n") + "\n" + '["compl');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("an append that fails refuses every later change with queue_unavailable; reads still answer", async () => {
    const dir = mkdtempSync(join(tmpdir(), "tidegate-q-"));
    try {
      await fiveOps(dir);
      const store = new EmbeddedQueueStore(dir);
      // The data directory goes away under the store (as root, permissions would not stop the write).
      rmSync(dir, { recursive: true, force: true });
      await expect(store.complete("b:000001", { ok: true, line: "r1" }, 4)).rejects.toMatchObject({ code: "queue_unavailable", message: expect.stringMatching(/could not be written .*ENOENT.*until tidegate restarts/) });
      await expect(store.claim("m", 5, 6, 100)).rejects.toMatchObject({ code: "queue_unavailable" });
      expect(await store.getBatch("b")).toMatchObject({ status: "in_progress" });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("a corrupt line in the middle names its line; recovery moves it and everything after it, and compaction never covers it", async () => {
    for (const bad of ["{not json", '["noSuchOp",1]', '"a string"', '["complete"]']) {
      const dir = mkdtempSync(join(tmpdir(), "tidegate-q-"));
      try {
        await fiveOps(dir);
        const path = join(dir, "queue.journal");
        const lines = readFileSync(path, "utf8").trimEnd().split("\n");
        const corrupted = [...lines.slice(0, 3), bad, ...lines.slice(3)];
        writeFileSync(path, corrupted.join("\n") + "\n");
        expect(() => new EmbeddedQueueStore(dir, { compactAfterOps: 1 }), bad).toThrow(new RegExp(`queue\\.journal:4: `));
        // Strict mode changed nothing, compaction included.
        expect(readFileSync(path, "utf8").split("\n")).toHaveLength(7);
        const r = new EmbeddedQueueStore(dir, { recover: true, compactAfterOps: 1 });
        expect(r.replayedOps, bad).toBe(3);
        expect(r.replay.recovered).toMatchObject({ fromLine: 4, movedLines: 3 });
        expect(readFileSync(`${path}.corrupt-1`, "utf8")).toBe([bad, ...lines.slice(3)].join("\n") + "\n");
        // The prefix (3 valid lines) was compacted to one snapshot; the moved lines are only in corrupt-1.
        expect(readFileSync(path, "utf8").trim().split("\n")).toHaveLength(1);
        expect(await r.getBatch("b")).toMatchObject({ status: "in_progress", completed: 0, leased: 0 });
        expect(new EmbeddedQueueStore(dir).replayedOps).toBe(1);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    }
  });
});

describe("embedded journal compaction", () => {
  it("rewrites a long journal as one snapshot that rebuilds the same state", async () => {
    const dir = mkdtempSync(join(tmpdir(), "tidegate-q-"));
    try {
      const a = new EmbeddedQueueStore(dir);
      await a.createBatch({ id: "b", endpoint: "/v1/completions", inputFileId: "f", completionWindow: "24h", metadata: { x: "y" }, createdAtMs: 0, expiresAtMs: 1e9 });
      await a.stage("b", Array.from({ length: 12 }, (_, i) => ({ index: i, payload: `p${i}` })));
      await a.activate("b", "m", 12, 1);
      await a.claim("m", 3, 2, 100);
      await a.complete("b:000001", { ok: false, line: "e1" }, 3);
      const before = { batch: await a.getBatch("b"), results: await a.results("b"), stats: await a.stats(["m"], 10, 5) };
      const b = new EmbeddedQueueStore(dir, { compactAfterOps: 3 });
      expect(b.replayedOps).toBe(5);
      expect(readFileSync(join(dir, "queue.journal"), "utf8").trim().split("\n")).toHaveLength(1);
      const c = new EmbeddedQueueStore(dir, { compactAfterOps: 3 });
      expect(c.replayedOps).toBe(1);
      expect({ batch: await c.getBatch("b"), results: await c.results("b"), stats: await c.stats(["m"], 10, 5) }).toEqual(before);
      expect(await c.requeueExpired(1000, 10)).toEqual({ expiredLeases: 2, requeued: 2 });
      expect((await c.claim("m", 20, 1001, 100)).map((r) => r.index)).toEqual([0, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("redis scripts", () => {
  it("are named name-NKEYS.lua with a KEYS/ARGV/Returns header and carry the package version", () => {
    const dir = join(fileURLToPath(new URL(".", import.meta.url)), "lua");
    const files = readdirSync(dir).filter((f) => f.endsWith(".lua") && f !== "_common.lua");
    expect(files.length).toBeGreaterThanOrEqual(12);
    for (const f of files) {
      const text = readFileSync(join(dir, f), "utf8");
      const head = text.slice(0, text.indexOf("]]"));
      const nkeys = Number(/-(\d+)\.lua$/.exec(f)![1]);
      for (let k = 1; k <= nkeys; k++) expect(head, `${f} documents KEYS[${k}]`).toContain(`KEYS[${k}]`);
      expect(head, `${f} documents no KEYS[${nkeys + 1}]`).not.toContain(`KEYS[${nkeys + 1}]`);
      expect(head, f).toContain("ARGV[1]".slice(0, 4));
      expect(head, f).toMatch(/Returns/);
    }
    const version = packageVersion().replace(/\./g, "_");
    for (const s of loadScripts()) {
      expect(s.command.endsWith(`_v${version}`)).toBe(true);
      expect(s.lua.startsWith(`-- tidegate ${packageVersion()} ${s.name}`)).toBe(true);
    }
  });

  it("reloads scripts after SCRIPT FLUSH (NOSCRIPT) and maps negative replies to QueueCode", async () => {
    const client = new Redis(redis.url);
    const prefix = testPrefix("flush");
    try {
      const q = new RedisQueueStore(client, prefix);
      await q.createBatch({ id: "b", endpoint: "/v1/completions", inputFileId: "f", completionWindow: "24h", metadata: null, createdAtMs: 0, expiresAtMs: 1 });
      await client.script("FLUSH");
      expect(await q.createBatch({ id: "b", endpoint: "/v1/completions", inputFileId: "f", completionWindow: "24h", metadata: null, createdAtMs: 0, expiresAtMs: 1 })).toBe(QueueCode.Exists);
      expect(new ScriptRunner(client).commands()).toContain(`claim_v${packageVersion().replace(/\./g, "_")}`);
    } finally {
      await cleanupPrefix(redis.url, prefix);
      client.disconnect();
    }
  });
});
