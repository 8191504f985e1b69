/**
 * The one conformance suite for QueueStore and FileStore adapters (STYLE "one conformance test suite for
 * interchangeable implementations"). router/queue/queue.test.ts runs it against the embedded store (in memory and with a journal)
 * and against a real Redis with a fresh key prefix per test.
 */
import { describe, expect, it } from "vitest";
import { QueueCode, requestId, type BatchInit, type FileStore, type QueueStore } from "../../router/queue/types.js";

/** Creates a fresh, empty store pair for one test and disposes of it afterwards. */
export type StoreFactory = () => Promise<{ queue: QueueStore; files: FileStore; dispose(): Promise<void> }>;

const HOUR = 3600_000;

function init(id: string, createdAtMs: number, expiresAtMs = createdAtMs + 24 * HOUR): BatchInit {
  return { id, endpoint: "/v1/chat/completions", inputFileId: "file-in", completionWindow: "24h", metadata: { k: "v" }, createdAtMs, expiresAtMs };
}

async function enqueue(q: QueueStore, id: string, n: number, nowMs: number, model = "m1", expiresAtMs?: number): Promise<void> {
  expect(await q.createBatch(init(id, nowMs, expiresAtMs))).toBe(QueueCode.Ok);
  expect(await q.stage(id, Array.from({ length: n }, (_, i) => ({ index: i, payload: `{"custom_id":"c${i}"}` })))).toBe(QueueCode.Ok);
  expect(await q.activate(id, model, n, nowMs)).toBe(QueueCode.Ok);
}

