import { describe, expect, it } from "vitest";
import { VirtualClock } from "../../../core/clock.js";
import { getProfile } from "../../../core/perf/model.js";
import { SimEngineCore } from "../core.js";
import { newSimEngine } from "../../../region/runtime/build-sim-engine.js";
import { behindBlocksEndMs } from "./behind-blocks.js";

describe("a pass behind the arriving blocks (BlitzScale §5.2 steps (1)–(2), S_i = 0)", () => {
  it("hand-checked: t_k = max(t_{k−1}, a_k) + C/n", () => {
    // C = 100 over 4 blocks (25 each), blocks every 50 ms: 50+25, 100+25, 150+25, 200+25 → the last block + one block's compute
    expect(behindBlocksEndMs(0, 100, [50, 100, 150, 200])).toBe(225);
    // compute-bound (blocks every 10 ms, 100 ms per block): the transfer is hidden, s + C
    expect(behindBlocksEndMs(0, 400, [0, 10, 20, 30])).toBe(400);
    // a gap: 0+50, 50+50, then block 3 at 300: 350, 400
    expect(behindBlocksEndMs(0, 200, [0, 0, 300, 300])).toBe(400);
    // every block here before the pass: s + C, as if loaded
    expect(behindBlocksEndMs(1000, 80, [0, 500, 900])).toBeCloseTo(1080, 9);
    expect(behindBlocksEndMs(7, 30, [])).toBe(37);
    // a block not known to arrive yet: no end yet
    expect(behindBlocksEndMs(0, 100, [0, Number.POSITIVE_INFINITY])).toBe(Number.POSITIVE_INFINITY);
  });

  it("the engine core's first token: max(load, prefill) + one block's compute, not load + prefill", () => {
    const clock = new VirtualClock();
    const profile = getProfile("llama3.1-8b", "h100-80gb", 2);
    const core = new SimEngineCore({ profile, clock });
    const P = profile.prefillMs(2000, 1);
    const arrivals = [200, 400, 600, 800];
    expect(P / 4).toBeLessThan(200); // so the last block binds
    core.setBlockArrivals(arrivals);
    expect(core.behindBlocks).toBe(true);
    let first = -1;
    core.submit({ id: "a", promptTokens: 2000, maxTokens: 3, priority: 0 }, { onFirstToken: (t) => (first = t) });
    clock.runUntilIdleSync();
    expect(first).toBeCloseTo(800 + P / 4, 9);
    expect(first).toBeLessThan(800 + P);
    expect(core.behindBlocks).toBe(false);
  });

  it("live: arrivals learnt as they happen end the pass that waits for them", () => {
    const clock = new VirtualClock();
    const profile = getProfile("llama3.1-8b", "h100-80gb", 2);
    const core = new SimEngineCore({ profile, clock });
    const P = profile.prefillMs(1000, 1);
    const inf = Number.POSITIVE_INFINITY;
    core.setBlockArrivals([0, inf, inf, inf]);
    let first = -1;
    core.submit({ id: "a", promptTokens: 1000, maxTokens: 2, priority: 0 }, { onFirstToken: (t) => (first = t) });
    clock.advanceToSync(300);
    expect(first).toBe(-1);
    // blocks 1–3 reported at 300: P/4 (block 0 at 0), then from 300 three blocks' compute
    core.setBlockArrivals([0, 300, 300, 300]);
    clock.runUntilIdleSync();
    expect(first).toBeCloseTo(300 + (3 * P) / 4, 9);
  });

  it("a stream behind a block not known yet waits (no next-token time) and gets its first token once the block is", async () => {
    const clock = new VirtualClock();
    const engine = newSimEngine({ instanceId: "i", model: "llama3.1-8b", gpu: "h100-80gb", tp: 2 }, { timeScale: 1 }, clock);
    const inf = Number.POSITIVE_INFINITY;
    engine.setBlockArrivals([0, inf]);
    const events: string[] = [];
    const run = (async () => {
      for await (const ev of engine.generate({ id: "g", model: "llama3.1-8b", kind: "completion", promptTokens: 100, maxTokens: 2, priority: 0, body: {} })) events.push(`${ev.type}@${clock.now()}`);
    })();
    await clock.advanceTo(500);
    expect(events).toEqual([]);
    engine.setBlockArrivals([0, 500]);
    await clock.advanceTo(2000);
    await run;
    expect(events[0]!.startsWith("token@")).toBe(true);
    expect(Number(events[0]!.split("@")[1])).toBeGreaterThan(500);
    expect(events[events.length - 1]!.startsWith("done@")).toBe(true);
  });
});
