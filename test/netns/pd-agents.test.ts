// Issue 48, real processes and real bytes with agent-started engines: `tidegate region` (agents mode) and `tidegate
// global` on the bridge's host side, one `tidegate agent` in each of two network namespaces (tbf-shaped links). The
// region's llama3.2-3b is a prefill pool and a decode pool (regions[].endpoints[].role), one instance each: the
// agents start their engine-sims with those roles (StartEngine's settings), one per namespace. Streams through the
// official `openai` client: the prompt's KV crosses the shaped links between the namespaces (the decode engine checks
// every byte), in the time the bandwidth allows; `kill -9` of the prefill engine in the middle of a transfer ends the
// request with an error within 3 s.
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { kvBytesPerToken, MODEL_SPECS } from "../../core/models.js";
import type { RegionInstances } from "../../core/ports.js";
import { metricSum } from "../e2e/procs.js";
import { ADMIN_KEY, processesWith, waitFor } from "../region/cluster.js";
import { startNetnsCluster, type NetnsCluster } from "./cluster.js";
import { netnsUnavailable } from "./topology.js";

const MODEL = "llama3.2-3b";
const GPU = "h100-80gb";
const RATE_MBIT = 200;
const KV_PER_TOKEN = kvBytesPerToken(MODEL_SPECS[MODEL]!);
const why = netnsUnavailable();

let n: NetnsCluster | undefined;
let listing: RegionInstances;
const urlOf = (role: string) => listing.instances.find((i) => i.role === role && i.state === "serving")!.url;

describe.skipIf(why !== undefined)(`prefill and decode pools on agents across network namespaces (tbf ${RATE_MBIT} Mbit/s links)${why === undefined ? "" : ` — skipped: ${why}`}`, () => {
  beforeAll(async () => {
    const ep = { model: MODEL, gpu: GPU, instances: 1, minInstances: 1, maxInstances: 1 };
    n = await startNetnsCluster({
      name: "pd-agents",
      rates: [RATE_MBIT, RATE_MBIT],
      region: "r1",
      slots: 2,
      model: MODEL,
      serving: 2,
      withGlobal: true,
      config: {
        models: [{ name: MODEL, gpusPerInstance: { [GPU]: 2 } }],
        regions: [{ name: "r1", gpus: [{ type: GPU, count: 4 }], endpoints: [{ ...ep, role: "prefill" }, { ...ep, role: "decode" }] }],
        controller: { reconcileIntervalMs: 100, agentLostAfterMs: 5000 },
        router: { port: 0, adminKeys: [ADMIN_KEY] },
        routing: { pdMinPrefillTokens: 0 },
        engines: { startTimeoutMs: 30_000, timeScale: 0.1 },
        parameters: { stallMs: 3000, models: { [MODEL]: { bytes: 8 * 1024 * 1024, seed: 21 } } },
      },
    });
    listing = await n.cluster.listing();
  }, 180_000);

  afterAll(async () => {
    await n?.close();
  });

  it("the agents start one engine per pool, each with its role, on different nodes", () => {
    const serving = listing.instances.filter((i) => i.state === "serving");
    expect(serving.map((i) => i.role).sort()).toEqual(["decode", "prefill"]);
    expect(new Set(serving.map((i) => i.node)).size).toBe(2);
  });

  it("moves each prompt's KV between the namespaces at the shaped rate, checked byte for byte", async () => {
    const client = new OpenAI({ baseURL: `${n!.cluster.routerUrl}/v1`, apiKey: "any", maxRetries: 0 });
    // ~270 prompt tokens: ~31 MB of KV, over a second at 200 Mbit/s.
    const stream = await client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "tidegate ".repeat(120) }], max_tokens: 4, stream: true, stream_options: { include_usage: true } });
    let prompt = 0;
    let completion = 0;
    for await (const chunk of stream) if (chunk.usage) [prompt, completion] = [chunk.usage.prompt_tokens, chunk.usage.completion_tokens];
    expect(completion).toBe(4);
    const decode = urlOf("decode");
    const bytes = prompt * KV_PER_TOKEN;
    expect(await metricSum(decode, "tidegate_kv_transfer_received_bytes_total")).toBe(bytes);
    expect(await metricSum(decode, "tidegate_kv_transfer_failed_total")).toBe(0);
    const seconds = await metricSum(decode, "tidegate_kv_transfer_seconds_sum");
    const shaped = (bytes * 8) / (RATE_MBIT * 1e6);
    console.log(`agent-started engines: KV of ${prompt} prompt tokens: ${bytes} bytes in ${seconds.toFixed(3)} s (${shaped.toFixed(3)} s at ${RATE_MBIT} Mbit/s)`);
    expect(seconds).toBeGreaterThan(shaped * 0.9);
    expect(seconds).toBeLessThan(shaped * 3 + 1);
  }, 60_000);

  it("kill -9 of the prefill engine in the middle of a transfer ends the request with an error within 3 s", async () => {
    const client = new OpenAI({ baseURL: `${n!.cluster.routerUrl}/v1`, apiKey: "any", maxRetries: 0 });
    const prefill = urlOf("prefill");
    const decode = urlOf("decode");
    const before = await metricSum(prefill, "vllm:request_success_total");
    const failedBefore = await metricSum(decode, "tidegate_kv_transfer_failed_total");
    // ~1,000 prompt tokens: ~110 MB of KV, several seconds at 200 Mbit/s.
    const started = (async () => {
      const stream = await client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "tidegate ".repeat(430) }], max_tokens: 4, stream: true });
      for await (const _ of stream) void _;
    })();
    const outcome = started.then(
      () => ({ ok: true as const, at: Date.now() }),
      (err: unknown) => ({ ok: false as const, at: Date.now(), err }),
    );
    await waitFor("the prefill step to finish", async () => ((await metricSum(prefill, "vllm:request_success_total")) > before ? true : undefined), 30_000);
    await new Promise((r) => setTimeout(r, 500));
    // The agent started it with its pool's role in its settings (engine-sim --settings), under its keeper process.
    const pids = [...processesWith("engine-sim", '"role":"prefill"')].filter(([, cmd]) => !cmd.includes("keeper.js")).map(([pid]) => pid);
    expect(pids).toHaveLength(1);
    const killedAt = Date.now();
    process.kill(pids[0]!, "SIGKILL");
    const o = await outcome;
    expect(o.ok).toBe(false);
    console.log(`kill -9 of the agent-started prefill engine: the request failed ${o.at - killedAt} ms later: ${o.ok ? "" : String(o.err)}`);
    expect(o.at - killedAt).toBeLessThan(3000);
    expect(await metricSum(decode, "tidegate_kv_transfer_failed_total")).toBe(failedBefore + 1);
  }, 60_000);
});
