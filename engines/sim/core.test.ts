import { describe, expect, it } from "vitest";
import { VirtualClock, WallClock } from "../../core/clock.js";
import type { ProfileFit } from "../../core/perf/fit.js";
import { PerfProfile, getProfile } from "../../core/perf/model.js";
import { SimEngineCore, type SimSubmit } from "./core.js";

/**
 * A hand-checkable profile: prefill 100 ms flat, decode iteration 10 + 1·B ms (+ cCtx per context token). With
 * `batchedCost`, a prefill of two or more prompts costs 150 ms from 200 tokens on (one prompt: still 100 ms).
 */
function flatProfile(cCtx = 0, batchedCost = false): PerfProfile {
  const fit: ProfileFit = {
    model: "llama3.2-3b",
    gpu: "h100-80gb",
    tp: 2,
    prefillKnots: [
      [1, 100],
      [1e9, 100],
    ],
    prefillBatchedKnots: batchedCost
      ? [
          [1, 100],
          [199, 100],
          [200, 150],
          [1e9, 150],
        ]
      : [
          [1, 100],
          [1e9, 100],
        ],
    decode: { c0: 10, cB: 1, cB2: 0, cCtx },
    maxMeasuredBatch: 64,
    source: "test",
  };
  return new PerfProfile(fit);
}

interface Seen {
  first: Record<string, number>;
  done: Record<string, number>;
  order: string[];
}

function harness(opts: { capacity?: number; cCtx?: number; maxBatch?: number; preemption?: "recompute" | "swap" | "off"; swapTokensPerMs?: number; batchSlotsBeside?: number; besideHoldMs?: number; batchedCost?: boolean; batchPrefillWaitMs?: number } = {}) {
  const clock = new VirtualClock();
  const profile = flatProfile(opts.cCtx, opts.batchedCost);
  const core = new SimEngineCore({
    profile,
    clock,
    kvCapacityTokens: opts.capacity ?? 100_000,
    maxBatch: opts.maxBatch ?? 256,
    ...(opts.preemption === undefined ? {} : { preemption: opts.preemption }),
    ...(opts.swapTokensPerMs === undefined ? {} : { swapBytesPerMs: opts.swapTokensPerMs * profile.kvBytesPerToken }),
    ...(opts.batchSlotsBeside === undefined ? {} : { batchSlotsBeside: opts.batchSlotsBeside }),
    ...(opts.besideHoldMs === undefined ? {} : { besideHoldMs: opts.besideHoldMs }),
    ...(opts.batchPrefillWaitMs === undefined ? {} : { batchPrefillWaitMs: opts.batchPrefillWaitMs }),
  });
  const seen: Seen = { first: {}, done: {}, order: [] };
  const submit = (r: SimSubmit) =>
    core.submit(r, {
      onFirstToken: (t) => {
        seen.first[r.id] = t;
        seen.order.push(r.id);
      },
      onDone: (t) => (seen.done[r.id] = t),
    });
  return { clock, core, seen, submit };
}

