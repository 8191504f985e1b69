import { describe, expect, it } from "vitest";
import { VirtualClock } from "../../core/clock.js";
import { TidegateError, findTidegateError } from "../../core/errors.js";
import type { EngineEvent, GenerateRequest, RequestCallbacks } from "../../core/ports.js";
import { FakeEngine } from "../../test/helpers/fake-engine.js";
import { collect, errorOf as failureOf } from "../../test/helpers/streams.js";
import { Gateway } from "./gateway.js";

const MODEL = "llama3.1-8b";
let nextId = 0;
function request(over: Partial<GenerateRequest> = {}): GenerateRequest {
  return { id: `req-${nextId++}`, model: MODEL, kind: "chat", promptTokens: 10, maxTokens: 5, priority: 0, body: {}, ...over };
}

function gateway(clock = new VirtualClock(), statsRefreshMs = 100): Gateway {
  return new Gateway({ region: "us-east", clock, statsRefreshMs });
}

describe("Gateway routing", () => {
  it("routes around an instance whose stats are stale, counts it as full, reports it, and uses it when nothing else serves", async () => {
    const gw = gateway(new VirtualClock(), 0);
    const fresh = new FakeEngine({ instanceId: "fresh", model: MODEL, stats: { kvBytesUsed: 60, kvBytesCapacity: 100, remainingTokens: 5000 } });
    const stale = new FakeEngine({ instanceId: "stale", model: MODEL, stats: { kvBytesUsed: 0, kvBytesCapacity: 100, remainingTokens: 0, stale: true } });
    gw.addInstance("h100-80gb", fresh);
    gw.addInstance("h100-80gb", stale);
    // JSQ alone would pick "stale" (0 remaining tokens); its zeros are not news, so "fresh" gets the request.
    expect(gw.route(MODEL)?.instanceId).toBe("fresh");
    await collect(gw.generate(request()));
    expect(fresh.requests).toHaveLength(1);
    expect(stale.requests).toHaveLength(0);
    const t = gw.snapshot().models[0]!;
    expect(t.staleInstances).toBe(1);
    expect(t.effectiveMemoryUtilization).toBeCloseTo((60 + 100) / 200);
    expect(gw.instances().find((i) => i.instanceId === "stale")?.stale).toBe(true);
    // The admin listing's "stats stale" detail is the region runtime's (region/runtime/build-region.test.ts).
    gw.setInstanceState("fresh", "draining");
    expect(gw.route(MODEL)?.instanceId).toBe("stale");
  });

  it("sends a request to the least-utilized endpoint, then to the instance with the fewest remaining tokens", async () => {
    const gw = gateway();
    const h1 = new FakeEngine({ instanceId: "h1", model: MODEL, stats: { kvBytesUsed: 50, kvBytesCapacity: 100, remainingTokens: 0 } });
    const a1 = new FakeEngine({ instanceId: "a1", model: MODEL, stats: { kvBytesUsed: 30, kvBytesCapacity: 100, remainingTokens: 900 } });
    const a2 = new FakeEngine({ instanceId: "a2", model: MODEL, stats: { kvBytesUsed: 10, kvBytesCapacity: 100, remainingTokens: 300 } });
    gw.addInstance("h100-80gb", h1);
    gw.addInstance("a100-80gb", a1);
    gw.addInstance("a100-80gb", a2);
    // h100 endpoint: 50/100 = 0.5; a100 endpoint: 40/200 = 0.2 → a100; JSQ inside it: a2 (300 < 900).
    expect(gw.route(MODEL)).toEqual({ endpointId: "llama3.1-8b/a100-80gb", instanceId: "a2" });
    const events = await collect(gw.generate(request({ maxTokens: 3 })));
    expect(a2.requests).toHaveLength(1);
    expect(events.map((e) => e.type)).toEqual(["token", "token", "token", "done"]);
    expect(events.at(-1)).toMatchObject({ type: "done", finishReason: "length", usage: { prompt_tokens: 10, completion_tokens: 3, total_tokens: 13 } });
  });

  it("skips instances that are not serving and reports no_region_available when none serves", async () => {
    const gw = gateway();
    const a = new FakeEngine({ instanceId: "a", model: MODEL, stats: { remainingTokens: 0 } });
    const b = new FakeEngine({ instanceId: "b", model: MODEL, stats: { remainingTokens: 5000 } });
    gw.addInstance("h100-80gb", a, "loading");
    gw.addInstance("h100-80gb", b);
    expect(gw.route(MODEL)?.instanceId).toBe("b");
    gw.setInstanceState("b", "draining");
    expect(gw.route(MODEL)).toBeUndefined();
    const err = await failureOf(collect(gw.generate(request())));
    expect(err.code).toBe("no_region_available");
    expect((await failureOf(collect(gw.generate(request({ model: "bloom-176b" }))))).code).toBe("model_not_found");
  });

  it("spreads a burst over instances and endpoints with its in-flight estimate until stats refresh", async () => {
    const clock = new VirtualClock();
    const gw = gateway(clock, 100);
    const engines = ["h-1", "h-2"].map((id) => new FakeEngine({ instanceId: id, model: MODEL, clock, tokenDelayMs: 1000, stats: { kvBytesCapacity: 1e9 } }));
    const other = new FakeEngine({ instanceId: "a-1", model: MODEL, clock, tokenDelayMs: 1000, stats: { kvBytesCapacity: 2e9 } });
    for (const e of engines) gw.addInstance("h100-80gb", e);
    gw.addInstance("a100-80gb", other);
    // Engine stats never move (all zero): without the correction every request would go to h-1.
    const ctl = new AbortController();
    const streams = Array.from({ length: 8 }, () => collect(gw.generate(request({ promptTokens: 1000, maxTokens: 100 }), ctl.signal)).catch((e: unknown) => e));
    await clock.advanceBy(0);
    const counts = [engines[0]!.requests.length, engines[1]!.requests.length, other.requests.length];
    // Each request adds 1000 prompt tokens × 131072 KV bytes/token to its endpoint's estimate; both endpoints hold
    // 2e9 bytes (two h100 instances of 1e9, one a100 instance of 2e9), so they alternate, and JSQ alternates h-1/h-2.
    expect(counts).toEqual([2, 2, 4]);
    expect(gw.instances().map((i) => i.inFlight)).toEqual([2, 2, 4]);
    // After the refresh period the estimate is reset to the engines' own (unchanged) stats: the next goes to h-1.
    await clock.advanceBy(100);
    expect(gw.route(MODEL)?.instanceId).toBe("h-1");
    ctl.abort();
    await clock.advanceBy(0);
    for (const err of await Promise.all(streams)) expect(findTidegateError(err)?.code).toBe("cancelled");
    expect(gw.instances().map((i) => i.inFlight)).toEqual([0, 0, 0]);
  });

  it("undoes a finished request's correction within the same stats epoch", async () => {
    const clock = new VirtualClock();
    const gw = gateway(clock, 1_000_000);
    const a = new FakeEngine({ instanceId: "a", model: MODEL });
    const b = new FakeEngine({ instanceId: "b", model: MODEL });
    gw.addInstance("h100-80gb", a);
    gw.addInstance("h100-80gb", b);
    await collect(gw.generate(request()));
    await collect(gw.generate(request()));
    // Both finished: no correction left, so the tie goes to the first instance again.
    expect(a.requests).toHaveLength(2);
    expect(b.requests).toHaveLength(0);
  });
});

