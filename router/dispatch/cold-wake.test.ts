import { describe, expect, it } from "vitest";
import type { ModelTelemetry, RegionTelemetry } from "../../core/ports.js";
import type { BatchRecord, QueueStats } from "../queue/types.js";
import { ColdWaker, coldWakeDue, perRequestMsOf, queuedWork, type QueuedWork } from "./cold-wake.js";

const S = { marginMs: 1000, maxWaitMs: 60_000 };

describe("coldWakeDue", () => {
  const base = { nowMs: 100_000, queued: 10, oldestEnqueuedAtMs: 90_000, deadlineMs: 200_000, coldStartMs: 5000, perRequestMs: 2000 };

  it("wakes once the time left is under cold start + queued work + margin", () => {
    // need = 5000 + 10 × 2000 + 1000 = 26 000 ms; left = 100 000: not yet.
    expect(coldWakeDue(base, S)).toBeUndefined();
    // left 26 000: exactly enough, not yet; 25 999: due.
    expect(coldWakeDue({ ...base, deadlineMs: 126_000 }, S)).toBeUndefined();
    expect(coldWakeDue({ ...base, deadlineMs: 125_999 }, S)).toBe("deadline");
    // a deadline already past is due
    expect(coldWakeDue({ ...base, deadlineMs: 50_000 }, S)).toBe("deadline");
  });

  it("wakes once the oldest request waited maxWaitMs; never for waiting when maxWaitMs is 0", () => {
    expect(coldWakeDue({ ...base, oldestEnqueuedAtMs: 40_001 }, S)).toBeUndefined();
    expect(coldWakeDue({ ...base, oldestEnqueuedAtMs: 40_000 }, S)).toBe("waited");
    expect(coldWakeDue({ ...base, oldestEnqueuedAtMs: 0 }, { ...S, maxWaitMs: 0 })).toBeUndefined();
  });

  it("nothing queued: never; an unknown cold start counts as 0", () => {
    expect(coldWakeDue({ ...base, queued: 0, deadlineMs: 0 }, S)).toBeUndefined();
    // need = 0 + 20 000 + 1000 = 21 000
    expect(coldWakeDue({ ...base, coldStartMs: Number.POSITIVE_INFINITY, deadlineMs: 121_000 }, S)).toBeUndefined();
    expect(coldWakeDue({ ...base, coldStartMs: Number.POSITIVE_INFINITY, deadlineMs: 120_999 }, S)).toBe("deadline");
  });

  it("one instance's time per request: output tokens × step over the batch", () => {
    expect(perRequestMsOf(20, 256, 256)).toBe(20);
    expect(perRequestMsOf(30, 10, 100)).toBe(300);
  });
});

const model = (name: string, serving: number, cold?: { held: number; expectedMs?: number }): ModelTelemetry =>
  ({ model: name, endpoints: [{ gpu: "h100-80gb", servingInstances: serving }], instances: { serving }, effectiveMemoryUtilization: 0, ...(cold === undefined ? {} : { cold }) }) as unknown as ModelTelemetry;
const report = (region: string, models: ModelTelemetry[]): RegionTelemetry => ({ region, models }) as unknown as RegionTelemetry;
const work = (queued: number, deadlineMs: number, regions: string[] | null = null): ReadonlyMap<string, QueuedWork> => new Map([["m", { queued, oldestEnqueuedAtMs: 0, deadlineMs, regions: regions === null ? null : new Set(regions) }]]);

