import { describe, expect, it } from "vitest";
import { VirtualClock } from "../../core/clock.js";
import { TidegateError } from "../../core/errors.js";
import { silentLogger } from "../../core/log.js";
import type { Engine, PairSpec, PairStatus } from "../../core/ports.js";
import { LivePairs, agentsLayerwise, blocksForLayer, layersHeld } from "./live-pairs.js";
import { parseLoadingConfig } from "./liveload-config.js";

/** A serving engine's control that records what it is sent; `hold` keeps each call pending until released. */
class FakeControl {
  readonly calls: ({ update: PairSpec } | { end: string })[] = [];
  fail = false;
  hold = false;
  private pending: (() => void)[] = [];
  private readonly status: PairStatus = { totals: { pairs: 0, updates: 0, episodes: 0, zigzagEpisodes: 0, expired: 0 } };
  update = (s: PairSpec): Promise<PairStatus> => this.answer({ update: s });
  end = (peer: string): Promise<PairStatus> => this.answer({ end: peer });
  release(): void {
    const p = this.pending;
    this.pending = [];
    for (const f of p) f();
  }
  private answer(call: { update: PairSpec } | { end: string }): Promise<PairStatus> {
    this.calls.push(call);
    if (this.fail) return Promise.reject(new TidegateError("not_found", "no control here"));
    if (!this.hold) return Promise.resolve(this.status);
    return new Promise((r) => this.pending.push(() => r(this.status)));
  }
  updates(): PairSpec[] {
    return this.calls.flatMap((c) => ("update" in c ? [c.update] : []));
  }
}

const flush = () => new Promise((r) => setImmediate(r));

function setup(inFlight: number[]) {
  const clock = new VirtualClock(0);
  const controls = inFlight.map(() => new FakeControl());
  const serving = inFlight.map((n, i) => ({ instanceId: `s${i}`, engine: { instanceId: `s${i}`, layerwise: controls[i] } as unknown as Engine, inFlight: n }));
  const pairs = new LivePairs({ clock, log: silentLogger, scheduler: "best-effort", serving: () => serving, hopMsPerToken: () => 0.001, ttlMs: 9000 });
  return { clock, controls, pairs, serving };
}

