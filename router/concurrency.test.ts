import { describe, expect, it } from "vitest";
import { VirtualClock } from "../core/clock.js";
import { parseConfig } from "../core/config.js";
import { FakeRegionLink, modelTelemetry } from "../test/helpers/fake-link.js";
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

  it("a queue above the tolerance cuts by the backoff, then waits for half the requests in flight to report; after slow start the limit grows, fast far below the last queue, slowly near it", () => {
    const l = new AdaptiveLimit(OPTS);
    l.inflight = 10;
    l.onSample(0, 30, 0, 0); // sent far below the limit: the reference is 30
    l.onSample(100, 55, 0, 9); // q = 25 > 20: cut 10 → 9
    expect(l.limit).toBe(9);
    expect(l.state()).toMatchObject({ cuts: 1, slowStart: false });
    for (let i = 1; i <= 4; i++) l.onSample(100 + i, 55, 0, 9); // samples 1-4 after the cut: no second cut yet
    expect(l.state().cuts).toBe(1);
    l.onSample(110, 55, 0, 9); // the 5th (≥ max(4, min(9, 10) / 2)): cut 9 → 8.1
    expect(l.state().cuts).toBe(2);
    expect(l.limit).toBe(8);
    // Near where the queue was seen (9 × 0.9 = 8.1 is not below 8.1): +increase (2) / limit a binding sample.
    l.onSample(200, 30, 0, 100);
    expect(l.limit).toBe(8); // 8.1 + 0.25
    for (let i = 0; i < 3; i++) l.onSample(201 + i, 30, 0, 100);
    expect(l.limit).toBe(9); // 8.1 + 4 × ~0.24
    // Far below it (a halving by a report): +sqrt(limit) / limit a sample.
    const f = new AdaptiveLimit({ ...OPTS, initialLimit: 64, maxLimit: 64 });
    f.inflight = 64;
    f.onQueueReport(10, 5);
    f.onQueueReport(10, 5); // at most halved: 32, the queue seen at 64
    expect(f.limit).toBe(32);
    for (let i = 0; i < 6; i++) f.onSample(i, 30, 0, 40); // +sqrt(32) / 32 ≈ 0.18 a sample
    expect(f.limit).toBe(33);
  });

  it("a report of two or more waiting, twice in a row while the limit binds, brings the limit to what runs + 1 (at most halved); not while the region scales", () => {
    const r = new AdaptiveLimit({ ...OPTS, initialLimit: 40 });
    r.inflight = 40; // the router holds the region at its limit
    r.onQueueReport(32, 0); // nothing waiting: no change
    r.onQueueReport(32, 5); // waiting once
    expect(r.limit).toBe(40);
    r.onQueueReport(32, 5); // twice in a row: the engines are full at 32
    expect(r.limit).toBe(33);
    expect(r.state()).toMatchObject({ slowStart: false, cuts: 1 });
    r.onQueueReport(35, 2); // never raised by a report
    r.onQueueReport(35, 2);
    expect(r.limit).toBe(33);
    r.inflight = 33;
    r.onQueueReport(3, 9); // the third report in a row with a queue: at most halved
    expect(r.limit).toBe(16);
    const one = new AdaptiveLimit({ ...OPTS, initialLimit: 40 });
    one.inflight = 40;
    for (let i = 0; i < 5; i++) one.onQueueReport(30, 1); // one waiting: a request between two engine steps
    expect(one.limit).toBe(40);
    const idle = new AdaptiveLimit({ ...OPTS, initialLimit: 40 });
    idle.inflight = 5; // far from the limit: waiting requests are the engines' own business
    idle.onQueueReport(4, 3);
    idle.onQueueReport(4, 3);
    expect(idle.limit).toBe(40);
    const scaling = new AdaptiveLimit({ ...OPTS, initialLimit: 40 });
    scaling.inflight = 40;
    scaling.onQueueReport(32, 5, true);
    scaling.onQueueReport(32, 5, true);
    expect(scaling.limit).toBe(40); // instances loading: the queue is expected to drain onto them
    scaling.onSample(0, 30, 0, 0);
    scaling.onSample(1, 500, 0, 39); // a queue, but the region scales: hold
    expect(scaling.state().cuts).toBe(0);
  });

  it("a TTFT queue is not cut for while the region's last report had nothing waiting at its engines", () => {
    const l = new AdaptiveLimit(OPTS);
    l.inflight = 10;
    l.onQueueReport(3, 0);
    l.onSample(0, 30, 0, 0);
    l.onSample(1, 500, 0, 9); // slow, but no engine queue: a busy host or the hops
    expect(l.state().cuts).toBe(0);
    l.onQueueReport(9, 1);
    l.onSample(2, 500, 0, 9);
    expect(l.state().cuts).toBe(1);
  });

  it("the ceiling from telemetry sets the limit, bounds its growth and moves it in proportion", () => {
    const l = new AdaptiveLimit({ ...OPTS, initialLimit: 100, maxLimit: 4096 });
    l.setCeiling(32);
    expect(l.limit).toBe(32);
    l.onSample(0, 30, 0, 31); // binding, slow start: would grow, but not past the ceiling
    expect(l.limit).toBe(32);
    l.setCeiling(64); // twice the instances
    expect(l.limit).toBe(64);
    l.setCeiling(16);
    expect(l.limit).toBe(16);
  });

  it("a constant overhead is baseline, not queue; the prompt's prefill is taken off", () => {
    const l = new AdaptiveLimit(OPTS);
    l.inflight = 9;
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

  it("the tolerance comes from the TTFT SLO: what it leaves after the unloaded TTFT (issue 49 item 4)", () => {
    // Reference overhead 45 ms (every unqueued sample), SLO 500 ms: slack 455, tolerance 0.5 × 455 = 227.5.
    const mk = (sloTtftMs: number | undefined) => {
      const l = new AdaptiveLimit({ ...OPTS, toleranceMs: 10, toleranceFraction: 0.5, ...(sloTtftMs === undefined ? {} : { sloTtftMs }) });
      for (let i = 0; i < 5; i++) l.onSample(i, 45, 0, 0);
      l.inflight = 9;
      return l;
    };
    const slo = mk(500);
    slo.onSample(10, 45 + 200, 0, 9); // a 200 ms queue: admitted requests still meet 500 ms
    expect(slo.state()).toMatchObject({ cuts: 0, toleranceMs: 227.5 });
    slo.onSample(20, 45 + 300, 0, 9); // 300 ms: past the half of the slack kept back
    expect(slo.state().cuts).toBe(1);
    // The same 200 ms queue against half the unloaded TTFT (the rule without an SLO): 22.5 ms, cut.
    const none = mk(undefined);
    none.onSample(10, 45 + 200, 0, 9);
    expect(none.state()).toMatchObject({ cuts: 1, toleranceMs: 22.5 });
    // What is left after the prompt's prefill: a 400 ms prefill leaves 55 ms of the SLO, so 100 ms of queue is too much.
    const long = mk(500);
    long.onSample(10, 45 + 400 + 100, 400, 9);
    expect(long.state()).toMatchObject({ cuts: 1, toleranceMs: 27.5 });
    // An SLO the unloaded TTFT already misses: judged against the unloaded TTFT instead (0.5 × 645).
    const missed = mk(500);
    missed.onSample(10, 45 + 600 + 100, 600, 9);
    expect(missed.state()).toMatchObject({ cuts: 0, toleranceMs: 322.5 });
  });

  it("the baseline forgets after two windows (an overhead that rose for good stops reading as queue)", () => {
    const l = new AdaptiveLimit({ ...OPTS, baselineWindowMs: 1000 });
    l.onSample(0, 10, 0, 0);
    l.onSample(500, 10, 0, 0);
    l.onSample(1500, 60, 0, 9); // rotate: previous min 10 → q = 50, sent at the limit: cut
    expect(l.state().cuts).toBe(1);
    l.onSample(2600, 60, 0, 0); // rotate: previous = 60, current 60 → q = 0
    expect(l.state().baselineMs).toBe(60);
    expect(l.state().queueMs).toBe(0);
  });

  it("a queue seen while the limit is far from binding does not cut it (Netflix's VegasLimit: no delay-based change below half)", () => {
    // 20 requests in flight against a limit of 100 (a closed-loop burst on one engine): a queue at the engine, but
    // the limit did not let it in; chipping at it would shed those 20 once it drifted below them.
    const l = new AdaptiveLimit({ ...OPTS, initialLimit: 100, maxLimit: 200, baselineWindowMs: 1e9 });
    l.onSample(0, 10, 0, 0); // the reference: 10 ms
    for (let i = 1; i <= 200; i++) l.onSample(i, 300, 0, 19);
    expect(l.state().queueMs).toBeGreaterThan(200);
    expect(l.state().cuts).toBe(0);
    expect(l.limit).toBe(100);
    // The same queue with half of the limit in flight: cut (and again after a round trip of samples).
    for (let i = 201; i <= 260; i++) l.onSample(i, 300, 0, 49);
    expect(l.state().cuts).toBeGreaterThanOrEqual(2);
    expect(l.limit).toBeLessThan(100);
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
    expect(h.refusal("m", "heavy", ["east"])).toBe("tenant_share"); // full, and beyond its share: shed at once
    expect(h.refusal("m", "a", ["east"])).toBe("concurrency"); // full, within its share (2 < 2.5): may wait
    // Below fairAbove, anyone is admitted (work-conserving).
    slots[0]!.release();
    slots[1]!.release();
    expect(c.refusal("m", "a", ["east"])).toBeUndefined();
    slots[1]!.release(); // idempotent
    expect(c.limit("east", "m").inflight).toBe(7);
  });

  it("a full model queues requests within their shares for queueMs; a freed slot goes to the tenant with the fewest in flight; the queue stays within the slots expected to free", async () => {
    const clock = new VirtualClock(0);
    const c = new ConcurrencyLimiter({ clock, limitFor: () => ({ ...OPTS, initialLimit: 4, minLimit: 1, maxLimit: 4 }), expectedMs: () => 0, fairAbove: 1 });
    const a1 = c.acquire("east", "m", "a", 10);
    c.acquire("east", "m", "a", 10);
    c.acquire("east", "m", "a", 10);
    c.acquire("east", "m", "b", 10);
    expect(c.refusal("m", "a", ["east"])).toBe("tenant_share"); // a holds 3 of 4, its share 2
    expect(c.refusal("m", "b", ["east"])).toBe("concurrency"); // b holds 1: full, within its share, may wait
    expect(c.mayWait("m", 100)).toBe(false); // no releases measured: no slot is expected to come, so none waits
    // The last whole second freed 20 slots: at that rate 2 free in 100 ms, so two may wait.
    for (let i = 0; i < 20; i++) c.acquire("west", "m", "x", 10).release();
    await clock.advanceTo(1000);
    c.acquire("west", "m", "x", 10).release(); // closes that second
    expect(c.mayWait("m", 100)).toBe(true);
    expect(c.mayWait("m", 40)).toBe(false); // 0.8 of a slot in 40 ms: it would only time out
    const forA = c.waitForRoom("m", "a", ["east"], 100);
    const forB = c.waitForRoom("m", "b", ["east"], 100);
    expect(c.waiting("m")).toBe(2);
    expect(c.mayWait("m", 100)).toBe(false);
    a1.release(); // b has 1 in flight, a 2: the slot goes to b
    expect(await forB).toBe(true);
    expect(c.waiting("m")).toBe(1);
    await clock.advanceTo(1100);
    expect(await forA).toBe(false); // nothing freed for it in 100 ms
    expect(c.waiting("m")).toBe(0);
    // An aborted wait ends at once.
    const ac = new AbortController();
    const gone = c.waitForRoom("m", "a", ["east"], 100, ac.signal);
    ac.abort();
    expect(await gone).toBe(false);
  });

  it("telemetry reaches the limit of its region and model only", () => {
    const c = limiter(() => ({ ...OPTS, initialLimit: 20 }));
    c.limit("east", "m");
    c.limit("west", "m");
    for (let i = 0; i < 20; i++) c.acquire("east", "m", "t", 10);
    for (const seq of [1, 2]) c.onTelemetry({ region: "east", seq, atMs: 0, models: [{ ...modelTelemetry("m", 0.9), running: 12, waiting: 3 }, { ...modelTelemetry("other", 0.9), running: 1, waiting: 9 }] });
    expect(c.limit("east", "m").limit).toBe(13); // running + 1
    expect(c.limit("west", "m").limit).toBe(20);
    expect(c.limit("east", "other").limit).toBe(20); // its report had only one waiting the first time: no cut
  });

  it("limiterFromConfig: on by default with the model's pace as tolerance; off with adaptive false; weights from API keys", () => {
    const base = { models: [{ name: "llama3.2-3b", gpusPerInstance: { "h100-80gb": 2 } }], regions: [{ name: "east", gpus: [{ type: "h100-80gb", count: 2 }], endpoints: [{ model: "llama3.2-3b", gpu: "h100-80gb", instances: 1 }] }] };
    const on = limiterFromConfig(parseConfig({ ...base, router: { apiKeys: [{ key: "k".repeat(12), tenant: "gold", weight: 4 }] } }), new VirtualClock(0))!;
    expect(on).toBeDefined();
    expect(on.limit("east", "llama3.2-3b").limit).toBe(4096); // router.maxInflight until a queue is seen
    expect(limiterFromConfig(parseConfig({ ...base, router: { concurrency: { adaptive: false } } }), new VirtualClock(0))).toBeUndefined();
    // The tolerance follows the model's TTFT SLO (slo.models overrides the default), unless toleranceMs is set.
    const judged = (over: object) => {
      const l = limiterFromConfig(parseConfig({ ...base, ...over }), new VirtualClock(0))!.limit("east", "llama3.2-3b");
      for (let i = 0; i < 5; i++) l.onSample(i, 45, 0, 0);
      return l.state().toleranceMs;
    };
    const reference = (() => {
      const l = limiterFromConfig(parseConfig(base), new VirtualClock(0))!.limit("east", "llama3.2-3b");
      for (let i = 0; i < 5; i++) l.onSample(i, 45, 0, 0);
      return l.state().referenceMs;
    })();
    expect(judged({})).toBeCloseTo(0.5 * (1000 - reference), 6);
    expect(judged({ slo: { models: { "llama3.2-3b": { ttftMs: 300 } } } })).toBeCloseTo(0.5 * (300 - reference), 6);
    expect(judged({ router: { concurrency: { toleranceMs: 7 } } })).toBe(7);
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
        concurrency: { limiter, tenant, retryAfterS: 1, queueMs: 0 },
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
