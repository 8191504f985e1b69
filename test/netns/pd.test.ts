// Issue 48, real processes and real bytes: a prefill engine-sim and a decode engine-sim each in its own network
// namespace with a tbf-shaped link, `tidegate region` (fixed engines with roles) and `tidegate global` on the bridge's
// host side, streams through the official `openai` client. The prompt's KV crosses the shaped links between the two
// namespaces (the decode side checks every byte against the prefill's pattern), in the time the bandwidth allows; a
// `kill -9` of the prefill engine in the middle of a transfer ends the request with an error within 3 s.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { kvBytesPerToken, MODEL_SPECS } from "../../core/models.js";
import { freePort, metricSum, spawnTidegate, spawnTidegateIn, stopAll, type Proc } from "../e2e/procs.js";
import { createTopology, netnsUnavailable, type Topology } from "./topology.js";

const MODEL = "llama3.2-3b";
const RATE_MBIT = 200;
const KV_PER_TOKEN = kvBytesPerToken(MODEL_SPECS[MODEL]!);
const why = netnsUnavailable();

let topo: Topology | undefined;
let dir: string;
let prefill: Proc;
let decode: Proc;
let routerUrl: string;

/** An engine-sim with `role` inside node `i`'s namespace, listening on its address. */
function engineIn(i: number, role: string): Promise<Proc> {
  const n = topo!.nodes[i]!;
  return spawnTidegateIn(n.ns, `engine-sim ${role}`, ["engine-sim", "--model", MODEL, "--gpu", "h100-80gb", "--tp", "2", "--host", n.ip, "--port", "0", "--time-scale", "0.1", "--role", role], /(http:\/\/[\d.]+:\d+)/);
}

/** Polls `read` every 50 ms until it is true (at most `ms`). */
async function until(read: () => Promise<boolean>, ms: number): Promise<void> {
  const end = Date.now() + ms;
  while (!(await read())) {
    if (Date.now() > end) throw new Error(`condition not met within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe.skipIf(why !== undefined)(`prefill and decode across network namespaces (tbf ${RATE_MBIT} Mbit/s links)${why === undefined ? "" : ` — skipped: ${why}`}`, () => {
  beforeAll(async () => {
    topo = createTopology([RATE_MBIT, RATE_MBIT], 9000);
    dir = mkdtempSync(join(tmpdir(), "tidegate-netns-pd-"));
    [prefill, decode] = await Promise.all([engineIn(0, "prefill"), engineIn(1, "decode")]);
    const [p, d] = [prefill.match[1]!, decode.match[1]!];
    const grpcPort = await freePort();
    const config = {
      models: [{ name: MODEL, gpusPerInstance: { "h100-80gb": 2 } }],
      regions: [{ name: "us-east", proximity: [], grpcAddress: `127.0.0.1:${grpcPort}`, gpus: [{ type: "h100-80gb", count: 4 }], endpoints: [{ model: MODEL, gpu: "h100-80gb", instances: 2, minInstances: 2, maxInstances: 2 }] }],
      controller: { actuator: "static" },
      routing: { pdMinPrefillTokens: 0 },
      engines: { kind: "openai-http", urls: { [`us-east/${MODEL}`]: [p, d] }, roles: { [p]: "prefill", [d]: "decode" } },
      queue: { dataDir: join(dir, "data") },
    };
    const file = join(dir, "config.json");
    writeFileSync(file, JSON.stringify(config));
    await spawnTidegate("region", ["region", "--config", file, "--region", "us-east", "--log-level", "warn"], /tidegate region \S+: grpc \S+ metrics (\S+)/);
    const global = await spawnTidegate("global", ["global", "--config", file, "--port", "0", "--log-level", "warn", "--telemetry-interval-ms", "200"], /serving (http:\/\/127\.0\.0\.1:\d+)/);
    routerUrl = global.match[1]!;
  }, 120_000);

  afterAll(async () => {
    await stopAll();
    topo?.destroy();
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  });

  it("moves each prompt's KV between the namespaces at the shaped rate, checked byte for byte", async () => {
    const client = new OpenAI({ baseURL: `${routerUrl}/v1`, apiKey: "any", maxRetries: 0 });
    // ~270 prompt tokens: ~31 MB of KV, over a second at 200 Mbit/s.
    const stream = await client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "tidegate ".repeat(120) }], max_tokens: 4, stream: true, stream_options: { include_usage: true } });
    let prompt = 0;
    let completion = 0;
    for await (const chunk of stream) if (chunk.usage) [prompt, completion] = [chunk.usage.prompt_tokens, chunk.usage.completion_tokens];
    expect(completion).toBe(4);
    const bytes = prompt * KV_PER_TOKEN;
    expect(await metricSum(decode.match[1]!, "tidegate_kv_transfer_received_bytes_total")).toBe(bytes);
    expect(await metricSum(decode.match[1]!, "tidegate_kv_transfer_failed_total")).toBe(0);
    const seconds = await metricSum(decode.match[1]!, "tidegate_kv_transfer_seconds_sum");
    const shaped = (bytes * 8) / (RATE_MBIT * 1e6);
    console.log(`KV of ${prompt} prompt tokens: ${bytes} bytes in ${seconds.toFixed(3)} s (${shaped.toFixed(3)} s at ${RATE_MBIT} Mbit/s)`);
    // The bytes crossed the shaped links: no faster than the rate allows, and not far slower.
    expect(seconds).toBeGreaterThan(shaped * 0.9);
    expect(seconds).toBeLessThan(shaped * 3 + 1);
  }, 60_000);

  it("kill -9 of the prefill engine in the middle of a transfer ends the request with an error within 3 s", async () => {
    const client = new OpenAI({ baseURL: `${routerUrl}/v1`, apiKey: "any", maxRetries: 0 });
    const before = await metricSum(prefill.match[1]!, "vllm:request_success_total");
    const failedBefore = await metricSum(decode.match[1]!, "tidegate_kv_transfer_failed_total");
    // ~1,000 prompt tokens: ~110 MB of KV, several seconds at 200 Mbit/s.
    const started = (async () => {
      const stream = await client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "tidegate ".repeat(430) }], max_tokens: 4, stream: true });
      for await (const _ of stream) void _;
    })();
    const outcome = started.then(
      () => ({ ok: true as const, at: Date.now() }),
      (err: unknown) => ({ ok: false as const, at: Date.now(), err }),
    );
    // The prefill answered (its request finished): the decode instance is pulling now.
    await until(async () => (await metricSum(prefill.match[1]!, "vllm:request_success_total")) > before, 30_000);
    await new Promise((r) => setTimeout(r, 500));
    const killedAt = Date.now();
    prefill.child.kill("SIGKILL");
    const o = await outcome;
    expect(o.ok).toBe(false);
    console.log(`kill -9 of the prefill engine: the request failed ${o.at - killedAt} ms later: ${o.ok ? "" : String(o.err)}`);
    expect(o.at - killedAt).toBeLessThan(3000);
    expect(await metricSum(decode.match[1]!, "tidegate_kv_transfer_failed_total")).toBe(failedBefore + 1);
  }, 60_000);
});
