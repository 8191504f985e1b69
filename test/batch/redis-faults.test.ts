/**
 * Redis faults (issue 15 item 5), over real processes and a private redis-server this test may kill:
 * - Redis (AOF, `appendfsync always`) is killed with SIGKILL during a 10,000-request batch through `tidegate global`
 *   and three `tidegate region` processes, and restarted on the same port and data: the batch completes with every
 *   custom_id exactly once (nothing lost, nothing duplicated); while Redis is down Batch and Files API calls answer
 *   503 `queue_unavailable` with a message naming Redis and a Retry-After, and interactive streams are served as
 *   before; the router logs the outage once, not once per reconnect.
 * - Redis with an ACL user (the default user off), and Redis over TLS with client certificates, both work from
 *   config (`queue.redisUrl` with the user in it, `queue.redisTls`): a batch completes through each.
 * The test starts its own redis-server even when REDIS_URL is set: it must kill and restart it.
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Redis, type RedisOptions } from "ioredis";
import OpenAI, { toFile } from "openai";
import { stopAll, type Proc } from "../e2e/procs.js";
import { hasOpenssl, makeTestCa, opensslMissing } from "../helpers/certs.js";
import { spawnRedisServer, type RedisServer } from "../helpers/redis.js";
import { expectEachCustomIdOnce, FLEET_MODEL as MODEL, FLEET_REGIONS, startGlobal, startRegion, streamChatOnce, writeFleetConfig } from "./fleet.js";
import { chatJsonl, parseJsonl, pollBatch, startHarness } from "./harness.js";

const hasRedisServer = (() => {
  try {
    execFileSync("redis-server", ["--version"], { stdio: "pipe" });
    return true;
  } catch {
    return false;
  }
})();

const N = 10_000;
let dir: string;
const servers: RedisServer[] = [];

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "tidegate-redis-faults-"));
});
afterAll(async () => {
  await stopAll();
  await Promise.all(servers.map((s) => s.kill()));
  rmSync(dir, { recursive: true, force: true });
});

/** `n` streams, `concurrency` at a time. */
async function streams(base: string, n: number, concurrency = 4): Promise<{ ttftMs: number; ok: boolean }[]> {
  const out: { ttftMs: number; ok: boolean }[] = [];
  let next = 0;
  await Promise.all(Array.from({ length: concurrency }, async () => {
    while (next < n) {
      next++;
      out.push(await streamChatOnce(base, 8));
    }
  }));
  return out;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

const aof = () => ["--dir", dir, "--appendonly", "yes", "--appendfsync", "always", "--save", ""];

describe.skipIf(!hasRedisServer)("Redis faults (real processes, a private redis-server)", () => {
  it("kill -9 of Redis mid-batch: 503 queue_unavailable while down, interactive unaffected, then every custom_id exactly once", async () => {
    let redis = await spawnRedisServer({ args: aof() });
    servers.push(redis);
    const config = await writeFleetConfig(dir, { redisUrl: redis.url, keyPrefix: "faults:" });
    const regions: Proc[] = await Promise.all(FLEET_REGIONS.map((r) => startRegion(config, r)));
    // All of its warnings are kept: the outage's lines are counted at the end, after a minute of a loaded fleet.
    const global = await startGlobal(config, "warn", 16 << 20);
    const base = global.match[1]!;
    const client = new OpenAI({ apiKey: "x", baseURL: `${base}/v1`, maxRetries: 0 });
    // 512 output tokens each: long enough that the outage lands with most of the batch still to run, and that it
    // still runs when interactive TTFT is measured again after the restart; short enough that the whole batch takes
    // about 20 s on a quiet machine.
    const file = await client.files.create({ file: await toFile(Buffer.from(chatJsonl(N, MODEL, 512)), "big.jsonl"), purpose: "batch" });
    const batch = await client.batches.create({ input_file_id: file.id, endpoint: "/v1/chat/completions", completion_window: "24h" });
    const started = Date.now();
    let beforeKill = 0;
    for (;;) {
      const b = await client.batches.retrieve(batch.id);
      beforeKill = b.request_counts!.completed;
      if (beforeKill >= 300) break;
      if (Date.now() - started > 120_000) throw new Error(`no progress: ${JSON.stringify(b)}\n${global.output()}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    // Interactive TTFT beside the running batch with Redis up, just before the kill: what the outage is compared with.
    // The engines hold the same leased batch work a moment later when Redis is gone, so it is like for like (after
    // the restart they hold less: batch fills less beside interactive traffic, router/dispatch policy.ts).
    const before = await streams(base, 8);
    expect(before.every((s) => s.ok)).toBe(true);
    await redis.kill();
    const killedAt = Date.now();

    const down = await fetch(`${base}/v1/batches/${batch.id}`);
    const downBody = (await down.json()) as { error: { code: string; message: string; type: string } };
    console.log(`redis faults: while down GET /v1/batches/:id → ${down.status} (${Date.now() - killedAt} ms after the kill): ${downBody.error.message}`);
    expect(down.status).toBe(503);
    expect(down.headers.get("retry-after")).toBe("1");
    expect(downBody.error.code).toBe("queue_unavailable");
    expect(downBody.error.message).toContain(`Redis at 127.0.0.1:${redis.port}`);
    const upload = await client.files.create({ file: await toFile(Buffer.from(chatJsonl(2, MODEL)), "small.jsonl"), purpose: "batch" }).then(() => undefined, (e: unknown) => e);
    expect(upload).toBeInstanceOf(OpenAI.APIError);
    expect((upload as InstanceType<typeof OpenAI.APIError>).status).toBe(503);
    // Once the router has seen the loss, calls fail fast instead of waiting on reconnects.
    const listStarted = Date.now();
    const list = await fetch(`${base}/v1/batches`);
    const listMs = Date.now() - listStarted;
    console.log(`redis faults: GET /v1/batches → ${list.status} in ${listMs} ms`);
    expect(list.status).toBe(503);
    expect(listMs).toBeLessThan(1000);

    const during = await streams(base, 8);
    const downForMs = Date.now() - killedAt;
    expect(during.every((s) => s.ok)).toBe(true);
    // Keep it down a little longer so results finished during the outage wait in the dispatcher.
    await new Promise((r) => setTimeout(r, Math.max(0, 3000 - downForMs)));

    redis = await spawnRedisServer({ port: redis.port, args: aof() });
    servers.push(redis);
    const restartedAt = Date.now();
    let afterRestart: OpenAI.Batches.Batch | undefined;
    while (afterRestart === undefined) {
      afterRestart = await client.batches.retrieve(batch.id).catch(() => undefined);
      if (Date.now() - restartedAt > 30_000) throw new Error(`Batch API not back 30 s after Redis restarted\n${global.output()}`);
      if (afterRestart === undefined) await new Promise((r) => setTimeout(r, 50));
    }
    console.log(`redis faults: Batch API back ${Date.now() - restartedAt} ms after Redis restarted; ${beforeKill} completed before the kill, ${afterRestart.request_counts!.completed} in Redis after the restart (AOF)`);
    // appendfsync always: every result acknowledged before the kill is still there.
    expect(afterRestart.request_counts!.completed).toBeGreaterThanOrEqual(beforeKill);
    // Interactive TTFT during the outage against just before it: served alike (the outage pauses batch dispatch, so
    // it is no slower then). And with Redis back and the batch running again, every stream served.
    const running = await client.batches.retrieve(batch.id);
    const after = await streams(base, 8);
    console.log(`redis faults: interactive median TTFT ${median(before.map((s) => s.ttftMs)).toFixed(1)} ms beside the batch just before the kill, ${median(during.map((s) => s.ttftMs)).toFixed(1)} ms with Redis down (${downForMs} ms into the outage), ${median(after.map((s) => s.ttftMs)).toFixed(1)} ms after it with the batch running (${running.request_counts!.completed} done when it began)`);
    expect(after.every((s) => s.ok)).toBe(true);
    expect(running.request_counts!.completed).toBeLessThan(N);
    // Judged against the slower of the two windows around the outage: on a machine whose cores are busy with other
    // work, what runs beside this test changes within seconds (a CI run with two busy loops saw 485 ms before and
    // 1,240 ms during, with nothing of the outage on the interactive path), and one window alone cannot tell that
    // from an outage that slows interactive traffic. An outage that does slow it is slower than both.
    const baselineMs = Math.max(median(before.map((s) => s.ttftMs)), median(after.map((s) => s.ttftMs)));
    expect(median(during.map((s) => s.ttftMs))).toBeLessThanOrEqual(2 * baselineMs + 25);

    const done = await pollBatch(client, batch.id, (s) => s === "completed" || s === "failed", 330_000 - (Date.now() - started));
    console.log(`redis faults: batch finished in ${((Date.now() - started) / 1000).toFixed(1)} s; counts ${JSON.stringify(done.request_counts)}`);
    expect(done.request_counts).toEqual({ total: N, completed: N, failed: 0 });
    expect(done.error_file_id).toBeNull();
    expectEachCustomIdOnce(parseJsonl(await (await client.files.content(done.output_file_id!)).text()), N);
    // One line per outage per client, not one per reconnect attempt.
    const out = global.output();
    const lost = out.match(/Redis connection lost: Batch API calls answer 503/g)?.length;
    if (lost !== 1) console.log(`redis faults: the router's output (${out.length} characters) ends with:\n${out.slice(-4000)}`);
    expect(lost).toBe(1);
    expect(out.match(/batch queue unavailable; dispatch pauses/g)?.length).toBe(1);
    expect(out.match(/Redis connection is back/g)?.length).toBe(2); // the batch tier's client and the plans client
    expect(out).toMatch(/batch queue available again; dispatch resumes/);
    await Promise.all([global.stop(), ...regions.map((r) => r.stop())]);
  }, 420_000);

  it("an ACL user (default user off) works from config; a wrong password is refused by Redis", async () => {
    const redis = await spawnRedisServer({
      args: ["--save", "", "--appendonly", "no", "--user", "default", "off", "--user", "tidegate", "on", ">s3cret-acl-pass", "~*", "&*", "+@all"],
      url: (port) => `redis://tidegate:s3cret-acl-pass@127.0.0.1:${port}`,
    });
    servers.push(redis);
    const h = await startHarness({ queue: { backend: "redis", redisUrl: redis.url, keyPrefix: "acl:" } });
    try {
      const file = await h.client.files.create({ file: await toFile(Buffer.from(chatJsonl(20)), "acl.jsonl"), purpose: "batch" });
      const b = await h.client.batches.create({ input_file_id: file.id, endpoint: "/v1/chat/completions", completion_window: "24h" });
      const done = await pollBatch(h.client, b.id, (s) => s === "completed" || s === "failed");
      expect(done.request_counts).toEqual({ total: 20, completed: 20, failed: 0 });
    } finally {
      await h.close();
    }
    // ACL is really on: the default user and a wrong password are refused.
    expect(await refusal(`redis://127.0.0.1:${redis.port}`)).toMatch(/NOAUTH/);
    expect(await refusal(`redis://tidegate:wrong-pass@127.0.0.1:${redis.port}`)).toMatch(/WRONGPASS/);
  });

  if (opensslMissing !== undefined) it.skip(`TLS with client certificates: ${opensslMissing}`, () => undefined);
  it.skipIf(!hasOpenssl)("TLS with client certificates (and an ACL user) works from config; a client without a certificate is refused", async () => {
    const ca = makeTestCa(dir, "redis-ca");
    const server = ca.issue("redis-server");
    const clientCert = ca.issue("tidegate-client");
    const tlsArgs = ["--tls-cert-file", server.certFile, "--tls-key-file", server.keyFile, "--tls-ca-cert-file", ca.caFile, "--tls-auth-clients", "yes"];
    const redis = await spawnRedisServer({
      args: ["--save", "", "--appendonly", "no", "--user", "default", "off", "--user", "tidegate", "on", ">tls-acl-pass", "~*", "&*", "+@all", ...tlsArgs],
      url: (port) => `rediss://tidegate:tls-acl-pass@127.0.0.1:${port}`,
      client: { tls: { ca: [readFileSync(ca.caFile)], cert: readFileSync(clientCert.certFile), key: readFileSync(clientCert.keyFile) } },
      tls: true,
    });
    servers.push(redis);
    const h = await startHarness({ queue: { backend: "redis", redisUrl: redis.url, keyPrefix: "tls:", redisTls: { caFile: ca.caFile, ...clientCert } } });
    try {
      const file = await h.client.files.create({ file: await toFile(Buffer.from(chatJsonl(20)), "tls.jsonl"), purpose: "batch" });
      const b = await h.client.batches.create({ input_file_id: file.id, endpoint: "/v1/chat/completions", completion_window: "24h" });
      const done = await pollBatch(h.client, b.id, (s) => s === "completed" || s === "failed");
      expect(done.request_counts).toEqual({ total: 20, completed: 20, failed: 0 });
    } finally {
      await h.close();
    }
    // Without a client certificate the handshake fails; without TLS the port does not speak Redis.
    expect(await refusal(redis.url, { tls: { ca: [readFileSync(ca.caFile)] } })).not.toBe("answered");
    expect(await refusal(`redis://tidegate:tls-acl-pass@127.0.0.1:${redis.port}`)).not.toBe("answered");
  });
});

/** What a client at `url` gets for PING: "answered", or why not. */
async function refusal(url: string, options: RedisOptions = {}): Promise<string> {
  const r = new Redis(url, { ...options, lazyConnect: true, enableReadyCheck: false, maxRetriesPerRequest: 0, retryStrategy: () => null, connectTimeout: 2000 });
  let reported: string | undefined;
  r.on("error", (err: Error) => void (reported ??= err.message));
  try {
    await r.connect();
    await r.ping();
    return "answered";
  } catch (err) {
    // ioredis reports a refused AUTH as an error event, then closes: the event says why.
    return reported ?? (err as Error).message;
  } finally {
    r.disconnect();
  }
}
