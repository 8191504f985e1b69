import { describe, expect, it } from "vitest";
import { VirtualClock } from "../core/clock.js";
import { modelTelemetry } from "../test/helpers/fake-link.js";
import { RegionSelector } from "./selector.js";
import type { RegionTelemetry } from "../core/ports.js";

const M = "llama3.1-8b";
/** 1 GB of KV per instance keeps the in-flight arithmetic readable. */
const GB = 1e9;

function setup(staleMs = 5000) {
  const clock = new VirtualClock(1_000_000);
  const selector = new RegionSelector({
    clock,
    regions: [
      { name: "east", proximity: ["central", "west"], models: [M] },
      { name: "central", proximity: ["east", "west"], models: [M] },
      { name: "west", proximity: ["central", "east"], models: [M, "other"] },
    ],
    memoryThreshold: 0.7,
    telemetryStaleMs: staleMs,
    instanceKvBytes: () => GB,
  });
  const seqs: Record<string, number> = {};
  const report = (region: string, utilization: number, instances = 2): RegionTelemetry => {
    const t = { region, seq: (seqs[region] = (seqs[region] ?? 0) + 1), atMs: clock.now(), models: [modelTelemetry(M, utilization, instances)] };
    selector.onTelemetry(t);
    return t;
  };
  return { clock, selector, report };
}

describe("RegionSelector (SageServe §6.2 with the router's in-flight estimate)", () => {
  it("picks the first region in the client's preference order under the threshold", () => {
    const { selector, report } = setup();
    report("east", 0.75);
    report("central", 0.4);
    report("west", 0.1);
    expect(selector.select(M, "east")).toMatchObject({ region: "central", reason: "threshold" });
    // west's own order: west first, and it is under the threshold.
    expect(selector.select(M, "west")).toMatchObject({ region: "west", reason: "threshold" });
    // No client region: configuration order east, central, west.
    expect(selector.select(M)?.region).toBe("central");
  });

  it("counts only the interactive share and what cannot be preempted: batch KV the engines would preempt does not push traffic away (issue 37)", () => {
    const { selector } = setup();
    const withBatch = (region: string, utilization: number, preemptible?: number): void => {
      const m = modelTelemetry(M, utilization);
      const p = preemptible === undefined ? {} : { preemptibleMemoryUtilization: preemptible };
      selector.onTelemetry({ region, seq: 1, atMs: 1_000_000, models: [{ ...m, ...p, endpoints: m.endpoints.map((e) => ({ ...e, ...p })) }] });
    };
    withBatch("east", 0.85, 0.6); // 0.25 interactive + non-preemptible
    withBatch("central", 0.3);
    withBatch("west", 0.1);
    expect(selector.select(M, "east")).toMatchObject({ region: "east", reason: "threshold" });
    expect(selector.candidate("east", M).utilization).toBeCloseTo(0.25, 9);
    // The same KV from engines that do not preempt (no figure) is all counted: east is passed over.
    withBatch("east", 0.85);
    expect(selector.select(M, "east")).toMatchObject({ region: "central", reason: "threshold" });
  });

  it("falls back to the least utilized when every region is at or over the threshold", () => {
    const { selector, report } = setup();
    report("east", 0.9);
    report("central", 0.7);
    report("west", 0.85);
    expect(selector.select(M, "west")).toMatchObject({ region: "central", reason: "least" });
  });

  it("adds the KV bytes dispatched since the last telemetry, so a burst spills to the next region", () => {
    const { selector, report } = setup();
    report("east", 0.6);
    report("central", 0.1);
    report("west", 0.1);
    // east: 2 instances × 1 GB = 2 GB of KV. 0.6 + 0.15 GB / 2 GB = 0.675 < 0.7 → still east.
    selector.noteDispatch("east", M, 0.15 * GB);
    expect(selector.candidate("east", M).utilization).toBeCloseTo(0.675, 10);
    expect(selector.select(M, "east")?.region).toBe("east");
    // Another 0.1 GB → 0.725 ≥ 0.7 → the burst moves on to central.
    selector.noteDispatch("east", M, 0.1 * GB);
    expect(selector.select(M, "east")?.region).toBe("central");
    expect(selector.inflightKvBytes("east", M)).toBeCloseTo(0.25 * GB);
  });

  it("a new telemetry seq resets the in-flight estimate (the region now counts those requests)", () => {
    const { selector, report } = setup();
    report("east", 0.6);
    report("central", 0.1);
    selector.noteDispatch("east", M, 0.3 * GB);
    expect(selector.select(M, "east")?.region).toBe("central");
    report("east", 0.62);
    expect(selector.inflightKvBytes("east", M)).toBe(0);
    expect(selector.select(M, "east")?.region).toBe("east");
  });

  it("telemetry older than telemetryStaleMs makes a region unavailable; none fresh → undefined", () => {
    const { clock, selector, report } = setup(5000);
    report("east", 0.1);
    clock.advanceToSync(clock.now() + 3000);
    report("central", 0.2);
    expect(selector.select(M, "east")?.region).toBe("east");
    clock.advanceToSync(clock.now() + 2001); // east is 5001 ms old, central 2001 ms
    expect(selector.candidate("east", M).available).toBe(false);
    expect(selector.select(M, "east")?.region).toBe("central");
    clock.advanceToSync(clock.now() + 3000);
    expect(selector.select(M, "east")).toBeUndefined();
  });

  it("regions without serving instances, without telemetry, or excluded are skipped; unknown models get none", () => {
    const { selector, report } = setup();
    report("east", 0.1, 0);
    report("central", 0.5);
    expect(selector.select(M, "east")?.region).toBe("central"); // east has 0 serving, west never reported
    expect(selector.select(M, "east", new Set(["central"]))).toBeUndefined();
    expect(selector.select("no-such-model")).toBeUndefined();
    expect(selector.hostingRegions("other")).toEqual(["west"]);
  });

  it("markDown makes a region unavailable until its next snapshot; unknown regions are ignored", () => {
    const { selector, report } = setup();
    report("east", 0.1);
    selector.markDown("east");
    expect(selector.candidate("east", M).available).toBe(false);
    report("east", 0.1);
    expect(selector.candidate("east", M).available).toBe(true);
    expect(selector.onTelemetry({ region: "mars", seq: 1, atMs: 0, models: [] })).toBe(false);
  });
});

