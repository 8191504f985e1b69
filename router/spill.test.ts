import { describe, expect, it } from "vitest";
import { completionMs, predictTtftMs, spillFrom, type RegionLoad, type SpillPace } from "./spill.js";
import { selectRegion, type RegionCandidate } from "./selection.js";

/** Round numbers: 4 ms decode steps whatever the batch, 20 ms prefills. */
const PACE: SpillPace = { prefillMs: () => 20, decodeIterMs: () => 4, maxBatch: 256 };
const load = (o: Partial<RegionLoad>): RegionLoad => ({ serving: 1, waiting: 0, running: 0, routerInflight: 0, routerPending: 0, kvTokensPerInstance: 4000, ...o });
const REQ = { promptTokens: 10, maxTokens: 390 };

describe("predictTtftMs (issue 46 item 5)", () => {
  it("an idle region: one step and the prompt's prefill", () => {
    expect(predictTtftMs(load({}), REQ, PACE)).toBe(4 + 20);
  });

  it("room for every request ahead: they prefill before it (ahead / instances + 1 prefills)", () => {
    // fit = ⌊4000 / 400⌋ = 10; 3 running + 4 waiting + 1 ≤ 10 → 4 + (4 + 1) × 20.
    expect(predictTtftMs(load({ running: 3, waiting: 4 }), REQ, PACE)).toBe(104);
    // Two instances share the queue: 4 + (4 / 2 + 1) × 20.
    expect(predictTtftMs(load({ serving: 2, running: 3, waiting: 4 }), REQ, PACE)).toBe(64);
  });

  it("KV full: it waits for completions at the drain rate of what runs (the file comment's example)", () => {
    // short = 10 + 5 + 1 − 10 = 6; service = 390 × 4 = 1,560 ms; progress unknown: 780 ms left each → 780 + 4 + 20.
    expect(predictTtftMs(load({ running: 10, waiting: 5 }), REQ, PACE)).toBe(804);
    // A measured mean output of 100 tokens: 200 + 24.
    expect(predictTtftMs(load({ running: 10, waiting: 5, meanOutputTokens: 100 }), REQ, PACE)).toBe(224);
    // The router's own 10 running started 100..1000 ms ago (100 apart): 1,460, 1,360, … 560 left; the 6th soonest is
    // 1,060 → 1,084.
    const elapsed = Array.from({ length: 10 }, (_, i) => 100 * (i + 1));
    expect(predictTtftMs(load({ routerInflight: 15, routerPending: 5, runningElapsedMs: elapsed }), REQ, PACE)).toBe(1084);
  });

  it("a decode pace the router measured slower than the model's steps lengthens the service; a faster one does not", () => {
    // 6 ms a token: service = 390 × 6 = 2,340 ms, half left 1,170 → 1,194.
    expect(predictTtftMs(load({ running: 10, waiting: 5, measuredMsPerToken: 6 }), REQ, PACE)).toBe(1194);
    expect(predictTtftMs(load({ running: 10, waiting: 5, measuredMsPerToken: 3 }), REQ, PACE)).toBe(804);
    // Nothing to wait for: the pace does not matter.
    expect(predictTtftMs(load({ running: 3, measuredMsPerToken: 6 }), REQ, PACE)).toBe(24);
  });

  it("first events measured later than predicted add their lateness; earlier ones take nothing off", () => {
    expect(predictTtftMs(load({ running: 10, waiting: 5, lateMs: 150 }), REQ, PACE)).toBe(954);
    expect(predictTtftMs(load({ lateMs: 150 }), REQ, PACE)).toBe(174);
    expect(predictTtftMs(load({ running: 10, waiting: 5, lateMs: -150 }), REQ, PACE)).toBe(804);
  });

  it("the router's own requests count between reports: pending ones wait ahead, the rest run", () => {
    // The report says idle; the router sent 14 since, 4 of them with a first token just now: ahead 10, running 4,
    // fit 10, short = 4 + 10 + 1 − 10 = 5: all 10 slots have 1,560 ms left (4 just started, 6 admitted from ahead):
    // the 5th completion at 1,560 → 1,584.
    expect(predictTtftMs(load({ routerInflight: 14, routerPending: 10, runningElapsedMs: [0, 0, 0, 0] }), REQ, PACE)).toBe(1584);
    // The larger of the report and the router's count: 6 waiting reported beats 2 pending.
    expect(predictTtftMs(load({ waiting: 6, routerInflight: 2, routerPending: 2 }), REQ, PACE)).toBe(4 + 7 * 20);
  });

  it("the router's oldest pending request waiting past twice the unloaded TTFT (and 100 ms more): full at what it runs", () => {
    // KV arithmetic says 10; 8 running, 1 pending; unloaded 4 + (1 + 1) × 20 = 44 ms: 144 ms is not queued yet.
    const l = load({ routerInflight: 9, routerPending: 1 });
    expect(predictTtftMs({ ...l, oldestPendingMs: 144 }, REQ, PACE)).toBe(44);
    // 145 ms is: fit 8, short = 8 + 1 + 1 − 8 = 2 → 780 + 24 = 804.
    expect(predictTtftMs({ ...l, oldestPendingMs: 145 }, REQ, PACE)).toBe(804);
  });

  it("a region seen running more than the KV rule fits is taken to fit at least that many", () => {
    // An engine that does not reserve max tokens runs 40 with none waiting: fit 40, nothing to wait for.
    expect(predictTtftMs(load({ running: 40 }), REQ, PACE)).toBe(24);
    // With 1 waiting it is full at 40: short = 40 + 1 + 1 − 40 = 2, the 2nd completion 780 ms on → 804.
    expect(predictTtftMs(load({ running: 40, waiting: 1 }), REQ, PACE)).toBe(804);
  });

  it("the batch limit bounds what fits when KV does not (unknown KV: maxBatch)", () => {
    const pace = { ...PACE, maxBatch: 4 };
    // fit 4; 4 running, 1 waiting: short 2, the 2nd completion 780 ms on → 804.
    expect(predictTtftMs(load({ kvTokensPerInstance: 0, running: 4, waiting: 1 }), REQ, pace)).toBe(804);
  });
});

