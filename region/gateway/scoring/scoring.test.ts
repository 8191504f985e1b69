import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { VirtualClock } from "../../../core/clock.js";
import { blockHashesOfBody, type KvEvent, type KvEventListener } from "../../../core/prefix.js";
import type { GenerateRequest } from "../../../core/ports.js";
import { SimEngine } from "../../../engines/sim/sim-engine.js";
import { FakeEngine } from "../../../test/helpers/fake-engine.js";
import { Gateway } from "../gateway.js";
import { JSQ_POLICY, PREFIX_AWARE_POLICY, RoutingPolicy, type ScoreContext } from "./plugins.js";
import { PrefixIndex } from "./prefix-index.js";
import { parseRoutingConfig } from "./routing-config.js";
import { DEFAULT_PD_MIN_PREFILL_TOKENS } from "../../../core/defaults.js";

const NONE: ScoreContext = { blockHashes: [], prefixBlocks: () => 0 };

/** Join-the-shortest-queue as SageServe §6.2 states it: the serving instance with the fewest remaining tokens, ties to the first. */
function jsqReference<I extends { remainingTokens: number; serving: boolean }>(instances: readonly I[]): I | undefined {
  let best: I | undefined;
  for (const i of instances) if (i.serving && (best === undefined || i.remainingTokens < best.remainingTokens)) best = i;
  return best;
}

