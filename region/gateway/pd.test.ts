/**
 * Prefill/decode disaggregation through the region gateway (pd.ts): engine-sim servers with roles behind the
 * openai-http adapter, as a vLLM P/D deployment sits behind vLLM's proxy. The gateway prefills on a prefill instance,
 * hands its kv_transfer_params to a decode instance, which pulls the KV over the native data plane and streams.
 */
import { afterEach, describe, expect, it } from "vitest";
import { WallClock } from "../../core/clock.js";
import type { TidegateError } from "../../core/errors.js";
import { kvBytesPerToken, MODEL_SPECS } from "../../core/models.js";
import type { EngineEvent, GenerateRequest } from "../../core/ports.js";
import { OpenAIHttpEngine } from "../../engines/openai-http/openai-http-engine.js";
import { EngineSimServer } from "../../engines/sim/http.js";
import { newSimEngine } from "../runtime/build-sim-engine.js";
import { Gateway } from "./gateway.js";
import { JSQ_POLICY } from "./scoring/plugins.js";

const MODEL = "llama3.2-3b";
const clock = new WallClock();
let servers: EngineSimServer[] = [];
let gateways: Gateway[] = [];
afterEach(async () => {
  await Promise.all(gateways.map((g) => g.close()));
  await Promise.all(servers.map((s) => s.close().catch(() => undefined)));
  servers = [];
  gateways = [];
});

/** An engine-sim server with `role`, and the adapter the gateway reaches it through. */
async function instance(id: string, role: "prefill" | "decode" | "both"): Promise<{ server: EngineSimServer; engine: OpenAIHttpEngine; url: string }> {
  const settings = { role } as const;
  const server = new EngineSimServer({ engine: newSimEngine({ instanceId: id, model: MODEL, gpu: "h100-80gb", tp: 2 }, { timeScale: 0.01, settings }, clock), settings, tp: 2 });
  servers.push(server);
  const url = await server.listen(0);
  return { server, url, engine: new OpenAIHttpEngine({ instanceId: id, model: MODEL, baseUrl: url, clock, metricsIntervalMs: 0, role }) };
}

/** Instances each request was booked on, in order (Gateway onRouted). */
let routed: string[] = [];

function gatewayOf(...engines: OpenAIHttpEngine[]): Gateway {
  return gatewayWith(0, ...engines);
}

/** A gateway over `engines` whose routing splits a disaggregated request from `pdMinPrefillTokens` uncached prompt tokens. */
function gatewayWith(pdMinPrefillTokens: number, ...engines: OpenAIHttpEngine[]): Gateway {
  routed = [];
  const gw = new Gateway({ region: "r", clock, statsRefreshMs: 0, onRouted: (_req, id) => routed.push(id), routing: { policy: JSQ_POLICY, blockTokens: 16, pdMinPrefillTokens } });
  gateways.push(gw);
  gw.addEndpoint(MODEL, "h100-80gb");
  for (const e of engines) gw.addInstance("h100-80gb", e);
  return gw;
}

const PROMPT = "tidegate ".repeat(200);
const request = (id: string): GenerateRequest => ({ id, model: MODEL, kind: "completion", promptTokens: 0, maxTokens: 4, priority: 0, body: { model: MODEL, prompt: PROMPT, max_tokens: 4 } });

async function collect(it: AsyncIterable<EngineEvent>): Promise<EngineEvent[]> {
  const out: EngineEvent[] = [];
  for await (const ev of it) out.push(ev);
  return out;
}