describe("completionMs", () => {
  it("the k-th completion among the slots; beyond them a freed slot's next request a whole service later", () => {
    expect(completionMs(1, 900, [900, 100, 450])).toBe(100);
    expect(completionMs(2, 900, [900, 100, 450])).toBe(450);
    expect(completionMs(3, 900, [900, 100, 450])).toBe(900);
    expect(completionMs(4, 900, [900, 100, 450])).toBe(1000);
  });
});

describe("spillFrom", () => {
  const c = (region: string, ttftMs: number | undefined, underThreshold = true) => ({ region, underThreshold, ...(ttftMs === undefined ? {} : { ttftMs }) });
  it("keeps the pick within the SLO or unpredictable", () => {
    expect(spillFrom(c("a", 300), [c("b", 10)], 500)).toMatchObject({ to: { region: "a" }, spilled: false, overSlo: false });
    expect(spillFrom(c("a", undefined), [c("b", 10)], 500)).toMatchObject({ to: { region: "a" }, spilled: false, overSlo: false });
  });
  it("leaves a pick beyond the SLO for the first other region under the threshold within it", () => {
    expect(spillFrom(c("a", 900), [c("a", 900), c("b", 600), c("c", 200, false), c("d", 400), c("e", 100)], 500)).toMatchObject({ to: { region: "d" }, spilled: true });
  });
  it("over the threshold only: the first other region within the SLO", () => {
    expect(spillFrom(c("a", 900, false), [c("b", 600), c("c", 100, false), c("d", undefined)], 500)).toMatchObject({ to: { region: "c" }, spilled: true });
  });
  it("keeps the pick and says overSlo when no other region predicts within the SLO", () => {
    expect(spillFrom(c("a", 900), [c("b", 600), c("d", undefined)], 500)).toMatchObject({ to: { region: "a" }, spilled: false, overSlo: true });
  });
  it("alone (no other allowed region), the pick beyond the SLO is kept and not marked for shedding", () => {
    expect(spillFrom(c("a", 900), [], 500)).toMatchObject({ to: { region: "a" }, spilled: false, overSlo: false });
    expect(spillFrom(c("a", 900), [c("a", 900)], 500)).toMatchObject({ to: { region: "a" }, spilled: false, overSlo: false });
  });
});

describe("selectRegion with an SLO (SageServe §6.2 extended)", () => {
  const w = (region: string, utilization: number, ttftMs?: number): RegionCandidate => ({ region, utilization, available: true, ...(ttftMs === undefined ? {} : { ttftMs }) });
  it("the nearest region under the threshold stays while it predicts within the SLO", () => {
    expect(selectRegion([w("east", 0.3, 400), w("west", 0.1, 30)], 0.7, new Set(), 500)).toEqual({ region: "east", reason: "threshold", nearest: true });
  });
  it("spills from a nearest region predicting beyond the SLO, memory far under the threshold", () => {
    expect(selectRegion([w("east", 0.3, 2300), w("west", 0.1, 30)], 0.7, new Set(), 500)).toEqual({ region: "west", reason: "slo-spill", nearest: false });
  });
  it("the memory rule first: east over the threshold, central predicting beyond the SLO, west within", () => {
    expect(selectRegion([w("east", 0.8, 30), w("central", 0.5, 900), w("west", 0.1, 30)], 0.7, new Set(), 500)).toEqual({ region: "west", reason: "slo-spill", nearest: false });
    // Within the SLO, central keeps it (reason threshold, not the nearest).
    expect(selectRegion([w("east", 0.8, 30), w("central", 0.5, 90), w("west", 0.1, 30)], 0.7, new Set(), 500)).toEqual({ region: "central", reason: "threshold", nearest: false });
  });
  it("no other region within the SLO: the pick stands, overSlo", () => {
    expect(selectRegion([w("east", 0.3, 2300), w("west", 0.1, 800)], 0.7, new Set(), 500)).toEqual({ region: "east", reason: "threshold", nearest: true, overSlo: true });
    // An excluded region (tried, or outside the key's regions) is no place to spill to: east alone is kept, not shed.
    expect(selectRegion([w("east", 0.3, 2300), w("west", 0.1, 30)], 0.7, new Set(["west"]), 500)).toEqual({ region: "east", reason: "threshold", nearest: true });
  });
  it("without an SLO nothing spills", () => {
    expect(selectRegion([w("east", 0.3, 2300), w("west", 0.1, 30)], 0.7)).toEqual({ region: "east", reason: "threshold", nearest: true });
  });
  it("a prefix holder predicting beyond the SLO spills too", () => {
    const a = { ...w("a", 0.2, 30), prefixBlocks: 0 };
    const b = { ...w("b", 0.5, 900), prefixBlocks: 40 };
    expect(selectRegion([a, b], 0.7, new Set(), 500)).toEqual({ region: "a", reason: "slo-spill", nearest: true });
  });
});