describe("routing plugins", () => {
  it("the jsq policy picks exactly JSQ's instance (ties to the first listed)", () => {
    const policy = new RoutingPolicy(JSQ_POLICY);
    fc.assert(
      fc.property(fc.array(fc.record({ remainingTokens: fc.integer({ min: 0, max: 5000 }), serving: fc.boolean() }), { minLength: 1, maxLength: 8 }), (xs) => {
        const cs = xs.map((x, i) => ({ instanceId: `i${i}`, ...x }));
        expect(policy.choose(NONE, cs)?.instanceId).toBe(jsqReference(cs)?.instanceId);
      }),
    );
  });

  it("prefix-aware weighs the share of the prompt held against load, 3 : 2", () => {
    const policy = new RoutingPolicy(PREFIX_AWARE_POLICY);
    expect(PREFIX_AWARE_POLICY.scorers).toEqual([
      { name: "prefix", weight: 3 },
      { name: "load", weight: 2 },
    ]);
    const held: Record<string, number> = { a: 8, b: 0, c: 5 };
    const ctx: ScoreContext = { blockHashes: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10], prefixBlocks: (id) => held[id] ?? 0 };
    const at = (id: string, remainingTokens: number) => ({ instanceId: id, remainingTokens, serving: true });
    // Totals are (3 × prefix + 2 × load) / 5, load = 1 − r / max r.
    // Equal load (load 0 for both): a (3 × 0.8 = 2.4) over b (0).
    expect(policy.choose(ctx, [at("b", 1000), at("a", 1000)])?.instanceId).toBe("a");
    // a twice as loaded: a 2.4 + 0, b 0 + 2 × 0.5 = 1: a.
    expect(policy.choose(ctx, [at("b", 1000), at("a", 2000)])?.instanceId).toBe("a");
    // a ten times as loaded: b's 2 × 0.9 = 1.8 still below a's 2.4 (held > 2/3 of the prompt wins whatever the load).
    expect(policy.choose(ctx, [at("b", 1000), at("a", 10_000)])?.instanceId).toBe("a");
    // c holds half: 3 × 0.5 = 1.5; c twice as loaded: b's 2 × 0.5 = 1.0 → c; c ten times as loaded: b's 1.8 → b.
    expect(policy.choose(ctx, [at("b", 1000), at("c", 2000)])?.instanceId).toBe("c");
    expect(policy.choose(ctx, [at("b", 1000), at("c", 10_000)])?.instanceId).toBe("b");
    // No blocks: load alone (JSQ).
    expect(policy.choose(NONE, [at("a", 2000), at("b", 1000)])?.instanceId).toBe("b");
    expect(policy.choose(ctx, [{ instanceId: "a", remainingTokens: 0, serving: false }])).toBeUndefined();
    expect(() => new RoutingPolicy({ filters: [], scorers: [{ name: "nope", weight: 1 }], picker: "max" })).toThrow(/unknown scorer "nope"/);
    expect(() => new RoutingPolicy({ filters: [], scorers: [{ name: "load", weight: 0 }], picker: "max" })).toThrow(/weight > 0/);
  });

  it("prefix-aware leaves a saturated prefix holder while an unsaturated peer serves (llm-d's 5 waiting, 0.8 KV)", () => {
    const policy = new RoutingPolicy(PREFIX_AWARE_POLICY);
    expect(PREFIX_AWARE_POLICY.filters).toEqual(["serving", "unsaturated"]);
    const ctx: ScoreContext = { blockHashes: [1, 2, 3, 4], prefixBlocks: (id) => (id === "hot" ? 4 : 0) };
    const at = (id: string, remainingTokens: number, waiting: number, kvUtilization: number) => ({ instanceId: id, remainingTokens, serving: true, waiting, kvUtilization });
    // Holder not saturated (4 waiting, KV 0.79): the held prompt wins over an idle peer.
    expect(policy.choose(ctx, [at("idle", 0, 0, 0), at("hot", 40_000, 4, 0.79)])?.instanceId).toBe("hot");
    // 5 waiting, or KV at 0.8: saturated; the idle peer takes the request.
    expect(policy.choose(ctx, [at("idle", 0, 0, 0), at("hot", 40_000, 5, 0.1)])?.instanceId).toBe("idle");
    expect(policy.choose(ctx, [at("idle", 0, 0, 0), at("hot", 40_000, 0, 0.8)])?.instanceId).toBe("idle");
    // Every candidate saturated: the filter keeps them all and the scores decide (the holder).
    expect(policy.choose(ctx, [at("idle", 0, 9, 0.9), at("hot", 40_000, 9, 0.9)])?.instanceId).toBe("hot");
    // A request with no blocks is not filtered: load alone, as JSQ (the saturated one has less left to do here).
    expect(policy.choose(NONE, [at("idle", 50_000, 0, 0), at("hot", 40_000, 9, 0.9)])?.instanceId).toBe("hot");
    // jsq has no such filter: load alone.
    expect(new RoutingPolicy(JSQ_POLICY).choose(ctx, [at("hot", 10, 9, 0.9), at("idle", 20, 0, 0)])?.instanceId).toBe("hot");
  });

  it("reads the routing section: presets, overrides, bad names at their path", () => {
    // Absent or empty: the default policy (core/defaults.ts, prefix-aware) with its region preference.
    expect(parseRoutingConfig(undefined)).toMatchObject({ preset: "prefix-aware", policy: PREFIX_AWARE_POLICY, blockTokens: 16, regionPrefix: true });
    expect(parseRoutingConfig({})).toEqual(parseRoutingConfig(undefined));
    expect(parseRoutingConfig({ policy: "jsq" })).toMatchObject({ preset: "jsq", policy: JSQ_POLICY, regionPrefix: false });
    expect(parseRoutingConfig({ policy: "prefix-aware" })).toMatchObject({ policy: PREFIX_AWARE_POLICY, regionPrefix: true });
    expect(parseRoutingConfig({ policy: "prefix-aware", scorers: [{ name: "prefix", weight: 3 }, { name: "load" }] })?.policy.scorers).toEqual([
      { name: "prefix", weight: 3 },
      { name: "load", weight: 1 },
    ]);
    expect(() => parseRoutingConfig({ scorers: [{ name: "prefx" }] })).toThrow(/routing\.scorers\[0\]\.name.*unknown scorer/);
    expect(() => parseRoutingConfig({ policy: "random" })).toThrow(/routing\.policy/);
    // Prefill/decode: every request split unless a threshold is set (pd.ts splits).
    expect(parseRoutingConfig(undefined).pdMinPrefillTokens).toBe(DEFAULT_PD_MIN_PREFILL_TOKENS);
    expect(parseRoutingConfig({ pdMinPrefillTokens: 512 }).pdMinPrefillTokens).toBe(512);
    expect(() => parseRoutingConfig({ pdMinPrefillTokens: -1 })).toThrow(/routing\.pdMinPrefillTokens/);
  });
});

