/**
 * engine-sim's λScale execute-while-load control (POST/GET /tidegate/lambda, http.ts): an engine waiting for its
 * blocks serves as an execution pipeline's head with the pass overhead the region sends, then locally.
 */
import { afterEach, describe, expect, it } from "vitest";
import { WallClock } from "../../core/clock.js";
import { newSimEngine } from "../../region/runtime/build-sim-engine.js";
import { EngineSimServer, LAMBDA_PATH } from "./http.js";
import type { SimEngine } from "./sim-engine.js";

let server: EngineSimServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

async function start(): Promise<{ url: string; engine: SimEngine }> {
  const engine = newSimEngine({ instanceId: "i", model: "llama3.2-3b", gpu: "h100-80gb", tp: 2 }, { timeScale: 0.01 }, new WallClock());
  server = new EngineSimServer({ engine });
  server.waitForParameters("waiting for llama3.2-3b's blocks");
  return { url: await server.listen(0), engine };
}

const post = (url: string, body: unknown) => fetch(new URL(LAMBDA_PATH, url), { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
const completion = (url: string) => fetch(new URL("/v1/completions", url), { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ model: "llama3.2-3b", prompt: "hi", max_tokens: 2 }) });

describe("engine-sim /tidegate/lambda", () => {
  it("a waiting engine serves as a pipeline head with the hop on every pass, then locally once its blocks are here", async () => {
    const { url, engine } = await start();
    expect((await fetch(new URL("/health", url))).status).toBe(503);
    expect((await completion(url)).status).toBe(503);
    expect(await (await fetch(new URL(LAMBDA_PATH, url))).json()).toEqual({ mode: "whole", passOverheadMs: 0, waiting: true });
    const r = await post(url, { passOverheadMs: 3.5 });
    expect(r.status).toBe(200);
    expect(await r.json()).toEqual({ mode: "pipeline", passOverheadMs: 3.5, waiting: false });
    expect(engine.core.passOverhead).toBe(3.5);
    expect((await fetch(new URL("/health", url))).status).toBe(200);
    expect((await completion(url)).status).toBe(200);
    // Its own blocks arrive: local mode (λScale §4.4), no hop.
    server!.ready({ model: "llama3.2-3b", bytes: 1024, blocks: 4 });
    expect(await (await fetch(new URL(LAMBDA_PATH, url))).json()).toEqual({ mode: "local", passOverheadMs: 0, waiting: false });
    expect(engine.core.passOverhead).toBe(0);
    // Once whole, it is no pipeline head any more.
    expect((await post(url, { passOverheadMs: 1 })).status).toBe(409);
  });

  it("bad bodies are 400 naming the field; the region's switch to local mode is accepted at any time", async () => {
    const { url, engine } = await start();
    for (const body of [{}, { passOverheadMs: -1 }, { passOverheadMs: "3" }]) {
      const r = await post(url, body);
      expect(r.status).toBe(400);
      expect(((await r.json()) as { error: { param: string } }).error.param).toBe("passOverheadMs");
    }
    expect((await post(url, { passOverheadMs: 2 })).status).toBe(200);
    expect(await (await post(url, { passOverheadMs: 0 })).json()).toEqual({ mode: "local", passOverheadMs: 0, waiting: false });
    expect(engine.core.passOverhead).toBe(0);
  });

  it("behindBlocks: a waiting engine serves a blitzscale cold start now, its prefill waiting for the blocks it is told of", async () => {
    const { url, engine } = await start();
    expect((await post(url, { passOverheadMs: 1, behindBlocks: true })).status).toBe(400);
    server!.blocks(1, 4);
    const r = await post(url, { passOverheadMs: 0, behindBlocks: true });
    expect(r.status).toBe(200);
    expect(await r.json()).toEqual({ mode: "behind-blocks", passOverheadMs: 0, waiting: false });
    expect(engine.core.behindBlocks).toBe(true);
    // accepted, but no token until the blocks are here
    const answer = completion(url);
    let answered = false;
    void answer.then(() => (answered = true));
    await new Promise((r) => setTimeout(r, 200));
    expect(answered).toBe(false);
    server!.blocks(3, 4);
    await new Promise((r) => setTimeout(r, 100));
    expect(answered).toBe(false);
    server!.ready({ model: "llama3.2-3b", bytes: 1024, blocks: 4 });
    expect((await answer).status).toBe(200);
    expect(engine.core.behindBlocks).toBe(false);
    expect(await (await fetch(new URL(LAMBDA_PATH, url))).json()).toEqual({ mode: "local", passOverheadMs: 0, waiting: false });
    // a whole engine takes no such mode
    expect((await post(url, { passOverheadMs: 0, behindBlocks: true })).status).toBe(409);
  });
});
