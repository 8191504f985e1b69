/**
 * Chunked prefill in the simulated engine core (core.ts, SimCoreOptions.maxNumBatchedTokens; mixed-step.ts), with
 * times computed by hand from a small profile, and the setting's way from engine-sim's flags to its /health.
 */
import { afterAll, describe, expect, it } from "vitest";
import { VirtualClock } from "../../core/clock.js";
import type { ProfileFit } from "../../core/perf/fit.js";
import { PerfProfile } from "../../core/perf/model.js";
import { spawnTidegate, stopAll } from "../../test/e2e/procs.js";
import { SimEngineCore, type SimHandle, type SimSubmit } from "./core.js";
import { mixedStepMs } from "./mixed-step.js";

/**
 * Prefill P(T) = max(10, T/10) ms (knots (100, 10) and (1000, 100): flat below 100 tokens, then linear; the same for
 * one prompt and for several), decode iteration τ(B) = 10 + B ms (no context term).
 */
function linearProfile(): PerfProfile {
  const knots: [number, number][] = [
    [100, 10],
    [1000, 100],
  ];
  const fit: ProfileFit = { model: "llama3.2-3b", gpu: "h100-80gb", tp: 2, prefillKnots: knots, prefillBatchedKnots: knots, decode: { c0: 10, cB: 1, cB2: 0, cCtx: 0 }, maxMeasuredBatch: 64, source: "test" };
  return new PerfProfile(fit);
}

const P = (tokens: number) => Math.max(10, tokens / 10);
const tau = (batch: number) => 10 + batch;

function harness(opts: { maxNumBatchedTokens?: number; capacity?: number } = {}) {
  const clock = new VirtualClock();
  const profile = linearProfile();
  const core = new SimEngineCore({ profile, clock, kvCapacityTokens: opts.capacity ?? 100_000, maxBatch: 8, ...(opts.maxNumBatchedTokens === undefined ? {} : { maxNumBatchedTokens: opts.maxNumBatchedTokens }) });
  const first: Record<string, number> = {};
  const done: Record<string, number> = {};
  const resumed: Record<string, [number, number]> = {};
  const submit = (r: SimSubmit) =>
    core.submit(r, {
      onFirstToken: (t) => (first[r.id] = t),
      onDone: (t) => (done[r.id] = t),
      onResumed: (t, g) => (resumed[r.id] = [t, g]),
    });
  return { clock, core, profile, first, done, resumed, submit };
}

/** Runs the clock token by token of `h` until it finishes; the time of each of its tokens from now on. */
function tokenTimes(clock: VirtualClock, h: SimHandle): number[] {
  const times: number[] = [];
  let seen = h.generatedNow();
  for (let guard = 0; !h.finished && guard < 10_000; guard++) {
    const t = h.nextTokenAtMs();
    if (t === undefined) throw new Error("a running request has no next token time");
    clock.advanceToSync(t);
    for (const g = h.generatedNow(); seen < g; seen++) times.push(clock.now());
  }
  return times;
}