describe("Gateway failures and cancellation", () => {
  it("retries another instance when one fails before the first event", async () => {
    const gw = gateway();
    const a = new FakeEngine({ instanceId: "a", model: MODEL });
    const b = new FakeEngine({ instanceId: "b", model: MODEL, stats: { remainingTokens: 10 } });
    gw.addInstance("h100-80gb", a);
    gw.addInstance("h100-80gb", b);
    a.failNext = ["before"];
    const events = await collect(gw.generate(request({ maxTokens: 2 })));
    expect(events.map((e) => e.type)).toEqual(["token", "token", "done"]);
    expect(a.requests).toHaveLength(1);
    expect(b.requests).toHaveLength(1);
  });

  it("fails with upstream_error when every tried instance fails before the first event", async () => {
    const outcomes: string[] = [];
    const gw = new Gateway({ region: "us-east", clock: new VirtualClock(), onOutcome: (_m, o) => outcomes.push(o) });
    const a = new FakeEngine({ instanceId: "a", model: MODEL });
    const b = new FakeEngine({ instanceId: "b", model: MODEL });
    gw.addInstance("h100-80gb", a);
    gw.addInstance("h100-80gb", b);
    a.failNext = ["before"];
    b.failNext = ["before"];
    const err = await failureOf(collect(gw.generate(request())));
    expect(err.code).toBe("upstream_error");
    expect(err.message).toContain("2 instance(s)");
    expect(outcomes).toEqual(["error"]);
  });

  it("reports a failure after the first event as upstream_error without retrying", async () => {
    const gw = gateway();
    const a = new FakeEngine({ instanceId: "a", model: MODEL });
    const b = new FakeEngine({ instanceId: "b", model: MODEL, stats: { remainingTokens: 10 } });
    gw.addInstance("h100-80gb", a);
    gw.addInstance("h100-80gb", b);
    a.failNext = ["after"];
    const seen: EngineEvent[] = [];
    const err = await failureOf(
      (async () => {
        for await (const ev of gw.generate(request())) seen.push(ev);
      })(),
    );
    expect(err.code).toBe("upstream_error");
    expect(seen).toHaveLength(1);
    expect(b.requests).toHaveLength(0);
  });

  it("passes an engine's client error (4xx) through without retrying", async () => {
    const gw = gateway();
    const bad = new FakeEngine({ instanceId: "a", model: MODEL });
    bad.generate = async function* () {
      yield* [];
      throw new TidegateError("invalid_request", "prompt too long", { param: "messages" });
    };
    const b = new FakeEngine({ instanceId: "b", model: MODEL, stats: { remainingTokens: 10 } });
    gw.addInstance("h100-80gb", bad);
    gw.addInstance("h100-80gb", b);
    const err = await failureOf(collect(gw.generate(request())));
    expect(err.code).toBe("invalid_request");
    expect(b.requests).toHaveLength(0);
  });

  it("counts a request as ok when its consumer stops right after the done event", async () => {
    const outcomes: string[] = [];
    const gw = new Gateway({ region: "us-east", clock: new VirtualClock(), onOutcome: (_m, o) => outcomes.push(o) });
    const e = new FakeEngine({ instanceId: "a", model: MODEL });
    gw.addInstance("h100-80gb", e);
    for await (const ev of gw.generate(request({ maxTokens: 2 }))) if (ev.type === "done") break;
    expect(outcomes).toEqual(["ok"]);
    expect(e.cancelled).toEqual([]);
    expect(e.active).toBe(0);
  });

  it("closes a request's books at its done event even if the consumer never pulls again (the router's relay)", async () => {
    const gw = new Gateway({ region: "us-east", clock: new VirtualClock() });
    const e = new FakeEngine({ instanceId: "a", model: MODEL });
    gw.addInstance("h100-80gb", e);
    const it = gw.generate(request({ maxTokens: 2 }))[Symbol.asyncIterator]();
    for (;;) {
      const step = await it.next();
      if (step.done === true || step.value.type === "done") break; // no return(): the generator stays suspended
    }
    expect(gw.instances()[0]!.inFlight).toBe(0);
    // The engine's own stream was returned before `done` was handed on: its `finally` ran (issue 32 item 6: the
    // openai-http adapter's in-flight count, and with it the region's running requests, grew by one per request).
    expect(e.active).toBe(0);
    expect(e.cancelled).toEqual([]);
  });

  it("closes the engine's stream at done for a consumer that returns the iterator after done (the gRPC servers)", async () => {
    const outcomes: string[] = [];
    const gw = new Gateway({ region: "us-east", clock: new VirtualClock(), onOutcome: (_m, o) => outcomes.push(o) });
    const e = new FakeEngine({ instanceId: "a", model: MODEL });
    gw.addInstance("h100-80gb", e);
    for (let i = 0; i < 50; i++) {
      const it = gw.generate(request({ maxTokens: 3 }))[Symbol.asyncIterator]();
      let step = await it.next();
      while (step.done !== true && step.value.type !== "done") step = await it.next();
      await it.return(undefined);
    }
    expect(e.active).toBe(0);
    expect(e.cancelled).toEqual([]);
    expect(outcomes).toEqual(Array.from({ length: 50 }, () => "ok"));
    expect(gw.instances()[0]!.inFlight).toBe(0);
  });

  it("cancels the engine's generation when the consumer stops or the signal aborts", async () => {
    const clock = new VirtualClock();
    const gw = gateway(clock);
    const e = new FakeEngine({ instanceId: "a", model: MODEL, clock, tokenDelayMs: 10 });
    gw.addInstance("h100-80gb", e);
    const r1 = request({ maxTokens: 100 });
    const it1 = gw.generate(r1)[Symbol.asyncIterator]();
    const first = it1.next();
    await clock.advanceBy(10);
    expect((await first).value).toMatchObject({ type: "token" });
    await it1.return(undefined);
    expect(e.cancelled).toContain(r1.id);
    expect(e.active).toBe(0);

    const ctl = new AbortController();
    const r2 = request({ maxTokens: 100 });
    const done = failureOf(collect(gw.generate(r2, ctl.signal)));
    await clock.advanceBy(25);
    ctl.abort();
    await clock.advanceBy(0);
    expect((await done).code).toBe("cancelled");
    expect(e.cancelled).toContain(r2.id);
    expect(gw.instances()[0]!.inFlight).toBe(0);
  });
});

