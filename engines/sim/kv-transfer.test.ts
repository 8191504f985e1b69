/**
 * Prefill/decode disaggregation in engine-sim (kv-transfer.ts), driven the way vLLM's proxy drives it: a prefill
 * instance answers kv_transfer_params, a decode instance pulls the prompt's KV through the native data plane (real
 * bytes over loopback TCP, checked against the prefill's pattern) and decodes without computing the prompt.
 */
import { hostname } from "node:os";
import { afterEach, describe, expect, it } from "vitest";
import { VirtualClock, WallClock } from "../../core/clock.js";
import { kvBytesPerToken, MODEL_SPECS } from "../../core/models.js";
import type { EngineSettings } from "../../core/engine-settings.js";
import { newSimEngine } from "../../region/runtime/build-sim-engine.js";
import { EngineSimServer, ROLE_PATH } from "./http.js";
import { OpenAIHttpEngine } from "../openai-http/openai-http-engine.js";
import { KvTransfer } from "./kv-transfer.js";
import { KV_BLOCK_TOKENS, type KvTransferParams } from "./kv-params.js";

const MODEL = "llama3.2-3b";
let servers: EngineSimServer[] = [];
afterEach(async () => {
  await Promise.all(servers.map((s) => s.close()));
  servers = [];
});

async function start(id: string, settings: EngineSettings, extra: { kvPullTimeoutMs?: number } = {}): Promise<{ url: string; server: EngineSimServer }> {
  const engine = newSimEngine({ instanceId: id, model: MODEL, gpu: "h100-80gb", tp: 2 }, { timeScale: 0.01, settings }, new WallClock());
  const server = new EngineSimServer({ engine, settings, tp: 2, ...extra });
  servers.push(server);
  return { url: await server.listen(0), server };
}

