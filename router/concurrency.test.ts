import { describe, expect, it } from "vitest";
import { VirtualClock } from "../core/clock.js";
import { parseConfig } from "../core/config.js";
import { FakeRegionLink } from "../test/helpers/fake-link.js";
import { ShedError } from "./admission.js";
import { AdaptiveLimit, ConcurrencyLimiter, DEFAULT_ADAPTIVE, limiterFromConfig, type AdaptiveLimitOptions } from "./concurrency.js";
import { dispatchWithRetry } from "./relay.js";
import { RegionSelector } from "./selector.js";

const OPTS: AdaptiveLimitOptions = { ...DEFAULT_ADAPTIVE, initialLimit: 10, minLimit: 2, maxLimit: 100, toleranceMs: 20, toleranceFraction: 0, smoothing: 1 };

describe("AdaptiveLimit (Vegas-style on TTFT less prefill)", () => {
  it("slow start: +1 per sample while the limit binds and nothing queues; holds when it does not bind", () => {
    const l = new AdaptiveLimit(OPTS);
    l.onSample(0, 30, 0, 9); // binding (9 + 1 ≥ 10), queue 0 (first sample is the baseline)
    expect(l.limit).toBe(11);
    l.onSample(10, 30, 0, 10);
    expect(l.limit).toBe(12);
    l.onSample(20, 30, 0, 3); // not binding: holds
    expect(l.limit).toBe(12);
  });

  it("a queue above the tolerance cuts by the backoff, then waits for half a limit of samples; after slow start, +sqrt(limit) a limit of samples", () => {
    const l = new AdaptiveLimit(OPTS);
    l.onSample(0, 30, 0, 0); // sent far below the limit: the reference is 30
    l.onSample(100, 80, 0, 9); // q = 50 > 20: cut 10 → 9
    expect(l.limit).toBe(9);
    expect(l.state().cuts).toBe(1);
    expect(l.state().slowStart).toBe(false);
    for (let i = 1; i <= 4; i++) l.onSample(100 + i, 80, 0, 9); // samples 1-4 after the cut: no second cut yet
    expect(l.state().cuts).toBe(1);
    l.onSample(110, 80, 0, 9); // the 5th (≥ max(4, 9 / 2)): cut 9 → 8.1
    expect(l.state().cuts).toBe(2);
    expect(l.limit).toBe(8);
    // No queue and the limit binding: +sqrt(8.1) / 8.1 ≈ 0.35 a sample.
    l.onSample(200, 30, 0, 100);
    l.onSample(201, 30, 0, 100);
    expect(l.limit).toBe(8); // 8.1 + 0.35 + 0.35 (the EWMA is 0 at once: smoothing 1)
    l.onSample(202, 30, 0, 100);
    expect(l.limit).toBe(9);
  });

  it("a constant overhead is baseline, not queue; the prompt's prefill is taken off", () => {
    const l = new AdaptiveLimit(OPTS);
    for (let i = 0; i < 5; i++) l.onSample(i * 10, 45, 0, 9); // overhead 45 every time: q = 0
    expect(l.state().cuts).toBe(0);
    expect(l.state().baselineMs).toBe(45);
    l.onSample(100, 45 + 400, 400, 9); // a long prompt: 400 ms of prefill explained, q = 0
    expect(l.state().cuts).toBe(0);
    l.onSample(200, 45 + 400, 0, 9); // the same TTFT unexplained: q = 400
    expect(l.state().cuts).toBe(1);
  });

  it("the reference is the mean overhead of unqueued requests (the wait for the next step averages in), kept within one step of the minimum", () => {
    const l = new AdaptiveLimit({ ...OPTS, stepMs: 20, toleranceMs: 5, toleranceFraction: 0, smoothing: 0.5 });
    // Sent far below the limit, the next step comes 0-20 ms later: overheads 30 and 50 alternate.
    for (let i = 0; i < 200; i++) l.onSample(i, i % 2 === 0 ? 30 : 50, 0, 0);
    expect(l.state().referenceMs).toBeGreaterThan(38);
    expect(l.state().referenceMs).toBeLessThan(42);
    expect(l.state().cuts).toBe(0); // a 50 is 10 over the reference, the EWMA stays within 5
    // Queued requests (sent at the limit) cannot raise the reference beyond min + one step.
    const q = new AdaptiveLimit({ ...OPTS, stepMs: 20, toleranceMs: 5, toleranceFraction: 100 });
    q.onSample(0, 30, 0, 9);
    for (let i = 1; i < 50; i++) q.onSample(i, 400, 0, 2); // "unqueued" by count, but 400 ms
    expect(q.state().referenceMs).toBe(50); // 30 + 20
  });

  it("the baseline forgets after two windows (an overhead that rose for good stops reading as queue)", () => {
    const l = new AdaptiveLimit({ ...OPTS, baselineWindowMs: 1000 });
    l.onSample(0, 10, 0, 0);
    l.onSample(500, 10, 0, 0);
    l.onSample(1500, 60, 0, 0); // rotate: previous min 10 → q = 50, cut
    expect(l.state().cuts).toBe(1);
    l.onSample(2600, 60, 0, 0); // rotate: previous = 60, current 60 → q = 0
    expect(l.state().baselineMs).toBe(60);
    expect(l.state().queueMs).toBe(0);
  });

  it("stays within [minLimit, maxLimit]", () => {
    const l = new AdaptiveLimit({ ...OPTS, initialLimit: 3, minLimit: 2, maxLimit: 4 });
    l.onSample(0, 10, 0, 2);
    l.onSample(1, 10, 0, 3);
    l.onSample(2, 10, 0, 3);
    expect(l.limit).toBe(4);
    for (let t = 100; t < 2000; t += 100) l.onSample(t, 500, 0, 3);
    expect(l.limit).toBe(2);
  });

  it("rejects nonsense settings", () => {
    expect(() => new AdaptiveLimit({ ...OPTS, backoff: 1 })).toThrow(/backoff/);
    expect(() => new AdaptiveLimit({ ...OPTS, minLimit: 0 })).toThrow(/minLimit/);
  });
});