/** An engine that hangs as a stopped process does: `tokensFirst` tokens, then nothing until its signal aborts. */
class HangingEngine extends FakeEngine {
  constructor(instanceId: string, readonly tokensFirst: number) {
    super({ instanceId, model: MODEL });
  }

  override async *generate(req: GenerateRequest, signal?: AbortSignal): AsyncGenerator<EngineEvent, void, undefined> {
    this.requests.push(req);
    for (let i = 0; i < this.tokensFirst; i++) yield { type: "token", text: "x", tokens: 1 };
    // A socket destroyed under a pending read: a plain error, not the gateway's reason.
    await new Promise((_, reject) => {
      if (signal?.aborted === true) reject(new Error("socket destroyed"));
      signal?.addEventListener("abort", () => reject(new Error("socket destroyed")), { once: true });
    });
  }
}

describe("Gateway.engineDown (issue 49 item 2)", () => {
  it("ends every stream on a down engine at once: unstarted ones retried on another instance, started ones failed with the reason; it then takes nothing", async () => {
    const gw = gateway(new VirtualClock(), 0);
    const hung = new HangingEngine("hung", 0);
    const started = new HangingEngine("started", 1);
    gw.addInstance("h100-80gb", hung);
    const waiting = gw.generate(request({ maxTokens: 2 }))[Symbol.asyncIterator]();
    const waitingFirst = waiting.next();
    await Promise.resolve();
    expect(hung.requests).toHaveLength(1);
    gw.setInstanceState("hung", "draining");
    gw.addInstance("h100-80gb", started);
    const running = gw.generate(request({ maxTokens: 5 }))[Symbol.asyncIterator]();
    expect((await running.next()).value).toMatchObject({ type: "token" });
    // A healthy instance beside them, and the ejection cap's case: "hung" kept serving.
    const ok = new FakeEngine({ instanceId: "ok", model: MODEL, stats: { remainingTokens: 1_000_000 } });
    gw.addInstance("h100-80gb", ok);
    gw.setInstanceState("hung", "serving");
    const changes: number[] = [];
    gw.onChange(() => changes.push(1));
    expect(gw.engineDown("hung", "stalled: no byte for 1000 ms while 1 request(s) or scrape(s) in flight")).toBe(1);
    expect(gw.engineDown("started", "connection refused (ECONNREFUSED)")).toBe(1);
    expect(gw.engineDown("started", "connection refused (ECONNREFUSED)")).toBe(0);
    expect(changes).toHaveLength(2);
    // The unstarted request moved to "ok" and finished there.
    expect((await waitingFirst).value).toMatchObject({ type: "token" });
    const rest: EngineEvent[] = [];
    for (let r = await waiting.next(); r.done !== true; r = await waiting.next()) rest.push(r.value);
    expect(rest.map((e) => e.type)).toEqual(["token", "done"]);
    expect(ok.requests).toHaveLength(1);
    // The started one ended with a typed error saying why.
    const err = await failureOf(running.next());
    expect(err.code).toBe("upstream_error");
    expect(err.message).toBe("instance started stopped answering (connection refused (ECONNREFUSED))");
    // Down engines take nothing, ejected or not (JSQ alone would pick them: 0 remaining tokens), count as stale and
    // full in telemetry, and are listed with why.
    expect(gw.route(MODEL)?.instanceId).toBe("ok");
    expect(gw.snapshot().models[0]!.staleInstances).toBe(2);
    expect(gw.instances().find((i) => i.instanceId === "hung")).toMatchObject({ state: "serving", down: "stalled: no byte for 1000 ms while 1 request(s) or scrape(s) in flight" });
    // With every engine down the region refuses at once (the router retries elsewhere), never waits on one.
    gw.engineDown("ok", "connection refused (ECONNREFUSED)");
    expect((await failureOf(collect(gw.generate(request())))).code).toBe("no_region_available");
    gw.engineUp("hung");
    expect(gw.route(MODEL)?.instanceId).toBe("hung");
    expect(changes).toHaveLength(4);
  });
});