describe("PrefixIndex", () => {
  it("remembers routing history up to the instance's capacity, least recently routed forgotten first", () => {
    const ix = new PrefixIndex(16);
    ix.attach("a", 4, undefined);
    ix.routed("a", [1, 2, 3]);
    ix.routed("a", [1, 9]); // 1 touched again; 2 is now the oldest
    ix.routed("a", [7]); // 5 blocks > 4: 2 forgotten
    expect(ix.prefixBlocks("a", [1, 2, 3])).toBe(1);
    expect(ix.prefixBlocks("a", [1, 9, 5])).toBe(2);
    expect(ix.prefixBlocks("b", [1])).toBe(0);
  });

  it("follows an engine's KV events: stored blocks are added, evicted ones dropped", () => {
    const clock = new VirtualClock();
    // No host KV tier here (hostKvCacheGiB 0): the GPU's evictions show; the host tier's test follows below.
    const engine = new SimEngine({ instanceId: "e", model: "llama3.2-3b", gpu: "h100-80gb", tp: 2, clock, kvCapacityTokens: 1000, events: "coalesced", prefixCache: { hostKvCacheGiB: 0 } });
    const ix = new PrefixIndex(16);
    ix.attach("e", 1, engine.kvEvents);
    expect(ix.followsEvents("e")).toBe(true);
    const blocks = (from: number, n: number) => Array.from({ length: n }, (_, i) => from + i);
    engine.core.submit({ id: "a", promptTokens: 640, maxTokens: 1, priority: 0, blockHashes: blocks(0, 40) });
    clock.runUntilIdleSync();
    expect(ix.prefixBlocks("e", blocks(0, 40))).toBe(40); // the events, not the history (capacity 1)
    engine.core.submit({ id: "b", promptTokens: 600, maxTokens: 1, priority: 0, blockHashes: blocks(100, 37) });
    clock.runUntilIdleSync();
    // b's admission left 399 tokens for cached blocks: a's tail was evicted, and the index knows.
    expect(ix.prefixBlocks("e", blocks(0, 40))).toBe(24);
    ix.detach("e");
    expect(ix.prefixBlocks("e", blocks(0, 40))).toBe(0);
  });

  it("with the engine's default host KV tier, blocks the GPU evicted stay indexed (medium CPU events)", () => {
    const clock = new VirtualClock();
    const engine = new SimEngine({ instanceId: "e", model: "llama3.2-3b", gpu: "h100-80gb", tp: 2, clock, kvCapacityTokens: 1000, events: "coalesced" });
    // Default: 128 GiB per GPU × 2 GPUs over 114,688 B per token × 16 tokens per block.
    expect(engine.core.prefixCache!.hostCapacityBlocks).toBe(Math.floor((256 * 2 ** 30) / (114_688 * 16)));
    const ix = new PrefixIndex(16);
    ix.attach("e", 1, engine.kvEvents);
    const blocks = (from: number, n: number) => Array.from({ length: n }, (_, i) => from + i);
    engine.core.submit({ id: "a", promptTokens: 640, maxTokens: 1, priority: 0, blockHashes: blocks(0, 40) });
    engine.core.submit({ id: "b", promptTokens: 600, maxTokens: 1, priority: 0, blockHashes: blocks(100, 37) });
    clock.runUntilIdleSync();
    expect(ix.size("e")).toBe(24 + 37); // GPU tier: a's tail evicted
    expect(ix.hostSize("e")).toBe(40 + 37); // host tier: everything stored
    expect(ix.prefixBlocks("e", blocks(0, 40))).toBe(40);
    expect(engine.stats().hostKvQueriedTokensTotal).toBe(640 + 600);
  });
});

