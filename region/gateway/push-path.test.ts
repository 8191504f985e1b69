/**
 * The token path is pushed (issue 47 item 3; core/push.ts): from the engine's socket (the openai-http adapter reading
 * a real HTTP SSE response) through the gateway to the caller's sink, no promise is created per token. Counted with
 * async_hooks (every promise V8 creates) while a stream of 40 tokens and one of 400 flow: the difference must stay far
 * below one per extra token.
 */
import { createHook } from "node:async_hooks";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WallClock } from "../../core/clock.js";
import type { EngineEvent, GenerateRequest } from "../../core/ports.js";
import { OpenAIHttpEngine } from "../../engines/openai-http/openai-http-engine.js";
import { Gateway } from "./gateway.js";

const MODEL = "llama3.1-8b";
let server: Server;
let url: string;

/** An OpenAI-compatible server streaming `max_tokens` token chunks, one per event-loop turn, then finish and usage. */
beforeAll(async () => {
  server = createServer((req, res) => {
    let body = "";
    req.on("data", (d: Buffer) => (body += d.toString()));
    req.on("end", () => {
      const n = (JSON.parse(body) as { max_tokens: number }).max_tokens;
      res.writeHead(200, { "content-type": "text/event-stream" });
      let i = 0;
      const step = () => {
        if (i < n) {
          res.write(`data: {"id":"x","choices":[{"index":0,"text":" t${i++}","finish_reason":null}]}\n\n`);
          return void setImmediate(step);
        }
        res.write('data: {"id":"x","choices":[{"index":0,"text":"","finish_reason":"length"}]}\n\n');
        res.write(`data: {"id":"x","choices":[],"usage":{"prompt_tokens":4,"completion_tokens":${n},"total_tokens":${n + 4}}}\n\n`);
        res.end("data: [DONE]\n\n");
      };
      step();
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await new Promise((r) => server.close(r));
});

/** Streams one request of `tokens` tokens through a gateway over the adapter; the promises created from its first token to its done. */
async function promisesWhileStreaming(gw: Gateway, id: string, tokens: number): Promise<{ promises: number; got: number }> {
  let promises = 0;
  const hook = createHook({
    init(_id, type) {
      if (type === "PROMISE") promises++;
    },
  });
  const req: GenerateRequest = { id, model: MODEL, kind: "completion", promptTokens: 4, maxTokens: tokens, priority: 0, body: { model: MODEL, prompt: "a b c d", max_tokens: tokens } };
  let got = 0;
  await new Promise<void>((resolve, reject) => {
    gw.open(req, {
      event(ev: EngineEvent) {
        if (ev.type === "token") {
          if (got++ === 0) hook.enable();
          return true;
        }
        hook.disable();
        resolve();
        return true;
      },
      fail: reject,
    });
  });
  hook.disable();
  return { promises, got };
}

describe("the push token path (engine socket → gateway → sink)", () => {
  it("creates no promise per token", async () => {
    const engine = new OpenAIHttpEngine({ instanceId: "e0", model: MODEL, baseUrl: url, clock: new WallClock(), metricsIntervalMs: 0 });
    const gw = new Gateway({ region: "r", clock: new WallClock() });
    gw.addInstance("h100-80gb", engine);
    try {
      await promisesWhileStreaming(gw, "warm", 40); // connection and JIT warm
      const small = await promisesWhileStreaming(gw, "small", 40);
      const large = await promisesWhileStreaming(gw, "large", 400);
      expect(small.got).toBe(40);
      expect(large.got).toBe(400);
      // 360 more tokens: a promise per token (the async-generator path) would add ≥ 360.
      expect(large.promises - small.promises, `promises: 40 tokens ${small.promises}, 400 tokens ${large.promises}`).toBeLessThan(36);
    } finally {
      await gw.close();
    }
  });

  it("pauses the engine's response while the sink is full and resumes it on the flow", async () => {
    const engine = new OpenAIHttpEngine({ instanceId: "e1", model: MODEL, baseUrl: url, clock: new WallClock(), metricsIntervalMs: 0 });
    const gw = new Gateway({ region: "r", clock: new WallClock() });
    gw.addInstance("h100-80gb", engine);
    try {
      const req: GenerateRequest = { id: "slow", model: MODEL, kind: "completion", promptTokens: 4, maxTokens: 200, priority: 0, body: { model: MODEL, prompt: "a b c d", max_tokens: 200 } };
      let got = 0;
      let done = false;
      const flow = gw.open(req, {
        event(ev) {
          if (ev.type === "done") done = true;
          else got++;
          return got < 5; // full from the fifth token on
        },
        fail(err) {
          throw err;
        },
      });
      const t0 = Date.now();
      while (got < 5 && Date.now() - t0 < 5000) await new Promise((r) => setTimeout(r, 5));
      const atPause = got;
      await new Promise((r) => setTimeout(r, 100));
      // Paused: at most what the chunk being parsed still held came after the sink said it was full.
      expect(got - atPause).toBeLessThanOrEqual(2);
      expect(done).toBe(false);
      flow.resume();
      const t1 = Date.now();
      while (!done && Date.now() - t1 < 5000) {
        flow.resume();
        await new Promise((r) => setTimeout(r, 5));
      }
      expect(done).toBe(true);
      expect(got).toBe(200);
    } finally {
      await gw.close();
    }
  });
});
