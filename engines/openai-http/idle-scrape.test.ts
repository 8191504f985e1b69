/**
 * The idle scrape (OpenAIHttpEngine.scrapeWhenIdle) waits IDLE_SCRAPE_DELAY_MS after the adapter's last request
 * ends: a client that sends its next request at once gets it to the engine before any /metrics scrape, and the engine
 * is scraped once it has stayed idle that long since its latest request. A tiny HTTP server logs what reaches it, in
 * order.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { VirtualClock, WallClock } from "../../core/clock.js";
import type { GenerateRequest } from "../../core/ports.js";
import { IDLE_SCRAPE_DELAY_MS, OpenAIHttpEngine } from "./openai-http-engine.js";

const seen: string[] = [];
let server: Server;
let baseUrl: string;

beforeAll(async () => {
  server = createServer((req, res) => {
    if (req.method === "GET" && req.url === "/metrics") {
      seen.push("metrics");
      res.writeHead(200, { "content-type": "text/plain" });
      res.end("vllm:num_requests_running 0\nvllm:num_requests_waiting 0\nvllm:kv_cache_usage_perc 0\n");
      return;
    }
    seen.push("post");
    req.resume();
    req.on("end", () => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write('data: {"choices":[{"index":0,"text":"a","finish_reason":null}]}\n\n');
      res.write('data: {"choices":[{"index":0,"text":"","finish_reason":"length"}]}\n\n');
      res.end('data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1}}\n\ndata: [DONE]\n\n');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

const req = (id: string): GenerateRequest => ({ id, model: "llama3.1-8b", kind: "completion", promptTokens: 3, maxTokens: 1, priority: 0, body: { model: "llama3.1-8b", prompt: "abc", max_tokens: 1 } });

/** Real time for a request already sent to reach the server (virtual time stands still meanwhile). */
const settleIo = () => new Promise((r) => setTimeout(r, 100));

async function run(engine: OpenAIHttpEngine, id: string): Promise<void> {
  for await (const _ of engine.generate(req(id))) void _;
}

describe("the idle scrape", () => {
  it("lets a request sent as the last one ends reach the engine first, then scrapes once the engine stayed idle", async () => {
    const engine = new OpenAIHttpEngine({ instanceId: "idle", model: "llama3.1-8b", baseUrl, clock: new WallClock(), metricsIntervalMs: 3_600_000 });
    try {
      await engine.scrape(); // the start-up scrape, awaited so that it is first in the log
      seen.length = 0;
      await run(engine, "one");
      await run(engine, "two"); // sent at once: within the delay
      expect(seen).toEqual(["post", "post"]);
      const deadline = Date.now() + 10_000;
      while (!seen.includes("metrics") && Date.now() < deadline) await new Promise((r) => setTimeout(r, IDLE_SCRAPE_DELAY_MS));
      expect(seen).toEqual(["post", "post", "metrics"]);
    } finally {
      await engine.close();
    }
  });

  it("counts the delay from the latest request's end, not the first (on a virtual clock)", async () => {
    const clock = new VirtualClock(0);
    const engine = new OpenAIHttpEngine({ instanceId: "idle-v", model: "llama3.1-8b", baseUrl, clock, metricsIntervalMs: 3_600_000 });
    try {
      await engine.scrape();
      seen.length = 0;
      await run(engine, "one"); // idle from t = 0: the timer is set for 25
      await clock.advanceBy(15);
      await run(engine, "two"); // idle again from t = 15
      await clock.advanceBy(12); // t = 27: the timer fired at 25, 10 ms after "two" ended, and waits on
      await settleIo(); // a scrape sent now would have reached the server
      expect(seen).toEqual(["post", "post"]);
      await run(engine, "three"); // idle from t = 27
      await clock.advanceBy(20); // t = 47
      await settleIo();
      expect(seen).toEqual(["post", "post", "post"]);
      await clock.advanceBy(10); // t = 57: 30 ms since "three" ended
      const deadline = Date.now() + 10_000;
      while (!seen.includes("metrics") && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
      expect(seen).toEqual(["post", "post", "post", "metrics"]);
    } finally {
      await engine.close();
    }
  });
});