describe("ConcurrencyLimiter: regions and tenants' shares", () => {
  function limiter(limitFor = () => ({ ...OPTS, initialLimit: 5 })) {
    return new ConcurrencyLimiter({ clock: new VirtualClock(0), limitFor, expectedMs: () => 0, fairAbove: 0.9, weightOf: (t) => (t === "heavy" ? 3 : 1) });
  }

  it("refuses only when every region is at its limit", () => {
    const c = limiter();
    for (let i = 0; i < 5; i++) c.acquire("east", "m", `t${i}`, 10);
    expect(c.hasRoom("east", "m")).toBe(false);
    expect(c.refusal("m", "x", ["east"])).toBe("concurrency");
    expect(c.refusal("m", "x", ["east", "west"])).toBeUndefined();
  });

  it("above fairAbove of the summed limits a tenant beyond its weighted share is shed, the others are not", () => {
    const c = limiter(() => ({ ...OPTS, initialLimit: 10 }));
    const slots = [];
    for (let i = 0; i < 6; i++) slots.push(c.acquire("east", "m", "a", 10));
    for (let i = 0; i < 3; i++) slots.push(c.acquire("east", "m", "b", 10));
    // 9 in flight of 10 (≥ 0.9 × 10): a holds 6 ≥ its share 5; b holds 3 < 5.
    expect(c.refusal("m", "a", ["east"])).toBe("tenant_share");
    expect(c.refusal("m", "b", ["east"])).toBeUndefined();
    // A new tenant's share is 10/3 and it holds nothing.
    expect(c.refusal("m", "c", ["east"])).toBeUndefined();
    // Weights: "heavy" (3) beside a (1): share 7.5.
    const h = limiter(() => ({ ...OPTS, initialLimit: 10 }));
    for (let i = 0; i < 7; i++) h.acquire("east", "m", "heavy", 10);
    h.acquire("east", "m", "a", 10);
    h.acquire("east", "m", "a", 10);
    expect(h.refusal("m", "heavy", ["east"])).toBeUndefined();
    h.acquire("east", "m", "heavy", 10);
    expect(h.refusal("m", "heavy", ["east"])).toBe("concurrency");
    // Below fairAbove, anyone is admitted (work-conserving).
    slots[0]!.release();
    slots[1]!.release();
    expect(c.refusal("m", "a", ["east"])).toBeUndefined();
    slots[1]!.release(); // idempotent
    expect(c.limit("east", "m").inflight).toBe(7);
  });

  it("limiterFromConfig: on by default with the model's pace as tolerance; off with adaptive false; weights from API keys", () => {
    const base = { models: [{ name: "llama3.2-3b", gpusPerInstance: { "h100-80gb": 2 } }], regions: [{ name: "east", gpus: [{ type: "h100-80gb", count: 2 }], endpoints: [{ model: "llama3.2-3b", gpu: "h100-80gb", instances: 1 }] }] };
    const on = limiterFromConfig(parseConfig({ ...base, router: { apiKeys: [{ key: "k".repeat(12), tenant: "gold", weight: 4 }] } }), new VirtualClock(0))!;
    expect(on).toBeDefined();
    expect(on.limit("east", "llama3.2-3b").limit).toBe(16);
    expect(limiterFromConfig(parseConfig({ ...base, router: { concurrency: { adaptive: false } } }), new VirtualClock(0))).toBeUndefined();
    expect(() => parseConfig({ ...base, router: { concurrency: { backoff: 1.5 } } })).toThrow(/backoff/);
    expect(() => parseConfig({ ...base, router: { concurrency: { initialLimt: 3 } } })).toThrow(/initialLimt/);
  });
});