describe("SimEngineCore (hand-checked timings)", () => {
  it("one request: prefill, then one token per decode iteration", () => {
    const { clock, seen, submit } = harness();
    submit({ id: "a", promptTokens: 100, maxTokens: 5, priority: 0 });
    clock.runUntilIdleSync();
    // first token at the end of the 100 ms prefill; 4 more iterations of 10 + 1·1 = 11 ms
    expect(seen.first.a).toBeCloseTo(100, 9);
    expect(seen.done.a).toBeCloseTo(144, 9);
  });

  it("continuous batching: requests prefill together, the batch shrinks when one finishes", () => {
    const { clock, seen, submit } = harness();
    submit({ id: "a", promptTokens: 100, maxTokens: 3, priority: 0 });
    submit({ id: "b", promptTokens: 100, maxTokens: 5, priority: 0 });
    clock.runUntilIdleSync();
    expect(seen.first.a).toBeCloseTo(100, 9);
    expect(seen.first.b).toBeCloseTo(100, 9);
    // B = 2: 12 ms iterations; a needs 2 more → 124; b then alone: 2 more of 11 ms → 146
    expect(seen.done.a).toBeCloseTo(124, 9);
    expect(seen.done.b).toBeCloseTo(146, 9);
  });

  it("an arrival during decode joins at the next iteration boundary, after its prefill", () => {
    const { clock, seen, submit } = harness();
    submit({ id: "a", promptTokens: 10, maxTokens: 10, priority: 0 });
    clock.advanceToSync(105); // a: first token 100, next boundary at 111
    submit({ id: "b", promptTokens: 10, maxTokens: 2, priority: 0 });
    clock.runUntilIdleSync();
    // cut at 111 (a has 2 tokens), prefill b 111→211, then B=2 at 12 ms: b done at 223 (2 tokens);
    // a has 3 at 223, needs 7 more alone at 11 ms → 300
    expect(seen.first.b).toBeCloseTo(211, 9);
    expect(seen.done.b).toBeCloseTo(223, 9);
    expect(seen.done.a).toBeCloseTo(300, 9);
  });

  it("a request waits while KV is full and is admitted when memory frees", () => {
    const { clock, core, seen, submit } = harness({ capacity: 1000 });
    submit({ id: "a", promptTokens: 500, maxTokens: 400, priority: 0 });
    submit({ id: "b", promptTokens: 200, maxTokens: 100, priority: 0 }); // 900 + 300 > 1000: waits
    clock.advanceToSync(50);
    expect(core.stats()).toMatchObject({ running: 1, waiting: 1 });
    clock.runUntilIdleSync();
    const aDone = 100 + 399 * 11;
    expect(seen.done.a).toBeCloseTo(aDone, 9);
    expect(seen.first.b).toBeCloseTo(aDone + 100, 9);
  });

  it("priority 0 before priority 1, FCFS within a priority", () => {
    const { clock, seen, submit } = harness({ capacity: 1000 });
    submit({ id: "busy", promptTokens: 500, maxTokens: 400, priority: 0 });
    submit({ id: "p1-first", promptTokens: 500, maxTokens: 400, priority: 1 });
    submit({ id: "p0-first", promptTokens: 500, maxTokens: 400, priority: 0 });
    submit({ id: "p1-second", promptTokens: 500, maxTokens: 400, priority: 1 });
    submit({ id: "p0-second", promptTokens: 500, maxTokens: 400, priority: 0 });
    clock.runUntilIdleSync();
    expect(seen.order).toEqual(["busy", "p0-first", "p0-second", "p1-first", "p1-second"]);
  });

  it("cancellation frees KV at once and lets a waiting request in at the next boundary", () => {
    const { clock, core, seen, submit } = harness({ capacity: 1000 });
    const a = submit({ id: "a", promptTokens: 500, maxTokens: 400, priority: 0 });
    submit({ id: "b", promptTokens: 200, maxTokens: 100, priority: 0 });
    clock.advanceToSync(150); // a: 1 + 4 tokens (boundaries 111, 122, 133, 144), next at 155
    expect(a.generatedNow()).toBeCloseTo(5, 9);
    const before = core.stats();
    expect(before.kvBytesUsed).toBe((500 + 5) * core.profile.kvBytesPerToken);
    a.cancel();
    const after = core.stats();
    expect(after.kvBytesUsed).toBeCloseTo(0, 9);
    expect(after.remainingTokens).toBeCloseTo(300, 9);
    clock.runUntilIdleSync();
    expect(seen.done.a).toBeUndefined();
    expect(seen.first.b).toBeCloseTo(155 + 100, 9);
  });

  it("FCFS head-of-line: a waiting request that fits stays behind the head until the head is cancelled", () => {
    const { clock, seen, submit } = harness({ capacity: 1000 });
    submit({ id: "a", promptTokens: 500, maxTokens: 300, priority: 0 });
    const b = submit({ id: "b", promptTokens: 300, maxTokens: 100, priority: 0 }); // 800 + 400 > 1000: waits
    submit({ id: "c", promptTokens: 100, maxTokens: 50, priority: 0 }); // would fit (950) but B is ahead
    clock.advanceToSync(150);
    expect(seen.first.c).toBeUndefined();
    b.cancel();
    clock.runUntilIdleSync();
    expect(seen.first.b).toBeUndefined();
    expect(seen.first.c).toBeCloseTo(155 + 100, 9); // next boundary after 150 is 155, then its prefill
  });

  it("context growth: closed-form segment times equal the per-iteration sum", () => {
    const cCtx = 0.001;
    const { clock, seen, submit } = harness({ cCtx });
    submit({ id: "a", promptTokens: 1000, maxTokens: 50, priority: 0 });
    clock.runUntilIdleSync();
    let t = 100;
    for (let ctx = 1001; ctx < 1050; ctx++) t += 11 + cCtx * ctx;
    expect(seen.done.a).toBeCloseTo(t, 6);
  });

  it("stats report remaining tokens (JSQ) and generated tokens analytically between events", () => {
    const { clock, core, submit } = harness();
    submit({ id: "a", promptTokens: 100, maxTokens: 10, priority: 0 });
    submit({ id: "b", promptTokens: 50, maxTokens: 20, priority: 0 });
    expect(core.stats().remainingTokens).toBeCloseTo(180, 9);
    clock.advanceToSync(100 + 12 * 3); // first token + 3 iterations each
    const s = core.stats();
    expect(s.generatedTokensTotal).toBeCloseTo(8, 9);
    expect(s.remainingTokens).toBe(10 - 4 + (20 - 4));
    expect(s.kvBytesUsed).toBe((100 + 4 + 50 + 4) * core.profile.kvBytesPerToken);
  });

  it("rejects a request that can never fit", () => {
    const { submit } = harness({ capacity: 1000 });
    expect(() => submit({ id: "x", promptTokens: 900, maxTokens: 200, priority: 0 })).toThrow(/KV capacity/);
  });

  it("virtual time and real time give the same token timings", async () => {
    const profile = getProfile("llama3.2-3b", "h100-80gb", 2);
    const reqs: SimSubmit[] = [
      { id: "r1", promptTokens: 900, maxTokens: 12, priority: 0 },
      { id: "r2", promptTokens: 300, maxTokens: 20, priority: 1 },
      { id: "r3", promptTokens: 2000, maxTokens: 6, priority: 0 },
    ];
    const run = async (clock: VirtualClock | WallClock) => {
      const core = new SimEngineCore({ profile, clock, timeScale: 2 });
      const t0 = clock.now();
      const times: number[] = [];
      // Nominal arrival t0 for all three: Date.now() may tick between the synchronous submits.
      await new Promise<void>((resolve) => {
        let left = reqs.length;
        for (const r of reqs) {
          core.submit(r, {
            onFirstToken: (t) => times.push(t - t0),
            onDone: (t) => {
              times.push(t - t0);
              if (--left === 0) resolve();
            },
          }, t0);
        }
        if (clock instanceof VirtualClock) clock.runUntilIdleSync();
      });
      return times;
    };
    const virtual = await run(new VirtualClock(0));
    const real = await run(new WallClock());
    expect(real.length).toBe(virtual.length);
    real.forEach((t, i) => expect(Math.abs(t - virtual[i]!)).toBeLessThanOrEqual(2));
    expect(virtual[virtual.length - 1]!).toBeGreaterThan(100);
  });
});

