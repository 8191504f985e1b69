import { describe, expect, it } from "vitest";
import { VirtualClock } from "../../core/clock.js";
import { engineSimFlags, newSimEngine } from "./build-sim-engine.js";

describe("simulated engines' host KV tier (engines.hostKvCacheGiB)", () => {
  const inst = { instanceId: "i0", model: "llama3.2-3b", gpu: "h100-80gb", tp: 2 } as const;
  it("builds the tier from the setting (0: off), the engine's default without it, and passes it to engine-sim", () => {
    const clock = new VirtualClock();
    // 16 GiB over 114,688 B per token × 16 tokens per block (llama3.2-3b).
    expect(newSimEngine(inst, { timeScale: 1, settings: { hostKvCacheGiB: 16 } }, clock).core.prefixCache!.hostCapacityBlocks).toBe(Math.floor((16 * 2 ** 30) / (114_688 * 16)));
    expect(newSimEngine(inst, { timeScale: 1, settings: { hostKvCacheGiB: 0 } }, clock).core.prefixCache!.hostCapacityBlocks).toBe(0);
    expect(newSimEngine(inst, { timeScale: 1 }, clock).core.prefixCache!.hostCapacityBlocks).toBe(Math.floor((256 * 2 ** 30) / (114_688 * 16)));
    expect(newSimEngine(inst, { timeScale: 1, settings: { prefixBlockTokens: 0, hostKvCacheGiB: 16 } }, clock).core.prefixCache).toBeUndefined();
    expect(engineSimFlags({ timeScale: 1, settings: { hostKvCacheGiB: 16 } })).toEqual(["--time-scale", "1", "--settings", '{"hostKvCacheGiB":16}']);
  });
});
