/**
 * Router HTTP behaviour against scripted in-memory region links: every bad input gets the right 4xx OpenAI error
 * (and the process keeps serving), retry before the first token, in-stream error after it, client disconnect
 * aborts upstream, keys, metrics initialised at 0, sub-app mounts.
 */
import { request as httpRequest } from "node:http";
import { Hono } from "hono";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { WallClock } from "../core/clock.js";
import { DEFAULT_CONFIG_JSON, parseConfig } from "../core/config.js";
import { silentLogger } from "../core/log.js";
import { GPU_SPECS, MODEL_SPECS, kvBytesPerToken, kvCapacityBytes } from "../core/models.js";
import { FakeRegionLink } from "../test/helpers/fake-link.js";
import { GlobalRouter } from "./server.js";

const MODELS = ["llama2-70b", "bloom-176b", "llama3.1-8b", "llama3.2-3b"];
const M = "llama3.2-3b";
const LIMIT = 4096;
const config = parseConfig({
  ...(DEFAULT_CONFIG_JSON as Record<string, unknown>),
  router: {
    bodyLimitBytes: LIMIT,
    apiKeys: [
      { key: "sk-open-key", tenant: "a" },
      { key: "sk-west-small", tenant: "b", region: "us-west", models: [M] },
      { key: "sk-resident-eu", tenant: "c", regions: ["us-east", "us-central"] },
    ],
    adminKeys: ["admin-key-123"],
  },
});
const links = config.regions.map((r) => new FakeRegionLink(r.name));
const [east, central, west] = links as [FakeRegionLink, FakeRegionLink, FakeRegionLink];
let router: GlobalRouter;
let base: string;
const auth = { authorization: "Bearer sk-open-key", "content-type": "application/json" };

function telemetryAll(util: Record<string, number> = {}) {
  for (const l of links) l.emitTelemetry(Object.fromEntries(MODELS.map((m) => [m, util[l.region] ?? 0.1])));
}

async function post(path: string, body: unknown, headers: Record<string, string> = auth): Promise<{ status: number; json: { error?: { code: string; param: string | null; type: string; message: string } } & Record<string, unknown> }> {
  const res = await fetch(base + path, { method: "POST", headers, body: typeof body === "string" ? body : JSON.stringify(body) });
  return { status: res.status, json: (await res.json()) as never };
}

beforeAll(async () => {
  const sub = new Hono();
  sub.get("/hello", (c) => c.json({ mounted: true }));
  router = new GlobalRouter({ config, links, clock: new WallClock(), logger: silentLogger, defaultMetrics: false, mounts: [{ path: "/sub", app: sub }] });
  await router.listen("127.0.0.1", 0);
  base = router.url();
});
afterAll(async () => {
  await router.close();
});
beforeEach(() => {
  for (const l of links) l.behavior = {};
  telemetryAll();
});