describe("SimEngineCore: the layerwise capability (a loading peer shares the prefill)", () => {
  it("a paired instance admits a loading episode at once and runs its batches to the planner's ends, then decodes", () => {
    const clock = new VirtualClock();
    // maxPrefillTokens 100: each 100-token request is its own batch
    const core = new SimEngineCore({ profile: flatProfile(), clock, kvCapacityTokens: 100_000, maxPrefillTokens: 100 });
    const asked: { start: number; batches: { tokens: number; aloneMs: number }[] }[] = [];
    core.setLayerwise({ active: () => true, plan: (start, batches) => (asked.push({ start, batches: [...batches] }), [60, 110, 150]) });
    const first: Record<string, number> = {};
    const done: Record<string, number> = {};
    for (const id of ["a", "b", "c"]) core.submit({ id, promptTokens: 100, maxTokens: 2, priority: 0 }, { onFirstToken: (t) => (first[id] = t), onDone: (t) => (done[id] = t) });
    expect(core.stats().waiting).toBe(3);
    clock.advanceToSync(1);
    // all three admitted at 0 (KV reserved, counted as running), one planner call with three 100 ms batches
    expect(core.stats()).toMatchObject({ running: 3, waiting: 0 });
    expect(asked).toEqual([{ start: 0, batches: [{ tokens: 100, aloneMs: 100 }, { tokens: 100, aloneMs: 100 }, { tokens: 100, aloneMs: 100 }] }]);
    clock.runUntilIdleSync();
    expect(first).toEqual({ a: 60, b: 110, c: 150 });
    // after the episode: one decode iteration of B = 3 (10 + 3 ms) finishes all three
    expect(done).toEqual({ a: 163, b: 163, c: 163 });
  });

  it("an inactive pairing (the peer has every layer) leaves prefill as it was; ends out of order are made non-decreasing", () => {
    const clock = new VirtualClock();
    const core = new SimEngineCore({ profile: flatProfile(), clock, kvCapacityTokens: 100_000, maxPrefillTokens: 100 });
    let active = false;
    core.setLayerwise({ active: () => active, plan: (s) => [s + 80, s + 50] });
    const first: Record<string, number> = {};
    core.submit({ id: "a", promptTokens: 100, maxTokens: 1, priority: 0 }, { onFirstToken: (t) => (first.a = t) });
    clock.runUntilIdleSync();
    expect(first.a).toBe(100);
    active = true;
    for (const id of ["b", "c"]) core.submit({ id, promptTokens: 100, maxTokens: 1, priority: 0 }, { onFirstToken: (t) => (first[id] = t) });
    clock.runUntilIdleSync();
    expect(first).toEqual({ a: 100, b: 180, c: 180 });
    expect(core.stats()).toMatchObject({ running: 0, waiting: 0, kvBytesUsed: 0 });
  });

  it("a request cancelled inside a planned batch frees its KV; close cancels the planned ones", () => {
    const clock = new VirtualClock();
    const core = new SimEngineCore({ profile: flatProfile(), clock, kvCapacityTokens: 100_000, maxPrefillTokens: 100 });
    core.setLayerwise({ active: () => true, plan: (s) => [s + 50, s + 100, s + 150] });
    const cancelled: string[] = [];
    const hs = ["a", "b", "c"].map((id) => core.submit({ id, promptTokens: 100, maxTokens: 5, priority: 0 }, { onCancelled: () => cancelled.push(id) }));
    clock.advanceToSync(10);
    hs[1]!.cancel();
    expect(core.stats().running).toBe(2);
    core.close();
    expect(cancelled.sort()).toEqual(["a", "b", "c"]);
    expect(core.stats()).toMatchObject({ running: 0, waiting: 0 });
  });

  it("an execution pipeline's activation hops add to every prefill and decode iteration (passOverheadMs)", () => {
    const clock = new VirtualClock();
    const core = new SimEngineCore({ profile: flatProfile(), clock, kvCapacityTokens: 100_000, passOverheadMs: 2 });
    let first = 0;
    let done = 0;
    core.submit({ id: "a", promptTokens: 100, maxTokens: 3, priority: 0 }, { onFirstToken: (t) => (first = t), onDone: (t) => (done = t) });
    clock.runUntilIdleSync();
    expect(first).toBe(102);
    expect(done).toBe(102 + 2 * 13);
  });
});

