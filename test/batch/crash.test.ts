/**
 * Crash test, multi-process, Redis backend: a 10,000-request batch runs through the real `tidegate global` and
 * three `tidegate region` processes (simulated engines); mid-run the global router and one region are killed with
 * SIGKILL and restarted. The batch must complete with exactly 10,000 output lines, every custom_id once.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import OpenAI, { toFile } from "openai";
import { stopAll } from "../e2e/procs.js";
import { cleanupPrefix, startTestRedis, testPrefix, type TestRedis } from "../helpers/redis.js";
import { expectEachCustomIdOnce, FLEET_MODEL as MODEL, FLEET_REGIONS, killHard, startGlobal, startRegion, writeFleetConfig } from "./fleet.js";
import { chatJsonl, parseJsonl } from "./harness.js";

const N = 10_000;
let redis: TestRedis;
let dir: string;
const prefix = testPrefix("crash");

beforeAll(async () => {
  redis = await startTestRedis();
  dir = mkdtempSync(join(tmpdir(), "tidegate-crash-"));
});
afterAll(async () => {
  await stopAll();
  await cleanupPrefix(redis.url, prefix);
  await redis.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe("crash test (Redis backend, real processes)", () => {
  it("a 10,000-request batch survives kill -9 of the global router and a region: 10,000 lines, each custom_id once", async () => {
    const config = await writeFleetConfig(dir, { redisUrl: redis.url, keyPrefix: prefix });
    const regions = await Promise.all(FLEET_REGIONS.map((r) => startRegion(config, r)));
    let global = await startGlobal(config);
    let client = new OpenAI({ apiKey: "x", baseURL: `${global.match[1]}/v1`, maxRetries: 0 });
    const file = await client.files.create({ file: await toFile(Buffer.from(chatJsonl(N, MODEL, 32)), "big.jsonl"), purpose: "batch" });
    const batch = await client.batches.create({ input_file_id: file.id, endpoint: "/v1/chat/completions", completion_window: "24h" });
    const started = Date.now();
    let killedAt = 0;
    for (;;) {
      const b = await client.batches.retrieve(batch.id);
      if (b.request_counts!.completed >= 2500) {
        killedAt = b.request_counts!.completed;
        break;
      }
      if (Date.now() - started > 120_000) throw new Error(`no progress: ${JSON.stringify(b)}\n${global.output()}`);
      await new Promise((r) => setTimeout(r, 100));
    }
    const probe = new Redis(redis.url);
    while ((await probe.zcard(`${prefix}leases`)) === 0 && Date.now() - started < 120_000) await new Promise((r) => setTimeout(r, 5));
    await Promise.all([killHard(global), killHard(regions[0]!)]);
    const leasedAtKill = await probe.zcard(`${prefix}leases`);
    probe.disconnect();
    console.log(`crash test: ${leasedAtKill} requests were leased (in flight) when the router died`);
    expect(leasedAtKill).toBeGreaterThan(0);
    await new Promise((r) => setTimeout(r, 300));
    regions[0] = await startRegion(config, "us-east");
    global = await startGlobal(config);
    client = new OpenAI({ apiKey: "x", baseURL: `${global.match[1]}/v1`, maxRetries: 0 });
    let done: OpenAI.Batches.Batch;
    for (;;) {
      done = await client.batches.retrieve(batch.id);
      if (done.status === "completed") break;
      if (Date.now() - started > 330_000) throw new Error(`not completed: ${JSON.stringify(done)}\n${global.output()}`);
      await new Promise((r) => setTimeout(r, 250));
    }
    console.log(`crash test: killed at ${killedAt} completed; finished in ${((Date.now() - started) / 1000).toFixed(1)} s; counts ${JSON.stringify(done.request_counts)}`);
    expect(done.request_counts).toEqual({ total: N, completed: N, failed: 0 });
    expectEachCustomIdOnce(parseJsonl(await (await client.files.content(done.output_file_id!)).text()), N);
    expect(done.error_file_id).toBeNull();
    const metrics = await (await fetch(`${global.match[1]}/metrics`)).text();
    expect(metrics).toMatch(/tidegate_batches\{status="completed"\} 1/);
    // Work the killed router had in flight came back (not by luck of an idle moment): taken back from its dead lease
    // owner (queue.ownerTtlMs) or, with this fleet's short 3 s lease, often by lease expiry first.
    const expiries = Number(/tidegate_queue_lease_expiries_total (\d+)/.exec(metrics)?.[1] ?? "0");
    const reclaimed = Number(/tidegate_queue_leases_reclaimed_total (\d+)/.exec(metrics)?.[1] ?? "0");
    console.log(`crash test: after restart, lease expiries ${expiries}, leases taken back from the dead router ${reclaimed}`);
    expect(expiries + reclaimed).toBeGreaterThan(0);
    await Promise.all([global.stop(), ...regions.map((r) => r.stop())]);
  }, 420_000);
});
