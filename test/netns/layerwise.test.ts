// Serve while loading across real processes (issue 12 item 5): `tidegate region` (agents mode, loading blitzscale
// with best-effort) in the root namespace, two `tidegate agent`s in their own namespaces behind tbf-shaped links, the
// engines real `tidegate engine-sim` processes. Targets 1 → 2 while the serving engine has a queue: the region pairs
// the loading instance with it and updates the pairing at every layer the data plane reports arriving across the
// shaped link; the serving engine plans loading episodes with the same LoadingPair as replay; the pairing ends when
// the last layer lands, and the new instance serves.
import { describe, expect, it } from "vitest";
import type { PairStatus } from "../../core/ports.js";
import { netnsClusterSuite } from "./cluster.js";
import { netnsUnavailable } from "./topology.js";

const MODEL = "llama3.1-8b";
const GPU = "h100-80gb";
const RATE_MBIT = 100;
const BYTES = 40 * 1024 * 1024;
const BLOCKS = 32;
const why = netnsUnavailable();

describe.skipIf(why !== undefined)(`serve while loading across network namespaces (tbf ${RATE_MBIT} Mbit/s links)${why === undefined ? "" : ` — skipped: ${why}`}`, () => {
  const cluster = netnsClusterSuite({
    name: "layerwise",
    rates: [RATE_MBIT, RATE_MBIT],
    model: MODEL,
    gpu: GPU,
    tp: 2,
    max: 2,
    extra: {
      controller: { strategy: "lt-i", reconcileIntervalMs: 100, agentLostAfterMs: 5000, loading: { source: "blitzscale", scheduler: "best-effort" } },
      engines: { startTimeoutMs: 30_000, timeScale: 1 },
      parameters: { stallMs: 3000, blockCount: BLOCKS, models: { [MODEL]: { bytes: BYTES, seed: 5 } } },
    },
  });

  it("1 → 2: the loading instance pairs with the serving engine, updated layer by layer as blocks cross the shaped link; episodes are planned; the new instance serves", async () => {
    const cl = cluster();
    const source = (await cl.listing()).instances.find((i) => i.model === MODEL && i.state === "serving")!;
    // ~3,000 prompt tokens, each request's its own (a number first: engine-sim's prefix cache would otherwise prefill
    // one repeated prompt once): prefill batches queue at the source
    const prompt = "tok ".repeat(3000);
    let stop = false;
    let sent = 0;
    let ok = 0;
    // A bounded load on the serving engine: waves of 12 concurrent requests until the new instance serves (≤ 60 waves).
    const load = (async () => {
      for (let wave = 0; wave < 60 && !stop; wave++) {
        const rs = await Promise.all(
          Array.from({ length: 12 }, () => {
            sent++;
            const own = `request ${sent}: ${prompt}`;
            return fetch(new URL("/v1/completions", source.url), { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ model: MODEL, prompt: own, max_tokens: 8 }) }).then(
              async (r) => {
                await r.arrayBuffer();
                return r.status;
              },
              () => 0,
            );
          }),
        );
        ok += rs.filter((s) => s === 200).length;
      }
    })();
    await new Promise((r) => setTimeout(r, 500));
    await cl.target(MODEL, GPU, 2);
    const l = await cl.serving(MODEL, 2, 120_000);
    stop = true;
    await load;
    expect(ok).toBe(sent);
    const target = l.instances.find((i) => i.model === MODEL && i.state === "serving" && i.id !== source.id)!;
    const t = cl.logLines<{ model: string; completed: string[]; elapsedMs: number }>("transfer finished").filter((x) => x.model === MODEL && x.completed.length === 1);
    expect(t).toHaveLength(1);
    // 40 MiB over a 100 Mbit/s link: ≥ 3 s of blocks arriving one by one
    expect(t[0]!.elapsedMs).toBeGreaterThan(((BYTES * 8) / (RATE_MBIT * 1e6)) * 1000 * 0.9);
    const paired = cl.logLines<{ instanceId: string; source: string; scheduler: string; layers: number; blocks: number }>("pairing a loading instance with a serving one (serve while loading)");
    expect(paired).toEqual([expect.objectContaining({ instanceId: target.id, source: source.id, scheduler: "best-effort", layers: 32, blocks: BLOCKS })]);
    const status = (await (await fetch(new URL("/tidegate/layerwise", source.url))).json()) as PairStatus;
    expect(status.current).toBeUndefined();
    expect(status.totals.pairs).toBe(1);
    // one update to start, one per block (32 blocks for 32 layers), possibly coalesced while one is in flight
    expect(status.ended).toMatchObject({ peer: target.id, why: "loaded" });
    expect(status.ended!.updates).toBeGreaterThanOrEqual(8);
    expect(status.ended!.episodes).toBeGreaterThan(0);
    const ended = cl.logLines<{ instanceId: string; why: string; episodes: number }>("serve-while-loading pairing ended");
    expect(ended).toEqual([expect.objectContaining({ instanceId: target.id, why: "every layer arrived", episodes: status.ended!.episodes })]);
    const res = await fetch(new URL("/v1/completions", target.url), { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ model: MODEL, prompt: "hi", max_tokens: 3 }) });
    expect(res.status).toBe(200);
  }, 240_000);
});