describe("SimEngineCore: a pair's KV reach", () => {
  it("admits past its own cache while paired, then admits nothing new until its reservations fit again", () => {
    const clock = new VirtualClock();
    const core = new SimEngineCore({ profile: flatProfile(), clock, kvCapacityTokens: 250, maxPrefillTokens: 100 });
    let active = true;
    core.setLayerwise({ active: () => active, plan: (s, b) => b.map((_, i) => s + 100 * (i + 1)), kvScale: () => 2 });
    const first: Record<string, number> = {};
    for (const id of ["a", "b", "c", "d"]) core.submit({ id, promptTokens: 100, maxTokens: 20, priority: 0 }, { onFirstToken: (t) => (first[id] = t) });
    clock.advanceToSync(1);
    // 4 × 120 = 480 ≤ 2 × 250: all four admitted in one episode, each keeping half its KV here (the peer holds the rest);
    // the stats are this instance's own memory: 400 prompt tokens in prefill × 0.5 over its own 250
    expect(core.stats()).toMatchObject({ running: 4, waiting: 0, kvBytesCapacity: 250 * core.profile.kvBytesPerToken, kvBytesUsed: 200 * core.profile.kvBytesPerToken });
    active = false;
    // after the pairing, their shares stay where they are: 240 of 250 here, so a whole 120-token request does not fit
    expect(core.kvUtilization()).toBeLessThanOrEqual(1);
    core.submit({ id: "e", promptTokens: 100, maxTokens: 20, priority: 0 }, { onFirstToken: (t) => (first.e = t) });
    clock.runUntilIdleSync();
    expect([first.a, first.b, first.c, first.d]).toEqual([100, 200, 300, 400]);
    // e waits until the others finish (240 of its own cache held + 120 > 250), then prefills alone
    expect(first.e).toBeGreaterThan(400 + 19 * 10);
    expect(core.stats()).toMatchObject({ kvBytesUsed: 0, running: 0 });
  });

  it("when the pairing ends, the peer that now serves holds the paired requests' other share until they end (handOffTo)", () => {
    const clock = new VirtualClock();
    const source = new SimEngineCore({ profile: flatProfile(), clock, kvCapacityTokens: 1000 });
    const target = new SimEngineCore({ profile: flatProfile(), clock, kvCapacityTokens: 1000 });
    let active = true;
    source.setLayerwise({ active: () => active, plan: (s, b) => b.map((_, i) => s + 100 * (i + 1)), kvScale: () => 2 });
    let aDone = -1;
    source.submit({ id: "a", promptTokens: 300, maxTokens: 100, priority: 0 }, { onDone: (t) => (aDone = t) });
    clock.advanceToSync(150); // a prefilled 0–100 with half its layers on the peer; decoding now
    active = false;
    source.setLayerwise(undefined);
    source.handOffTo(target);
    // a's 400-token reservation × 1/2 lives in the target's cache: 200 of its 1000; in use (300 + 1) / 2 — its context
    // as of its decode segment's start (the first token; the target does not run the source's clock arithmetic)
    expect(target.stats().kvBytesUsed / target.profile.kvBytesPerToken).toBeCloseTo((300 + 1) / 2, 9);
    let bFirst = -1;
    target.submit({ id: "b", promptTokens: 800, maxTokens: 100, priority: 0 }, { onFirstToken: (t) => (bFirst = t) });
    clock.runUntilIdleSync();
    // 200 + 900 > 1000: b waits for a (first token at 100, then 99 iterations of 11 ms: done at 1189), then prefills
    // 100 ms; without the hand-off b would have had its first token at 250
    expect(aDone).toBe(1189);
    expect(bFirst).toBe(1289);
    expect(target.stats().kvBytesUsed).toBe(0);
  });
});