describe("Gateway telemetry", () => {
  it("computes utilization, queues, states and tokens/s on hand-checked numbers", async () => {
    const clock = new VirtualClock(0);
    const gw = new Gateway({ region: "us-west", clock, rateWindowMs: 10_000 });
    gw.addInstance("h100-80gb", new FakeEngine({ instanceId: "h1", model: MODEL, stats: { kvBytesUsed: 30, kvBytesCapacity: 100, running: 3, waiting: 1 } }));
    gw.addInstance("h100-80gb", new FakeEngine({ instanceId: "h2", model: MODEL, stats: { kvBytesUsed: 10, kvBytesCapacity: 100, running: 1 } }));
    gw.addInstance("h100-80gb", new FakeEngine({ instanceId: "h3", model: MODEL, stats: { kvBytesUsed: 50, kvBytesCapacity: 100, running: 2, waiting: 2 } }), "draining");
    gw.addInstance("a100-80gb", new FakeEngine({ instanceId: "a1", model: MODEL, stats: { kvBytesUsed: 60, kvBytesCapacity: 200, running: 4 } }));
    gw.addInstance("a100-80gb", new FakeEngine({ instanceId: "a2", model: MODEL }), "provisioning");
    // 10 prompt + 5 output tokens served in the first 2 s → 7.5 tokens/s.
    await collect(gw.generate(request({ promptTokens: 10, maxTokens: 5 })));
    clock.advanceToSync(2000);
    const t = gw.snapshot();
    expect(t).toMatchObject({ region: "us-west", seq: 1, atMs: 2000 });
    const m = t.models[0]!;
    // Serving only: (30 + 10 + 60) / (100 + 100 + 200) = 0.25; h100 endpoint 40/200 = 0.2, a100 60/200 = 0.3.
    expect(m.effectiveMemoryUtilization).toBeCloseTo(0.25, 12);
    expect(m.endpoints).toEqual([
      { endpointId: "llama3.1-8b/h100-80gb", gpu: "h100-80gb", effectiveMemoryUtilization: 0.2, servingInstances: 2 },
      { endpointId: "llama3.1-8b/a100-80gb", gpu: "a100-80gb", effectiveMemoryUtilization: 0.3, servingInstances: 1 },
    ]);
    expect(m.running).toBe(3 + 1 + 2 + 4);
    expect(m.waiting).toBe(1 + 2);
    expect(m.instances).toEqual({ provisioning: 1, loading: 0, serving: 3, draining: 1, spot: 0 });
    expect(m.tokensPerS).toBeCloseTo(7.5, 12);
    // Nothing more served: at 11 s the baseline is still the 0 s sample (15 tokens / 11 s); at 13 s the 2 s sample
    // is at least 10 s old and becomes the baseline, so the burst has left the window.
    clock.advanceToSync(11_000);
    expect(gw.snapshot().models[0]!.tokensPerS).toBeCloseTo(15 / 11, 12);
    clock.advanceToSync(13_000);
    expect(gw.snapshot().models[0]!.tokensPerS).toBe(0);
  });

  it("reports utilization 1 (not NaN) for a model with no serving capacity", () => {
    const gw = gateway();
    gw.addInstance("h100-80gb", new FakeEngine({ instanceId: "x", model: MODEL }), "loading");
    const m = gw.snapshot().models[0]!;
    expect(m.effectiveMemoryUtilization).toBe(1);
    expect(m.endpoints[0]!.servingInstances).toBe(0);
  });
});