/** Registers the suite under `name`. */
export function queueConformance(name: string, factory: StoreFactory): void {
  const withStore = (fn: (q: QueueStore, f: FileStore) => Promise<void>) => async () => {
    const s = await factory();
    try {
      await fn(s.queue, s.files);
    } finally {
      await s.dispose();
    }
  };

  describe(`QueueStore conformance: ${name}`, () => {
    it("creates batches in validating, refuses duplicate ids, and lists newest first with after/limit", withStore(async (q) => {
      expect(await q.createBatch(init("b1", 1000))).toBe(QueueCode.Ok);
      expect(await q.createBatch(init("b1", 1000))).toBe(QueueCode.Exists);
      expect(await q.createBatch(init("b2", 2000))).toBe(QueueCode.Ok);
      expect(await q.createBatch(init("b3", 3000))).toBe(QueueCode.Ok);
      const b = await q.getBatch("b1");
      expect(b).toMatchObject({ id: "b1", status: "validating", total: 0, metadata: { k: "v" }, createdAtMs: 1000, model: null });
      expect(await q.getBatch("nope")).toBeUndefined();
      const p1 = await q.listBatches(undefined, 2);
      expect(p1.batches.map((x) => x.id)).toEqual(["b3", "b2"]);
      expect(p1.hasMore).toBe(true);
      const p2 = await q.listBatches("b2", 2);
      expect(p2.batches.map((x) => x.id)).toEqual(["b1"]);
      expect(p2.hasMore).toBe(false);
      expect((await q.activeBatchIds()).sort()).toEqual(["b1", "b2", "b3"]);
      expect((await q.getBatch("b1"))!.owner).toBe("anonymous");
      expect((await q.getBatch("b1"))!.allowedModels).toBeUndefined();
      await q.createBatch({ ...init("s1", 3500), allowedModels: ["m1", "m2"] });
      expect((await q.getBatch("s1"))!.allowedModels).toEqual(["m1", "m2"]);
      expect((await q.getBatch("s1"))!.allowedRegions).toBeUndefined();
      await q.createBatch({ ...init("s2", 3600), owner: "tenant-r", allowedRegions: ["r1"] });
      expect((await q.getBatch("s2"))!.allowedRegions).toEqual(["r1"]);
      await q.createBatch({ ...init("t1", 4000), owner: "tenant-a" });
      await q.createBatch({ ...init("t2", 5000), owner: "tenant-a" });
      const mine = await q.listBatches(undefined, 1, "tenant-a");
      expect(mine).toMatchObject({ batches: [{ id: "t2", owner: "tenant-a" }], hasMore: true });
      expect((await q.listBatches("t2", 5, "tenant-a")).batches.map((b) => b.id)).toEqual(["t1"]);
      expect((await q.listBatches(undefined, 10, "anonymous")).batches.map((b) => b.id)).toEqual(["s1", "b3", "b2", "b1"]);
      expect((await q.listBatches(undefined, 10, "nobody")).batches).toEqual([]);
    }));

    it("activates only fully staged batches; stage is idempotent per index", withStore(async (q) => {
      await q.createBatch(init("b", 0));
      await q.stage("b", [{ index: 0, payload: "a" }, { index: 1, payload: "b" }]);
      expect(await q.activate("b", "m1", 3, 10)).toBe(QueueCode.WrongState);
      await q.stage("b", [{ index: 0, payload: "CHANGED" }, { index: 2, payload: "c" }]);
      expect(await q.activate("b", "m1", 3, 10)).toBe(QueueCode.Ok);
      expect(await q.stage("b", [{ index: 3, payload: "late" }])).toBe(QueueCode.WrongState);
      expect(await q.stage("zz", [{ index: 0, payload: "x" }])).toBe(QueueCode.NoBatch);
      const c = await q.claim("m1", 10, 20, 1000);
      // Enqueued with the batch's creation time (0; earliest deadline first), in progress from its activation (10).
      expect(c.map((r) => [r.index, r.payload, r.enqueuedAtMs, r.leaseUntilMs])).toEqual([[0, "a", 0, 1020], [1, "b", 0, 1020], [2, "c", 0, 1020]]);
      expect((await q.getBatch("b"))).toMatchObject({ status: "in_progress", model: "m1", total: 3, leased: 3, enqueuedAtMs: 0, inProgressAtMs: 10 });
    }));

    it("claims FIFO across batches and models, never the same request twice", withStore(async (q) => {
      await enqueue(q, "old", 2, 100);
      await enqueue(q, "new", 2, 200);
      await enqueue(q, "other", 2, 50, "m2");
      const first = await q.claim("m1", 3, 300, 1000);
      expect(first.map((r) => r.requestId)).toEqual(["old:000000", "old:000001", "new:000000"]);
      const second = await q.claim("m1", 5, 300, 1000);
      expect(second.map((r) => r.requestId)).toEqual(["new:000001"]);
      expect(await q.claim("m1", 5, 300, 1000)).toEqual([]);
      expect((await q.claim("m2", 5, 300, 1000)).map((r) => r.model)).toEqual(["m2", "m2"]);
      expect(await q.claim("m3", 5, 300, 1000)).toEqual([]);
    }));

    it("claims earliest deadline first across batches: one created earlier but validated later goes first (issue 37)", withStore(async (q) => {
      // "big" is created at 100 (deadline 100 + 24 h) and activated at 900; "small" created and activated at 500.
      expect(await q.createBatch(init("big", 100))).toBe(QueueCode.Ok);
      await enqueue(q, "small", 2, 500);
      expect(await q.stage("big", [0, 1].map((i) => ({ index: i, payload: `{"custom_id":"c${i}"}` })))).toBe(QueueCode.Ok);
      expect(await q.activate("big", "m1", 2, 900)).toBe(QueueCode.Ok);
      const c = await q.claim("m1", 4, 1000, 1000);
      expect(c.map((r) => r.requestId)).toEqual(["big:000000", "big:000001", "small:000000", "small:000001"]);
      // Their age (promotion to priority 0) counts from creation.
      expect(c.map((r) => r.enqueuedAtMs)).toEqual([100, 100, 500, 500]);
    }));

    it("claims in index order within a batch (FCFS), past 10 requests", withStore(async (q) => {
      await enqueue(q, "b", 12, 0);
      const c = await q.claim("m1", 12, 1, 1000);
      expect(c.map((r) => r.index)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]);
      expect(c[11]!.requestId).toBe(requestId("b", 11));
      expect(c[11]!.payload).toBe('{"custom_id":"c11"}');
    }));

    it("writes each result once, counts it, and finalizes when the last result lands", withStore(async (q) => {
      await enqueue(q, "b", 3, 0);
      const c = await q.claim("m1", 3, 10, 1000);
      expect(await q.complete(c[0]!.requestId, { ok: true, line: "o0" }, 20)).toBe(QueueCode.Ok);
      expect(await q.complete(c[0]!.requestId, { ok: false, line: "dup" }, 21)).toBe(QueueCode.Duplicate);
      expect(await q.complete(c[1]!.requestId, { ok: false, line: "e1" }, 22)).toBe(QueueCode.Ok);
      expect(await q.getBatch("b")).toMatchObject({ completed: 1, failed: 1, leased: 1, status: "in_progress" });
      expect(await q.complete(c[2]!.requestId, { ok: true, line: "o2" }, 30)).toBe(QueueCode.Finalizing);
      expect(await q.getBatch("b")).toMatchObject({ status: "finalizing", target: "completed", finalizingAtMs: 30, leased: 0 });
      const res = await q.results("b");
      expect([...res.entries()].sort((a, b) => a[0] - b[0])).toEqual([[0, { ok: true, line: "o0" }], [1, { ok: false, line: "e1" }], [2, { ok: true, line: "o2" }]]);
      expect(await q.complete(c[2]!.requestId, { ok: true, line: "again" }, 31)).toBe(QueueCode.BatchClosed);
      expect(await q.finalize("b", "file-out", "file-err", 0, 40)).toBe(QueueCode.Ok);
      expect(await q.finalize("b", "file-out2", null, 0, 41)).toBe(QueueCode.WrongState);
      expect(await q.getBatch("b")).toMatchObject({ status: "completed", completedAtMs: 40, outputFileId: "file-out", errorFileId: "file-err", completed: 2, failed: 1, target: null });
      expect((await q.results("b")).size).toBe(0);
      expect(await q.activeBatchIds()).toEqual([]);
    }));

    it("completeMany handles each result as if alone, across batches, in one step", withStore(async (q) => {
      await enqueue(q, "x", 2, 0);
      await enqueue(q, "y", 1, 0);
      const c = await q.claim("m1", 3, 1, 1000);
      expect(c.map((r) => r.requestId)).toEqual([requestId("x", 0), requestId("x", 1), requestId("y", 0)]);
      const codes = await q.completeMany([
        { requestId: requestId("x", 0), result: { ok: true, line: "a" } },
        { requestId: requestId("x", 0), result: { ok: true, line: "again" } },
        { requestId: requestId("y", 0), result: { ok: false, line: "e" } },
        { requestId: requestId("zz", 0), result: { ok: true, line: "?" } },
        { requestId: requestId("x", 1), result: { ok: true, line: "b" } },
      ], 5);
      expect(codes).toEqual([QueueCode.Ok, QueueCode.Duplicate, QueueCode.Finalizing, QueueCode.NoBatch, QueueCode.Finalizing]);
      expect(await q.getBatch("x")).toMatchObject({ status: "finalizing", completed: 2, leased: 0 });
      expect(await q.getBatch("y")).toMatchObject({ status: "finalizing", failed: 1, leased: 0 });
      expect((await q.results("x")).get(0)).toEqual({ ok: true, line: "a" });
      expect(await q.completeMany([], 6)).toEqual([]);
      await enqueue(q, "w", 2, 0);
      const cw = await q.claim("m1", 2, 7, 1000);
      expect(await q.completeMany([
        { requestId: cw[0]!.requestId, result: { ok: true, line: "1" } },
        { requestId: cw[1]!.requestId, result: { ok: true, line: "2" } },
        { requestId: cw[1]!.requestId, result: { ok: true, line: "late" } },
      ], 8)).toEqual([QueueCode.Ok, QueueCode.Finalizing, QueueCode.BatchClosed]);
    }));

    it("adds each result's output tokens by capacity to its batch once, with the result (issue 37)", withStore(async (q) => {
      await enqueue(q, "t", 3, 0);
      const a = await q.openOwner(0, 60_000);
      const c = await q.claim("m1", 3, 1, 60_000, a);
      expect(c).toHaveLength(3);
      expect(await q.getBatch("t")).toMatchObject({ spareTokens: 0, dedicatedTokens: 0 });
      expect(await q.completeMany([
        { requestId: c[0]!.requestId, result: { ok: true, line: "a", spareTokens: 48 }, owner: a },
        // The same request again (a second run): its result and its tokens are dropped.
        { requestId: c[0]!.requestId, result: { ok: true, line: "again", spareTokens: 48 } },
        { requestId: c[1]!.requestId, result: { ok: true, line: "b", dedicatedTokens: 16 }, owner: a },
      ], 2)).toEqual([QueueCode.Ok, QueueCode.Duplicate, QueueCode.Ok]);
      // A fenced owner's result counts nothing.
      expect(await q.complete(c[2]!.requestId, { ok: true, line: "z", spareTokens: 1000 }, 3, a + 1)).toBe(QueueCode.Fenced);
      expect(await q.getBatch("t")).toMatchObject({ completed: 2, spareTokens: 48, dedicatedTokens: 16 });
      // The stored result is the line only.
      expect((await q.results("t")).get(0)).toEqual({ ok: true, line: "a" });
      expect(await q.complete(c[2]!.requestId, { ok: true, line: "c", spareTokens: 7.9 }, 4, a)).toBe(QueueCode.Finalizing);
      expect(await q.getBatch("t")).toMatchObject({ spareTokens: 55, dedicatedTokens: 16 });
    }));

    it("returns a request whose lease ran out to the queue with its original age; the first result wins", withStore(async (q) => {
      await enqueue(q, "a", 1, 100);
      await enqueue(q, "z", 1, 200);
      const [first] = await q.claim("m1", 1, 300, 100);
      expect(first!.requestId).toBe("a:000000");
      expect(await q.requeueExpired(399, 100)).toEqual({ expiredLeases: 0, requeued: 0 });
      expect(await q.requeueExpired(401, 100)).toEqual({ expiredLeases: 1, requeued: 1 });
      expect(await q.getBatch("a")).toMatchObject({ leased: 0 });
      const [again] = await q.claim("m1", 1, 402, 100);
      expect(again).toMatchObject({ requestId: "a:000000", enqueuedAtMs: 100, payload: '{"custom_id":"c0"}' });
      expect(await q.complete("a:000000", { ok: true, line: "late-first-run" }, 403)).toBe(QueueCode.Finalizing);
      expect(await q.complete("a:000000", { ok: true, line: "second-run" }, 404)).toBe(QueueCode.BatchClosed);
      expect((await q.results("a")).get(0)).toEqual({ ok: true, line: "late-first-run" });
      expect(await q.getBatch("a")).toMatchObject({ leased: 0, completed: 1 });
    }));

    it("renew extends leases still held, never shortens one, and leaves finished or requeued requests alone", withStore(async (q) => {
      await enqueue(q, "r", 3, 100);
      const [c0, c1, c2] = await q.claim("m1", 3, 200, 100); // leased until 300
      await q.complete(c1!.requestId, { ok: true, line: "done" }, 210);
      // c0 and c2 extended to 500; c1 has no lease any more; an unknown id is ignored.
      expect(await q.renew([c0!.requestId, c1!.requestId, c2!.requestId, requestId("nope", 0)], 500)).toBe(2);
      expect(await q.renew([c0!.requestId], 400)).toBe(0); // never shortened
      expect(await q.renew([], 900)).toBe(0);
      expect(await q.requeueExpired(450, 100)).toEqual({ expiredLeases: 0, requeued: 0 });
      expect(await q.getBatch("r")).toMatchObject({ leased: 2 });
      expect(await q.requeueExpired(501, 100)).toEqual({ expiredLeases: 2, requeued: 2 });
      // A requeued request is not leased: renewing it does not take it back from the queue.
      expect(await q.renew([c0!.requestId], 900)).toBe(0);
      expect((await q.claim("m1", 5, 502, 100)).map((r) => r.index)).toEqual([0, 2]);
    }));

    it("release gives leases back at once, keeping age; released-but-finished requests stay finished", withStore(async (q) => {
      await enqueue(q, "b", 3, 100);
      const c = await q.claim("m1", 3, 200, 60_000);
      await q.complete(c[1]!.requestId, { ok: true, line: "done" }, 201);
      expect(await q.release([c[0]!.requestId, c[1]!.requestId, requestId("b", 2), requestId("nope", 0)], 202)).toBe(2);
      expect(await q.getBatch("b")).toMatchObject({ leased: 0, status: "in_progress" });
      const again = await q.claim("m1", 5, 203, 60_000);
      expect(again.map((r) => [r.index, r.enqueuedAtMs])).toEqual([[0, 100], [2, 100]]);
      expect(await q.release([], 204)).toBe(0);
    }));

    it("a completed request that was requeued is not handed out again", withStore(async (q) => {
      await enqueue(q, "b", 2, 0);
      await q.claim("m1", 1, 10, 100);
      await q.requeueExpired(200, 10);
      expect(await q.complete(requestId("b", 0), { ok: true, line: "x" }, 201)).toBe(QueueCode.Ok);
      const next = await q.claim("m1", 5, 202, 100);
      expect(next.map((r) => r.requestId)).toEqual(["b:000001"]);
    }));

    it("lease owners: a dead owner's leases return at once; its results, renewals and releases are fenced; tokens are never reused", withStore(async (q) => {
      await enqueue(q, "b", 4, 100);
      const a = await q.openOwner(0, 1000);
      const d = await q.openOwner(0, 1000);
      expect(a).toBeGreaterThan(0);
      expect(d).toBeGreaterThan(a);
      const ca = await q.claim("m1", 2, 10, 60_000, a);
      expect(ca.map((c) => [c.index, c.owner])).toEqual([[0, a], [1, a]]);
      const [cd] = await q.claim("m1", 1, 10, 60_000, d);
      expect(cd).toMatchObject({ index: 2, owner: d });
      expect(await q.heartbeat(a, 500, 1000)).toBe(true); // a is live until 1500; d until 1000
      expect(await q.reclaimDead(1000)).toEqual({ owners: 0, leases: 0, requeued: 0 });
      expect(await q.reclaimDead(1001)).toEqual({ owners: 1, leases: 1, requeued: 1 });
      expect(await q.getBatch("b")).toMatchObject({ leased: 2 });
      // d is fenced: no heartbeat, no claim, and its result, renewal and release of the request it had are refused.
      expect(await q.heartbeat(d, 1002, 1000)).toBe(false);
      expect(await q.claim("m1", 5, 1002, 60_000, d)).toEqual([]);
      expect(await q.complete(cd!.requestId, { ok: true, line: "zombie" }, 1003, d)).toBe(QueueCode.Fenced);
      expect(await q.renew([cd!.requestId], 90_000, d)).toBe(0);
      expect(await q.release([cd!.requestId], 1003, d)).toBe(0);
      // The request went back with its age and order: a takes it (and the one behind it), then d's late result is
      // still refused, a's is written.
      const again = await q.claim("m1", 5, 1004, 60_000, a);
      expect(again.map((c) => [c.index, c.enqueuedAtMs, c.owner])).toEqual([[2, 100, a], [3, 100, a]]);
      expect(await q.complete(cd!.requestId, { ok: true, line: "zombie" }, 1005, d)).toBe(QueueCode.Fenced);
      expect(await q.completeMany([
        { requestId: requestId("b", 2), result: { ok: true, line: "r2" }, owner: a },
        { requestId: requestId("b", 0), result: { ok: true, line: "r0-by-d" }, owner: d },
        { requestId: requestId("b", 0), result: { ok: true, line: "r0" }, owner: a },
      ], 1006)).toEqual([QueueCode.Ok, QueueCode.Fenced, QueueCode.Ok]);
      // Only the holder renews or releases a lease.
      expect(await q.renew([requestId("b", 1)], 90_000, d)).toBe(0);
      expect(await q.renew([requestId("b", 1)], 90_000, a)).toBe(1);
      expect(await q.release([requestId("b", 3)], 1007, d)).toBe(0);
      expect(await q.release([requestId("b", 3)], 1007, a)).toBe(1);
      // A request no owner holds (requeued) takes no owner's result.
      expect(await q.complete(requestId("b", 3), { ok: true, line: "x" }, 1008, a)).toBe(QueueCode.Fenced);
      expect(await q.getBatch("b")).toMatchObject({ completed: 2, leased: 1, status: "in_progress" });
      expect([...(await q.results("b")).entries()].sort((x, y) => x[0] - y[0])).toEqual([[0, { ok: true, line: "r0" }], [2, { ok: true, line: "r2" }]]);
      // An owner that expired but was not yet declared dead may heartbeat again (its leases were never taken).
      expect(await q.heartbeat(a, 100_000, 1000)).toBe(true);
      expect(await q.reclaimDead(100_500)).toEqual({ owners: 0, leases: 0, requeued: 0 });
      expect(await q.openOwner(100_500, 1000)).toBeGreaterThan(d);
      // Leases claimed without an owner are never taken back by reclaimDead (only their own expiry returns them).
      const [plain] = await q.claim("m1", 1, 100_600, 60_000);
      expect(plain).toMatchObject({ index: 3 });
      expect(plain!.owner).toBeUndefined();
      expect(await q.reclaimDead(200_000)).toMatchObject({ leases: 1 }); // a's lease of request 1, not the plain one
      expect(await q.getBatch("b")).toMatchObject({ leased: 1 });
    }));

    it("fails validation with line errors and drops staged payloads", withStore(async (q) => {
      await q.createBatch(init("b", 0));
      await q.stage("b", [{ index: 0, payload: "p" }]);
      const errors = [{ code: "invalid_json_line", message: "bad", param: null, line: 2 }];
      expect(await q.failValidation("b", errors, 5)).toBe(QueueCode.Ok);
      expect(await q.failValidation("b", errors, 6)).toBe(QueueCode.WrongState);
      expect(await q.getBatch("b")).toMatchObject({ status: "failed", failedAtMs: 5, errors });
      expect(await q.activeBatchIds()).toEqual([]);
      expect((await q.payloads("b", [0])).size).toBe(0);
      expect(await q.activate("b", "m1", 1, 7)).toBe(QueueCode.BatchClosed);
      expect(await q.failValidation("nope", errors, 6)).toBe(QueueCode.NoBatch);
    }));

    it("cancels: waiting requests leave the queue, leased ones may finish, then finalizing(cancelled)", withStore(async (q) => {
      await enqueue(q, "b", 4, 0);
      const c = await q.claim("m1", 2, 10, 1000);
      expect(await q.cancel("b", 20)).toBe(QueueCode.Ok);
      expect(await q.getBatch("b")).toMatchObject({ status: "cancelling", cancellingAtMs: 20, leased: 2 });
      expect(await q.claim("m1", 10, 21, 1000)).toEqual([]);
      expect(await q.complete(c[0]!.requestId, { ok: true, line: "o" }, 22)).toBe(QueueCode.Ok);
      expect(await q.requeueExpired(2000, 10)).toEqual({ expiredLeases: 1, requeued: 0 });
      expect(await q.getBatch("b")).toMatchObject({ status: "finalizing", target: "cancelled", leased: 0, completed: 1 });
      expect(await q.cancel("b", 2001)).toBe(QueueCode.WrongState);
      expect((await q.payloads("b", [1, 2, 3])).size).toBe(3);
      expect(await q.finalize("b", "o", "e", 3, 2002)).toBe(QueueCode.Ok);
      expect(await q.getBatch("b")).toMatchObject({ status: "cancelled", cancelledAtMs: 2002, failed: 3, completed: 1 });
      expect(await q.cancel("b", 2003)).toBe(QueueCode.WrongState);
      expect(await q.cancel("nope", 2003)).toBe(QueueCode.NoBatch);
    }));

    it("cancelling with nothing leased finalizes at once", withStore(async (q) => {
      await enqueue(q, "b", 2, 0);
      expect(await q.cancel("b", 5)).toBe(QueueCode.Finalizing);
      await q.createBatch(init("v", 0));
      expect(await q.cancel("v", 5)).toBe(QueueCode.Finalizing);
      expect(await q.activate("v", "m1", 0, 6)).toBe(QueueCode.BatchClosed);
    }));

    it("expires a batch only past its window; late results are refused", withStore(async (q) => {
      await enqueue(q, "b", 3, 0, "m1", 1000);
      const [c] = await q.claim("m1", 1, 10, 5000);
      expect(await q.complete(c!.requestId, { ok: true, line: "o" }, 11)).toBe(QueueCode.Ok);
      await q.claim("m1", 1, 12, 5000);
      expect(await q.expire("b", 999)).toBe(QueueCode.NotDue);
      expect(await q.expire("b", 1000)).toBe(QueueCode.Finalizing);
      expect(await q.getBatch("b")).toMatchObject({ status: "finalizing", target: "expired", leased: 0 });
      expect(await q.claim("m1", 10, 1001, 5000)).toEqual([]);
      expect(await q.complete("b:000001", { ok: true, line: "late" }, 1002)).toBe(QueueCode.BatchClosed);
      expect(await q.expire("b", 1003)).toBe(QueueCode.WrongState);
      expect(await q.requeueExpired(10_000, 10)).toEqual({ expiredLeases: 0, requeued: 0 });
      expect(await q.finalize("b", "o", "e", 2, 1004)).toBe(QueueCode.Ok);
      expect(await q.getBatch("b")).toMatchObject({ status: "expired", expiredAtMs: 1004, completed: 1, failed: 2 });
    }));

    it("reports depth by priority, the oldest request, leases and batches by status", withStore(async (q) => {
      await enqueue(q, "old", 2, 0);
      await enqueue(q, "new", 3, 5000);
      await q.createBatch(init("v", 0));
      await q.claim("m1", 1, 6000, 1000);
      const s = await q.stats(["m1", "m2"], 10_000, 8000);
      expect(s.depth).toEqual({ m1: { p0: 1, p1: 3 }, m2: { p0: 0, p1: 0 } });
      expect(s.oldestEnqueuedAtMs).toEqual({ m1: 0, m2: null });
      expect(s.leased).toBe(1);
      expect(s.batchesByStatus).toMatchObject({ in_progress: 2, validating: 1, completed: 0, cancelled: 0 });
    }));
  });

  describe(`FileStore conformance: ${name}`, () => {
    it("stores, reads, lists newest first and deletes files", withStore(async (_q, f) => {
      const body = Buffer.from('{"a":1}\n{"b":2}\n');
      expect(await f.put({ id: "file-a", bytes: body.length, createdAtMs: 1000, filename: "in.jsonl", purpose: "batch" }, body)).toBe(QueueCode.Ok);
      expect(await f.put({ id: "file-a", bytes: 1, createdAtMs: 1000, filename: "x", purpose: "batch" }, Buffer.from("x"))).toBe(QueueCode.Exists);
      await f.put({ id: "file-b", bytes: 0, createdAtMs: 2000, filename: "empty.jsonl", purpose: "batch_output" }, Buffer.alloc(0));
      expect(await f.get("file-a")).toEqual({ id: "file-a", bytes: body.length, createdAtMs: 1000, filename: "in.jsonl", purpose: "batch", owner: "anonymous" });
      await f.put({ id: "file-t", bytes: 1, createdAtMs: 500, filename: "t.jsonl", purpose: "batch", owner: "tenant-a" }, Buffer.from("x"));
      expect((await f.get("file-t"))!.owner).toBe("tenant-a");
      expect(await f.delete("file-t")).toBe(true);
      expect((await f.content("file-a"))!.equals(body)).toBe(true);
      expect((await f.content("file-b"))!.length).toBe(0);
      expect((await f.list()).map((m) => m.id)).toEqual(["file-b", "file-a"]);
      expect(await f.delete("file-a")).toBe(true);
      expect(await f.delete("file-a")).toBe(false);
      expect(await f.get("file-a")).toBeUndefined();
      expect(await f.content("file-a")).toBeUndefined();
      expect((await f.list()).map((m) => m.id)).toEqual(["file-b"]);
    }));
  });
}