describe("SimEngineCore: priority preemption (vLLM priority scheduling)", () => {
  /** Two batch requests of 400 KV tokens running in 1,000; an interactive one of 300 arrives at 105 ms. */
  function fullOfBatch(opts: { preemption?: "recompute" | "swap" | "off"; swapTokensPerMs?: number; maxBatch?: number; capacity?: number }) {
    const h = harness({ capacity: opts.capacity ?? 1000, ...opts });
    const events: string[] = [];
    const done: Record<string, { atMs: number; tokens: number }[]> = {};
    const sub = (id: string, priority: 0 | 1, promptTokens: number, maxTokens: number) =>
      h.core.submit({ id, promptTokens, maxTokens, priority }, {
        onFirstToken: (t) => {
          h.seen.first[id] = t;
          events.push(`${id} first ${t}`);
        },
        onDone: (t, n) => (done[id] ??= []).push({ atMs: t, tokens: n }),
        onPreempted: (t, n) => events.push(`${id} preempted ${t} at ${n}`),
        onResumed: (t, n) => events.push(`${id} resumed ${t} at ${n}`),
        onCancelled: (t, n) => events.push(`${id} cancelled ${t} at ${n}`),
      });
    const b1 = sub("b1", 1, 300, 100);
    const b2 = sub("b2", 1, 300, 100);
    h.clock.advanceToSync(105); // both prefilled at 100 (1 token), decoding at B = 2: boundaries 112, 124, …
    return { ...h, events, done, sub, b1, b2 };
  }

  it("recompute: the interactive request preempts the latest batch request at the next boundary; it resumes and ends once with its full output", () => {
    const { clock, core, events, done, sub, b2 } = fullOfBatch({});
    expect(core.stats().preemptibleKvBytes).toBeCloseTo((2 * 301) * core.profile.kvBytesPerToken, 6);
    sub("i", 0, 100, 200); // 800 + 300 > 1000
    clock.runUntilIdleSync();
    // 112: b2 (2 tokens) preempted, i prefilled 112 → 212 (TTFT 107 = 7 to the boundary + the 100 ms prefill).
    // b1 and i decode at 12 ms: b1 done at 212 + 98·12 = 1388. b2 recomputed 1388 → 1488 (its 3rd token), then
    // b2 and i at 12 ms: b2 done at 1488 + 97·12 = 2652; i (99 + 97 = 196 tokens) alone 4 × 11 → 2696.
    expect(events).toEqual(["b1 first 100", "b2 first 100", "b2 preempted 112 at 2", "i first 212", "b2 resumed 1488 at 3"]);
    expect(done.b1).toEqual([{ atMs: 1388, tokens: 100 }]);
    expect(done.b2).toHaveLength(1);
    expect(done.b2![0]!.atMs).toBeCloseTo(2652, 9);
    expect(done.b2![0]!.tokens).toBe(100);
    expect(done.i![0]!.atMs).toBeCloseTo(2696, 9);
    expect(done.i![0]!.tokens).toBe(200);
    expect(b2.preemptions).toBe(1);
    expect(core.preemptionCounts()).toEqual({ preempted: 1, resumed: 1 });
    expect(core.stats()).toMatchObject({ kvBytesUsed: 0, running: 0, waiting: 0, preemptionsTotal: 1 });
  });

  it("swap: the copy out delays the interactive prefill, the copy in replaces the resumed request's prefill and yields no token", () => {
    // 10 tokens per ms: b2's 302 tokens take 30.2 ms each way.
    const { clock, events, done, sub } = fullOfBatch({ preemption: "swap", swapTokensPerMs: 10 });
    sub("i", 0, 100, 200);
    clock.runUntilIdleSync();
    // 112: b2 swapped out (30.2), i prefilled → 242.2; b1 done at 242.2 + 98·12 = 1418.2; b2 swapped in → 1448.4
    // (still 2 tokens); b2 and i at 12 ms: b2 done at 1448.4 + 98·12 = 2624.4; i (197) 3 × 11 → 2657.4.
    expect(events.slice(2, 4)).toEqual(["b2 preempted 112 at 2", "i first 242.2"]);
    expect(events[4]).toMatch(/^b2 resumed 1448\.4\d* at 2$/);
    expect(done.b1![0]!.atMs).toBeCloseTo(1418.2, 9);
    expect(done.b2![0]!.atMs).toBeCloseTo(2624.4, 9);
    expect(done.b2![0]!.tokens).toBe(100);
    expect(done.i![0]!.atMs).toBeCloseTo(2657.4, 9);
  });

  it("a missing batch slot preempts one batch request even with KV free", () => {
    const { clock, events, sub } = fullOfBatch({ maxBatch: 2, capacity: 100_000 });
    sub("i", 0, 100, 200);
    clock.runUntilIdleSync();
    expect(events.slice(2, 4)).toEqual(["b2 preempted 112 at 2", "i first 212"]);
  });

  it("off: the interactive request waits for batch KV to free (§6.3 as written)", () => {
    const { clock, events, sub } = fullOfBatch({ preemption: "off" });
    sub("i", 0, 100, 200);
    clock.runUntilIdleSync();
    // b1 and b2 end together at 100 + 99·12 = 1288; i prefilled 1288 → 1388.
    expect(events).toEqual(["b1 first 100", "b2 first 100", "i first 1388"]);
  });

  it("priority 1 rides along in a priority 0 prefill only where it adds at most 1% to it", () => {
    // Costless batching (flat profile): b and b2 share i's prefill, 0 → 100.
    const free = harness();
    free.submit({ id: "b", promptTokens: 100, maxTokens: 5, priority: 1 });
    free.submit({ id: "i", promptTokens: 100, maxTokens: 5, priority: 0 });
    free.submit({ id: "b2", promptTokens: 100, maxTokens: 5, priority: 1 });
    free.clock.runUntilIdleSync();
    expect(free.seen.first).toEqual({ i: 100, b: 100, b2: 100 });
    // Two prompts cost 150 ms: i prefills alone 0 → 100 and decodes (11 ms) to 144. b and b2 may not prefill on their
    // own beside interactive work before the head has waited batchPrefillWaitMs (200 ms): together 200 → 350.
    const { clock, seen, submit } = harness({ batchedCost: true });
    submit({ id: "b", promptTokens: 100, maxTokens: 5, priority: 1 });
    submit({ id: "i", promptTokens: 100, maxTokens: 5, priority: 0 });
    submit({ id: "b2", promptTokens: 100, maxTokens: 5, priority: 1 });
    clock.runUntilIdleSync();
    expect(seen.first).toEqual({ i: 100, b: 350, b2: 350 });
    expect(seen.done.i).toBe(144);
  });

  it("beside interactive work, an interactive arrival waits for a decode step, not for a batch request's prefill (batchPrefillWaitMs)", () => {
    // i1 (50 tokens) prefills 0 → 100 and decodes alone at 11 ms; b arrives at 105, i2 at 150.
    const run = (batchPrefillWaitMs?: number) => {
      const h = harness({ batchedCost: true, ...(batchPrefillWaitMs === undefined ? {} : { batchPrefillWaitMs }) });
      h.submit({ id: "i1", promptTokens: 100, maxTokens: 50, priority: 0 });
      h.clock.advanceToSync(105);
      h.submit({ id: "b", promptTokens: 100, maxTokens: 5, priority: 1 });
      h.clock.advanceToSync(150);
      h.submit({ id: "i2", promptTokens: 100, maxTokens: 5, priority: 0 });
      h.clock.runUntilIdleSync();
      return h.seen.first;
    };
    // Held: i2 joins at the boundary at 155 and prefills alone (b would make it 150 ms) → 255; i1 and i2 decode at
    // 12 ms until i2 ends at 303, i1 alone at 11 ms; b has waited 200 ms at 305 and prefills alone at the next
    // boundary, 314 → 414.
    expect(run()).toMatchObject({ i1: 100, i2: 255, b: 414 });
    // Not held (0, as before): b prefills at the boundary at 111 → 211, and i2 waits for it: 211 → 311.
    expect(run(0)).toMatchObject({ i1: 100, b: 211, i2: 311 });
  });

  it("batch slots beside interactive work: batch beyond them is preempted at the next boundary and resumes when the interactive work has left", () => {
    const h = harness({ batchSlotsBeside: 1, besideHoldMs: 0 });
    const ev: string[] = [];
    const sub = (id: string, priority: 0 | 1, maxTokens: number) =>
      h.core.submit({ id, promptTokens: 10, maxTokens, priority }, {
        onFirstToken: (t) => ev.push(`${id} first ${t}`),
        onDone: (t, n) => ev.push(`${id} done ${t} (${n})`),
        onPreempted: (t, n) => ev.push(`${id} preempted ${t} at ${n}`),
        onResumed: (t, n) => ev.push(`${id} resumed ${t} at ${n}`),
      });
    for (const id of ["b1", "b2", "b3"]) sub(id, 1, 5);
    h.clock.advanceToSync(105); // prefilled together 0 → 100; decoding at B = 3 (13 ms): next boundary 113
    sub("i", 0, 3); // fits, but 3 batch requests run beside it where 1 may
    h.clock.runUntilIdleSync();
    // 113: b3 then b2 preempted (2 tokens each), i prefilled alone → 213; b1 and i at 12 ms: i done at 237 (3), b1 at 4.
    // 237: no interactive work: b2 and b3 recomputed → 337 (3rd token); B = 3 at 13 ms: b1 done 350; B = 2: 362.
    expect(ev.slice(3)).toEqual(["b3 preempted 113 at 2", "b2 preempted 113 at 2", "i first 213", "i done 237 (3)", "b2 resumed 337 at 3", "b3 resumed 337 at 3", "b1 done 350 (5)", "b2 done 362 (5)", "b3 done 362 (5)"]);
  });

  it("priority 0 never preempts priority 0, and nothing is preempted in vain", () => {
    const h = harness({ capacity: 1000 });
    const pre: string[] = [];
    const sub = (id: string, priority: 0 | 1, p: number, m: number) => h.core.submit({ id, promptTokens: p, maxTokens: m, priority }, { onPreempted: () => pre.push(id), onFirstToken: (t) => (h.seen.first[id] = t) });
    sub("a", 0, 300, 300); // 600
    sub("b", 1, 150, 150); // 300
    h.clock.advanceToSync(105);
    sub("i", 0, 250, 250); // 500 > 100 free, and 400 with b preempted: waits, b keeps running
    h.clock.advanceToSync(500);
    expect(pre).toEqual([]);
    expect(h.core.stats()).toMatchObject({ running: 2, waiting: 1 });
    h.clock.runUntilIdleSync();
    expect(pre).toEqual([]);
    expect(h.seen.first.i).toBeGreaterThan(500);
  });

  it("a preempted request cancelled while it waits ends once, with the output it had", () => {
    const { clock, core, done, events, sub, b2 } = fullOfBatch({});
    sub("i", 0, 100, 200);
    clock.advanceToSync(150); // b2 preempted at 112 with 2 tokens
    expect(core.stats()).toMatchObject({ waiting: 1, preemptibleKvBytes: expect.any(Number) });
    expect(b2.generatedNow()).toBe(2);
    expect(b2.nextTokenAtMs()).toBeUndefined();
    b2.cancel();
    b2.cancel();
    expect(b2.finished).toBe(true);
    clock.runUntilIdleSync();
    expect(done.b2).toBeUndefined();
    expect(events.filter((e) => e.startsWith("b2 "))).toEqual(["b2 first 100", "b2 preempted 112 at 2", "b2 cancelled 150 at 2"]);
    expect(core.stats()).toMatchObject({ kvBytesUsed: 0, waiting: 0, running: 0, remainingTokens: 0 });
  });
});