describe("chunked prefill (maxNumBatchedTokens)", () => {
  // a: 100-token prompt, 50 tokens out, from t = 0; b: a 1000-token prompt arriving at t = 30, 2 tokens out.
  function longPromptBesideDecode(maxNumBatchedTokens?: number) {
    const x = harness(maxNumBatchedTokens === undefined ? {} : { maxNumBatchedTokens });
    const a = x.submit({ id: "a", promptTokens: 100, maxTokens: 50, priority: 0 });
    x.clock.advanceToSync(30);
    x.submit({ id: "b", promptTokens: 1000, maxTokens: 2, priority: 0 });
    return { ...x, aTimes: tokenTimes(x.clock, a) };
  }

  it("a long prompt arriving while a request decodes no longer stalls it: each gap is at most one mixed step", () => {
    const { first, aTimes } = longPromptBesideDecode(200);
    // a: prefill P(100) = 10, then decode iterations of τ(1) = 11 ms: 21, 32 (b arrived at 30: the segment ends at 32).
    expect(first.a).toBeCloseTo(P(100), 9);
    // From 32, steps of a's decode + 199 of b's prompt tokens: τ(1) + P(1 + 199) − P(1) = 11 + 20 − 10 = 21 ms, five of
    // them (995 tokens), then the last 5 tokens: τ(1) + P(6) − P(1) = 11 ms; b's first token ends that step.
    const mixed = tau(1) + P(200) - P(1);
    expect(mixed).toBeCloseTo(21, 9);
    const last = tau(1) + P(6) - P(1);
    const steps = [32, ...[1, 2, 3, 4, 5].map((i) => 32 + i * mixed), 32 + 5 * mixed + last];
    expect(first.b).toBeCloseTo(32 + 5 * mixed + last, 9); // 148
    aTimes.slice(0, steps.length).forEach((t, i) => expect(t).toBeCloseTo(steps[i]!, 9));
    // then a and b decode together (τ(2) = 12 ms) until b's second token ends it at 160
    expect(aTimes[steps.length]).toBeCloseTo(first.b! + tau(2), 9);
    const gaps = aTimes.slice(1).map((t, i) => t - aTimes[i]!);
    expect(Math.max(...gaps)).toBeCloseTo(mixed, 9);
    expect(aTimes).toHaveLength(48); // tokens 3..50 (two were out by t = 30)
  });

  it("unset: the whole prompt prefills in a step of its own and stalls the decode, as before (times unchanged)", () => {
    const { first, aTimes } = longPromptBesideDecode(undefined);
    expect(first.a).toBe(10);
    // b's prefill runs alone from 32: P(1000) = 100 ms; a's next token comes after it, in a decode of two (12 ms).
    expect(first.b).toBe(132);
    expect(aTimes[0]).toBe(32);
    expect(aTimes[1]).toBe(144);
    expect(aTimes[1]! - aTimes[0]!).toBe(112);
  });

  it("a prompt larger than the budget completes over ceil(prompt / budget) steps; its first token ends the last one", () => {
    const { clock, first, submit, profile } = harness({ maxNumBatchedTokens: 320 });
    const h = submit({ id: "long", promptTokens: 1000, maxTokens: 2, priority: 0 });
    // ceil(1000 / 320) = 4 steps: 320, 320, 320 and 40 tokens, nothing else running.
    const stepMs = [profile.prefillMs(320), profile.prefillMs(320), profile.prefillMs(320), profile.prefillMs(40)];
    expect(stepMs.map((ms) => Math.round(ms * 1e9) / 1e9)).toEqual([32, 32, 32, 10]);
    const ends = stepMs.map((_, i) => stepMs.slice(0, i + 1).reduce((s, x) => s + x, 0));
    // Inside step 2 the prompt is not done: no token due yet; inside step 4 it is due at that step's end.
    clock.advanceToSync(ends[0]! + 1);
    expect(h.nextTokenAtMs()).toBeUndefined();
    expect(h.generatedNow()).toBe(0);
    clock.advanceToSync(ends[2]! + 1);
    expect(h.nextTokenAtMs()).toBeCloseTo(ends[3]!, 9);
    clock.runUntilIdleSync();
    expect(first.long).toBeCloseTo(32 + 32 + 32 + 10, 9); // 106: the sum of the steps (whole: P(1000) = 100)
    expect(first.long).toBeCloseTo(ends[3]!, 9);
  });

  it("the step time composes the decode iteration with the prefill curve's increment for the chunk tokens", () => {
    const p = linearProfile();
    expect(mixedStepMs(p, 0, 0, 0, 0)).toBe(0);
    expect(mixedStepMs(p, 3, 0, 0, 0)).toBe(tau(3)); // a plain decode iteration
    expect(mixedStepMs(p, 0, 0, 500, 1)).toBeCloseTo(P(500), 9); // a prefill of the chunk alone
    // 3 decodes + 97 chunk tokens: still under the curve's floor (100 tokens), so the chunk rides free
    expect(mixedStepMs(p, 3, 0, 97, 1)).toBeCloseTo(tau(3), 9);
    // 3 decodes + 497 chunk tokens: P(500) − P(3) = 50 − 10 on top of the decode iteration
    expect(mixedStepMs(p, 3, 0, 497, 1)).toBeCloseTo(tau(3) + 40, 9);
  });

  it("a priority 0 arrival gets its chunk in the next step, before the rest of a priority 1 prompt already under way", () => {
    const { clock, first, submit } = harness({ maxNumBatchedTokens: 200 });
    submit({ id: "batch", promptTokens: 1000, maxTokens: 2, priority: 1 });
    clock.advanceToSync(5);
    submit({ id: "chat", promptTokens: 100, maxTokens: 2, priority: 0 });
    clock.runUntilIdleSync();
    // step 1 (0–20): 200 of batch's tokens, P(200) = 20; step 2: chat's whole prompt (100) and 100 more of batch's,
    // two prompts: P(200) = 20 → chat's first token at 40.
    expect(first.chat).toBeCloseTo(P(200) + P(200), 9);
    // batch has 700 tokens left; from 40 chat decodes beside 199 of them: τ(1) + P(200) − P(1) = 21 ms, which ends chat
    // (its second token); the last 501 go alone: 200, 200, 101 → P(200) + P(200) + P(101).
    expect(first.batch).toBeCloseTo(40 + (tau(1) + P(200) - P(1)) + 2 * P(200) + P(101), 9);
  });

  it("a priority 0 request short of KV preempts a decoding priority 1 one at the next boundary and prefills in chunks; the preempted one resumes by recompute", () => {
    const { clock, core, first, done, resumed, submit } = harness({ maxNumBatchedTokens: 200, capacity: 1000 });
    submit({ id: "batch", promptTokens: 100, maxTokens: 500, priority: 1 }); // reserves 600
    clock.advanceToSync(15);
    submit({ id: "chat", promptTokens: 450, maxTokens: 3, priority: 0 }); // 453 more: does not fit
    clock.runUntilIdleSync();
    // batch: first token at 10, one decode to 21; there chat preempts it (2 tokens out) and prefills 200 + 200 + 50
    // tokens alone: P(200) + P(200) + P(50) = 20 + 20 + 10 → first token at 71, then two decodes of τ(1) = 11 → 93.
    expect(first.batch).toBeCloseTo(10, 9);
    expect(first.chat).toBeCloseTo(21 + 2 * P(200) + P(50), 9);
    expect(done.chat).toBeCloseTo(71 + 2 * tau(1), 9);
    expect(core.preemptionCounts()).toEqual({ preempted: 1, resumed: 1 });
    // batch resumes at 93 by recomputing its prompt and output (102 tokens, one step): P(102) = 10.2, its third token.
    expect(resumed.batch![0]).toBeCloseTo(93 + P(102), 9);
    expect(resumed.batch![1]).toBe(3);
    expect(done.batch).toBeCloseTo(93 + P(102) + 497 * tau(1), 6);
  });

  it("cancelling a request in the middle of its chunked prefill frees its KV; close ends the rest", () => {
    const { clock, core, submit } = harness({ maxNumBatchedTokens: 200 });
    const h = submit({ id: "long", promptTokens: 1000, maxTokens: 2, priority: 0 });
    clock.advanceToSync(30); // inside the second step
    expect(core.stats().running).toBe(1);
    expect(core.stats().kvBytesUsed).toBeGreaterThan(0);
    h.cancel();
    expect(h.finished).toBe(true);
    expect(core.stats().running).toBe(0);
    expect(core.stats().kvBytesUsed).toBe(0);
    const other = submit({ id: "other", promptTokens: 500, maxTokens: 2, priority: 0 });
    clock.advanceToSync(core.clock.now() + 25);
    core.close();
    expect(other.finished).toBe(true);
    expect(core.stats().running).toBe(0);
  });

  it("refuses a budget below the batch cap and the modes that time whole-prompt prefills", () => {
    const clock = new VirtualClock();
    expect(() => new SimEngineCore({ profile: linearProfile(), clock, maxBatch: 256, maxNumBatchedTokens: 128 })).toThrow("maxNumBatchedTokens (128) must be ≥ maxBatch (256)");
    expect(() => new SimEngineCore({ profile: linearProfile(), clock, maxBatch: 8, maxNumBatchedTokens: 8.5 })).toThrow("maxNumBatchedTokens must be an integer");
    const core = new SimEngineCore({ profile: linearProfile(), clock, maxBatch: 8, maxNumBatchedTokens: 64 });
    expect(() => core.setLayerwise({ active: () => true, plan: (s) => [s] })).toThrow("prefills in chunks");
    expect(() => core.setBlockArrivals([Number.POSITIVE_INFINITY])).toThrow("prefills in chunks");
    // Nothing pending: no refusal (ending a mode is always fine).
    core.setLayerwise(undefined);
    core.setBlockArrivals(undefined);
    expect(core.paired).toBe(false);
    expect(core.behindBlocks).toBe(false);
  });
});

