/**
 * The batch tier inside the real `tidegate dev` process (embedded queue by default; `--redis-url` switches to Redis):
 * the openai client end to end, a batch surviving `kill -9` of the whole process (journal + lease expiry), and a
 * finished batch and its files still there after a restart.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import OpenAI, { toFile } from "openai";
import { DEFAULT_CONFIG_JSON } from "../../core/config.js";
import { spawnTidegate, stopAll, type Proc } from "../e2e/procs.js";
import { cleanupPrefix, startTestRedis, testPrefix, type TestRedis } from "../helpers/redis.js";
import { chatJsonl, parseJsonl, pollBatch } from "./harness.js";

let dir: string;
let redis: TestRedis;
beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "tidegate-devbatch-"));
  redis = await startTestRedis();
});
afterAll(async () => {
  await stopAll();
  await redis.stop();
  rmSync(dir, { recursive: true, force: true });
});

function writeConfig(name: string, queue: Record<string, unknown>): string {
  const file = join(dir, `${name}.json`);
  writeFileSync(file, JSON.stringify({ ...(DEFAULT_CONFIG_JSON as Record<string, unknown>), queue: { dataDir: join(dir, `${name}-data`), leaseMs: 2000, ...queue }, engines: { timeScale: 0.05 } }));
  return file;
}

async function startDev(config: string, extra: string[] = []): Promise<{ proc: Proc; client: OpenAI }> {
  const proc = await spawnTidegate("dev", ["dev", "--config", config, "--port", "0", "--log-level", "error", ...extra], /serving (http:\/\/[^\s]+)/);
  return { proc, client: new OpenAI({ apiKey: "x", baseURL: `${proc.match[1]}/v1`, maxRetries: 0 }) };
}

function expectEachOnce(lines: Record<string, unknown>[], n: number): void {
  const ids = new Set(lines.map((l) => l.custom_id as string));
  expect(lines).toHaveLength(n);
  expect(ids.size).toBe(n);
  for (let i = 0; i < n; i++) expect(ids.has(`req-${i}`)).toBe(true);
}

describe("batch in tidegate dev", () => {
  it("runs a batch end to end, survives kill -9 mid-batch, and keeps finished batches across a restart", async () => {
    const config = writeConfig("embedded", {});
    let { proc, client } = await startDev(config);
    const small = await client.files.create({ file: await toFile(Buffer.from(chatJsonl(40, "llama3.2-3b", 4)), "small.jsonl"), purpose: "batch" });
    const b1 = await client.batches.create({ input_file_id: small.id, endpoint: "/v1/chat/completions", completion_window: "24h" });
    const done1 = await pollBatch(client, b1.id, (s) => s === "completed", 60_000);
    expectEachOnce(parseJsonl(await (await client.files.content(done1.output_file_id!)).text()), 40);

    const n = 200; // dev reports telemetry once a second: at most 2 per endpoint per second (SageServe §6.3)
    const big = await client.files.create({ file: await toFile(Buffer.from(chatJsonl(n, "llama3.2-3b", 4)), "big.jsonl"), purpose: "batch" });
    const b2 = await client.batches.create({ input_file_id: big.id, endpoint: "/v1/chat/completions", completion_window: "24h" });
    await pollBatch(client, b2.id, (s) => s === "in_progress", 30_000);
    await new Promise((r) => setTimeout(r, 3000)); // let some requests run and hold leases
    const exited = new Promise((r) => proc.child.once("exit", r));
    proc.child.kill("SIGKILL");
    await exited;

    ({ proc, client } = await startDev(config));
    expect((await client.batches.retrieve(b1.id)).status).toBe("completed");
    const done2 = await pollBatch(client, b2.id, (s) => s === "completed", 120_000);
    expect(done2.request_counts).toEqual({ total: n, completed: n, failed: 0 });
    expectEachOnce(parseJsonl(await (await client.files.content(done2.output_file_id!)).text()), n);
    await proc.stop();

    ({ proc, client } = await startDev(config));
    const again = await client.batches.retrieve(b1.id);
    expect(again).toMatchObject({ status: "completed", output_file_id: done1.output_file_id });
    expectEachOnce(parseJsonl(await (await client.files.content(again.output_file_id!)).text()), 40);
    const listed = await client.batches.list({ limit: 10 });
    expect(listed.data.map((b) => b.id)).toEqual([b2.id, b1.id]);
    await proc.stop();
  }, 240_000);

  it("cancel and expiry through tidegate dev: each custom_id once across output and error files", async () => {
    // §6.3's 1-or-2 rule (fillIdle false): the batches must outlast the cancel and the window; the fill policy
    // would run all 150 requests in a second or two.
    const config = writeConfig("window", { completionWindowMs: 4000, fillIdle: false });
    const { proc, client } = await startDev(config);
    try {
      const n = 150; // dev dispatches at most 2 per endpoint per 1 s report: these outlast the 4 s window
      const f = await client.files.create({ file: await toFile(Buffer.from(chatJsonl(n, "llama3.2-3b", 4)), "in.jsonl"), purpose: "batch" });
      const toCancel = await client.batches.create({ input_file_id: f.id, endpoint: "/v1/chat/completions", completion_window: "24h" });
      const toExpire = await client.batches.create({ input_file_id: f.id, endpoint: "/v1/chat/completions", completion_window: "24h" });
      await pollBatch(client, toCancel.id, (s) => s === "in_progress", 30_000);
      await new Promise((r) => setTimeout(r, 1500));
      expect((await client.batches.cancel(toCancel.id)).status).toBe("cancelling");
      for (const [id, status, code] of [[toCancel.id, "cancelled", "batch_cancelled"], [toExpire.id, "expired", "batch_expired"]] as const) {
        const done = await pollBatch(client, id, (s) => s === status, 60_000);
        const c = done.request_counts!;
        expect(c.completed + c.failed).toBe(n);
        expect(c.failed).toBeGreaterThan(0);
        const out = done.output_file_id === null ? [] : parseJsonl(await (await client.files.content(done.output_file_id!)).text());
        const err = parseJsonl(await (await client.files.content(done.error_file_id!)).text());
        expect(out).toHaveLength(c.completed);
        expect(err.every((l) => (l.error as { code: string }).code === code)).toBe(true);
        const ids = new Set([...out, ...err].map((l) => l.custom_id));
        expect(ids.size).toBe(n);
        expect(out.length + err.length).toBe(n);
      }
    } finally {
      await proc.stop();
    }
  }, 120_000);

  it("--redis-url puts the queue and the files in Redis", async () => {
    const prefix = testPrefix("dev");
    const config = writeConfig("redis", { keyPrefix: prefix });
    const { proc, client } = await startDev(config, ["--redis-url", redis.url]);
    try {
      const f = await client.files.create({ file: await toFile(Buffer.from(chatJsonl(20, "llama3.2-3b", 2)), "in.jsonl"), purpose: "batch" });
      const b = await client.batches.create({ input_file_id: f.id, endpoint: "/v1/chat/completions", completion_window: "24h" });
      const done = await pollBatch(client, b.id, (s) => s === "completed", 60_000);
      expectEachOnce(parseJsonl(await (await client.files.content(done.output_file_id!)).text()), 20);
      const r = new Redis(redis.url);
      try {
        expect(await r.hget(`${prefix}b:${b.id}`, "status")).toBe("completed");
        expect(await r.exists(`${prefix}fd:${done.output_file_id}`)).toBe(1);
      } finally {
        r.disconnect();
      }
    } finally {
      await proc.stop();
      await cleanupPrefix(redis.url, prefix);
    }
  }, 120_000);
});