describe("Gateway.submit (the callback form)", () => {
  it("keeps the same in-flight books as generate: a burst spreads over instances, ends settle them, tokens are counted", async () => {
    const { SimEngine } = await import("../../engines/sim/sim-engine.js");
    const clock = new VirtualClock();
    const gw = gateway(clock, 100);
    const engines = ["a", "b", "c"].map((id) => new SimEngine({ instanceId: id, model: MODEL, gpu: "h100-80gb", tp: 2, clock }));
    for (const e of engines) gw.addInstance("h100-80gb", e);
    const done: number[] = [];
    const firsts: number[] = [];
    const hooks = { onFirstToken: (t: number) => firsts.push(t), onDone: (t: number) => done.push(t) };
    // Three requests at one instant, before any stats refresh: the estimate sends each to another instance.
    const picks = [0, 1, 2].map(() => gw.submit(request({ promptTokens: 100, maxTokens: 20 }), hooks)?.instanceId);
    expect(new Set(picks).size).toBe(3);
    expect(gw.instances().map((i) => i.inFlight)).toEqual([1, 1, 1]);
    await clock.advanceBy(60_000);
    expect(done).toHaveLength(3);
    expect(firsts.every((t, i) => t <= done[i]!)).toBe(true);
    expect(gw.instances().map((i) => i.inFlight)).toEqual([0, 0, 0]);
    // Batch requests' tokens are counted apart in telemetry, in both shapes.
    gw.submit(request({ promptTokens: 100, maxTokens: 20, batch: true }), {});
    const streamed = collect(gw.generate(request({ promptTokens: 50, maxTokens: 10, batch: true })));
    await clock.advanceBy(5_000);
    await streamed;
    const m = gw.snapshot().models[0]!;
    expect(m.batchTokensPerS).toBeGreaterThan(0);
    expect(m.tokensPerS).toBeGreaterThan(m.batchTokensPerS!);
    // Demand: prompt + max tokens of every request that entered, over the time since the first sample (65 s here).
    expect(m.demandTokensPerS).toBeCloseTo((3 * 120 + 120 + 60) / 65, 3);
    // The same request streamed through generate takes the same route from the same state.
    const routed = gw.route(MODEL)?.instanceId;
    expect(gw.submit(request({ promptTokens: 100, maxTokens: 20 }), {})?.instanceId).toBe(routed);
  });

  it("returns undefined with no serving instance, throws for an unknown model or a prompt that cannot fit, and drives stream-only engines", async () => {
    const clock = new VirtualClock();
    const gw = gateway(clock, 0);
    gw.addEndpoint(MODEL, "h100-80gb");
    expect(gw.submit(request(), {})).toBeUndefined();
    expect(() => gw.submit(request({ model: "nope" }), {})).toThrow(/nope/);
    const fake = new FakeEngine({ instanceId: "f", model: MODEL });
    gw.addInstance("h100-80gb", fake);
    const seen: string[] = [];
    expect(gw.submit(request(), { onFirstToken: () => seen.push("first"), onDone: (_t, n) => seen.push(`done ${n}`) })?.instanceId).toBe("f");
    await new Promise((r) => setTimeout(r, 20));
    expect(seen[0]).toBe("first");
    expect(seen.at(-1)).toMatch(/^done \d+$/);
    const { SimEngine } = await import("../../engines/sim/sim-engine.js");
    const gw2 = gateway(clock, 0);
    gw2.addInstance("h100-80gb", new SimEngine({ instanceId: "s", model: MODEL, gpu: "h100-80gb", tp: 2, clock, kvCapacityTokens: 1000 }));
    expect(() => gw2.submit(request({ promptTokens: 900, maxTokens: 200 }), {})).toThrow(/KV capacity/);
    expect(gw2.instances()[0]!.inFlight).toBe(0);
  });
});