describe("PrefixIndex in-flight requests", () => {
  /** A KV-event source driven by hand. */
  const source = (snapshot: number[] = []) => {
    const ls: KvEventListener[] = [];
    return {
      src: { blockTokens: 16, subscribe: (l: KvEventListener) => (ls.push(l), () => ls.splice(ls.indexOf(l), 1)), snapshot: () => snapshot },
      emit: (ev: KvEvent) => ls.forEach((l) => l(ev)),
    };
  };

  it("counts a routed request's blocks while it is in flight, and after it only what the engine stored", () => {
    const { src, emit } = source();
    const ix = new PrefixIndex(16);
    ix.attach("a", 100, src);
    const end1 = ix.routed("a", [1, 2, 3])!;
    const end2 = ix.routed("a", [1, 2, 4])!;
    expect(ix.prefixBlocks("a", [1, 2, 3])).toBe(3); // queued there: will be stored at its admission
    emit({ type: "BlockStored", blockHashes: [1, 2, 3], parentBlockHash: null, blockSize: 16 }); // request 1 admitted
    emit({ type: "BlockRemoved", blockHashes: [3] }); // request 1 done, its tail evicted
    end1();
    end1(); // idempotent
    expect(ix.prefixBlocks("a", [1, 2, 3])).toBe(2);
    // Request 2 never reached the engine (it failed): once it ends, its block 4 is not indexed there.
    expect(ix.prefixBlocks("a", [1, 2, 4])).toBe(3);
    end2();
    expect(ix.prefixBlocks("a", [1, 2, 4])).toBe(2);
  });

  it("starts from the engine's snapshot; without events the history keeps what was routed", () => {
    const { src } = source([7, 8]);
    const ix = new PrefixIndex(16);
    ix.attach("a", 100, src);
    expect(ix.prefixBlocks("a", [7, 8, 9])).toBe(2);
    ix.attach("b", 100, undefined);
    expect(ix.routed("b", [5, 6])).toBeUndefined();
    expect(ix.prefixBlocks("b", [5, 6])).toBe(2);
  });
});

describe("PrefixIndex with a host KV tier (events with medium)", () => {
  it("counts a block either tier holds: a GPU eviction keeps it while the host tier has it, a CPU removal drops it", () => {
    const ls: KvEventListener[] = [];
    const src = { blockTokens: 16, subscribe: (l: KvEventListener) => (ls.push(l), () => ls.splice(ls.indexOf(l), 1)), snapshot: () => [1], hostSnapshot: () => [1, 2] };
    const emit = (ev: KvEvent) => ls.forEach((l) => l(ev));
    const ix = new PrefixIndex(16);
    ix.attach("a", 100, src);
    expect(ix.prefixBlocks("a", [1, 2, 3])).toBe(2); // 1 on GPU, 2 in host memory (snapshots)
    emit({ type: "BlockStored", blockHashes: [3], parentBlockHash: 2, blockSize: 16, medium: "GPU" });
    emit({ type: "BlockStored", blockHashes: [3], parentBlockHash: 2, blockSize: 16, medium: "CPU" });
    emit({ type: "BlockRemoved", blockHashes: [1, 3], medium: "GPU" }); // the GPU evicts: host copies remain
    expect(ix.prefixBlocks("a", [1, 2, 3])).toBe(3);
    expect(ix.size("a")).toBe(0);
    expect(ix.hostSize("a")).toBe(3);
    emit({ type: "BlockRemoved", blockHashes: [2], medium: "CPU" }); // the host tier's LRU drops 2
    expect(ix.prefixBlocks("a", [1, 2, 3])).toBe(1);
    emit({ type: "AllBlocksCleared" }); // every tier
    expect(ix.hostSize("a")).toBe(0);
    expect(ix.prefixBlocks("a", [1, 2, 3])).toBe(0);
  });
});

