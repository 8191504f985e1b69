/**
 * The in-process KV fabric (kv-fabric.ts) and SimEngine's prefill/decode steps over it, on a virtual clock. Times are
 * checked by hand: llama3.1-8b holds 32 layers × 2 × 8 KV heads × 128 × 2 bytes = 131,072 bytes of KV per token, so
 * a 1,000-token prompt is 131,072,000 bytes, 5.24288 ms between two 2-GPU instances at 100 Gbps per GPU (25 MB per ms).
 */
import { describe, expect, it } from "vitest";
import { VirtualClock } from "../../core/clock.js";
import type { TidegateError } from "../../core/errors.js";
import type { EngineEvent, GenerateRequest } from "../../core/ports.js";
import { KvFabric } from "./kv-fabric.js";
import { SimEngine } from "./sim-engine.js";
import { readOnClock } from "../../test/helpers/streams.js";

const MODEL = "llama3.1-8b";
const ONE_PULL_MS = 5.24288;

function settle<T>(p: Promise<T>): { value?: T; error?: unknown; done: boolean } {
  const out: { value?: T; error?: unknown; done: boolean } = { done: false };
  p.then((v) => Object.assign(out, { value: v, done: true }), (e: unknown) => Object.assign(out, { error: e, done: true }));
  return out;
}

describe("KvFabric", () => {
  it("times a pull as bytes over the link, queues pulls on one side and runs pulls on separate sides at once", async () => {
    const clock = new VirtualClock();
    const fabric = new KvFabric({ clock });
    const a = fabric.offer("p1", MODEL, 2, "r1", 1000);
    const b = fabric.offer("p1", MODEL, 2, "r2", 1000);
    const c = fabric.offer("p2", MODEL, 2, "r3", 1000);
    expect(a.remote_block_ids).toHaveLength(63); // ⌈1000 / 16⌉
    expect(fabric.heldCount()).toBe(3);
    const first = settle(fabric.pull("d1", MODEL, 2, { ...a }, 1000));
    const second = settle(fabric.pull("d2", MODEL, 2, { ...b }, 1000)); // p1's send side is busy with r1
    const third = settle(fabric.pull("d3", MODEL, 2, { ...c }, 1000)); // p2 → d3: free sides
    await clock.advanceTo(ONE_PULL_MS - 0.001);
    expect([first.done, second.done, third.done]).toEqual([false, false, false]);
    await clock.advanceTo(ONE_PULL_MS);
    expect(first.value).toEqual({ remoteTokens: 999, bytes: 131_072_000, ms: ONE_PULL_MS });
    expect(third.value?.ms).toBe(ONE_PULL_MS);
    expect(second.done).toBe(false);
    await clock.advanceTo(2 * ONE_PULL_MS);
    expect(second.value?.ms).toBe(2 * ONE_PULL_MS);
    expect(fabric.heldCount()).toBe(0);
    expect(fabric.totals).toMatchObject({ bytes: 3 * 131_072_000, pulls: 3, failed: 0 });
  });

  it("fails a pull of KV not held, of the wrong size, past its timeout, and drops KV held past holdMs", async () => {
    const clock = new VirtualClock();
    const fabric = new KvFabric({ clock, bitsPerSPerGpu: 1e9, pullTimeoutMs: 500, holdMs: 60_000 });
    const a = fabric.offer("p1", MODEL, 2, "r1", 1000);
    await expect(fabric.pull("d1", MODEL, 2, { ...a, remote_request_id: "nope" }, 1000)).rejects.toMatchObject({ code: "upstream_error" });
    await expect(fabric.pull("d1", MODEL, 2, { ...a }, 2000)).rejects.toMatchObject({ code: "invalid_request" });
    await expect(fabric.pull("d1", MODEL, 2, { do_remote_decode: true }, 1000)).rejects.toMatchObject({ code: "invalid_request" });
    // 131 MB at 2 × 1 Gbps is 524.3 ms: past the 500 ms timeout, which ends it at 500 ms.
    const late = settle(fabric.pull("d1", MODEL, 2, { ...a }, 1000));
    await clock.advanceTo(499);
    expect(late.done).toBe(false);
    await clock.advanceTo(500);
    expect((late.error as TidegateError).code).toBe("timeout");
    await clock.advanceTo(60_000);
    expect(fabric.heldCount()).toBe(0);
    expect(fabric.totals.dropped).toBe(1);
  });

  it("ends a cancelled pull with its signal's reason", async () => {
    const clock = new VirtualClock();
    const fabric = new KvFabric({ clock });
    const a = fabric.offer("p1", MODEL, 2, "r1", 1000);
    const ac = new AbortController();
    const pull = settle(fabric.pull("d1", MODEL, 2, { ...a }, 1000, ac.signal));
    await clock.advanceTo(1);
    ac.abort(new Error("gone"));
    await clock.advanceTo(1);
    expect((pull.error as Error).message).toBe("gone");
  });
});

