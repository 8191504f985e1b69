import { describe, expect, it } from "vitest";
import * as grpc from "@grpc/grpc-js";
import type { EngineEvent } from "../../core/ports.js";
import { FakeEngine } from "../../test/helpers/fake-engine.js";
import { findTidegateError } from "../../core/errors.js";
import { MODEL, clock, collect, errorOf, until, useGrpcFixture } from "../../test/helpers/grpc-fixture.js";
import { regionService, requestToWire, type WireDispatchEvents } from "./region-proto.js";

const { cleanup, request, region, serve, link } = useGrpcFixture("m");
/** Ids the tests build by hand (`m-x…`, `hold-…`) take their numbers from here. */
let n = 0;

/** An engine whose requests with ids starting "hold-" wait (abortably) before their first token. */
function holdingEngine(id: string, tokenDelayMs: number): FakeEngine {
  const engine = new FakeEngine({ instanceId: id, model: MODEL, clock, tokenDelayMs });
  const plain = engine.generate.bind(engine);
  engine.generate = async function* (r, signal) {
    if (r.id.startsWith("hold-")) await clock.sleep(60_000, signal);
    yield* plain(r, signal);
  };
  return engine;
}

describe("gRPC RegionLink over one DispatchMux stream", () => {
  it("carries 32 concurrent requests on one stream, each with exactly its own events in order", async () => {
    const gw = region([new FakeEngine({ instanceId: "a", model: MODEL, clock, tokenDelayMs: 2 }), new FakeEngine({ instanceId: "b", model: MODEL, clock, tokenDelayMs: 3 })]);
    const server = await serve(gw);
    const l = link(server.address);
    const reqs = Array.from({ length: 32 }, (_, i) => request({ maxTokens: 20 + i, id: `mx-${n++}-${"x".repeat(i)}` }));
    const remote = await Promise.all(reqs.map((r) => collect(l.dispatch(r))));
    for (let i = 0; i < reqs.length; i++) {
      const direct = await collect(gw.generate(reqs[i]!));
      expect(remote[i]).toEqual(direct);
      expect(remote[i]).toHaveLength(20 + i + 1);
    }
    expect(l.muxConnects).toBe(1);
  });

  it("a batch request's text comes in one message with its done; interactive neighbours still stream token by token", async () => {
    const gw = region([new FakeEngine({ instanceId: "a", model: MODEL, clock, tokenDelayMs: 1 })]);
    const l = link((await serve(gw)).address);
    const batch = request({ maxTokens: 50, batch: true, priority: 1 });
    const interactive = request({ maxTokens: 50 });
    const [b, i] = await Promise.all([collect(l.dispatch(batch)), collect(l.dispatch(interactive))]);
    const direct = await collect(gw.generate({ ...batch, id: `d${batch.id.slice(1)}` })); // same id length, same text
    const text = (evs: EngineEvent[]) => evs.map((e) => (e.type === "token" ? e.text : "")).join("");
    expect(b).toHaveLength(2);
    expect(b[0]).toEqual({ type: "token", text: text(direct), tokens: 50 });
    expect(b[1]).toEqual(direct.at(-1));
    expect(i).toHaveLength(51);
  });

  it("cancels one request without disturbing the others on the stream", async () => {
    const engine = new FakeEngine({ instanceId: "a", model: MODEL, clock, tokenDelayMs: 5 });
    const l = link((await serve(region([engine]))).address);
    const victim = request({ maxTokens: 10_000 });
    const ctl = new AbortController();
    const others = [request({ maxTokens: 40 }), request({ maxTokens: 40 })];
    const otherRuns = others.map((r) => collect(l.dispatch(r)));
    const got: EngineEvent[] = [];
    const err = await errorOf(
      (async () => {
        for await (const ev of l.dispatch(victim, ctl.signal)) {
          got.push(ev);
          if (got.length === 3) ctl.abort();
        }
      })(),
    );
    expect(err.code).toBe("cancelled");
    const done = await Promise.all(otherRuns);
    for (const evs of done) {
      expect(evs).toHaveLength(41);
      expect(evs.at(-1)).toMatchObject({ type: "done", finishReason: "length" });
    }
    await until(() => engine.cancelled.includes(victim.id));
    expect(engine.cancelled).toEqual([victim.id]);
    // Stopping the iteration early also cancels at the region.
    const early = request({ maxTokens: 10_000 });
    for await (const ev of l.dispatch(early)) if (ev.type === "token") break;
    await until(() => engine.cancelled.includes(early.id));
    expect(engine.cancelled).toEqual([victim.id, early.id]);
    expect(l.muxConnects).toBe(1);
  });

  it("fails one request before its first token as a retryable error while its neighbours stream on", async () => {
    const a = new FakeEngine({ instanceId: "a", model: MODEL });
    const l = link((await serve(region([a]))).address);
    a.failNext = ["before"];
    const bad = l.dispatch(request());
    const good = l.dispatch(request({ maxTokens: 30 }));
    expect((await errorOf(collect(bad))).code).toBe("upstream_error");
    expect(await collect(good)).toHaveLength(31);
    expect((await errorOf(collect(l.dispatch(request({ model: "bloom-176b" }))))).code).toBe("model_not_found");
    a.failNext = ["after"];
    const mid = await errorOf(collect(l.dispatch(request())));
    expect(mid.code).toBe("upstream_error");
    expect(mid.message).toContain("mid-stream");
    expect(l.muxConnects).toBe(1);
  });

  it("fails every in-flight request when the region restarts, then reconnects for new requests", async () => {
    const first = await serve(region([holdingEngine("a", 10)]));
    const l = link(first.address);
    const streaming = request({ maxTokens: 100_000 });
    const held = request({ id: `hold-${n++}` });
    const seen: EngineEvent[] = [];
    const streamingRun = errorOf(
      (async () => {
        for await (const ev of l.dispatch(streaming)) seen.push(ev);
      })(),
    );
    const heldRun = errorOf(collect(l.dispatch(held)));
    await until(() => seen.length >= 3);
    await first.close();
    const [mid, before] = await Promise.all([streamingRun, heldRun]);
    expect(mid.code).toBe("upstream_error");
    expect(mid.message).toContain("mid-stream");
    expect(before.code).toBe("upstream_error");
    expect(before.message).not.toContain("mid-stream");
    await serve(region([holdingEngine("b", 0)]), first.address);
    let events: EngineEvent[] = [];
    const start = Date.now();
    for (;;) {
      try {
        events = await collect(l.dispatch(request({ maxTokens: 3 })));
        break;
      } catch (err) {
        expect(findTidegateError(err)?.code).toBe("upstream_error");
        if (Date.now() - start > 5000) throw err;
        await clock.sleep(50);
      }
    }
    expect(events.map((e) => e.type)).toEqual(["token", "token", "token", "done"]);
    expect(l.muxConnects).toBeGreaterThanOrEqual(2);
  });

  it("fails a request whose consumer stalls the shared stream past stallLimitMs; the others complete", async () => {
    // One token per macrotask: every token becomes its own message, so the stalled queue fills quickly.
    const engine = new FakeEngine({ instanceId: "a", model: MODEL });
    const plain = engine.generate.bind(engine);
    engine.generate = async function* (r, signal) {
      for await (const ev of plain(r, signal)) {
        await new Promise<void>((resolve) => setImmediate(resolve));
        yield ev;
      }
    };
    const l = link((await serve(region([engine]))).address, { stallLimitMs: 300 });
    const stalled = request({ maxTokens: 100_000 });
    const it = l.dispatch(stalled)[Symbol.asyncIterator]();
    expect((await it.next()).value).toMatchObject({ type: "token" });
    const other = await collect(l.dispatch(request({ maxTokens: 2000 })));
    expect(other).toHaveLength(2001);
    const err = await errorOf(
      (async () => {
        for (;;) if ((await it.next()).done === true) return;
      })(),
    );
    expect(err.code).toBe("upstream_error");
    expect(err.message).toContain("stalled");
    await until(() => engine.cancelled.includes(stalled.id));
  });

  it("still serves the unary-request Dispatch rpc (back-compat)", async () => {
    const gw = region([new FakeEngine({ instanceId: "a", model: MODEL })]);
    const server = await serve(gw);
    const Ctor = regionService();
    const client = new Ctor(server.address, grpc.credentials.createInsecure()) as unknown as grpc.Client & { Dispatch(r: unknown): grpc.ClientReadableStream<WireDispatchEvents> };
    cleanup(() => client.close());
    const req = request({ maxTokens: 5 });
    const msgs: WireDispatchEvents[] = [];
    for await (const m of client.Dispatch(requestToWire(req))) msgs.push(m as WireDispatchEvents);
    expect(msgs.flatMap((m) => m.texts)).toHaveLength(5);
    expect(msgs.at(-1)!.done).toMatchObject({ finish_reason: "length", completion_tokens: 5 });
  });
});