describe("LivePairs: the region pairs loading instances with serving engines as blocks arrive (issue 12 item 5)", () => {
  it("maps blocks to layers: a layer runs once every block holding part of it is here", () => {
    // 16 blocks for 32 layers: each block holds two layers
    expect([0, 1, 2, 15, 16].map((p) => layersHeld(p, 16, 32))).toEqual([0, 2, 4, 30, 32]);
    expect([0, 1, 2, 31].map((k) => blocksForLayer(k, 16, 32))).toEqual([1, 1, 2, 16]);
    // 64 blocks for 32 layers: each layer spans two blocks
    expect([1, 2, 3, 64].map((p) => layersHeld(p, 64, 32))).toEqual([0, 1, 1, 32]);
    expect([0, 1, 31].map((k) => blocksForLayer(k, 64, 32))).toEqual([2, 4, 64]);
    // 10 blocks for 32 layers (uneven)
    expect(layersHeld(3, 10, 32)).toBe(9);
    expect(blocksForLayer(9, 10, 32)).toBe(4);
  });

  it("pairs with the busiest serving engine not already paired; a third loading instance finds none", async () => {
    const { controls, pairs } = setup([2, 7]);
    pairs.begin("t1", "llama3.1-8b", "h100-80gb", 16, 1600);
    pairs.begin("t2", "llama3.1-8b", "h100-80gb", 16, 1600);
    pairs.begin("t3", "llama3.1-8b", "h100-80gb", 16, 1600);
    await flush();
    expect(pairs.active().map((a) => [a.target, a.source])).toEqual([["t1", "s1"], ["t2", "s0"]]);
    expect(pairs.counters).toMatchObject({ pairs: 2, unpaired: 1 });
    // the first update: nothing here yet, each layer expected at the ideal rate (1600 ms / 16 blocks, two layers a block)
    const first = controls[1]!.updates()[0]!;
    expect(first).toMatchObject({ peer: "t1", scheduler: "best-effort", layers: 32, arrivedLayers: 0, hopMsPerToken: 0.001, ttlMs: 9000 });
    expect(first.expectedInMs.slice(0, 4)).toEqual([100, 100, 200, 200]);
    expect(first.expectedInMs[31]).toBe(1600);
  });

  it("updates as the prefix of blocks grows, at the measured rate; the last block ends the pairing with no DELETE", async () => {
    const { clock, controls, pairs } = setup([1]);
    const c = controls[0]!;
    pairs.begin("t", "llama3.1-8b", "h100-80gb", 16, 1600);
    await flush();
    clock.advanceToSync(100);
    pairs.block("t", 1); // out of order: block 0 still missing, no layer yet
    await flush();
    expect(c.updates()).toHaveLength(1);
    pairs.block("t", 0); // blocks 0–1 here: layers 0–3, 50 ms a block so far
    await flush();
    const u = c.updates()[1]!;
    expect(u.arrivedLayers).toBe(4);
    expect(u.expectedInMs.slice(0, 3)).toEqual([50, 50, 100]);
    for (let b = 2; b < 16; b++) {
      pairs.block("t", b);
      await flush();
    }
    expect(c.updates().at(-1)!.arrivedLayers).toBe(32);
    expect(c.updates()).toHaveLength(16);
    expect(pairs.active()).toEqual([]);
    pairs.end("t"); // it serves: already ended on the engine
    await flush();
    expect(c.calls.some((x) => "end" in x)).toBe(false);
  });

  it("one update in flight at a time (the newest state follows); an end waits for it, then DELETEs", async () => {
    const { controls, pairs } = setup([1]);
    const c = controls[0]!;
    c.hold = true;
    pairs.begin("t", "llama3.1-8b", "h100-80gb", 16, 1600);
    pairs.block("t", 0);
    pairs.block("t", 1);
    expect(c.calls).toHaveLength(1); // the first is pending: the two layer changes wait
    c.release();
    await flush();
    expect(c.updates().map((s) => s.arrivedLayers)).toEqual([0, 4]);
    pairs.end("t"); // the second update is still pending
    expect(c.calls).toHaveLength(2);
    c.release();
    await flush();
    expect(c.calls.at(-1)).toEqual({ end: "t" });
    c.release();
  });

  it("an engine that refuses leaves the instance to load stop-the-world: no further calls", async () => {
    const { controls, pairs } = setup([1]);
    const c = controls[0]!;
    c.fail = true;
    pairs.begin("t", "llama3.1-8b", "h100-80gb", 16, 1600);
    await flush();
    pairs.block("t", 0);
    pairs.end("t");
    await flush();
    expect(c.calls).toHaveLength(1);
    expect(pairs.counters).toMatchObject({ pairs: 1, failed: 1 });
    expect(pairs.active()).toEqual([]);
  });

  it("agentsLayerwise: none for stop-the-world, the scheduler and the RDMA hop for blitzscale, an error for real engines", () => {
    expect(agentsLayerwise("r", undefined)).toBeUndefined();
    expect(agentsLayerwise("r", parseLoadingConfig({ source: "network" }, "x"))).toBeUndefined();
    const z = agentsLayerwise("r", parseLoadingConfig({ source: "blitzscale", bandwidthsGbps: { rdma: 200 } }, "x"))!;
    expect(z.scheduler).toBe("zigzag");
    // llama3.1-8b: hidden size 4096 × 2 bytes over 200 Gbps (25 GB/s) = 0.32768 µs a token
    expect(z.hopMsPerToken("llama3.1-8b")).toBeCloseTo((4096 * 2) / 25e9 * 1000, 12);
    expect(() => agentsLayerwise("r", parseLoadingConfig({ source: "blitzscale" }, "x"), "vllm serve {model} --port {port}")).toThrow(/^region r: loading blitzscale\/zigzag pairs loading instances with serving engine-sim engines; engines.commandTemplate/);
    expect(agentsLayerwise("r", parseLoadingConfig({ source: "network" }, "x"), "vllm serve {model} --port {port}")).toBeUndefined();
  });

  it("a source that stops serving is let go (its pairing ended) and the loading instance pairs with another, keeping the blocks already here", async () => {
    const { controls, pairs, serving } = setup([5, 1]);
    pairs.begin("t", "llama3.1-8b", "h100-80gb", 16, 1600);
    await flush();
    pairs.block("t", 0);
    await flush();
    expect(pairs.active()).toEqual([{ target: "t", source: "s0", layersHeld: 2, layers: 32 }]);
    serving.shift(); // s0 drains
    pairs.block("t", 1);
    await flush();
    expect(controls[0]!.calls.at(-1)).toEqual({ end: "t" });
    expect(pairs.active()).toEqual([{ target: "t", source: "s1", layersHeld: 4, layers: 32 }]);
    expect(controls[1]!.updates()[0]).toMatchObject({ peer: "t", arrivedLayers: 4 });
    expect(pairs.counters.pairs).toBe(2);
  });
});