describe("the region gateway with prefill and decode instances", () => {
  it("prefills on the prefill instance, decodes on the decode instance with the prompt's KV moved between them", async () => {
    const p = await instance("p0", "prefill");
    const d = await instance("d0", "decode");
    const gw = gatewayOf(p.engine, d.engine);
    const events = await collect(gw.generate({ ...request("pd-1"), promptTokens: 601 }));
    expect(routed).toEqual(["p0", "d0"]);
    expect(events.filter((e) => e.type === "token").length).toBe(4);
    const done = events.at(-1)!;
    expect(done.type).toBe("done");
    const promptTokens = (done as { usage: { prompt_tokens: number } }).usage.prompt_tokens;
    const bytes = promptTokens * kvBytesPerToken(MODEL_SPECS[MODEL]!);
    // The decode instance received the prompt's KV once, from the prefill instance, which no longer holds it.
    expect(d.server["kv"]!.totals.receivedBytes).toBe(bytes);
    expect(p.server["kv"]!.totals.sentBytes).toBe(bytes);
    expect(p.server["kv"]!.heldCount()).toBe(0);
  });

  it("retries a failed prefill once on another prefill instance, and ends with a typed error when none answers", async () => {
    const p0 = await instance("p0", "prefill");
    const p1 = await instance("p1", "prefill");
    const d = await instance("d0", "decode");
    const gw = gatewayOf(p0.engine, p1.engine, d.engine);
    await p0.server.close();
    const events = await collect(gw.generate({ ...request("pd-2"), promptTokens: 601 }));
    expect(events.at(-1)!.type).toBe("done");
    // p0 (first listed, as idle as p1) was tried first, failed, and the prefill went to p1.
    expect(routed).toEqual(["p0", "p1", "d0"]);
    expect(p1.server["kv"]!.totals.sentBytes).toBeGreaterThan(0);
    await p1.server.close();
    routed = [];
    const err = await collect(gw.generate({ ...request("pd-3"), promptTokens: 601 })).then(() => undefined, (e: unknown) => e as TidegateError);
    expect(err).toMatchObject({ code: "upstream_error", message: expect.stringMatching(/^upstream p[01] \(127\.0\.0\.1:\d+\): .*ECONNREFUSED/) });
    // Two prefill attempts, no decode.
    expect(routed.sort()).toEqual(["p0", "p1"]);
  });

  it("plain instances serve a model without both roles; roles never take plain requests", async () => {
    const both = await instance("b0", "both");
    const d = await instance("d0", "decode");
    const gw = gatewayOf(both.engine, d.engine);
    for (let i = 0; i < 3; i++) expect((await collect(gw.generate({ ...request(`plain-${i}`), promptTokens: 601 }))).at(-1)!.type).toBe("done");
    // No prefill instance: no disaggregation, so the decode-only instance took nothing (and pulled no KV).
    expect(d.server["kv"]).toBeUndefined();
    const metrics = await (await fetch(`${d.url}/metrics`)).text();
    expect(metrics).toMatch(/^vllm:request_success_total\{[^}]*finished_reason="length"\} 0$/m);
  });

  it("sends a request whose uncached prompt is under routing.pdMinPrefillTokens whole to a decode instance, and splits a longer one", async () => {
    const p = await instance("p0", "prefill");
    const d = await instance("d0", "decode");
    const gw = gatewayWith(256, p.engine, d.engine);
    const short = { ...request("short"), promptTokens: 40, body: { model: MODEL, prompt: "tidegate ".repeat(20), max_tokens: 4 } };
    const whole = await collect(gw.generate(short));
    expect(whole.at(-1)!.type).toBe("done");
    expect(whole.filter((e) => e.type === "token").length).toBe(4);
    // Whole on the decode instance: no prefill step, no KV moved.
    expect(routed).toEqual(["d0"]);
    expect(p.server["kv"]?.totals.sentBytes ?? 0).toBe(0);
    expect(d.server["kv"]?.totals.receivedBytes ?? 0).toBe(0);
    routed = [];
    expect((await collect(gw.generate({ ...request("long"), promptTokens: 601 }))).at(-1)!.type).toBe("done");
    expect(routed).toEqual(["p0", "d0"]);
    expect(d.server["kv"]!.totals.receivedBytes).toBeGreaterThan(0);
  });
});
