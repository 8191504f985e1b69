/**
 * Issue 34: the prefix scorer with real engine-sim processes behind the openai-http adapter. Two `tidegate
 * engine-sim` processes (time scale 0.05) sit behind one region Gateway with the prefix-aware policy; the gateway's
 * prefix index follows each engine's KV-event stream (GET /tidegate/kv_events). A conversation's first turn lands on
 * the second instance (the first is busy then); once both are idle, JSQ would send the next turn to the first listed,
 * and the prefix scorer sends it to the instance holding the conversation, whose /metrics then count the hit.
 * Also checks prefix identity: the block hashes the engine stores are the ones the router computes from the body.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WallClock } from "../../core/clock.js";
import { blockHashesOfBody } from "../../core/prefix.js";
import type { GenerateRequest } from "../../core/ports.js";
import type { KvEvent } from "../../core/prefix.js";
import { OpenAIHttpEngine } from "../../engines/openai-http/openai-http-engine.js";
import { KvEventStream } from "../../engines/openai-http/kv-events.js";
import { Gateway } from "../../region/gateway/gateway.js";
import { PREFIX_AWARE_POLICY } from "../../region/gateway/scoring/plugins.js";
import { spawnTidegate, stopAll, type Proc } from "./procs.js";

const MODEL = "llama3.2-3b";
let procs: Proc[] = [];

beforeAll(async () => {
  procs = await Promise.all(["a", "b"].map((n) => spawnTidegate(`engine-sim ${n}`, ["engine-sim", "--model", MODEL, "--gpu", "h100-80gb", "--port", "0", "--time-scale", "0.05"], /^(http:\/\/127\.0\.0\.1:\d+)\n/m)));
});
afterAll(async () => {
  for (const p of procs) expect(await p.stop()).toBe(0);
  await stopAll();
});

/** Waits (bounded) until `ok()` holds, polling every 20 ms. */
async function until(ok: () => boolean | Promise<boolean>, what: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await ok())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

async function metric(url: string, name: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith(`${name}{`));
  return line === undefined ? Number.NaN : Number(line.split(" ").at(-1));
}

describe("prefix scorer over engine-sim processes (openai-http adapter, KV events)", () => {
  it("sends a conversation's next turn to the instance holding its prefix, which hits its cache", async () => {
    const clock = new WallClock();
    const urls = procs.map((p) => p.match[1]!);
    const engines = urls.map((url, i) => new OpenAIHttpEngine({ instanceId: `i${i}`, model: MODEL, baseUrl: url, clock, metricsIntervalMs: 100 }));
    const routed: string[] = [];
    const gw = new Gateway({ region: "r", clock, statsRefreshMs: 0, routing: { policy: PREFIX_AWARE_POLICY, blockTokens: 16 }, onRouted: (_req, id) => routed.push(id) });
    for (const e of engines) gw.addInstance("h100-80gb", e);
    // A second subscriber to instance 1's stream, to compare the engine's hashes with the router's.
    const seen: KvEvent[] = [];
    const probe = new KvEventStream({ url: new URL(urls[1]! + "/"), clock, blockTokens: 16 });
    const off = probe.subscribe((ev) => seen.push(ev));
    try {
      await until(() => engines.every((e) => e.kvEvents.open) && probe.open, "the KV-event streams to open");
      const req = (id: string, body: Record<string, unknown>, maxTokens: number): GenerateRequest => ({ id, model: MODEL, kind: "chat", promptTokens: 600, maxTokens, priority: 0, body: { ...body, model: MODEL, max_tokens: maxTokens } });
      const drain = async (it: AsyncIterable<unknown>) => {
        for await (const _ of it) void _;
      };
      // A long request occupies instance 0 (first listed; both idle); turn 1 then goes to instance 1 (less load).
      const filler = drain(gw.generate(req("filler", { messages: [{ role: "user", content: "z".repeat(400) }] }, 300)));
      const turn1Body = { messages: [{ role: "user", content: "q".repeat(2400) }] };
      await drain(gw.generate(req("turn1", turn1Body, 4)));
      await filler;
      expect(routed).toEqual(["i0", "i1"]);
      const turn1Blocks = blockHashesOfBody("chat", turn1Body, 16);
      await until(() => gw.prefixIndex.prefixBlocks("i1", turn1Blocks) === turn1Blocks.length && seen.some((e) => e.type === "BlockStored" && e.blockHashes.includes(turn1Blocks.at(-1)!)), "instance 1's turn-1 blocks in the index");
      // The engine stored exactly the router's hashes of turn 1 (prefix identity), in order, on GPU (and in its host tier).
      const stored = seen.flatMap((e) => (e.type === "BlockStored" && e.medium !== "CPU" ? e.blockHashes : []));
      expect(stored.filter((h) => turn1Blocks.includes(h))).toEqual(turn1Blocks);
      expect(gw.prefixIndex.followsEvents("i1")).toBe(true);
      // Both idle now: JSQ would pick i0 (first listed; route() without a prompt shows it); the prefix scorer picks i1.
      await until(async () => (await Promise.all(engines.map((e) => e.scrape()))).every(Boolean) && engines.every((e) => e.stats().running === 0 && e.stats().remainingTokens === 0), "both engines idle");
      expect(gw.route(MODEL)?.instanceId).toBe("i0");
      const turn2Body = { messages: [...turn1Body.messages, { role: "assistant", content: "a".repeat(200) }, { role: "user", content: "r".repeat(200) }] };
      const hitsBefore = await metric(urls[1]!, "vllm:prefix_cache_hits_total");
      await drain(gw.generate(req("turn2", turn2Body, 4)));
      expect(routed.at(-1)).toBe("i1");
      expect((await metric(urls[1]!, "vllm:prefix_cache_hits_total")) - hitsBefore).toBe(turn1Blocks.length * 16);
      expect(await metric(urls[0]!, "vllm:prefix_cache_hits_total")).toBe(0);
    } finally {
      off();
      probe.close();
      await gw.close();
    }
  });
});