describe("bad input → 4xx OpenAI-style errors, and the router keeps serving", () => {
  const chat = (extra: Record<string, unknown>) => ({ model: M, messages: [{ role: "user", content: "hi" }], ...extra });
  const cases: [string, string, unknown, number, string, string | null][] = [
    ["malformed JSON", "/v1/chat/completions", '{"model": "x", "messages": [', 400, "invalid_json", null],
    ["a JSON array body", "/v1/chat/completions", "[1,2]", 400, "invalid_request", "(root)"],
    ["messages of the wrong type", "/v1/chat/completions", chat({ messages: "hi" }), 400, "invalid_request", "messages"],
    ["model of the wrong type", "/v1/chat/completions", { model: 42, messages: [{ role: "user", content: "hi" }] }, 400, "invalid_request", "model"],
    ["stream of the wrong type", "/v1/chat/completions", chat({ stream: "yes" }), 400, "invalid_request", "stream"],
    ["negative max_tokens", "/v1/chat/completions", chat({ max_tokens: -5 }), 400, "invalid_request", "max_tokens"],
    ["huge max_tokens", "/v1/chat/completions", chat({ max_tokens: 1e12 }), 400, "invalid_request", "max_tokens"],
    ["max_tokens past the model's context (OpenAI's code and param)", "/v1/chat/completions", { ...chat({ max_tokens: 5000 }), model: "llama2-70b" }, 400, "context_length_exceeded", "messages"],
    ["a completion past the model's context", "/v1/completions", { model: "llama2-70b", prompt: "tide", max_tokens: 4096 }, 400, "context_length_exceeded", "prompt"],
    ["fractional max_tokens", "/v1/completions", { model: M, prompt: "x", max_tokens: 1.5 }, 400, "invalid_request", "max_tokens"],
    ["empty messages", "/v1/chat/completions", chat({ messages: [] }), 400, "invalid_request", "messages"],
    ["empty user content", "/v1/chat/completions", chat({ messages: [{ role: "user", content: "" }] }), 400, "invalid_request", "messages[0].content"],
    ["empty prompt", "/v1/completions", { model: M, prompt: "" }, 400, "invalid_request", "prompt"],
    ["unknown model", "/v1/chat/completions", chat({ model: "gpt-9" }), 404, "model_not_found", "model"],
    ["empty body", "/v1/completions", "", 400, "invalid_request", null],
  ];
  for (const [name, path, body, status, code, param] of cases) {
    it(`${name} → ${status} ${code}`, async () => {
      const r = await post(path, body);
      expect(r.status).toBe(status);
      expect(r.json.error?.code).toBe(code);
      if (param !== null) expect(r.json.error?.param).toBe(param);
      expect(typeof r.json.error?.type).toBe("string");
    });
  }

  it("an unknown x-tidegate-region header → 400 naming the header", async () => {
    const r = await post("/v1/chat/completions", chat({}), { ...auth, "x-tidegate-region": "mars" });
    expect(r.status).toBe(400);
    expect(r.json.error?.param).toBe("header x-tidegate-region");
  });

  it("oversized body with Content-Length → 413 without reading it", async () => {
    const r = await post("/v1/completions", { model: M, prompt: "x".repeat(LIMIT * 2) });
    expect(r.status).toBe(413);
    expect(r.json.error?.code).toBe("payload_too_large");
  });

  it("oversized chunked body → 413 while the client is still sending (enforced while reading)", async () => {
    const url = new URL(base + "/v1/completions");
    const { status, bodyText, sentBytes } = await new Promise<{ status: number; bodyText: string; sentBytes: number }>((resolve, reject) => {
      let sent = 0;
      const req = httpRequest({ host: url.hostname, port: url.port, path: url.pathname, method: "POST", headers: { ...auth, "transfer-encoding": "chunked" } }, (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (d: string) => (text += d));
        res.on("end", () => {
          clearInterval(timer);
          req.destroy();
          resolve({ status: res.statusCode ?? 0, bodyText: text, sentBytes: sent });
        });
      });
      req.on("error", (err) => {
        clearInterval(timer);
        reject(err);
      });
      req.write('{"model":"' + M + '","prompt":"');
      // Keep sending 1 KiB every 5 ms; the response must arrive long before 1 MiB (256 × the limit) is sent.
      const timer = setInterval(() => {
        if (sent > 1024 * 1024) {
          clearInterval(timer);
          req.end('"}');
          return;
        }
        req.write("y".repeat(1024));
        sent += 1024;
      }, 5);
    });
    expect(status).toBe(413);
    expect(JSON.parse(bodyText).error.code).toBe("payload_too_large");
    expect(sentBytes).toBeLessThan(1024 * 1024);
  });

  it("no region with fresh telemetry → 503 no_region_available", async () => {
    for (const l of links) router.selector.markDown(l.region);
    const r = await post("/v1/chat/completions", chat({}));
    expect(r.status).toBe(503);
    expect(r.json.error?.code).toBe("no_region_available");
  });

  it("still serves after all of the above", async () => {
    const r = await post("/v1/chat/completions", chat({ max_tokens: 3 }));
    expect(r.status).toBe(200);
    expect((r.json.usage as { completion_tokens: number }).completion_tokens).toBe(3);
  });
});

