import { describe, expect, it } from "vitest";
import { VirtualClock } from "../../core/clock.js";
import { TidegateError } from "../../core/errors.js";
import { EmbeddedQueueStore } from "../queue/embedded.js";
import { QueueCode, requestId, type CompleteItem, type QueueStore } from "../queue/types.js";
import { ResultWriter } from "./result-writer.js";

async function storeWith(n: number): Promise<{ store: EmbeddedQueueStore; calls: CompleteItem[][] }> {
  const store = new EmbeddedQueueStore(null);
  await store.createBatch({ id: "b", endpoint: "/v1/completions", inputFileId: "f", completionWindow: "24h", metadata: null, createdAtMs: 0, expiresAtMs: 1e9 });
  await store.stage("b", Array.from({ length: n }, (_, i) => ({ index: i, payload: "p" })));
  await store.activate("b", "m", n, 0);
  await store.claim("m", n, 0, 1e6);
  const calls: CompleteItem[][] = [];
  const inner = store.completeMany.bind(store);
  store.completeMany = async (items, nowMs) => {
    calls.push([...items]);
    return inner(items, nowMs);
  };
  return { store, calls };
}

describe("ResultWriter", () => {
  it("groups results within lingerMs into one store call and resolves each with its own code", async () => {
    const clock = new VirtualClock();
    const { store, calls } = await storeWith(3);
    const w = new ResultWriter({ store, clock, lingerMs: 5 });
    const a = w.write(requestId("b", 0), { ok: true, line: "a" });
    const dup = w.write(requestId("b", 0), { ok: true, line: "again" });
    await clock.advanceBy(4);
    expect(calls).toHaveLength(0);
    const b = w.write(requestId("b", 1), { ok: false, line: "b" });
    await clock.advanceBy(1);
    expect(await Promise.all([a, dup, b])).toEqual([QueueCode.Ok, QueueCode.Duplicate, QueueCode.Ok]);
    expect(calls.map((c) => c.length)).toEqual([3]);
  });

  it("flushes at maxGroup without waiting, and retries a failing store before rejecting", async () => {
    const clock = new VirtualClock();
    const { store, calls } = await storeWith(3);
    const w = new ResultWriter({ store, clock, lingerMs: 1000, maxGroup: 2 });
    const both = Promise.all([w.write(requestId("b", 0), { ok: true, line: "a" }), w.write(requestId("b", 1), { ok: true, line: "b" })]);
    expect(await both).toEqual([QueueCode.Ok, QueueCode.Ok]);
    expect(calls).toHaveLength(1);
    let failures = 0;
    const flaky: QueueStore = Object.assign(Object.create(store) as QueueStore, {
      completeMany: async () => {
        failures++;
        throw new Error("redis down");
      },
    });
    const w2 = new ResultWriter({ store: flaky, clock, lingerMs: 0, attempts: 3 });
    const p = w2.write(requestId("b", 2), { ok: true, line: "c" });
    const caught = p.catch((e: unknown) => e);
    await clock.advanceBy(1000);
    expect(await caught).toBeInstanceOf(Error);
    expect(failures).toBe(3);
  });

  it("keeps a group through a store outage (queue_unavailable) for unavailableRetryMs, then gives up", async () => {
    const clock = new VirtualClock();
    const { store } = await storeWith(2);
    let down = true;
    let tries = 0;
    const outage: QueueStore = Object.assign(Object.create(store) as QueueStore, {
      completeMany: async (items: readonly CompleteItem[], nowMs: number) => {
        tries++;
        if (down) throw new TidegateError("queue_unavailable", "redis down");
        return store.completeMany(items, nowMs);
      },
    });
    const w = new ResultWriter({ store: outage, clock, lingerMs: 0, attempts: 2, unavailableRetryMs: 10_000 });
    const p = w.write(requestId("b", 0), { ok: true, line: "a" });
    // Tries at 0, 250, 750, 1750, 3750, 5750 and 7750 ms: far more than `attempts`, and still pending.
    await clock.advanceBy(8000);
    expect(tries).toBe(7);
    down = false;
    await clock.advanceBy(2000);
    expect(await p).toBe(QueueCode.Ok);
    // Past the window it rejects like any other failure.
    down = true;
    const q = w.write(requestId("b", 1), { ok: true, line: "b" }).catch((e: unknown) => e);
    await clock.advanceBy(20_000);
    expect(await q).toBeInstanceOf(TidegateError);
  });
});