/**
 * A callback-form engine on a VirtualClock that plays one script per request: its first token `firstMs` after
 * submit, then `tokens` tokens with the last at `doneMs`; or, with `cancelMs`, it goes away then (onCancelled).
 */
interface Script {
  firstMs: number;
  doneMs: number;
  tokens: number;
  cancelMs?: number;
}
class ScriptedEngine {
  readonly model = MODEL;
  readonly scripts: Script[] = [];
  constructor(
    readonly instanceId: string,
    private readonly clock: VirtualClock,
  ) {}
  generate(): AsyncIterable<EngineEvent> {
    throw new Error("callback form only");
  }
  submit(_req: GenerateRequest, cb: RequestCallbacks & { onCancelled?(atMs: number, generatedTokens: number): void }): void {
    const s = this.scripts.shift()!;
    if (s.firstMs <= (s.cancelMs ?? Infinity)) this.clock.after(s.firstMs, () => cb.onFirstToken?.(this.clock.now()));
    if (s.cancelMs !== undefined) this.clock.after(s.cancelMs, () => cb.onCancelled?.(this.clock.now(), 0));
    else this.clock.after(s.doneMs, () => cb.onDone?.(this.clock.now(), s.tokens));
  }
  stats() {
    return { kvBytesUsed: 0, kvBytesCapacity: 1e9, running: 0, waiting: 0, remainingTokens: 0, generatedTokensTotal: 0 };
  }
  async close(): Promise<void> {}
}