describe("dispatch under adaptive limits", () => {
  function setup(limit: number) {
    const clock = new VirtualClock(0);
    const east = new FakeRegionLink("east", () => clock.now());
    const west = new FakeRegionLink("west", () => clock.now());
    const selector = new RegionSelector({
      clock,
      regions: [
        { name: "east", proximity: ["west"], models: ["m"] },
        { name: "west", proximity: ["east"], models: ["m"] },
      ],
      memoryThreshold: 0.7,
      telemetryStaleMs: 1500,
      instanceKvBytes: () => 0,
    });
    for (const l of [east, west]) l.subscribe((t) => selector.onTelemetry(t));
    east.emitTelemetry({ m: 0.1 });
    west.emitTelemetry({ m: 0.1 });
    const limiter = new ConcurrencyLimiter({ clock, limitFor: () => ({ ...OPTS, initialLimit: limit, minLimit: 1, maxLimit: limit }), expectedMs: () => 0, fairAbove: 1 });
    const links = new Map([
      ["east", east],
      ["west", west],
    ]);
    const open = (tenant = "t") =>
      dispatchWithRetry({
        selector,
        links,
        req: { id: `r${Math.random()}`, model: "m", kind: "completion", promptTokens: 5, maxTokens: 3, priority: 0, body: {} },
        clientRegion: "east",
        signal: new AbortController().signal,
        concurrency: { limiter, tenant, retryAfterS: 1 },
      });
    return { east, west, limiter, open };
  }

  it("a region at its limit is passed over; when all are, the request is shed with 429 before any dispatch; a finished stream frees its slot", async () => {
    const { east, west, limiter, open } = setup(1);
    const a = await open();
    expect(a.region).toBe("east");
    const b = await open();
    expect(b.region).toBe("west"); // east at its limit of 1
    const dispatched = east.dispatches.length + west.dispatches.length;
    await expect(open()).rejects.toSatisfy((e: unknown) => e instanceof ShedError && e.limit === "concurrency" && e.status === 429);
    expect(east.dispatches.length + west.dispatches.length).toBe(dispatched);
    // Drain a to the end and release it: east has room again.
    for (let r = await a.next(); !r.done; r = await a.next());
    a.release();
    expect(limiter.limit("east", "m").inflight).toBe(0);
    expect((await open()).region).toBe("east");
    b.abort();
    expect(limiter.limit("west", "m").inflight).toBe(0);
  });

  it("the first event feeds the region's limit", async () => {
    const { limiter, open } = setup(1);
    const s = await open();
    expect(limiter.limit("east", "m").state().samples).toBe(1);
    s.abort();
  });
});