const post = (url: string, body: unknown) => fetch(new URL("/v1/completions", url), { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
const PROMPT = "tidegate ".repeat(300);

/** The prefill call of vLLM's proxy: do_remote_decode, max_tokens 1, not streamed. */
async function prefill(url: string): Promise<{ params: KvTransferParams; promptTokens: number }> {
  const res = await post(url, { model: MODEL, prompt: PROMPT, max_tokens: 1, stream: false, kv_transfer_params: { do_remote_decode: true } });
  expect(res.status).toBe(200);
  const body = (await res.json()) as { kv_transfer_params: KvTransferParams; usage: { prompt_tokens: number; completion_tokens: number } };
  expect(body.usage.completion_tokens).toBe(1);
  return { params: body.kv_transfer_params, promptTokens: body.usage.prompt_tokens };
}

describe("engine-sim prefill/decode with vLLM's kv_transfer_params", () => {
  it("moves the prompt's KV from the prefill instance to the decode instance, which streams the output", async () => {
    const p = await start("prefill-0", { role: "prefill" });
    const d = await start("decode-0", { role: "decode" });
    const { params, promptTokens } = await prefill(p.url);
    const blocks = Math.ceil(promptTokens / KV_BLOCK_TOKENS);
    expect(params).toMatchObject({ do_remote_prefill: true, do_remote_decode: false, remote_engine_id: "prefill-0", remote_host: "127.0.0.1", remote_port: Number(new URL(p.url).port), tp_size: 2 });
    expect(params.remote_block_ids).toEqual(Array.from({ length: blocks }, (_, b) => b));
    expect(p.server["kv"]!.heldCount()).toBe(1);

    const res = await post(d.url, { model: MODEL, prompt: PROMPT, max_tokens: 5, stream: true, kv_transfer_params: params });
    expect(res.status).toBe(200);
    const text = await res.text();
    expect(text.trim().endsWith("data: [DONE]")).toBe(true);
    expect(text).not.toMatch(/"error"/);
    // Every byte of the prompt's KV (llama3.2-3b: 28 layers × 2 × 8 KV heads × 128 × 2 B per token) crossed the data plane, once.
    const bytes = promptTokens * kvBytesPerToken(MODEL_SPECS[MODEL]!);
    expect(d.server["kv"]!.totals.receivedBytes).toBe(bytes);
    expect(p.server["kv"]!.totals.sentBytes).toBe(bytes);
    // Sent KV is freed: a second pull of the same params fails at once, naming the prefill instance and why.
    expect(p.server["kv"]!.heldCount()).toBe(0);
    const again = await post(d.url, { model: MODEL, prompt: PROMPT, max_tokens: 5, kv_transfer_params: params });
    expect(again.status).toBe(502);
    expect(((await again.json()) as { error: { message: string } }).error.message).toMatch(/prefill instance prefill-0 .*holds no KV for request/);
  });

  it("answers an address other hosts can reach: the listen address, this host's name when it listens on every address, or --kv-host", async () => {
    const open = async (listen: string, kvAdvertiseHost?: string) => {
      const settings = {};
      const engine = newSimEngine({ instanceId: `p-${listen}-${kvAdvertiseHost ?? ""}`, model: MODEL, gpu: "h100-80gb", tp: 2 }, { timeScale: 0.01, settings }, new WallClock());
      const server = new EngineSimServer({ engine, settings, ...(kvAdvertiseHost === undefined ? {} : { kvAdvertiseHost }) });
      servers.push(server);
      const port = new URL(await server.listen(0, listen)).port;
      return { url: `http://127.0.0.1:${port}`, server };
    };
    const all = await open("0.0.0.0");
    expect((await prefill(all.url)).params.remote_host).toBe(hostname());
    // Listening on every address with --kv-host 127.0.0.1: a decode instance here pulls through it.
    const named = await open("0.0.0.0", "127.0.0.1");
    const { params } = await prefill(named.url);
    expect(params.remote_host).toBe("127.0.0.1");
    const d = await start("decode-h", {});
    expect((await post(d.url, { model: MODEL, prompt: PROMPT, max_tokens: 2, kv_transfer_params: params })).status).toBe(200);
  });

  it("a decode whose prefill instance is gone ends with a clear error and does not hang", async () => {
    const p = await start("prefill-1", {});
    const d = await start("decode-1", {}, { kvPullTimeoutMs: 5000 });
    const { params } = await prefill(p.url);
    await p.server.close();
    servers = servers.filter((s) => s !== p.server);
    const t0 = Date.now();
    const res = await post(d.url, { model: MODEL, prompt: PROMPT, max_tokens: 3, kv_transfer_params: params });
    expect(res.status).toBe(502);
    expect(((await res.json()) as { error: { message: string } }).error.message).toMatch(/pulling the KV of .* from prefill instance prefill-1 .* failed/);
    expect(Date.now() - t0).toBeLessThan(5000);
  });

  it("refuses what the role or the contract does not allow, naming the field", async () => {
    const p = await start("prefill-2", { role: "prefill" });
    const d = await start("decode-2", { role: "decode" });
    const both = await start("both-2", {});
    const plain = { model: MODEL, prompt: "hi", max_tokens: 2 };
    const message = async (r: Response) => ({ status: r.status, message: ((await r.json()) as { error: { message: string } }).error.message });
    expect(await message(await post(p.url, plain))).toMatchObject({ status: 400, message: expect.stringMatching(/prefills for remote decode only \(role prefill\)/) });
    expect(await message(await post(d.url, { ...plain, kv_transfer_params: { do_remote_decode: true } }))).toMatchObject({ status: 400, message: expect.stringMatching(/decode instance \(role decode\).*does not prefill for a remote decode/) });
    // A decode instance serves a request whole (a short prompt the router did not split), as vLLM's consumer does.
    expect((await post(d.url, plain)).status).toBe(200);
    expect(await message(await post(both.url, { ...plain, stream: true, kv_transfer_params: { do_remote_decode: true } }))).toMatchObject({ status: 400, message: expect.stringMatching(/not streamed/) });
    expect(await message(await post(both.url, { ...plain, kv_transfer_params: { do_remote_prefill: true, remote_host: "127.0.0.1" } }))).toMatchObject({ status: 400, message: expect.stringMatching(/kv_transfer_params\.remote_engine_id/) });
    expect(await message(await post(both.url, { ...plain, kv_transfer_params: { do_remote_prefill: true, do_remote_decode: true } }))).toMatchObject({ status: 400, message: expect.stringMatching(/kv_transfer_params\.do_remote_prefill/) });
    // "both" serves plain requests too.
    expect((await post(both.url, plain)).status).toBe(200);
  });
});

describe("the simulated core with KV from a prefill instance", () => {
  it("computes only the prompt's last token: the first token comes after a 1-token prefill, not the whole prompt's", () => {
    const first = (remoteTokens: number | undefined): number => {
      const clock = new VirtualClock(0);
      const engine = newSimEngine({ instanceId: "i", model: MODEL, gpu: "h100-80gb", tp: 2 }, { timeScale: 1, settings: { prefixBlockTokens: 0 } }, clock);
      let at = -1;
      engine.core.submit({ id: "r", promptTokens: 4000, maxTokens: 2, priority: 0, ...(remoteTokens === undefined ? {} : { remoteTokens }) }, { onFirstToken: (t) => (at = t) });
      clock.advanceToSync(60_000);
      return at;
    };
    const profile = newSimEngine({ instanceId: "p", model: MODEL, gpu: "h100-80gb", tp: 2 }, { timeScale: 1 }, new VirtualClock(0)).core["profile"] as { prefillMs(tokens: number): number };
    expect(first(undefined)).toBeCloseTo(profile.prefillMs(4000), 6);
    expect(first(3999)).toBeCloseTo(profile.prefillMs(1), 6);
  });
});

describe("what a prefill instance holds", () => {
  it("drops the oldest held KV past its byte bound, and that request's decode fails naming why", async () => {
    const perToken = kvBytesPerToken(MODEL_SPECS[MODEL]!);
    const kv = new KvTransfer({ model: MODEL, engineId: "p", host: "127.0.0.1", httpPort: () => 1, tp: 2, maxHeldBytes: 250 * perToken });
    try {
      kv.offer("a", 100);
      kv.offer("b", 100);
      expect([kv.heldCount(), kv.totals.dropped]).toEqual([2, 0]);
      kv.offer("c", 100); // 300 tokens' KV held > 250: "a" goes
      expect([kv.heldCount(), kv.totals.dropped]).toEqual([2, 1]);
      await expect(kv.send({ remote_request_id: "a", host: "127.0.0.1", port: 9, run_id: 1 })).rejects.toThrow(/holds no KV for request a .*oldest past/);
    } finally {
      kv.close();
    }
  });

  it("a prefill instance switched to decode (BlitzScale §5.2; ROLE_PATH through the openai-http adapter) decodes from a remote prefill at once", async () => {
    const p = await start("prefill-1", { role: "prefill" });
    const q = await start("prefill-2", { role: "prefill" });
    const engine = new OpenAIHttpEngine({ instanceId: "prefill-2", model: MODEL, baseUrl: q.url, clock: new WallClock(), kvBytesCapacity: 1e9, role: "prefill" });
    try {
      await engine.switchRole("decode");
      expect(engine.role).toBe("decode");
      expect(((await (await fetch(new URL("/health", q.url))).json()) as { settings: EngineSettings }).settings.role).toBe("decode");
      // It refuses a prefill for a remote decode now, and decodes from the other prefill instance.
      expect((await post(q.url, { model: MODEL, prompt: PROMPT, max_tokens: 1, stream: false, kv_transfer_params: { do_remote_decode: true } })).status).toBe(400);
      const { params } = await prefill(p.url);
      const res = await post(q.url, { model: MODEL, prompt: PROMPT, max_tokens: 3, stream: true, kv_transfer_params: params });
      expect(res.status).toBe(200);
      expect((await res.text()).trim().endsWith("data: [DONE]")).toBe(true);
      // A colocated engine-sim does not switch; a role that is neither is refused.
      const both = await start("both-0", {});
      const refused = await fetch(new URL(ROLE_PATH, both.url), { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ role: "decode" }) });
      expect(refused.status).toBe(409);
      const bad = await fetch(new URL(ROLE_PATH, q.url), { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ role: "both" }) });
      expect(bad.status).toBe(400);
    } finally {
      await engine.close();
    }
  });
});
