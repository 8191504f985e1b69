/**
 * Prefill/decode disaggregation through the region gateway (pd.ts) with in-process simulated engines on a virtual
 * clock (engines/sim/kv-fabric.ts): what the replays and bench:pd run. The gateway's two steps are the live ones.
 */
import { describe, expect, it } from "vitest";
import { VirtualClock } from "../../core/clock.js";
import type { GenerateRequest } from "../../core/ports.js";
import { KvFabric, type KvFabricOptions } from "../../engines/sim/kv-fabric.js";
import { SimEngine } from "../../engines/sim/sim-engine.js";
import { Gateway } from "./gateway.js";
import { JSQ_POLICY } from "./scoring/plugins.js";
import { readOnClock } from "../../test/helpers/streams.js";

const MODEL = "llama3.1-8b";

function fleet(fabricOpts: Omit<KvFabricOptions, "clock"> = {}) {
  const clock = new VirtualClock();
  const fabric = new KvFabric({ clock, ...fabricOpts });
  const routed: string[] = [];
  const gw = new Gateway({ region: "r", clock, onRouted: (_req, id) => routed.push(id), routing: { policy: JSQ_POLICY, blockTokens: 16, pdMinPrefillTokens: 0 } });
  const engines = (["prefill", "decode", "decode"] as const).map((role, i) => new SimEngine({ instanceId: `${role}-${i}`, model: MODEL, gpu: "h100-80gb", tp: 2, clock, events: "coalesced", role, kvFabric: fabric }));
  for (const e of engines) gw.addInstance("h100-80gb", e);
  return { clock, fabric, gw, routed, engines };
}

/** Streams `req` through `gw` on the fleet's virtual clock. */
const stream = (clock: VirtualClock, gw: Gateway, req: GenerateRequest) => readOnClock(clock, gw.generate(req));

const request = (id: string): GenerateRequest => ({ id, model: MODEL, kind: "chat", promptTokens: 1000, maxTokens: 8, priority: 0, body: {}, blockHashes: [] });

describe("in-process prefill/decode through the gateway", () => {
  it("prefills on the prefill instance, moves the KV and streams from a decode instance", async () => {
    const { clock, fabric, gw, routed, engines } = fleet();
    const out = await stream(clock, gw, request("a"));
    expect(out.error).toBeUndefined();
    expect(routed).toEqual(["prefill-0", expect.stringMatching(/^decode-/)]);
    const tokens = out.events.reduce((s, e) => s + (e.type === "token" ? e.tokens : 0), 0);
    expect(tokens).toBe(8);
    expect(out.events.at(-1)?.type).toBe("done");
    // TTFT: the prompt's prefill, its KV over 2 × 100 Gbps (131 MB: 5.24 ms), one prompt token on the decode side.
    const profile = engines[0]!.core.profile;
    expect(out.firstAtMs).toBeCloseTo(profile.prefillMs(1000, 1) + 5.24288 + profile.prefillMs(1, 1), 6);
    expect(fabric.totals).toMatchObject({ pulls: 1, failed: 0, bytes: 131_072_000 });
    expect(fabric.heldCount()).toBe(0);
    await gw.close();
  });

  it("a pull that times out is tried on the other decode instance, then ends with a typed error", async () => {
    // 131 MB at 2 × 0.1 Gbps takes 5.2 s, past a 1 s pull timeout.
    const { clock, fabric, gw, routed } = fleet({ bitsPerSPerGpu: 1e8, pullTimeoutMs: 1000 });
    const out = await stream(clock, gw, request("b"));
    expect(out.events).toEqual([]);
    // The gateway's typed error after its attempts, the last pull's timeout as its cause.
    expect(out.error).toMatchObject({ code: "upstream_error", cause: { code: "timeout" } });
    expect(routed[0]).toBe("prefill-0");
    expect(new Set(routed.slice(1))).toEqual(new Set(["decode-1", "decode-2"]));
    expect(fabric.totals.failed).toBe(2);
    await gw.close();
  });
});