describe("Gateway SLO attainment", () => {
  // TTFT ≤ 150 ms and TPOT ≤ 100 ms at p90.
  const slo = { ttftMs: 150, tpotMs: 100, percentile: 0.9, models: {} };

  it("judges streamed requests: TTFT from entry to the first token, TPOT over the rest; batch, cancelled and client errors are not judged", async () => {
    const clock = new VirtualClock();
    const outcomes: string[] = [];
    const gw = new Gateway({ region: "us-east", clock, slo, onSlo: (_m, o) => outcomes.push(o) });
    const e = new FakeEngine({ instanceId: "a", model: MODEL, clock, tokenDelayMs: 100 });
    gw.addInstance("h100-80gb", e);
    const run = async (req: GenerateRequest, signal?: AbortSignal) => {
      const p = collect(gw.generate(req, signal)).catch((err: unknown) => err);
      await clock.advanceBy(1000);
      return p;
    };
    // Tokens at 100, 200, 300 ms: TTFT 100, TPOT (300 − 100) / 2 = 100 → met (both targets are inclusive).
    await run(request({ promptTokens: 10, maxTokens: 3 }));
    // Tokens at 100..500: TPOT 100 as well, but a batch request is never judged.
    await run(request({ maxTokens: 5, batch: true }));
    // Broke after its first token: a miss, and not a finished request for the token sums.
    e.failNext = ["after"];
    await run(request({ maxTokens: 3 }));
    // Cancelled by its caller mid-stream: not judged.
    const ctl = new AbortController();
    const cancelled = collect(gw.generate(request({ maxTokens: 5 }), ctl.signal)).catch((err: unknown) => err);
    await clock.advanceBy(150);
    ctl.abort();
    await clock.advanceBy(0);
    expect(findTidegateError(await cancelled)?.code).toBe("cancelled");
    // Nothing serving: unserved.
    gw.setInstanceState("a", "draining");
    expect((await failureOf(collect(gw.generate(request())))).code).toBe("no_region_available");
    expect(outcomes).toEqual(["met", "missed", "unserved"]);
    expect(gw.snapshot().models[0]!.slo).toEqual({ requests: 3, met: 1, finished: 1, promptTokens: 10, outputTokens: 3 });
    // A client error is the request's fault, not the region's.
    gw.setInstanceState("a", "serving");
    e.generate = async function* () {
      yield* [];
      throw new TidegateError("invalid_request", "prompt too long");
    };
    expect((await failureOf(collect(gw.generate(request())))).code).toBe("invalid_request");
    expect(outcomes).toHaveLength(3);
  });

  it("misses a slow first token, holds each model to its own override, and counts failures on every instance as unserved", async () => {
    const clock = new VirtualClock();
    const outcomes: string[] = [];
    const gw = new Gateway({ region: "us-east", clock, slo, onSlo: (_m, o) => outcomes.push(o) });
    const slow = new FakeEngine({ instanceId: "slow", model: MODEL, clock, tokenDelayMs: 200 });
    gw.addInstance("h100-80gb", slow);
    const p = collect(gw.generate(request({ maxTokens: 2 })));
    await clock.advanceBy(1000);
    await p;
    // TTFT 200 > 150 (TPOT 200 > 100 too) → missed; under an override of 250 / 200 ms the same request meets it.
    const lenient = new Gateway({ region: "us-east", clock, slo: { ...slo, models: { [MODEL]: { ttftMs: 250, tpotMs: 200, percentile: 0.9 } } }, onSlo: (_m, o) => outcomes.push(o) });
    lenient.addInstance("h100-80gb", new FakeEngine({ instanceId: "slow2", model: MODEL, clock, tokenDelayMs: 200 }));
    const q = collect(lenient.generate(request({ maxTokens: 2 })));
    await clock.advanceBy(1000);
    await q;
    slow.failNext = ["before"];
    expect((await failureOf(collect(gw.generate(request())))).code).toBe("upstream_error");
    expect(outcomes).toEqual(["missed", "met", "unserved"]);
    expect(lenient.sloSummaries()[0]).toMatchObject({ ttftMs: 250, tpotMs: 200, met: 1 });
  });

  it("judges callback-form requests the same way, hand-checked; telemetry carries running totals any reader may take", async () => {
    const clock = new VirtualClock(0);
    const outcomes: string[] = [];
    const gw = new Gateway({ region: "us-east", clock, statsRefreshMs: 0, slo, onSlo: (_m, o) => outcomes.push(o) });
    const e = new ScriptedEngine("s", clock);
    gw.addInstance("h100-80gb", e);
    e.scripts.push(
      { firstMs: 100, doneMs: 300, tokens: 3 }, // TTFT 100, TPOT 100: met
      { firstMs: 200, doneMs: 300, tokens: 3 }, // TTFT 200: missed
      { firstMs: 100, doneMs: 500, tokens: 3 }, // TPOT 200: missed
      { firstMs: 150, doneMs: 150, tokens: 1 }, // one token, no TPOT: met
      { firstMs: 50, doneMs: 0, tokens: 0, cancelMs: 80 }, // the engine went away after the first token: missed
      { firstMs: 50, doneMs: 0, tokens: 0, cancelMs: 20 }, // … and before it: unserved
      { firstMs: 500, doneMs: 900, tokens: 3 }, // batch: not judged
    );
    for (let i = 0; i < 6; i++) gw.submit(request({ promptTokens: 10 * (i + 1) }), {});
    gw.submit(request({ batch: true }), {});
    await clock.advanceBy(1000);
    expect(outcomes).toEqual(["unserved", "missed", "met", "met", "missed", "missed"]);
    // Refused at the door (nothing serving): unserved.
    gw.setInstanceState("s", "loading");
    expect(gw.submit(request(), {})).toBeUndefined();
    // 7 judged, 2 met; the 4 finished had prompts 10 + 20 + 30 + 40 and outputs 3 + 3 + 3 + 1.
    const totals = { requests: 7, met: 2, finished: 4, promptTokens: 100, outputTokens: 10 };
    expect(gw.snapshot().models[0]!.slo).toEqual(totals);
    // A second reader sees the same totals (nothing is taken away by reading).
    expect(gw.snapshot().models[0]!.slo).toEqual(totals);
    expect(gw.sloSummaries()).toEqual([
      { model: MODEL, ttftMs: 150, tpotMs: 100, percentile: 0.9, met: 2, missed: 3, unserved: 2, lastHourRequests: 7, lastHourMet: 2, lastHourAttainment: 2 / 7, judgedHours: 0, violatedHours: 0 },
    ]);
  });
});