describe("prefix caching in the core (issue 34)", () => {
  /** Prefill 1 ms per prompt token (knots (1, 1) … (100 000, 100 000)), decode 10 + 1·B ms. */
  function linear(capacity: number, hostKvCacheGiB = 0) {
    const fit: ProfileFit = {
      model: "llama3.2-3b",
      gpu: "h100-80gb",
      tp: 2,
      prefillKnots: [
        [1, 1],
        [100_000, 100_000],
      ],
      prefillBatchedKnots: [
        [1, 1],
        [100_000, 100_000],
      ],
      decode: { c0: 10, cB: 1, cB2: 0, cCtx: 0 },
      maxMeasuredBatch: 64,
      source: "test",
    };
    const clock = new VirtualClock();
    const core = new SimEngineCore({ profile: new PerfProfile(fit), clock, kvCapacityTokens: capacity, prefixCache: { hostKvCacheGiB } });
    const first: Record<string, number> = {};
    const run = (id: string, promptTokens: number, blockHashes: number[]) => {
      const at = clock.now();
      core.submit({ id, promptTokens, maxTokens: 1, priority: 0, blockHashes }, { onFirstToken: (t) => (first[id] = t - at) });
      clock.runUntilIdleSync();
    };
    return { core, clock, first, run };
  }
  const blocks = (from: number, n: number) => Array.from({ length: n }, (_, i) => from + i);

  it("prefills only the uncached tokens and reports vLLM's counters", () => {
    const { core, first, run } = linear(100_000);
    run("a", 1000, blocks(0, 62)); // 62 full blocks of 16 (992 tokens)
    expect(first.a).toBeCloseTo(1000, 6);
    run("b", 1000, [...blocks(0, 40), ...blocks(500, 22)]); // 40 blocks (640 tokens) cached
    expect(first.b).toBeCloseTo(360, 6);
    run("c", 1000, blocks(0, 62)); // every full block cached: 992 tokens
    expect(first.c).toBeCloseTo(8, 6);
    const s = core.stats();
    expect(s.prefixQueriedTokensTotal).toBe(3000);
    expect(s.prefixHitTokensTotal).toBe(640 + 992);
  });

  it("evicts the cache down to the KV that admissions leave unreserved", () => {
    // 1,000 tokens of KV = 62 blocks: a 600-token request reserves 601, leaving 399 tokens (24 blocks) for cache.
    const { core, first, run } = linear(1000);
    run("a", 640, blocks(0, 40));
    expect(core.prefixCache!.size).toBe(40);
    run("b", 600, blocks(100, 37));
    // While b ran, a's blocks were cut to 24 (1000 − 601 = 399 tokens); b's 37 then freed too (61 ≤ 62, nothing more).
    expect(core.prefixCache!.size).toBe(24 + 37);
    run("c", 640, blocks(0, 40));
    // a's head survived (its tail was evicted first): 24 blocks hit.
    expect(first.c).toBeCloseTo(640 - 24 * 16, 6);
  });

  it("loads prefix blocks the GPU evicted from the host tier over PCIe instead of prefilling them", () => {
    // As above, with a 1 GiB host tier: c finds a's 24 head blocks on GPU and its next 15 in host memory (a hit is at
    // most floor(639 / 16) = 39 blocks), so it prefills 640 − 39 × 16 = 16 tokens (16 ms) after loading 15 × 16 =
    // 240 tokens × 114,688 B (llama3.2-3b: 28 layers × 8 KV heads × 128 × 2 × 2 B) at 128 Gbps = 16e6 B/ms:
    // 27,525,120 / 16e6 = 1.72032 ms.
    const { core, first, run } = linear(1000, 1);
    expect(core.profile.kvBytesPerToken).toBe(114_688);
    run("a", 640, blocks(0, 40));
    run("b", 600, blocks(100, 37));
    expect(core.prefixCache!.size).toBe(24 + 37);
    run("c", 640, blocks(0, 40));
    expect(first.c).toBeCloseTo(16 + 1.72032, 6);
    const s = core.stats();
    expect(s.prefixHitTokensTotal).toBe(24 * 16); // vLLM's counter: GPU hits only
    expect(s.hostKvQueriedTokensTotal).toBe(640 + 600 + (640 - 24 * 16));
    expect(s.hostKvHitTokensTotal).toBe(240);
  });

  it("leaves cached prompt tokens out of remainingTokens: waiting (peeked when queued) and in prefill (found at admission)", () => {
    const { core, clock, run } = linear(100_000);
    run("a", 1000, blocks(0, 62)); // 992 tokens cached once a is done
    expect(core.stats().remainingTokens).toBe(0);
    // b: 1,000 prompt + 4 output tokens, its first 40 blocks (640 tokens) cached: 1004 − 640 = 364 still to do.
    core.submit({ id: "b", promptTokens: 1000, maxTokens: 4, priority: 0, blockHashes: [...blocks(0, 40), ...blocks(500, 22)] });
    expect(core.stats()).toMatchObject({ waiting: 1, remainingTokens: 364 });
    clock.advanceToSync(clock.now()); // the zero-delay step: b admitted, in prefill (360 ms)
    expect(core.stats()).toMatchObject({ waiting: 0, running: 1, remainingTokens: 364 });
    // c, uncached, waits behind b's prefill: its whole 1000 + 4.
    core.submit({ id: "c", promptTokens: 1000, maxTokens: 4, priority: 0, blockHashes: blocks(900, 62) });
    expect(core.stats()).toMatchObject({ waiting: 1, remainingTokens: 364 + 1004 });
    clock.runUntilIdleSync();
    expect(core.stats().remainingTokens).toBe(0);
  });

  it("without a host tier reports no host counters", () => {
    const { core, run } = linear(1000);
    run("a", 640, blocks(0, 40));
    expect(core.stats().hostKvHitTokensTotal).toBeUndefined();
  });
});

