/**
 * `tidegate engine-sim` over HTTP: the compiled CLI as a child process on a free port (npm test builds first).
 */
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { syntheticToken } from "../../core/openai.js";
import { spawnTidegate, stopAll, type Proc } from "../../test/e2e/procs.js";
import { seedOf } from "./sim-engine.js";
import { WallClock } from "../../core/clock.js";
import { isTidegateError } from "../../core/errors.js";
import { OpenAIHttpEngine } from "../openai-http/openai-http-engine.js";
import type { PairStatus } from "../../core/ports.js";

let proc: Proc;
let url: string;

beforeAll(async () => {
  proc = await spawnTidegate("engine-sim", ["engine-sim", "--model", "llama3.2-3b", "--gpu", "h100-80gb", "--port", "0", "--time-scale", "0.05"], /^(http:\/\/127\.0\.0\.1:\d+)\n/m);
  url = proc.match[1]!;
});
afterAll(async () => {
  expect(await proc.stop()).toBe(0);
  await stopAll();
});

function post(path: string, body: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(url + path, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: typeof body === "string" ? body : JSON.stringify(body) });
}

function sseData(text: string): string[] {
  return text
    .split("\n\n")
    .filter((e) => e.length > 0)
    .map((e) => {
      expect(e.startsWith("data: ")).toBe(true);
      return e.slice(6);
    });
}