describe("ColdWaker", () => {
  const waker = () => new ColdWaker({ marginMs: 0, maxWaitMs: 0, perRequestMs: () => 100 });

  it("wakes the region whose cold start is expected soonest, once, until the wake ends", () => {
    const w = waker();
    w.note("east", report("east", [model("m", 0, { held: 0, expectedMs: 9000 })]), 0);
    w.note("west", report("west", [model("m", 0, { held: 0, expectedMs: 4000 })]), 0);
    // need = 4000 + 10 × 100 = 5000; left 6000: not due; left 4999: due in west.
    expect(w.due(work(10, 6000), 0)).toEqual([]);
    expect(w.due(work(10, 4999), 0)).toEqual([{ model: "m", region: "west", regions: ["west", "east"], reason: "deadline", coldStartMs: 4000 }]);
    expect(w.due(work(10, 4999), 0)).toEqual([]);
    w.ended("m");
    expect(w.due(work(10, 4999), 0).map((x) => x.region)).toEqual(["west"]);
  });

  it("wakes only a region the model's batches may run in (allowedRegions), soonest first among them", () => {
    const w = waker();
    w.note("east", report("east", [model("m", 0, { held: 0, expectedMs: 9000 })]), 0);
    w.note("west", report("west", [model("m", 0, { held: 0, expectedMs: 4000 })]), 0);
    w.note("north", report("north", [model("m", 0, { held: 0, expectedMs: 6000 })]), 0);
    // west is soonest but not allowed: east and north are, north first. The deadline rule reads north's cold start.
    expect(w.due(work(10, 7001, ["east", "north"]), 0)).toEqual([]);
    expect(w.due(work(10, 6999, ["east", "north"]), 0)).toEqual([{ model: "m", region: "north", regions: ["north", "east"], reason: "deadline", coldStartMs: 6000 }]);
    w.ended("m");
    // no allowed region scales the model from zero: no wake
    expect(w.due(work(10, 0, ["south"]), 0)).toEqual([]);
  });

  it("does not wake while a region serves the model, holds its requests, or for a region that does not scale it from zero or went stale", () => {
    const w = waker();
    w.note("east", report("east", [model("m", 1)]), 0);
    w.note("west", report("west", [model("m", 0, { held: 0, expectedMs: 100 })]), 0);
    expect(w.due(work(5, 0), 0)).toEqual([]);
    expect(w.watching(0)).toBe(false);
    w.note("east", report("east", [model("m", 0)]), 1000);
    w.note("west", report("west", [model("m", 0, { held: 2, expectedMs: 100 })]), 1000);
    expect(w.due(work(5, 0), 1000)).toEqual([]);
    w.note("west", report("west", [model("m", 0, { held: 0, expectedMs: 100 })]), 2000);
    expect(w.watching(2000)).toBe(true);
    expect(w.due(work(5, 0), 2000).map((x) => x.region)).toEqual(["west"]);
    w.ended("m");
    // west's report is now older than staleMs (10 s), east has no cold telemetry: nobody to wake.
    expect(w.due(work(5, 0), 12_001)).toEqual([]);
    expect(w.watching(12_001)).toBe(false);
  });
});

describe("queuedWork", () => {
  it("per model: queued requests, the oldest, and the earliest deadline of in-progress batches with work left", () => {
    const b = (id: string, modelName: string, expiresAtMs: number, total: number, done: number, status = "in_progress", allowedRegions?: string[]) =>
      ({ id, model: modelName, expiresAtMs, total, completed: done, failed: 0, status, ...(allowedRegions === undefined ? {} : { allowedRegions }) }) as unknown as BatchRecord;
    const stats = { depth: { m: { p0: 1, p1: 4 }, n: { p0: 0, p1: 0 } }, oldestEnqueuedAtMs: { m: 7, n: null }, leased: 0, batchesByStatus: {} } as unknown as QueueStats;
    const out = queuedWork([b("a", "m", 900, 10, 2), b("b", "m", 500, 10, 10), b("c", "m", 700, 10, 0), b("d", "m", 100, 10, 0, "finalizing"), b("e", "n", 50, 1, 0)], stats);
    expect(out.get("m")).toEqual({ queued: 5, oldestEnqueuedAtMs: 7, deadlineMs: 700, regions: null });
    expect(out.get("n")).toEqual({ queued: 0, oldestEnqueuedAtMs: null, deadlineMs: 50, regions: null });
    // allowed regions: the union over the model's active batches; any when one of them has no restriction; done
    // or finalizing batches do not count
    const kept = queuedWork([b("a", "m", 900, 10, 0, "in_progress", ["east"]), b("c", "m", 700, 10, 0, "in_progress", ["west", "east"]), b("d", "m", 100, 10, 0, "finalizing"), b("e", "n", 50, 1, 0, "in_progress", ["east"]), b("f", "n", 60, 1, 0), b("g", "n", 70, 1, 1, "in_progress", ["x"])], stats);
    expect(kept.get("m")!.regions).toEqual(new Set(["east", "west"]));
    expect(kept.get("n")!.regions).toBeNull();
  });
});
