/**
 * Issue 32 item 4 through real processes: `kill -9` of `tidegate global` mid-batch, on the Redis queue (a private
 * redis-server) and on the embedded queue (a temp data directory), each with the default `queue.leaseMs` (120 s).
 * The restarted router takes back the dead incarnation's leases once its lease-owner heartbeat has run out
 * (`queue.ownerTtlMs`, 5 s), not when the leases expire: the batch completes with every custom_id exactly once, and
 * its progress (results written, as the Batch API reports them) never stands still for more than 10 s, the kill and
 * restart included. Without the take-back the requests leased at the kill would hold the batch's last results back
 * until their leases ran out, a gap of about 2 minutes. The batch's output tokens by capacity (issue 37) survive the
 * kill: the restarted router's Batch API object counts every token of the output file.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import OpenAI, { toFile } from "openai";
import { stopAll, type Proc } from "../e2e/procs.js";
import { cleanupPrefix, startTestRedis, testPrefix, type TestRedis } from "../helpers/redis.js";
import { expectEachCustomIdOnce, FLEET_MODEL as MODEL, FLEET_REGIONS, killHard, startGlobal, startRegion, writeFleetConfig } from "./fleet.js";
import { chatJsonl, parseJsonl } from "./harness.js";

const N = 2000;
/**
 * Output tokens per request: enough that three quarters of the batch are still to run when the router is killed. With
 * 32 the whole batch finished in ~3 s once dispatch moved to the framed connection (issue 47), and in two CI runs the
 * kill, at the first poll that saw a quarter done, came after the last result: nothing was left to take back.
 */
const MAX_TOKENS = 128;
/** The default lease (120 s), so that only the owner take-back can bring the killed router's requests back in time. */
const LEASE_MS = 120_000;
const OWNER_TTL_MS = 5000;
/**
 * The longest the batch may stand still. What the kill costs by design: the restart (spawning `tidegate global` and
 * its start-up: 1–3 s here, more on a busy machine) until the waiting requests flow again, and for the requests the
 * dead router had leased, its heartbeat's TTL (5 s after its last heartbeat, ≤ 1 s before the kill) plus one 1 s
 * maintenance pass: ≤ 6 s after the kill, while the other requests keep the batch moving. 10 s (the target) leaves
 * 4 s of headroom for a loaded machine, and is far from the 120 s lease it replaces.
 */
const MAX_GAP_MS = 10_000;

let redis: TestRedis;
let dir: string;
const prefix = testPrefix("router-kill");

beforeAll(async () => {
  redis = await startTestRedis();
  dir = mkdtempSync(join(tmpdir(), "tidegate-router-kill-"));
});
afterAll(async () => {
  await stopAll();
  await cleanupPrefix(redis.url, prefix);
  await redis.stop();
  rmSync(dir, { recursive: true, force: true });
});