describe("engine-sim --max-num-batched-tokens", () => {
  afterAll(() => stopAll());
  const URL_LINE = /^(http:\/\/127\.0\.0\.1:\d+)\n/m;
  const health = async (url: string) => (await (await fetch(url + "/health")).json()) as { settings?: Record<string, unknown> };

  it("reports the setting on /health, given as its flag or in --settings", async () => {
    const byFlag = await spawnTidegate("engine-sim-chunked", ["engine-sim", "--model", "llama3.2-3b", "--port", "0", "--max-num-batched-tokens", "512"], URL_LINE);
    expect((await health(byFlag.match[1]!)).settings).toEqual({ maxNumBatchedTokens: 512 });
    const bySettings = await spawnTidegate("engine-sim-chunked-json", ["engine-sim", "--model", "llama3.2-3b", "--port", "0", "--settings", JSON.stringify({ maxNumBatchedTokens: 64, maxBatch: 16 })], URL_LINE);
    expect((await health(bySettings.match[1]!)).settings).toEqual({ maxNumBatchedTokens: 64, maxBatch: 16 });
    // A completion runs through the chunked core.
    const r = await fetch(bySettings.match[1]! + "/v1/completions", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ model: "llama3.2-3b", prompt: "hello ".repeat(200), max_tokens: 3 }) });
    expect(r.status).toBe(200);
    expect(((await r.json()) as { usage: { completion_tokens: number } }).usage.completion_tokens).toBe(3);
  });

  it("refuses a budget below the batch cap at start-up, naming both", async () => {
    await expect(spawnTidegate("engine-sim-chunked-bad", ["engine-sim", "--model", "llama3.2-3b", "--port", "0", "--max-num-batched-tokens", "100"], URL_LINE)).rejects.toThrow("maxNumBatchedTokens (100) must be ≥ maxBatch (256)");
  });
});
