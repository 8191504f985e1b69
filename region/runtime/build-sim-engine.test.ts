import { describe, expect, it } from "vitest";
import { VirtualClock } from "../../core/clock.js";
import { engineSimFlags, newSimEngine } from "./build-sim-engine.js";
import { settingsAgentsDoNotPass } from "./agents-host.js";
import { DEFAULT_CONFIG_JSON, parseConfig } from "../../core/config.js";

describe("simulated engines' host KV tier (engines.hostKvCacheGiB)", () => {
  const inst = { instanceId: "i0", model: "llama3.2-3b", gpu: "h100-80gb", tp: 2 } as const;
  it("builds the tier from the setting (0: off), the engine's default without it, and passes it to engine-sim", () => {
    const clock = new VirtualClock();
    // 16 GiB over 114,688 B per token × 16 tokens per block (llama3.2-3b).
    expect(newSimEngine(inst, { timeScale: 1, hostKvCacheGiB: 16 }, clock).core.prefixCache!.hostCapacityBlocks).toBe(Math.floor((16 * 2 ** 30) / (114_688 * 16)));
    expect(newSimEngine(inst, { timeScale: 1, hostKvCacheGiB: 0 }, clock).core.prefixCache!.hostCapacityBlocks).toBe(0);
    expect(newSimEngine(inst, { timeScale: 1 }, clock).core.prefixCache!.hostCapacityBlocks).toBe(Math.floor((256 * 2 ** 30) / (114_688 * 16)));
    expect(newSimEngine(inst, { timeScale: 1, prefixBlockTokens: 0, hostKvCacheGiB: 16 }, clock).core.prefixCache).toBeUndefined();
    expect(engineSimFlags({ timeScale: 1, hostKvCacheGiB: 16 })).toEqual(expect.arrayContaining(["--host-kv-cache-gib", "16"]));
  });
});

describe("engines settings node agents do not carry (agents-host.ts settingsAgentsDoNotPass)", () => {
  const withEngines = (engines: Record<string, unknown>) => parseConfig({ ...(DEFAULT_CONFIG_JSON as Record<string, unknown>), engines: { ...((DEFAULT_CONFIG_JSON as { engines?: Record<string, unknown> }).engines ?? {}), ...engines } });
  it("names every set one that a StartEngine would drop, none on the defaults or for command-template engines", () => {
    expect(settingsAgentsDoNotPass(withEngines({}))).toEqual([]);
    expect(settingsAgentsDoNotPass(withEngines({ preemption: "swap", batchSlotsBeside: 4, hostKvCacheGiB: 0 }))).toEqual(["engines.preemption (swap)", "engines.batchSlotsBeside (4)", "engines.hostKvCacheGiB (0)"]);
    expect(settingsAgentsDoNotPass(withEngines({ hostKvCacheGiB: 0, commandTemplate: "vllm serve {model} --port {port}" }))).toEqual([]);
  });
});
