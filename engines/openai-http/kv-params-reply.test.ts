/**
 * The openai-http adapter's side of vLLM's disaggregation contract (issue 48): a prefill for a remote decode whose
 * answer carries no kv_transfer_params, or a malformed one (not an object), ends in a typed upstream_error naming the
 * instance — never a decode step with nothing to pull. The upstream is a hand-written HTTP server.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { WallClock } from "../../core/clock.js";
import type { GenerateRequest } from "../../core/ports.js";
import { errorOf } from "../../test/helpers/streams.js";
import { OpenAIHttpEngine } from "./openai-http-engine.js";

let server: Server | undefined;
afterEach(async () => {
  await new Promise<void>((r) => (server === undefined ? r() : server.close(() => r())));
  server = undefined;
});

/** An upstream answering every completion whole with `kvTransferParams` as the body's kv_transfer_params (absent when undefined). */
async function upstream(kvTransferParams: unknown): Promise<string> {
  server = createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      const body = { id: "x", object: "text_completion", choices: [{ index: 0, text: "a", finish_reason: "length" }], usage: { prompt_tokens: 5, completion_tokens: 1, total_tokens: 6 }, ...(kvTransferParams === undefined ? {} : { kv_transfer_params: kvTransferParams }) };
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify(body));
    });
  });
  await new Promise<void>((r) => server!.listen(0, "127.0.0.1", r));
  return `http://127.0.0.1:${(server!.address() as AddressInfo).port}`;
}

const prefillReq: GenerateRequest = { id: "r1", model: "llama3.2-3b", kind: "completion", promptTokens: 5, maxTokens: 8, priority: 0, body: { prompt: "hello there" }, blockHashes: [], kvTransfer: { remoteDecode: true } };

async function prefillThrough(baseUrl: string) {
  const engine = new OpenAIHttpEngine({ instanceId: "prefill-0", model: "llama3.2-3b", baseUrl, clock: new WallClock(), kvBytesCapacity: 1e9, role: "prefill", metricsIntervalMs: 60_000 });
  try {
    return await errorOf((async () => {
      for await (const _ of engine.generate(prefillReq)) void _;
    })());
  } finally {
    await engine.close();
  }
}

describe("openai-http: a prefill's kv_transfer_params", () => {
  it("missing from the answer: a typed upstream_error naming the instance", async () => {
    const e = await prefillThrough(await upstream(undefined));
    expect(e.code).toBe("upstream_error");
    expect(e.message).toContain("prefill-0 answered a prefill for a remote decode without kv_transfer_params");
  });

  it("malformed (not an object): the same typed error", async () => {
    const e = await prefillThrough(await upstream("remote_block_ids=1,2"));
    expect(e.code).toBe("upstream_error");
    expect(e.message).toContain("without kv_transfer_params");
  });

  it("present: the done event carries them for the decode step", async () => {
    const url = await upstream({ do_remote_prefill: true, remote_engine_id: "prefill-0", remote_block_ids: [0] });
    const engine = new OpenAIHttpEngine({ instanceId: "prefill-0", model: "llama3.2-3b", baseUrl: url, clock: new WallClock(), kvBytesCapacity: 1e9, role: "prefill", metricsIntervalMs: 60_000 });
    try {
      const events = [];
      for await (const ev of engine.generate(prefillReq)) events.push(ev);
      expect(events.at(-1)).toMatchObject({ type: "done", kvTransferParams: { remote_engine_id: "prefill-0", remote_block_ids: [0] } });
    } finally {
      await engine.close();
    }
  });
});