describe("Gateway with the prefix-aware policy", () => {
  it("sends a conversation's next turn to the instance holding its prefix, and its prefill there skips the cached part", async () => {
    const clock = new VirtualClock();
    const gw = new Gateway({ region: "r", clock, statsRefreshMs: 0, routing: { policy: PREFIX_AWARE_POLICY, blockTokens: 16 } });
    const engines = ["e0", "e1", "e2"].map((id) => new SimEngine({ instanceId: id, model: "llama3.2-3b", gpu: "h100-80gb", tp: 2, clock, events: "coalesced" }));
    for (const e of engines) gw.addInstance("h100-80gb", e);
    const turn1 = { model: "llama3.2-3b", messages: [{ role: "user", content: "q".repeat(8000) }] };
    const turn2 = { model: "llama3.2-3b", messages: [...turn1.messages, { role: "assistant", content: "a".repeat(400) }, { role: "user", content: "r".repeat(400) }] };
    const send = (id: string, body: Record<string, unknown>) =>
      new Promise<{ instance: string; ttftMs: number }>((resolve) => {
        const req: GenerateRequest = { id, model: "llama3.2-3b", kind: "chat", promptTokens: Math.ceil(JSON.stringify(body.messages).length / 4), maxTokens: 4, priority: 0, body };
        const at = clock.now();
        let ttft = 0;
        const choice = gw.submit(req, { onFirstToken: (t) => (ttft = t - at), onDone: () => resolve({ instance: choice!.instanceId, ttftMs: ttft }) });
        clock.runUntilIdleSync();
      });
    const first = await send("t1", turn1);
    const second = await send("t2", turn2);
    expect(second.instance).toBe(first.instance);
    const e = engines.find((x) => x.instanceId === first.instance)!;
    const s = e.stats();
    expect(s.prefixHitTokensTotal).toBeGreaterThanOrEqual(blockHashesOfBody("chat", turn1).length * 16 - 16);
    expect(second.ttftMs).toBeLessThan(first.ttftMs / 3);
    expect(gw.prefixIndex.followsEvents(first.instance)).toBe(true);
  });

  it("counts a request's load on an instance less the prompt tokens the index says it holds there", () => {
    // Stats read once (statsRefreshMs huge): from then on the load scorer sees only the in-flight estimate.
    const clock = new VirtualClock();
    const gw = new Gateway({ region: "r", clock, statsRefreshMs: 1e12, routing: { policy: PREFIX_AWARE_POLICY, blockTokens: 16 } });
    for (const id of ["e0", "e1"]) gw.addInstance("h100-80gb", new SimEngine({ instanceId: id, model: "llama3.2-3b", gpu: "h100-80gb", tp: 2, clock, events: "coalesced" }));
    const range = (from: number, n: number) => Array.from({ length: n }, (_, i) => from + i);
    const send = (id: string, promptTokens: number, blockHashes: number[]) => gw.submit({ id, model: "llama3.2-3b", kind: "completion", promptTokens, maxTokens: 4, priority: 0, body: {}, blockHashes }, {})!.instanceId;
    // A 1,600-token prefix (100 blocks) ends up on e0 (a tie goes to the first listed).
    expect(send("warm", 1600, range(0, 100))).toBe("e0");
    clock.runUntilIdleSync();
    // A: the prefix + 400 new tokens goes to its holder; it adds 400 + 4 there, not 2,000 + 4.
    expect(send("a", 2000, range(0, 125))).toBe("e0");
    // B: 1,000 unrelated tokens, to the idle e1 (1,004 there).
    expect(send("b", 1000, range(5000, 62))).toBe("e1");
    // C: unrelated: e0's 404 < e1's 1,004. Counting A's cached prefix as work (2,004) would send it to e1.
    expect(send("c", 500, range(9000, 31))).toBe("e0");
    clock.runUntilIdleSync();
  });

  it("tells a stream-only engine (openai-http) the prompt tokens its prefix is expected to hold: GenerateRequest.expectedCachedTokens", async () => {
    const gw = new Gateway({ region: "r", clock: new VirtualClock(), statsRefreshMs: 0, routing: { policy: PREFIX_AWARE_POLICY, blockTokens: 16 } });
    const engine = new FakeEngine({ instanceId: "f0", model: "llama3.2-3b", outputTokens: 1 });
    gw.addInstance("h100-80gb", engine);
    const range = (from: number, n: number) => Array.from({ length: n }, (_, i) => from + i);
    const run = async (id: string, promptTokens: number, blockHashes: number[]) => {
      for await (const _ of gw.generate({ id, model: "llama3.2-3b", kind: "completion", promptTokens, maxTokens: 1, priority: 0, body: {}, blockHashes })) void _;
    };
    await run("t1", 640, range(0, 40)); // nothing held yet: no hint
    await run("t2", 1000, range(0, 62)); // its first 40 blocks routed there before (routing history): 640 tokens
    expect(engine.requests.map((r) => r.expectedCachedTokens)).toEqual([undefined, 640]);
  });
});
