import { beforeAll, describe, expect, it } from "vitest";
import { VirtualClock } from "../../../core/clock.js";
import { isTidegateError } from "../../../core/errors.js";
import { HighsSolver } from "../../../core/solver.js";
import { SimEngine } from "../sim-engine.js";
import type { PairSpec } from "../../../core/ports.js";
import { parsePairSpec } from "./layerwise-host.js";

const MODEL = "llama3.1-8b";

function engine(clock: VirtualClock, id = "src"): SimEngine {
  return new SimEngine({ instanceId: id, model: MODEL, gpu: "h100-80gb", tp: 2, clock, solver: () => HighsSolver.create() });
}

const spec = (over: Partial<PairSpec> = {}): PairSpec => {
  const layers = over.layers ?? 32;
  const arrivedLayers = over.arrivedLayers ?? 16;
  return { peer: "new-1", scheduler: "best-effort", layers, arrivedLayers, expectedInMs: Array.from({ length: layers - arrivedLayers }, () => 60_000), hopMsPerToken: 0, ttlMs: 120_000, ...over };
};

/** Submits `n` equal prompts at the clock's now; returns each request's first-token time as it comes. */
function burst(e: SimEngine, n: number): number[] {
  const first: number[] = [];
  for (let i = 0; i < n; i++) e.submit({ id: `${e.instanceId}-${i}`, model: MODEL, kind: "completion", promptTokens: 2000, maxTokens: 4, priority: 0, body: {} }, { onFirstToken: (t) => first.push(t), onDone: () => undefined });
  return first;
}

describe("LayerwiseHost: a serving engine's side of a live pairing (issue 12 item 5)", () => {
  beforeAll(async () => {
    await HighsSolver.create(); // load the wasm once, outside the timed cases
  });

  it("a paired engine's queued prompts get their first tokens sooner; an update with every layer ends the pairing", async () => {
    const clock = new VirtualClock(0);
    const alone = engine(clock, "alone");
    const paired = engine(clock, "paired");
    const s = await paired.layerwise.update(spec());
    expect(s.current).toMatchObject({ peer: "new-1", layers: 32, arrivedLayers: 16, updates: 1, episodes: 0 });
    expect(paired.core.paired).toBe(true);
    const a = burst(alone, 16);
    const p = burst(paired, 16);
    clock.advanceToSync(30_000);
    expect(a).toHaveLength(16);
    expect(p).toHaveLength(16);
    // Half the layers on the peer: the prefill batches pipeline across the two instances.
    expect(Math.max(...p)).toBeLessThan(Math.max(...a) * 0.8);
    const mid = paired.layerwise.status();
    expect(mid.current!.episodes).toBeGreaterThan(0);
    const end = await paired.layerwise.update(spec({ arrivedLayers: 32 }));
    expect(end.current).toBeUndefined();
    expect(end.ended).toMatchObject({ peer: "new-1", why: "loaded", updates: 2, episodes: mid.current!.episodes });
    expect(end.totals).toMatchObject({ pairs: 1, updates: 2, episodes: mid.current!.episodes, expired: 0 });
    expect(paired.core.paired).toBe(false);
  });

  it("updates move layers in; the pairing expires ttlMs after the last update (a region that went away)", async () => {
    const clock = new VirtualClock(0);
    const e = engine(clock);
    await e.layerwise.update(spec({ arrivedLayers: 0, ttlMs: 1000 }));
    clock.advanceToSync(800);
    const s = await e.layerwise.update(spec({ arrivedLayers: 8, ttlMs: 1000 }));
    expect(s.current).toMatchObject({ arrivedLayers: 8, updates: 2 });
    clock.advanceToSync(1700); // 900 ms after the second update: still paired
    expect(e.core.paired).toBe(true);
    clock.advanceToSync(1801);
    const after = e.layerwise.status();
    expect(after.current).toBeUndefined();
    expect(after.ended?.why).toBe("expired: no update for 1000 ms");
    expect(after.totals.expired).toBe(1);
    expect(e.core.paired).toBe(false);
  });

  it("one peer at a time; an update cannot change the layer count or scheduler; ending an unknown peer is not_found", async () => {
    const clock = new VirtualClock(0);
    const e = engine(clock);
    await e.layerwise.update(spec());
    await expect(e.layerwise.update(spec({ peer: "new-2" }))).rejects.toSatisfy((x: unknown) => isTidegateError(x, "conflict"));
    await expect(e.layerwise.update(spec({ layers: 40, arrivedLayers: 16 }))).rejects.toThrow(/cannot change them/);
    await expect(e.layerwise.end("new-2")).rejects.toSatisfy((x: unknown) => isTidegateError(x, "not_found"));
    const s = await e.layerwise.end("new-1");
    expect(s.ended?.why).toBe("ended by the region");
    expect(e.core.paired).toBe(false);
    // now another peer may pair
    expect((await e.layerwise.update(spec({ peer: "new-2" }))).current?.peer).toBe("new-2");
    // a closing engine ends its pairing and takes no other
    await e.close();
    expect(e.layerwise.status().ended?.why).toBe("engine closed");
    await expect(e.layerwise.update(spec({ peer: "new-3" }))).rejects.toThrow(/closing/);
  });

  it("zigzag pairs through HiGHS; an engine without a solver refuses zigzag and still takes best-effort", async () => {
    const clock = new VirtualClock(0);
    const z = engine(clock);
    await z.layerwise.update(spec({ scheduler: "zigzag" }));
    burst(z, 16);
    clock.advanceToSync(30_000);
    expect(z.layerwise.status().current!.episodes).toBeGreaterThan(0);
    const bare = new SimEngine({ instanceId: "bare", model: MODEL, gpu: "h100-80gb", tp: 2, clock });
    await expect(bare.layerwise.update(spec({ scheduler: "zigzag" }))).rejects.toThrow(/no solver for zigzag/);
    expect((await bare.layerwise.update(spec())).current?.scheduler).toBe("best-effort");
  });

  it("parsePairSpec names the field at fault", () => {
    const ok = spec();
    expect(parsePairSpec(JSON.parse(JSON.stringify(ok)))).toEqual(ok);
    const bad = (v: unknown) => {
      try {
        parsePairSpec(v);
      } catch (e) {
        expect(isTidegateError(e, "invalid_request")).toBe(true);
        return (e as Error).message;
      }
      return "accepted";
    };
    expect(bad({ ...ok, expectedInMs: [1, 2] })).toMatch(/^expectedInMs: has 2 entries; the 16 layers not yet arrived need one each/);
    expect(bad({ ...ok, scheduler: "lambda-pipelines" })).toMatch(/^scheduler: /);
    expect(bad({ ...ok, arrivedLayers: 33 })).toMatch(/^arrivedLayers: /);
    expect(bad({ ...ok, expectedInMs: [...ok.expectedInMs.slice(1), 1] })).toMatch(/non-decreasing/);
    expect(bad({ ...ok, expectedInMs: ok.expectedInMs.map((_, i) => (i === 3 ? -1 : 60_000)) })).toMatch(/^expectedInMs\[3\]: expected a finite number ≥ 0/);
    expect(bad({ ...ok, extra: 1 })).toMatch(/extra/);
    expect(bad([])).toMatch(/expected an object/);
  });
});
