import { describe, expect, it } from "vitest";
import { VirtualClock } from "../../core/clock.js";
import { findTidegateError } from "../../core/errors.js";
import type { GenerateRequest } from "../../core/ports.js";
import { FakeEngine } from "../../test/helpers/fake-engine.js";
import { collect } from "../../test/helpers/streams.js";
import { ColdHold } from "./cold-hold.js";
import { Gateway, HELD } from "./gateway.js";

const MODEL = "llama3.1-8b";
let nextId = 0;
const request = (over: Partial<GenerateRequest> = {}): GenerateRequest => ({ id: `c-${nextId++}`, model: MODEL, kind: "chat", promptTokens: 10, maxTokens: 3, priority: 0, body: {}, ...over });

function world(holdMs = 10_000, maxHeld = 2) {
  const clock = new VirtualClock();
  const ttfts: number[] = [];
  const refused: string[] = [];
  const hold = new ColdHold({ region: "r", clock, holdMs, maxHeld, onColdTtft: (_m, ms) => ttfts.push(ms), onRefused: (_m, why) => refused.push(why) });
  const gw = new Gateway({ region: "r", clock, statsRefreshMs: 0, coldHold: hold, coldModels: new Set([MODEL]) });
  gw.addEndpoint(MODEL, "h100-80gb");
  return { clock, hold, gw, ttfts, refused };
}

/** Lets pending promise callbacks run (the hold resolves through promises). */
const settle = async () => {
  for (let k = 0; k < 200; k++) await Promise.resolve();
};

describe("ColdHold in the gateway", () => {
  it("holds a stream for a model with no serving instance and streams it once one serves; TTFT counts the wait", async () => {
    const w = world();
    const done = collect(w.gw.generate(request()));
    await settle();
    expect(w.hold.held(MODEL)).toBe(1);
    expect(w.hold.idleForMs(MODEL)).toBe(0);
    await w.clock.advanceTo(2500);
    w.gw.addInstance("h100-80gb", new FakeEngine({ instanceId: "i1", model: MODEL }));
    const events = await done;
    expect(events.filter((e) => e.type === "token")).toHaveLength(3);
    expect(events.at(-1)?.type).toBe("done");
    expect(w.hold.held(MODEL)).toBe(0);
    expect(w.ttfts).toEqual([2500]);
    await w.clock.advanceTo(4000);
    expect(w.hold.idleForMs(MODEL)).toBe(1500);
    // Served while warm: not a cold start.
    await collect(w.gw.generate(request()));
    expect(w.ttfts).toEqual([2500]);
  });

  it("refuses beyond maxHeld at once and after holdMs with model_cold (503), and lets a cancelled waiter go", async () => {
    const w = world(10_000, 2);
    const a = collect(w.gw.generate(request())).catch((e: unknown) => e);
    const ctl = new AbortController();
    const b = collect(w.gw.generate(request(), ctl.signal)).catch((e: unknown) => e);
    await settle();
    const c = await collect(w.gw.generate(request())).catch((e: unknown) => e);
    expect(findTidegateError(c, "model_cold")?.status).toBe(503);
    ctl.abort();
    expect(findTidegateError(await b, "cancelled")).toBeDefined();
    expect(w.hold.held(MODEL)).toBe(1);
    await w.clock.advanceTo(10_000);
    expect(findTidegateError(await a, "model_cold")?.message).toMatch(/within 10000 ms/);
    expect(w.refused).toEqual(["full", "timeout"]);
    expect(w.hold.held(MODEL)).toBe(0);
    // Both refusals count as unserved against the SLO.
    expect(w.gw.sloSummaries()[0]!.unserved).toBe(2);
  });

  it("refuses every held request of a model at once with the region's reason (refuse), and a noted reason names a timeout's cause", async () => {
    const w = world(10_000, 4);
    const a = collect(w.gw.generate(request())).catch((e: unknown) => e);
    const b = collect(w.gw.generate(request())).catch((e: unknown) => e);
    await settle();
    expect(w.hold.refuse(MODEL, { code: "no_capacity", detail: "llama3.1-8b/h100-80gb: no free GPU for an instance" })).toBe(2);
    for (const err of [await a, await b]) {
      const te = findTidegateError(err, "no_capacity");
      expect(te?.status).toBe(503);
      expect(te?.message).toBe("model llama3.1-8b cannot start from zero in region r: llama3.1-8b/h100-80gb: no free GPU for an instance");
    }
    expect(w.refused).toEqual(["no_capacity", "no_capacity"]);
    expect(w.hold.held(MODEL)).toBe(0);
    expect(w.hold.refuse(MODEL, { code: "no_capacity", detail: "x" })).toBe(0);
    // A hold that runs out while the region knows why keeps model_cold and says why.
    const c = collect(w.gw.generate(request())).catch((e: unknown) => e);
    await settle();
    w.hold.note(MODEL, { code: "cold_start_failed", detail: "its engine exited" });
    await w.clock.advanceTo(10_000);
    expect(findTidegateError(await c, "model_cold")?.message).toMatch(/within 10000 ms \(controller\.scaleToZero\.holdMs\): its engine exited$/);
    // Released waiters forget the reason.
    w.hold.note(MODEL, { code: "not_placed", detail: "nowhere" });
    const d = collect(w.gw.generate(request()));
    await settle();
    w.gw.addInstance("h100-80gb", new FakeEngine({ instanceId: "i1", model: MODEL }));
    expect((await d).at(-1)?.type).toBe("done");
    w.gw.setInstanceState("i1", "draining");
    const e = collect(w.gw.generate(request())).catch((x: unknown) => x);
    await settle();
    await w.clock.advanceTo(20_000);
    expect(findTidegateError(await e, "model_cold")?.message).toMatch(/still under way or blocked/);
  });

  it("holds a callback-form request and submits it when an instance serves; refuses it after holdMs", async () => {
    const w = world(5000, 4);
    const seen: string[] = [];
    const cb = (tag: string) => ({ onFirstToken: (at: number) => seen.push(`${tag} first ${at}`), onDone: (at: number) => seen.push(`${tag} done ${at}`), onError: (at: number, err: unknown) => seen.push(`${tag} ${findTidegateError(err)?.code} ${at}`) });
    expect(w.gw.submit(request(), cb("a"))).toBe(HELD);
    await w.clock.advanceTo(1000);
    w.gw.addInstance("h100-80gb", new FakeEngine({ instanceId: "i1", model: MODEL }));
    await settle();
    expect(seen[0]).toBe("a first 1000");
    expect(seen[1]).toBe("a done 1000");
    w.gw.setInstanceState("i1", "draining");
    expect(w.gw.submit(request(), cb("b"))).toBe(HELD);
    await w.clock.advanceTo(6000);
    expect(seen[2]).toBe("b model_cold 6000");
  });
});