describe("SimEngineCore: interactive TTFT beside batch (virtual time, issue 37)", () => {
  /**
   * One closed-loop interactive stream (152 + 16 tokens, 2–6 ms between requests) on llama3.2-3b, 2 × h100 (KV 24,000
   * tokens), alone or beside 10 closed-loop batch clients (136 + 48 tokens, 0–300 ms between requests), 60 s; a fixed
   * seed. Mean TTFT in ms.
   */
  function meanTtft(batch: boolean, opts: { batchPrefillWaitMs?: number } = {}): number {
    let s = 7;
    const rnd = () => (s = (s * 1103515245 + 12345) % 2147483648) / 2147483648;
    const clock = new VirtualClock(0);
    const core = new SimEngineCore({ profile: getProfile("llama3.2-3b", "h100-80gb", 2), clock, kvCapacityTokens: 24_000, ...opts });
    const ttft: number[] = [];
    const end = 60_000;
    let id = 0;
    const interactive = (at: number): void => {
      if (at > end) return;
      clock.after(Math.max(0, at - clock.now()), () => {
        const t0 = clock.now();
        core.submit({ id: `i${id++}`, promptTokens: 152, maxTokens: 16, priority: 0 }, { onFirstToken: (t) => ttft.push(t - t0), onDone: (t) => interactive(t + 2 + rnd() * 4) });
      });
    };
    const batchClient = (at: number): void => {
      if (at > end) return;
      clock.after(Math.max(0, at - clock.now()), () => core.submit({ id: `b${id++}`, promptTokens: 136, maxTokens: 48, priority: 1 }, { onDone: (t) => batchClient(t + rnd() * 300) }));
    };
    interactive(5);
    if (batch) for (let i = 0; i < 10; i++) batchClient(rnd() * 300);
    clock.advanceToSync(end + 5000);
    return ttft.reduce((a, b) => a + b, 0) / ttft.length;
  }

  it("batch prefills held beside interactive work (batchPrefillWaitMs) leave an arrival only the decode step under way", () => {
    const alone = meanTtft(false);
    const beside = meanTtft(true);
    const notHeld = meanTtft(true, { batchPrefillWaitMs: 0 });
    console.log(`interactive TTFT alone ${alone.toFixed(2)} ms; beside batch ${beside.toFixed(2)} ms (×${(beside / alone).toFixed(3)}); batch prefills not held ${notHeld.toFixed(2)} ms (×${(notHeld / alone).toFixed(3)})`);
    expect(alone).toBeCloseTo(9.31, 1); // the prefill alone: the engine is idle at each arrival
    expect(beside).toBeLessThan(notHeld - 0.5);
    // What is left: about half a decode step of the batch beside it (4.2–4.4 ms at 8–10 requests).
    expect(beside - alone).toBeLessThan(2.5);
  });
});
