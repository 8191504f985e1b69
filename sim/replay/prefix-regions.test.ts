/**
 * Issue 34, "what it must show": a multi-region replay (virtual time, the replay wiring: the global router's
 * RouterCore, in-process links, each region's gateway and simulated engines) in which conversations start in one
 * region and continue from another. With prefix affinity (routing.regionPrefix) a continuing turn goes where its
 * conversation's KV is while that region is under the 0.70 threshold, and moves when the region crosses it.
 */
import { describe, expect, it } from "vitest";
import "../../region/config-sections.js";
import { VirtualClock } from "../../core/clock.js";
import { parseConfig } from "../../core/config.js";
import type { RegionName } from "../../core/models.js";
import type { GenerateRequest } from "../../core/ports.js";
import { buildReplayWiring } from "./replay-wiring.js";

const MODEL = "llama3.2-3b";

function config(regionPrefix: boolean) {
  return parseConfig({
    models: [{ name: MODEL, gpusPerInstance: { "h100-80gb": 2 } }],
    regions: [
      { name: "east", proximity: ["west"], gpus: [{ type: "h100-80gb", count: 2 }], endpoints: [{ model: MODEL, gpu: "h100-80gb", instances: 1 }] },
      { name: "west", proximity: ["east"], gpus: [{ type: "h100-80gb", count: 2 }], endpoints: [{ model: MODEL, gpu: "h100-80gb", instances: 1 }] },
    ],
    engines: { kvCapacityTokens: 20_000 },
    routing: { policy: "prefix-aware", regionPrefix },
  });
}

async function scenario(regionPrefix: boolean) {
  const clock = new VirtualClock();
  const w = buildReplayWiring(config(regionPrefix), clock, { events: "coalesced" });
  await clock.advanceBy(1500); // the first telemetry from both regions
  let n = 0;
  const send = async (client: RegionName, promptTokens: number, maxTokens: number, blockHashes?: number[]): Promise<{ region: RegionName | undefined; ttftMs: number }> => {
    const req: GenerateRequest = { id: `q${n++}`, model: MODEL, kind: "chat", promptTokens, maxTokens, priority: 0, body: {}, ...(blockHashes === undefined ? {} : { blockHashes }) };
    const at = clock.now();
    let ttftMs = Number.NaN;
    const region = w.router.submit(req, client, { onFirstToken: (t) => (ttftMs = t - at) });
    // A conversation turn runs to its end (and the next telemetry) before the next one; the fillers keep running.
    if (maxTokens <= 4) await clock.advanceBy(1500);
    return { region, ttftMs };
  };
  // One conversation: 1,000 prompt tokens a turn more (62 blocks, then 125, 187, 250).
  const blocks = (turn: number) => Array.from({ length: 62 * turn + Math.floor(turn / 2) }, (_, i) => 1000 + i);
  const turn1 = await send("east", 1000, 4, blocks(1));
  const turn2 = await send("west", 2000, 4, blocks(2));
  // East fills: two long requests from its own clients hold 14,000 of its 20,000 KV tokens and grow (> 0.70).
  await send("east", 7000, 2000);
  await send("east", 7000, 2000);
  await clock.advanceBy(1500);
  const eastUtil = w.selector.candidate("east", MODEL).utilization;
  const turn3 = await send("west", 3000, 4, blocks(3));
  const turn4 = await send("west", 4000, 4, blocks(4));
  const hits = Object.fromEntries([...w.gateways].map(([r, gw]) => [r, gw.prefixStats().reduce((a, s) => a + s.hitTokens, 0)]));
  await w.close();
  return { turn1, turn2, turn3, turn4, eastUtil, hits };
}

describe("prefix affinity across regions (replay, virtual time)", () => {
  it("keeps a conversation in the region holding its prefix until that region crosses 0.70, then moves it", async () => {
    const s = await scenario(true);
    expect(s.turn1.region).toBe("east");
    // Turn 2 comes from a west client: it stays in east, where turn 1's KV is (east is under 0.70).
    expect(s.turn2.region).toBe("east");
    expect(s.eastUtil).toBeGreaterThan(0.7);
    // East above the threshold: turn 3 moves to the client's own region, and turn 4 finds turn 3's KV there.
    expect(s.turn3.region).toBe("west");
    expect(s.turn4.region).toBe("west");
    // The cache hits where the turns stayed together: east (turn 2 on turn 1) and west (turn 4 on turn 3).
    expect(s.hits.east).toBeGreaterThanOrEqual(62 * 16);
    expect(s.hits.west).toBeGreaterThanOrEqual(187 * 16);
    expect(s.turn2.ttftMs).toBeLessThan(s.turn3.ttftMs);
  });

  it("without prefix affinity a continuing turn goes to its client's region (the 0.70 rule alone)", async () => {
    const s = await scenario(false);
    expect(s.turn1.region).toBe("east");
    expect(s.turn2.region).toBe("west");
    expect(s.hits.east).toBe(0);
  });
});