async function metric(base: string, name: string): Promise<number> {
  const text = await (await fetch(`${base}/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith(`${name} `));
  return line === undefined ? Number.NaN : Number(line.split(" ").pop());
}

/**
 * Runs an N-request batch on `config`, kills the router with SIGKILL once a quarter is done, restarts it and follows
 * the batch to the end. Returns what the checks need.
 */
async function killMidBatch(config: string, label: string) {
  const regions = await Promise.all(FLEET_REGIONS.map((r) => startRegion(config, r)));
  let global: Proc = await startGlobal(config);
  let base = global.match[1]!;
  let client = new OpenAI({ apiKey: "x", baseURL: `${base}/v1`, maxRetries: 0 });
  const file = await client.files.create({ file: await toFile(Buffer.from(chatJsonl(N, MODEL, MAX_TOKENS)), "kill.jsonl"), purpose: "batch" });
  const batch = await client.batches.create({ input_file_id: file.id, endpoint: "/v1/chat/completions", completion_window: "24h" });
  /** Every time the completed count was seen to grow: [wall ms, completed]. */
  const progress: [number, number][] = [[Date.now(), 0]];
  const see = (b: OpenAI.Batches.Batch) => {
    const n = b.request_counts!.completed + b.request_counts!.failed;
    if (n > progress.at(-1)![1]) progress.push([Date.now(), n]);
  };
  const started = Date.now();
  // Polls until `until`; a deadline bounds every wait (the batch takes well under a minute when healthy).
  const follow = async (until: (b: OpenAI.Batches.Batch) => boolean, deadlineMs: number): Promise<OpenAI.Batches.Batch> => {
    for (;;) {
      const b = await client.batches.retrieve(batch.id);
      see(b);
      if (until(b)) return b;
      if (Date.now() > deadlineMs) throw new Error(`${label}: ${JSON.stringify(b.request_counts)} ${b.status} at the deadline\n${global.output()}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  };
  await follow((b) => b.request_counts!.completed >= N / 4, started + 180_000);
  // The leases the router holds now (its own gauge, refreshed every second): what the kill strands.
  const leasedAtKill = await metric(base, "tidegate_queue_leased");
  const killedAtMs = Date.now();
  await killHard(global);
  global = await startGlobal(config);
  base = global.match[1]!;
  client = new OpenAI({ apiKey: "x", baseURL: `${base}/v1`, maxRetries: 0 });
  const restartedAtMs = Date.now();
  const done = await follow((b) => b.status === "completed", restartedAtMs + 240_000);
  const lines = parseJsonl(await (await client.files.content(done.output_file_id!)).text());
  const reclaimed = await metric(base, "tidegate_queue_leases_reclaimed_total");
  const expiries = await metric(base, "tidegate_queue_lease_expiries_total");
  let maxGapMs = 0;
  for (let i = 1; i < progress.length; i++) maxGapMs = Math.max(maxGapMs, progress[i]![0] - progress[i - 1]![0]);
  const figures = { leasedAtKill, restartMs: restartedAtMs - killedAtMs, maxGapMs, reclaimed, expiries, totalS: (Date.now() - started) / 1000 };
  console.log(`[router-kill] ${label}: ${JSON.stringify(figures)}`);
  await Promise.all([global.stop(), ...regions.map((r) => r.stop())]);
  return { done, lines, ...figures };
}

describe("kill -9 of the global router mid-batch: the restarted router takes the leases back within seconds", () => {
  for (const backend of ["redis", "embedded"] as const) {
    it(`${backend} queue: every custom_id once, no gap in progress over ${MAX_GAP_MS / 1000} s`, async () => {
      const queue = backend === "redis"
        ? { redisUrl: redis.url, keyPrefix: prefix, leaseMs: LEASE_MS, ownerTtlMs: OWNER_TTL_MS }
        : { backend: "embedded", dataDir: join(dir, "data"), leaseMs: LEASE_MS, ownerTtlMs: OWNER_TTL_MS };
      const config = await writeFleetConfig(join(dir), queue);
      const r = await killMidBatch(config, backend);
      expect(r.done.request_counts).toEqual({ total: N, completed: N, failed: 0 });
      expectEachCustomIdOnce(r.lines, N);
      // Its output tokens by capacity (issue 37) are the store's: the restarted router reports every token the batch
      // produced, the killed router's share included, each once. All ran at priority 1 (spare capacity).
      const outputTokens = r.lines.reduce((s, l) => s + (l.response as { body: { usage: { completion_tokens: number } } }).body.usage.completion_tokens, 0);
      expect(outputTokens).toBeGreaterThan(0);
      expect((r.done as unknown as { tidegate: { spare_tokens: number; dedicated_tokens: number } }).tidegate).toMatchObject({ spare_tokens: outputTokens, dedicated_tokens: 0 });
      // The kill stranded leased requests, and they came back by the take-back, not by lease expiry. What was leased
      // is the restarted router's count of leases it took back; the killed router's gauge just before the kill
      // (leasedAtKill, printed) is refreshed once a second and read 0 in one loaded CI run with requests in flight.
      expect(r.reclaimed).toBeGreaterThan(0);
      expect(r.expiries).toBe(0);
      expect(r.maxGapMs).toBeLessThanOrEqual(MAX_GAP_MS);
    }, 480_000);
  }
});