describe("API keys", () => {
  const body = { model: M, prompt: "hello", max_tokens: 2 };
  it("a key with regions is served only there: never routed elsewhere, a header naming another region is 403", async () => {
    const resident = { authorization: "Bearer sk-resident-eu", "content-type": "application/json" };
    // us-west is the only region under the threshold: an unrestricted key goes there, the resident key does not.
    telemetryAll({ "us-east": 0.95, "us-central": 0.95, "us-west": 0.1 });
    const open = await fetch(base + "/v1/completions", { method: "POST", headers: auth, body: JSON.stringify(body) });
    expect(open.headers.get("x-tidegate-region")).toBe("us-west");
    await open.json();
    const kept = await fetch(base + "/v1/completions", { method: "POST", headers: resident, body: JSON.stringify(body) });
    expect(kept.status).toBe(200);
    expect(["us-east", "us-central"]).toContain(kept.headers.get("x-tidegate-region"));
    await kept.json();
    const named = await post("/v1/completions", body, { ...resident, "x-tidegate-region": "us-west" });
    expect(named.status).toBe(403);
    expect(named.json.error?.message).toMatch(/only in us-east, us-central/);
    // Its regions dark: 503 naming them, not a detour through us-west.
    router.selector.markDown("us-east");
    router.selector.markDown("us-central");
    const dark = await post("/v1/completions", body, resident);
    expect(dark.status).toBe(503);
    expect(dark.json.error?.message).toMatch(/among this API key's regions \(us-east, us-central\)/);
  });
  it("missing or unknown key → 401", async () => {
    expect((await post("/v1/completions", body, { "content-type": "application/json" })).status).toBe(401);
    // A key sent without "Bearer " is told the scheme is wrong, not that the key is missing.
    const noScheme = await post("/v1/completions", body, { authorization: "sk-open-key", "content-type": "application/json" });
    expect(noScheme.status).toBe(401);
    expect(noScheme.json.error?.message).toBe('the Authorization header must carry the API key as Bearer <key>; it has no scheme: a key sent without "Bearer " in front of it');
    expect((await post("/v1/completions", body, { authorization: "Bearer sk-nope" })).json.error?.code).toBe("unauthorized");
  });
  it("a key scoped to models is refused other models (403) and lists only its models", async () => {
    const r = await post("/v1/completions", { ...body, model: "llama2-70b" }, { authorization: "Bearer sk-west-small" });
    expect(r.status).toBe(403);
    // The reason a batch line naming that model gets too (router/batch/validate.ts): both come from modelForbidden.
    expect(r.json.error).toMatchObject({ code: "forbidden", param: "model", message: 'this API key may not use model "llama2-70b"' });
    const models = (await (await fetch(base + "/v1/models", { headers: { authorization: "Bearer sk-west-small" } })).json()) as { data: { id: string }[] };
    expect(models.data.map((m) => m.id)).toEqual([M]);
  });
  it("a key's region comes first in preference order; the header overrides it", async () => {
    const r1 = await fetch(base + "/v1/completions", { method: "POST", headers: { authorization: "Bearer sk-west-small" }, body: JSON.stringify(body) });
    expect(r1.headers.get("x-tidegate-region")).toBe("us-west");
    await r1.json();
    const r2 = await fetch(base + "/v1/completions", { method: "POST", headers: { authorization: "Bearer sk-west-small", "x-tidegate-region": "us-central" }, body: JSON.stringify(body) });
    expect(r2.headers.get("x-tidegate-region")).toBe("us-central");
    await r2.json();
  });
});

async function streamText(body: unknown, signal?: AbortSignal): Promise<{ status: number; region: string | null; text: string }> {
  const res = await fetch(base + "/v1/chat/completions", { method: "POST", headers: auth, body: JSON.stringify(body), ...(signal ? { signal } : {}) });
  return { status: res.status, region: res.headers.get("x-tidegate-region"), text: await res.text() };
}

async function metricValue(name: string, labels: string): Promise<number> {
  const text = await (await fetch(base + "/metrics")).text();
  const line = text.split("\n").find((l) => l.startsWith(`${name}{${labels}}`));
  return line === undefined ? Number.NaN : Number(line.split(" ").pop());
}

describe("streaming, retry and cancellation", () => {
  const req = { model: M, messages: [{ role: "user", content: "hi" }], stream: true, max_tokens: 5, stream_options: { include_usage: true } };

  it("streams role, 5 tokens, finish, usage and [DONE] from the first region under the threshold", async () => {
    const r = await streamText(req);
    expect(r.status).toBe(200);
    expect(r.region).toBe("us-east");
    const events = r.text.split("\n\n").filter((e) => e.startsWith("data: ")).map((e) => e.slice(6));
    expect(events.at(-1)).toBe("[DONE]");
    const chunks = events.slice(0, -1).map((e) => JSON.parse(e) as { choices: { delta: { content?: string; role?: string }; finish_reason: string | null }[]; usage?: { completion_tokens: number } });
    expect(chunks[0]!.choices[0]!.delta.role).toBe("assistant");
    expect(chunks.filter((c) => c.choices[0]?.delta.content).length).toBe(5);
    expect(chunks.at(-2)!.choices[0]!.finish_reason).toBe("length");
    expect(chunks.at(-1)!.usage?.completion_tokens).toBe(5);
  });

  it("closes the region's stream once a completion ends, streamed or not (its cleanup runs; issue 32 item 6)", async () => {
    const n = east.dispatches.length;
    expect((await streamText(req)).status).toBe(200);
    expect((await post("/v1/chat/completions", { ...req, stream: false })).status).toBe(200);
    const mine = east.dispatches.slice(n);
    expect(mine.map((d) => [d.finished, d.aborted])).toEqual([
      [true, false],
      [true, false],
    ]);
    // The relay stops pulling at `done`; release() returns the stream. The response can reach the client a turn
    // before the release, so wait on the condition rather than assume it.
    for (let i = 0; i < 200 && !mine.every((d) => d.closed); i++) await new Promise((r) => setTimeout(r, 5));
    expect(mine.map((d) => d.closed)).toEqual([true, true]);
  });

  it("a region failing before the first token is retried in the next region and counted", async () => {
    const before = await metricValue("tidegate_router_retries_total", `model="${M}",region="us-east"`);
    expect(before).toBe(0);
    east.behavior = { failBeforeFirst: true };
    const r = await streamText(req);
    expect(r.status).toBe(200);
    expect(r.region).toBe("us-central");
    expect(r.text.endsWith("data: [DONE]\n\n")).toBe(true);
    expect(await metricValue("tidegate_router_retries_total", `model="${M}",region="us-east"`)).toBe(1);
  });

  it("every region failing before the first token → 503 with each failure named", async () => {
    for (const l of links) l.behavior = { failBeforeFirst: true };
    const r = await post("/v1/chat/completions", { ...req, stream: false });
    expect(r.status).toBe(503);
    expect(String(r.json.error?.message)).toMatch(/us-east.*us-central.*us-west/);
  });

  it("a failure after the first token is reported in-stream and the stream ends (no retry)", async () => {
    east.behavior = { failAfterTokens: 2 };
    const n = central.dispatches.length;
    const r = await streamText(req);
    expect(r.status).toBe(200);
    const last = r.text.trim().split("\n\n").at(-1)!;
    expect(JSON.parse(last.slice(6)).error.code).toBe("upstream_error");
    expect(r.text).not.toContain("[DONE]");
    expect(central.dispatches.length).toBe(n);
  });

  it("a client disconnect aborts the upstream dispatch and is counted", async () => {
    west.behavior = { delayMs: 20 };
    const before = await metricValue("tidegate_router_client_aborts_total", `model="${M}",region="us-west"`);
    const ac = new AbortController();
    const res = await fetch(base + "/v1/chat/completions", { method: "POST", headers: { ...auth, "x-tidegate-region": "us-west" }, body: JSON.stringify({ ...req, max_tokens: 1000 }), signal: ac.signal });
    const reader = res.body!.getReader();
    await reader.read();
    ac.abort();
    const d = west.dispatches.at(-1)!;
    for (let i = 0; i < 500 && !d.aborted; i++) await new Promise((r) => setTimeout(r, 10));
    expect(d.aborted).toBe(true);
    expect(d.finished).toBe(false);
    for (let i = 0; i < 500; i++) {
      if ((await metricValue("tidegate_router_client_aborts_total", `model="${M}",region="us-west"`)) === before + 1) break;
      await new Promise((r) => setTimeout(r, 10));
    }
    expect(await metricValue("tidegate_router_client_aborts_total", `model="${M}",region="us-west"`)).toBe(before + 1);
  });
});

describe("a client that leaves before its first token", () => {
  it("is counted under the region the request was sent to, not \"none\"", async () => {
    west.behavior = { hangAfterTokens: 0 };
    const labels = `model="${M}",region="us-west"`;
    const [aborts, requests] = [await metricValue("tidegate_router_client_aborts_total", labels), await metricValue("tidegate_router_requests_total", `${labels},status="499"`)];
    const [noneAborts, noneRequests] = [await metricValue("tidegate_router_client_aborts_total", `model="${M}",region="none"`), await metricValue("tidegate_router_requests_total", `model="${M}",region="none",status="499"`)];
    const ac = new AbortController();
    const sent = west.dispatches.length;
    const res = fetch(base + "/v1/chat/completions", { method: "POST", headers: { ...auth, "x-tidegate-region": "us-west" }, body: JSON.stringify({ model: M, messages: [{ role: "user", content: "hi" }], stream: true }), signal: ac.signal }).catch(() => undefined);
    for (let i = 0; i < 500 && west.dispatches.length === sent; i++) await new Promise((r) => setTimeout(r, 10));
    expect(west.dispatches.length).toBe(sent + 1);
    ac.abort();
    await res;
    for (let i = 0; i < 500 && (await metricValue("tidegate_router_requests_total", `${labels},status="499"`)) === requests; i++) await new Promise((r) => setTimeout(r, 10));
    expect(await metricValue("tidegate_router_requests_total", `${labels},status="499"`)).toBe(requests + 1);
    expect(await metricValue("tidegate_router_client_aborts_total", labels)).toBe(aborts + 1);
    expect(await metricValue("tidegate_router_client_aborts_total", `model="${M}",region="none"`)).toBe(noneAborts);
    expect(await metricValue("tidegate_router_requests_total", `model="${M}",region="none",status="499"`)).toBe(noneRequests);
  });
});

describe("a burst between two telemetry updates", () => {
  it("spills to the next region once the router's in-flight estimate takes the first over the threshold", async () => {
    const model = "llama2-70b";
    const maxTokens = 4000;
    telemetryAll({ "us-east": 0.66, "us-central": 0.1, "us-west": 0.1 });
    // Fake telemetry: 2 serving h100 instances of 4 GPUs. Prompt "hi" = 1 token.
    const spec = MODEL_SPECS[model]!;
    const capacity = 2 * kvCapacityBytes(spec, GPU_SPECS["h100-80gb"]!, 4);
    const perRequest = (1 + maxTokens) * kvBytesPerToken(spec);
    let expectedEast = 0;
    while (0.66 + (expectedEast * perRequest) / capacity < 0.7) expectedEast++;
    expect(expectedEast).toBeGreaterThan(2);
    const n = expectedEast + 6;
    const eastBefore = east.dispatches.length;
    const centralBefore = central.dispatches.length;
    const responses = await Promise.all(
      Array.from({ length: n }, () => fetch(base + "/v1/completions", { method: "POST", headers: auth, body: JSON.stringify({ model, prompt: "hi", max_tokens: maxTokens }) })),
    );
    const regions = responses.map((r) => r.headers.get("x-tidegate-region"));
    await Promise.all(responses.map((r) => r.arrayBuffer()));
    expect(regions.filter((r) => r === "us-east").length).toBe(expectedEast);
    expect(regions.filter((r) => r === "us-central").length).toBe(n - expectedEast);
    expect(east.dispatches.length - eastBefore).toBe(expectedEast);
    expect(central.dispatches.length - centralBefore).toBe(n - expectedEast);
  });
});

describe("models, health, metrics, mounts", () => {
  it("lists the configured models in OpenAI's format", async () => {
    const body = (await (await fetch(base + "/v1/models", { headers: auth })).json()) as { object: string; data: { id: string; object: string }[] };
    expect(body.object).toBe("list");
    expect(body.data.map((m) => m.id)).toEqual(MODELS);
  });
  it("healthz reports region availability", async () => {
    const body = (await (await fetch(base + "/healthz")).json()) as { status: string; regions: Record<string, { available: boolean }> };
    expect(body.status).toBe("ok");
    expect(body.regions["us-east"]?.available).toBe(true);
  });
  it("counts a bad request for a known model under that model, not \"unknown\"", async () => {
    const before = await metricValue("tidegate_router_requests_total", `model="${M}",region="none",status="400"`);
    const unknownBefore = await metricValue("tidegate_router_requests_total", `model="unknown",region="none",status="400"`);
    expect((await post("/v1/chat/completions", { model: M, messages: [{ role: "user", content: "hi" }], max_tokens: -5 })).status).toBe(400);
    expect(await metricValue("tidegate_router_requests_total", `model="${M}",region="none",status="400"`)).toBe(before + 1);
    expect(await metricValue("tidegate_router_requests_total", `model="unknown",region="none",status="400"`)).toBe(unknownBefore);
  });
  it("answers liveness and readiness (ready: fresh telemetry from a region)", async () => {
    expect((await fetch(base + "/livez")).status).toBe(200);
    const r = await fetch(base + "/readyz");
    expect(r.status).toBe(200);
    expect(((await r.json()) as { regions: Record<string, { telemetryAgeMs: number }> }).regions["us-east"]?.telemetryAgeMs).toBeGreaterThanOrEqual(0);
  });
  it("metrics start every model × region × status series at 0", async () => {
    expect(await metricValue("tidegate_router_requests_total", `model="bloom-176b",region="us-west",status="503"`)).toBe(0);
    expect(await metricValue("tidegate_router_client_aborts_total", `model="llama2-70b",region="us-central"`)).toBe(0);
  });
  it("a path served with another method is 405 with Allow, as OpenAI answers", async () => {
    const get = await fetch(base + "/v1/chat/completions", { headers: auth });
    expect(get.status).toBe(405);
    expect(get.headers.get("allow")).toBe("POST");
    expect(await get.json()).toEqual({ error: { message: "Invalid method for URL (GET /v1/chat/completions): use POST", type: "invalid_request_error", param: null, code: "method_not_allowed" } });
    const models = await fetch(base + "/v1/models", { method: "POST", headers: auth, body: "{}" });
    expect(models.status).toBe(405);
    expect(models.headers.get("allow")).toBe("GET, HEAD");
    expect((await fetch(base + "/admin/regions/us-east/instances", { method: "DELETE", headers: auth })).headers.get("allow")).toBe("GET, HEAD");
  });

  it("mounted sub-apps are served; unknown routes are OpenAI-style 404s", async () => {
    expect(await (await fetch(base + "/sub/hello")).json()).toEqual({ mounted: true });
    const r = await fetch(base + "/nope");
    expect(r.status).toBe(404);
    expect(((await r.json()) as { error: { code: string } }).error.code).toBe("not_found");
  });
});