describe("RegionSelector: a warm region against a cold start (issue 33)", () => {
  it("sends the request to the cold region when the warm one's queue makes its expected TTFT longer than the cold start's; the prompt's prefill comes from the pace", () => {
    const clock = new VirtualClock(0);
    // 100 ms per 1,000 prompt tokens, 40 ms decode steps.
    const pace = { tbtMs: 40, stepMs: 40, prefillMs: (t: number) => t / 10, decodeIterMs: () => 40, maxBatch: 256 };
    const selector = new RegionSelector({
      clock,
      regions: [
        { name: "east", proximity: ["west"], models: [M] },
        { name: "west", proximity: ["east"], models: [M] },
      ],
      memoryThreshold: 0.7,
      telemetryStaleMs: 5000,
      instanceKvBytes: () => GB,
      pace: (m) => (m === M ? pace : undefined),
    });
    const cold = { ...modelTelemetry(M, 0, 0), cold: { held: 1, expectedMs: 3000 } };
    selector.onTelemetry({ region: "east", seq: 1, atMs: 0, models: [cold] });
    const busy = (waiting: number) => selector.onTelemetry({ region: "west", seq: waiting + 2, atMs: 0, models: [{ ...modelTelemetry(M, 0.95, 2), waiting }] });
    // west: 2 instances, 60 waiting → 40 + (30 + 1) × 100 = 3,140 ms; east: 3,000 + (1 + 1) × 100 = 3,200 ms → west.
    busy(60);
    expect(selector.select(M, "east", new Set(), 1000)).toMatchObject({ region: "west", reason: "least" });
    // 62 waiting → 3,240 ms > 3,200 ms → east's cold start.
    busy(62);
    const pick = selector.select(M, "east", new Set(), 1000);
    expect(pick).toMatchObject({ region: "east", reason: "cold-sooner" });
    expect(pick?.candidates.map((c) => c.ttftMs)).toEqual([3200, 3240]);
    // Without a prompt size (no estimate) the warm region wins, as before.
    expect(selector.select(M, "east")).toMatchObject({ region: "west", reason: "least" });
  });
});

describe("RegionSelector.track: the router's own measurements for the spill (issue 46 item 5)", () => {
  it("counts pending and running requests, and learns the decode pace per token of finished ones (EWMA 0.2)", () => {
    const { clock, selector } = setup();
    const a = selector.track("east", M);
    const b = selector.track("east", M);
    expect(selector.liveCount("east", M)).toMatchObject({ inflight: 2, pending: 2 });
    clock.advanceToSync(clock.now() + 50);
    a.firstEvent();
    b.firstEvent();
    expect(selector.liveCount("east", M)).toMatchObject({ inflight: 2, pending: 0, runningElapsedMs: [0, 0] });
    expect(selector.measured("east", M).msPerToken).toBeUndefined();
    // a: 101 tokens in 1,000 ms after its first → 10 ms a token (the first sample is taken as is).
    clock.advanceToSync(clock.now() + 1000);
    a.done(101);
    expect(selector.measured("east", M).msPerToken).toBe(10);
    // b: 51 tokens in 1,000 ms → 20 ms; 10 + 0.2 × (20 − 10) = 12.
    b.done(51);
    expect(selector.measured("east", M).msPerToken).toBeCloseTo(12, 9);
    expect(selector.liveCount("east", M)).toMatchObject({ inflight: 0, pending: 0 });
    // Ended ones measure nothing more; a request that ends without done (failed, aborted) measures nothing.
    b.done(1000);
    const c = selector.track("east", M);
    c.firstEvent();
    clock.advanceToSync(clock.now() + 5);
    c.end();
    expect(selector.measured("east", M).msPerToken).toBeCloseTo(12, 9);
  });

  it("learns how much later than predicted first events come (EWMA 0.2), fading by half every 2 s without samples", () => {
    const { clock, selector } = setup();
    expect(selector.measured("west", M).lateMs).toBe(0);
    const a = selector.track("west", M, 300);
    clock.advanceToSync(clock.now() + 800);
    a.firstEvent(); // 500 ms late: 0 + 0.2 × 500 = 100
    expect(selector.measured("west", M).lateMs).toBeCloseTo(100, 9);
    const b = selector.track("west", M, 300);
    clock.advanceToSync(clock.now() + 2000); // 100 fades to 50; b is 1,700 ms late: 50 + 0.2 × (1700 − 50) = 380
    b.firstEvent();
    expect(selector.measured("west", M).lateMs).toBeCloseTo(380, 9);
    clock.advanceToSync(clock.now() + 4000);
    expect(selector.measured("west", M).lateMs).toBeCloseTo(95, 9);
    // Without a prediction nothing is learned; another region keeps its own.
    const c = selector.track("west", M);
    clock.advanceToSync(clock.now() + 10_000);
    c.firstEvent();
    expect(selector.measured("west", M).lateMs).toBeCloseTo(95 / 32, 9);
    expect(selector.measured("east", M).lateMs).toBe(0);
  });
});