describe("SimEngine prefill/decode steps", () => {
  async function run(engine: SimEngine, req: GenerateRequest, clock: VirtualClock): Promise<{ events: EngineEvent[]; firstAtMs: number }> {
    const out = await readOnClock(clock, engine.generate(req));
    if (out.error !== undefined) throw out.error;
    return out;
  }

  it("a prefill instance answers with kv_transfer_params; a decode instance pulls them, then prefills one token", async () => {
    const clock = new VirtualClock();
    const fabric = new KvFabric({ clock });
    const prefill = new SimEngine({ instanceId: "p1", model: MODEL, gpu: "h100-80gb", tp: 2, clock, role: "prefill", kvFabric: fabric });
    const decode = new SimEngine({ instanceId: "d1", model: MODEL, gpu: "h100-80gb", tp: 2, clock, role: "decode", kvFabric: fabric });
    const whole = new SimEngine({ instanceId: "w1", model: MODEL, gpu: "h100-80gb", tp: 2, clock });
    const base: GenerateRequest = { id: "r1", model: MODEL, kind: "completion", promptTokens: 1000, maxTokens: 8, priority: 0, body: {} };

    const p = await run(prefill, { ...base, maxTokens: 1, kvTransfer: { remoteDecode: true } }, clock);
    const done = p.events.at(-1)!;
    expect(done.type).toBe("done");
    const params = done.type === "done" ? done.kvTransferParams : undefined;
    expect(params).toMatchObject({ do_remote_prefill: true, remote_engine_id: "p1", remote_request_id: "r1" });
    const prefillEndMs = clock.now();
    // The whole prompt's prefill on an idle instance: the prefill step's first token.
    expect(p.firstAtMs).toBeCloseTo(prefill.core.profile.prefillMs(1000, 1), 6);

    const d = await run(decode, { ...base, kvTransfer: { params: params! } }, clock);
    // Pull (5.24 ms), then one prompt token prefilled here before the first token.
    expect(d.firstAtMs - prefillEndMs).toBeCloseTo(ONE_PULL_MS + decode.core.profile.prefillMs(1, 1), 6);
    expect(d.events.filter((e) => e.type === "token").reduce((s, e) => s + (e.type === "token" ? e.tokens : 0), 0)).toBe(8);
    expect(fabric.totals.pulls).toBe(1);

    // Roles refuse the other step; a plain engine has no fabric for either.
    await expect(run(prefill, { ...base, id: "r2" }, clock)).rejects.toMatchObject({ code: "invalid_request" });
    await expect(run(decode, { ...base, id: "r3", kvTransfer: { remoteDecode: true } }, clock)).rejects.toMatchObject({ code: "invalid_request" });
    await expect(run(whole, { ...base, id: "r4", kvTransfer: { remoteDecode: true } }, clock)).rejects.toMatchObject({ code: "invalid_request" });
    expect(() => decode.submit({ ...base, id: "r5", kvTransfer: { params: params! } }, {})).toThrow(/generate/);
    expect(() => new SimEngine({ instanceId: "x", model: MODEL, gpu: "h100-80gb", tp: 2, clock, role: "decode" })).toThrow(/KV fabric/);
  });
});