describe("engine-sim HTTP", () => {
  it("streams chat chunks: role, one chunk per token, finish, usage, [DONE]", async () => {
    const res = await post("/v1/chat/completions", { model: "llama3.2-3b", messages: [{ role: "user", content: "hello there" }], max_tokens: 7, stream: true, stream_options: { include_usage: true } }, { "x-request-id": "req-abc" });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("text/event-stream");
    const data = sseData(await res.text());
    expect(data[data.length - 1]).toBe("[DONE]");
    const chunks = data.slice(0, -1).map((d) => JSON.parse(d) as { id: string; object: string; choices: { delta: { content?: string; role?: string }; finish_reason: string | null }[]; usage?: { prompt_tokens: number; completion_tokens: number; total_tokens: number } });
    expect(chunks.every((c) => c.id === "req-abc" && c.object === "chat.completion.chunk")).toBe(true);
    expect(chunks[0]!.choices[0]!.delta.role).toBe("assistant");
    const text = chunks.slice(1, 8).map((c) => c.choices[0]!.delta.content).join("");
    expect(text).toBe(Array.from({ length: 7 }, (_, i) => syntheticToken(seedOf("req-abc"), i)).join(""));
    expect(chunks[8]!.choices[0]!.finish_reason).toBe("length");
    // prompt estimate: ⌈11/4⌉ + 3 per message + 3 = 9
    expect(chunks[9]!.choices).toEqual([]);
    expect(chunks[9]!.usage).toEqual({ prompt_tokens: 9, completion_tokens: 7, total_tokens: 16 });
  });

  it("works with the official openai client (completions, stream and not)", async () => {
    const client = new OpenAI({ baseURL: url + "/v1", apiKey: "unused" });
    const full = await client.completions.create({ model: "llama3.2-3b", prompt: "once upon a time", max_tokens: 5 });
    expect(full.object).toBe("text_completion");
    expect(full.usage).toEqual({ prompt_tokens: 4, completion_tokens: 5, total_tokens: 9 });
    expect(full.choices[0]!.text.split(" ").length).toBe(6);
    const stream = await client.chat.completions.create({ model: "llama3.2-3b", messages: [{ role: "user", content: "x" }], max_tokens: 4, stream: true, stream_options: { include_usage: true } });
    let tokens = 0;
    let usage: unknown;
    for await (const chunk of stream) {
      if (chunk.choices[0]?.delta.content) tokens++;
      if (chunk.usage) usage = chunk.usage;
    }
    expect(tokens).toBe(4);
    expect(usage).toEqual({ prompt_tokens: 7, completion_tokens: 4, total_tokens: 11 });
  });

  it("answers bad input with OpenAI-style 4xx errors and keeps serving", async () => {
    const cases: [string, unknown, number, RegExp][] = [
      ["/v1/chat/completions", "{not json", 400, /not valid JSON/],
      ["/v1/chat/completions", { model: 7, messages: [] }, 400, /model/],
      ["/v1/chat/completions", { model: "llama3.2-3b", messages: "hi" }, 400, /messages/],
      ["/v1/chat/completions", { model: "llama3.2-3b", messages: [] }, 400, /at least 1/],
      ["/v1/chat/completions", { model: "llama3.2-3b", messages: [{ role: "user", content: "" }] }, 400, /must not be empty/],
      ["/v1/chat/completions", { model: "llama3.2-3b", messages: [{ role: "user", content: "a" }], max_tokens: -1 }, 400, /max_tokens/],
      ["/v1/chat/completions", { model: "llama3.2-3b", messages: [{ role: "user", content: "a" }], max_tokens: 1e12 }, 400, /max_tokens/],
      ["/v1/chat/completions", { model: "llama3.2-3b", messages: [{ role: "user", content: "a" }], max_tokens: "5" }, 400, /max_tokens/],
      ["/v1/chat/completions", { model: "gpt-9", messages: [{ role: "user", content: "a" }] }, 404, /gpt-9/],
      ["/v1/completions", { model: "llama3.2-3b", prompt: "" }, 400, /prompt/],
      ["/v1/completions", { model: "llama3.2-3b", prompt: "a", stream: "yes" }, 400, /stream/],
    ];
    for (const [path, body, status, msg] of cases) {
      const res = await post(path, body);
      expect(res.status, JSON.stringify(body)).toBe(status);
      const err = (await res.json()) as { error: { message: string; type: string; code: string } };
      expect(err.error.message).toMatch(msg);
      expect(err.error.type).toBe("invalid_request_error");
    }
    const big = await post("/v1/completions", { model: "llama3.2-3b", prompt: "x".repeat(5 * 1024 * 1024) });
    expect(big.status).toBe(413);
    expect((await fetch(url + "/v1/nothing")).status).toBe(404);
    expect((await fetch(url + "/health")).status).toBe(200);
  });

  it("serves /v1/models and /metrics with vLLM's names", async () => {
    const models = (await (await fetch(url + "/v1/models")).json()) as { data: { id: string }[] };
    expect(models.data.map((m) => m.id)).toEqual(["llama3.2-3b"]);
    const metrics = await (await fetch(url + "/metrics")).text();
    for (const name of [
      "vllm:kv_cache_usage_perc",
      "vllm:num_requests_running",
      "vllm:num_requests_waiting",
      "vllm:time_to_first_token_seconds_bucket",
      "vllm:time_per_output_token_seconds_bucket",
      "vllm:inter_token_latency_seconds_bucket",
      "vllm:prompt_tokens_total",
      "vllm:generation_tokens_total",
    ]) {
      expect(metrics).toMatch(new RegExp(`^${name}\\{[^}]*model_name="llama3.2-3b"`, "m"));
    }
    expect(metrics).toMatch(/^vllm:generation_tokens_total\{model_name="llama3.2-3b"\} ([1-9]\d*)$/m);
  });

  it("a client disconnect cancels the generation and frees its KV", async () => {
    const res = await post("/v1/completions", { model: "llama3.2-3b", prompt: "p".repeat(4000), max_tokens: 60_000, stream: true }, {});
    const reader = res.body!.getReader();
    await reader.read();
    const during = await (await fetch(url + "/metrics")).text();
    expect(Number(/^vllm:kv_cache_usage_perc\{[^}]*\} (\S+)$/m.exec(during)![1])).toBeGreaterThan(0);
    expect(/^vllm:num_requests_running\{[^}]*\} (\S+)$/m.exec(during)![1]).toBe("1");
    await reader.cancel();
    let running = "1";
    // 60k tokens take ~10 s at this time scale: the request can only end early by the disconnect.
    for (let i = 0; i < 250 && running !== "0"; i++) {
      await new Promise((r) => setTimeout(r, 20));
      running = /^vllm:num_requests_running\{[^}]*\} (\S+)$/m.exec(await (await fetch(url + "/metrics")).text())![1]!;
    }
    expect(running).toBe("0");
    const after = await (await fetch(url + "/metrics")).text();
    expect(/^vllm:kv_cache_usage_perc\{[^}]*\} (\S+)$/m.exec(after)![1]).toBe("0");
    expect(after).toMatch(/vllm:request_success_total\{model_name="llama3.2-3b",finished_reason="abort"\} 1/);
  });

  it("a request waits while KV is full (vllm:num_requests_waiting) and runs when the first one is cancelled", async () => {
    const small = await spawnTidegate("engine-sim-small", ["engine-sim", "--model", "llama3.2-3b", "--port", "0", "--time-scale", "0.5", "--kv-capacity-tokens", "3000"], /^(http:\/\/127\.0\.0\.1:\d+)\n/m);
    const base = small.match[1]!;
    const gauge = async (name: string) => Number(new RegExp(`^${name}\\{[^}]*\\} (\\S+)$`, "m").exec(await (await fetch(base + "/metrics")).text())![1]);
    try {
      const a = await fetch(base + "/v1/completions", { method: "POST", body: JSON.stringify({ model: "llama3.2-3b", prompt: "a".repeat(2000), max_tokens: 2400, stream: true }) });
      const reader = a.body!.getReader();
      await reader.read(); // A reserves 500 + 2400 of the 3000 tokens and runs ~4 s at this time scale
      const b = fetch(base + "/v1/completions", { method: "POST", body: JSON.stringify({ model: "llama3.2-3b", prompt: "b".repeat(400), max_tokens: 600 }) });
      let waiting = 0;
      for (let i = 0; i < 100 && waiting !== 1; i++) {
        await new Promise((r) => setTimeout(r, 10));
        waiting = await gauge("vllm:num_requests_waiting");
      }
      expect(waiting).toBe(1);
      expect(await gauge("vllm:num_requests_running")).toBe(1);
      await reader.cancel();
      const done = (await (await b).json()) as { usage: { completion_tokens: number } };
      expect(done.usage.completion_tokens).toBe(600);
      expect(await gauge("vllm:num_requests_waiting")).toBe(0);
    } finally {
      expect(await small.stop()).toBe(0);
    }
  });

  it("takes the region's serve-while-loading control: pair (best-effort, then zigzag through HiGHS), status, end; bad input is a 4xx; the openai-http adapter drives it", async () => {
    const spec = { peer: "r/n2/llama3.2-3b/abc", scheduler: "best-effort", layers: 28, arrivedLayers: 4, expectedInMs: Array.from({ length: 24 }, (_, i) => 100 + i * 10), hopMsPerToken: 0.0001, ttlMs: 5000 };
    const none = (await (await fetch(url + "/tidegate/layerwise")).json()) as PairStatus;
    expect(none.current).toBeUndefined();
    const r = await post("/tidegate/layerwise", spec);
    expect(r.status).toBe(200);
    expect(((await r.json()) as PairStatus).current).toMatchObject({ peer: spec.peer, layers: 28, arrivedLayers: 4, updates: 1 });
    const bad = await post("/tidegate/layerwise", { ...spec, expectedInMs: [1] });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { message: string } }).error.message).toMatch(/^expectedInMs: has 1 entries/);
    const other = await post("/tidegate/layerwise", { ...spec, peer: "someone-else" });
    expect(other.status).toBe(409);
    expect((await fetch(url + "/tidegate/layerwise?peer=x", { method: "DELETE" })).status).toBe(404);
    expect((await fetch(url + "/tidegate/layerwise", { method: "DELETE" })).status).toBe(400);
    const ended = (await (await fetch(url + "/tidegate/layerwise?peer=" + encodeURIComponent(spec.peer), { method: "DELETE" })).json()) as PairStatus;
    expect(ended.ended).toMatchObject({ peer: spec.peer, why: "ended by the region", updates: 1 });
    // The adapter the region uses (OpenAIHttpEngine.layerwise): zigzag loads HiGHS in the engine process on first use.
    const adapter = new OpenAIHttpEngine({ instanceId: "e", model: "llama3.2-3b", baseUrl: url, clock: new WallClock(), metricsIntervalMs: 0 });
    try {
      const z = await adapter.layerwise.update({ ...spec, peer: "z", scheduler: "zigzag" });
      expect(z.current).toMatchObject({ peer: "z", scheduler: "zigzag" });
      const done = await adapter.layerwise.update({ ...spec, peer: "z", scheduler: "zigzag", arrivedLayers: 28, expectedInMs: [] });
      expect(done.ended).toMatchObject({ peer: "z", why: "loaded" });
      await expect(adapter.layerwise.end("z")).rejects.toSatisfy((e: unknown) => isTidegateError(e, "not_found"));
    } finally {
      await adapter.close();
    }
  });
});
