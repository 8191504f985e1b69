/**
 * The openai-http adapter against a real `tidegate engine-sim` child process (compiled CLI; npm test builds first),
 * plus the SSE/metrics parsers on hand-written input.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { VirtualClock, WallClock } from "../../core/clock.js";
import { isTidegateError } from "../../core/errors.js";
import { syntheticToken } from "../../core/openai.js";
import type { EngineEvent, GenerateRequest } from "../../core/ports.js";
import { spawnTidegate, stopAll, type Proc } from "../../test/e2e/procs.js";
import { seedOf } from "../sim/sim-engine.js";
import { OpenAIHttpEngine } from "./openai-http-engine.js";
import { SseSplitter, parseChunk, promValue } from "./sse.js";

describe("SSE and metrics parsing", () => {
  it("splits events across arbitrary byte boundaries and classifies chunks", () => {
    const s = new SseSplitter();
    const enc = new TextEncoder();
    const text =
      'data: {"id":"x","choices":[{"index":0,"delta":{"content":" a\\"b\\n"},"logprobs":null,"finish_reason":null}]}\n\n' +
      ": keep-alive comment\n\n" +
      'data: {"id":"x","choices":[{"index":0,"text":" c","logprobs":null,"finish_reason":null}]}\r\n\r\n' +
      'data: {"id":"x","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n' +
      'data: {"id":"x","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}\n\n' +
      "data: [DONE]\n\n";
    const bytes = enc.encode(text);
    const events: string[] = [];
    for (let i = 0; i < bytes.length; i += 7) events.push(...s.push(bytes.subarray(i, i + 7)));
    expect(events.map(parseChunk)).toEqual([
      { kind: "text", text: ' a"b\n' },
      { kind: "text", text: " c" },
      { kind: "finish", reason: "stop", text: "" },
      { kind: "usage", promptTokens: 3, completionTokens: 2 },
      { kind: "done" },
    ]);
    expect(parseChunk('{"error":{"message":"boom","code":"internal"}}')).toEqual({ kind: "error", message: "boom", code: "internal" });
  });

  it("decodes multi-byte characters split at any byte, a leading byte-order mark dropped, as one decoder would", () => {
    const enc = new TextEncoder();
    const text = 'data: {"choices":[{"index":0,"text":"é — 漢字 🌊","finish_reason":null}]}\n\ndata: {"choices":[{"index":0,"text":"ü","finish_reason":null}]}\n\n';
    const bytes = enc.encode("\uFEFF" + text);
    for (let cut = 1; cut < bytes.length; cut++) {
      const s = new SseSplitter();
      const events = [...s.push(bytes.subarray(0, cut)), ...s.push(bytes.subarray(cut))];
      expect(events.map(parseChunk), `cut at ${cut}`).toEqual([
        { kind: "text", text: "é — 漢字 🌊" },
        { kind: "text", text: "ü" },
      ]);
    }
    // Bytes that are not UTF-8 become U+FFFD on either path.
    const s = new SseSplitter();
    const bad = [...s.push(enc.encode("data: x\n\n")), ...s.push(Uint8Array.from([0x64, 0x61, 0x74, 0x61, 0x3a, 0x20, 0xff, 0x0a, 0x0a]))];
    expect(bad).toEqual(["x", "\uFFFD"]);
  });

  it("sums a metric over its label sets and ignores longer names", () => {
    const text = [
      "# HELP vllm:num_requests_running x",
      'vllm:num_requests_running{model_name="a"} 2',
      'vllm:num_requests_running{model_name="b"} 3',
      'vllm:num_requests_running_total{model_name="a"} 100',
      "vllm:kv_cache_usage_perc 0.25",
    ].join("\n");
    expect(promValue(text, "vllm:num_requests_running")).toBe(5);
    expect(promValue(text, "vllm:kv_cache_usage_perc")).toBe(0.25);
    expect(promValue(text, "vllm:num_requests_waiting")).toBeUndefined();
  });
});

describe("OpenAIHttpEngine against engine-sim", () => {
  let proc: Proc;
  let engine: OpenAIHttpEngine;
  beforeAll(async () => {
    proc = await spawnTidegate("engine-sim", ["engine-sim", "--model", "llama3.1-8b", "--gpu", "h100-80gb", "--port", "0", "--time-scale", "0.05"], /^(http:\/\/127\.0\.0\.1:\d+)\n/m);
    engine = new OpenAIHttpEngine({ instanceId: "e1", model: "llama3.1-8b", baseUrl: proc.match[1]!, clock: new WallClock(), metricsIntervalMs: 0, kvBytesCapacity: 1000 });
  });
  afterAll(async () => {
    await engine.close();
    await proc.stop();
    await stopAll();
  });

  const req = (id: string, maxTokens: number, kind: "chat" | "completion" = "chat"): GenerateRequest => ({
    id,
    model: "llama3.1-8b",
    kind,
    promptTokens: 9,
    maxTokens,
    priority: 0,
    body: kind === "chat" ? { model: "llama3.1-8b", messages: [{ role: "user", content: "hello there" }], max_tokens: maxTokens } : { model: "llama3.1-8b", prompt: "hello there", max_tokens: maxTokens },
  });

  it("scrapes as soon as its last request ends, not at the next tick (stats of an engine that just emptied)", async () => {
    const hourly = new OpenAIHttpEngine({ instanceId: "e-idle", model: "llama3.1-8b", baseUrl: proc.match[1]!, clock: new WallClock(), metricsIntervalMs: 3_600_000, kvBytesCapacity: 1000 });
    try {
      await hourly.scrape();
      // 4,000 tokens run about 1.4 s at this engine's ×0.05 time scale (0.35 ms a step): the scrape below sees the
      // request still running even when this machine is busy and one /metrics round trip takes hundreds of ms. (With
      // 40 tokens, 14 ms, the request had usually ended before the scrape: two runs in three failed on a quiet box.)
      const it = hourly.generate(req("idle-scrape", 4_000))[Symbol.asyncIterator]();
      await it.next(); // running in the engine now
      expect(await hourly.scrape()).toBe(true);
      expect(hourly.stats().running).toBe(1);
      expect(hourly.stats().kvBytesUsed).toBeGreaterThan(0);
      for (let r = await it.next(); r.done !== true; r = await it.next());
      // No tick comes within the hour: only the scrape at the end can show the engine empty.
      const deadline = Date.now() + 10_000;
      while (hourly.stats().running > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      expect(hourly.stats().running).toBe(0);
      expect(hourly.stats().kvBytesUsed).toBe(0);
    } finally {
      await hourly.close();
    }
  });

  it("streams the engine's tokens (same synthetic text, request id forwarded) and its usage", async () => {
    for (const kind of ["chat", "completion"] as const) {
      const events: EngineEvent[] = [];
      for await (const ev of engine.generate(req(`gen-${kind}`, 6, kind))) events.push(ev);
      const texts = events.filter((e) => e.type === "token").map((e) => (e.type === "token" ? e.text : ""));
      expect(texts).toEqual(Array.from({ length: 6 }, (_, i) => syntheticToken(seedOf(`gen-${kind}`), i)));
      expect(events[events.length - 1]).toEqual({ type: "done", finishReason: "length", usage: { prompt_tokens: kind === "chat" ? 9 : 3, completion_tokens: 6, total_tokens: kind === "chat" ? 15 : 9 } });
    }
    expect(engine.stats().generatedTokensTotal).toBe(12);
    expect(engine.stats().remainingTokens).toBe(0);
  });

  it("asks for a batch request without streaming: one token event with all its text, then done with the usage", async () => {
    for (const kind of ["chat", "completion"] as const) {
      const before = engine.stats().generatedTokensTotal;
      const events: EngineEvent[] = [];
      for await (const ev of engine.generate({ ...req(`batch-${kind}`, 5, kind), batch: true, priority: 1 })) events.push(ev);
      const whole = Array.from({ length: 5 }, (_, i) => syntheticToken(seedOf(`batch-${kind}`), i)).join("");
      expect(events).toEqual([
        { type: "token", text: whole, tokens: 5 },
        { type: "done", finishReason: "length", usage: { prompt_tokens: kind === "chat" ? 9 : 3, completion_tokens: 5, total_tokens: kind === "chat" ? 14 : 8 } },
      ]);
      expect(engine.stats().generatedTokensTotal).toBe(before + 5);
    }
    expect(engine.stats().remainingTokens).toBe(0);
    // Aborted while the engine works on it: the upstream request is destroyed and nothing stays counted.
    const ac = new AbortController();
    const pending = (async () => {
      for await (const _ of engine.generate({ ...req("batch-abort", 20_000), batch: true, priority: 1 }, ac.signal)) void _;
    })();
    await new Promise((r) => setTimeout(r, 30));
    ac.abort(new Error("lease lost"));
    await expect(pending).rejects.toThrow("lease lost");
    expect(engine.stats().remainingTokens).toBe(0);
  });

  it("fills stats() from /metrics while a request runs, and abort cancels upstream", async () => {
    const ac = new AbortController();
    const it = engine.generate({ ...req("long", 20_000), body: { model: "llama3.1-8b", messages: [{ role: "user", content: "z".repeat(8000) }], max_tokens: 20_000 } }, ac.signal)[Symbol.asyncIterator]();
    const first = await it.next();
    expect(first.value).toMatchObject({ type: "token" });
    expect(await engine.scrape()).toBe(true);
    const s = engine.stats();
    expect(s.running).toBe(1);
    expect(s.kvBytesUsed).toBeGreaterThan(0);
    expect(s.kvBytesUsed).toBeLessThan(1000);
    // Prompt + max output, less the prompt and every token the socket has delivered (counted as it arrives, read or
    // not: the push path parses each chunk when it comes; at least the first token by now).
    expect(s.remainingTokens).toBeLessThanOrEqual(9 + 20_000 - 9 - 1);
    expect(s.remainingTokens).toBeGreaterThan(20_000 - 1000);
    ac.abort(new Error("client went away"));
    await expect(it.next()).rejects.toThrow("client went away");
    let running = 1;
    for (let i = 0; i < 50 && running !== 0; i++) {
      await new Promise((r) => setTimeout(r, 20));
      await engine.scrape();
      running = engine.stats().running;
    }
    expect(running).toBe(0);
    expect(engine.stats().kvBytesUsed).toBe(0);
    expect(engine.stats().remainingTokens).toBe(0);
  });

  it("leaves the prompt tokens the routing expects cached out of remainingTokens (GenerateRequest.expectedCachedTokens)", async () => {
    // The adapter counts a request when it is opened (generate opens it at once): read right after next() is called.
    for (const [hint, expected] of [[undefined, 9 + 20_000], [5, 9 - 5 + 20_000], [50, 1 + 20_000]] as const) {
      const ac = new AbortController();
      const it = engine.generate({ ...req(`hint-${hint}`, 20_000), ...(hint === undefined ? {} : { expectedCachedTokens: hint }) }, ac.signal)[Symbol.asyncIterator]();
      const first = it.next();
      expect(engine.stats().remainingTokens).toBe(expected); // a hint above the prompt leaves one prompt token (at most prompt − 1 cached)
      await first;
      ac.abort(new Error("done"));
      await expect(it.next()).rejects.toThrow("done");
      expect(engine.stats().remainingTokens).toBe(0);
    }
  });

  it("maps upstream 4xx to typed errors before the first token", async () => {
    const bad = { ...req("bad", 5), body: { model: "llama3.1-8b", messages: [], max_tokens: 5 } };
    await expect(async () => {
      for await (const ev of engine.generate(bad)) expect(ev).toBeUndefined();
    }).rejects.toSatisfy((err: unknown) => isTidegateError(err, "invalid_request"));
    const wrong = { ...req("wrong", 5), model: "llama2-70b" };
    await expect(async () => {
      for await (const ev of engine.generate(wrong)) expect(ev).toBeUndefined();
    }).rejects.toSatisfy((err: unknown) => isTidegateError(err, "model_not_found"));
  });

  it("reports a dead upstream as upstream_error and unhealthy metrics", async () => {
    const dead = new OpenAIHttpEngine({ instanceId: "dead", model: "llama3.1-8b", baseUrl: "http://127.0.0.1:1", clock: new WallClock(), metricsIntervalMs: 0 });
    await expect(async () => {
      for await (const ev of dead.generate(req("d", 3))) expect(ev).toBeUndefined();
    }).rejects.toSatisfy((err: unknown) => isTidegateError(err, "upstream_error"));
    expect(await dead.scrape()).toBe(false);
    expect(dead.metricsHealthy).toBe(false);
    // Stale, not zero: the stats say so, and the gateway routes around it and counts it as full.
    expect(dead.stale).toBe(true);
    expect(dead.stats().stale).toBe(true);
    await dead.close();
  });

  it("turns stale when no scrape succeeded for staleAfterMs and fresh again with the next good scrape", async () => {
    const clock = new VirtualClock(1_000);
    const e = new OpenAIHttpEngine({ instanceId: "e2", model: "llama3.1-8b", baseUrl: proc.match[1]!, clock, metricsIntervalMs: 0, staleAfterMs: 2000 });
    expect(e.stale).toBe(false); // nothing read yet: not stale until a read fails or ages
    expect(await e.scrape()).toBe(true);
    expect(e.stats().stale).toBeUndefined();
    clock.advanceToSync(2_999);
    expect(e.stale).toBe(false);
    clock.advanceToSync(3_001);
    expect(e.stats().stale).toBe(true);
    expect(await e.scrape()).toBe(true);
    expect(e.stale).toBe(false);
    await e.close();
  });
});
