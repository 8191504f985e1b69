import { describe, expect, it } from "vitest";
import { correctedUtilization, expectedColdTtftMs, expectedWarmTtftMs, preferenceOrder, selectRegion } from "./selection.js";

describe("selectRegion (SageServe §6.2)", () => {
  const c = (region: string, utilization: number, available = true) => ({ region, utilization, available });

  it("takes the first region in preference order under the threshold", () => {
    expect(selectRegion([c("east", 0.75), c("central", 0.65), c("west", 0.1)], 0.7)).toMatchObject({ region: "central", reason: "threshold" });
  });

  it("a region exactly at the threshold is not under it", () => {
    expect(selectRegion([c("east", 0.7), c("west", 0.69)], 0.7)?.region).toBe("west");
  });

  it("falls back to the least utilized when all are over", () => {
    expect(selectRegion([c("east", 0.9), c("central", 0.8), c("west", 0.95)], 0.7)).toMatchObject({ region: "central", reason: "least" });
  });

  it("scale from zero: a region serving the model beats any cold one; with none serving, the soonest cold start wins", () => {
    const cold = (region: string, coldStartMs: number) => ({ region, utilization: Number.POSITIVE_INFINITY, available: true, coldStartMs });
    expect(selectRegion([cold("east", 500), c("west", 3)], 0.7)).toMatchObject({ region: "west", reason: "least" });
    expect(selectRegion([cold("east", 4000), cold("central", 900), cold("west", 900)], 0.7)).toMatchObject({ region: "central", reason: "cold" });
    expect(selectRegion([cold("east", 4000), cold("central", 900)], 0.7, new Set(["central"]))?.region).toBe("east");
    expect(selectRegion([cold("east", 4000), c("west", 0.1, false)], 0.7)).toMatchObject({ region: "east", reason: "cold" });
  });

  it("warm against cold: a cold start whose expected TTFT is lower than the picked warm region's wins; without both estimates the warm region does", () => {
    const warm = (region: string, utilization: number, ttftMs?: number) => ({ region, utilization, available: true, ...(ttftMs === undefined ? {} : { ttftMs }) });
    const cold = (region: string, coldStartMs: number, ttftMs?: number) => ({ region, utilization: Number.POSITIVE_INFINITY, available: true, coldStartMs, ...(ttftMs === undefined ? {} : { ttftMs }) });
    // west is over the threshold with a long queue (least utilized, 9 s to a first token); east's cold start: 4.2 s.
    expect(selectRegion([cold("east", 4000, 4200), warm("west", 0.95, 9000)], 0.7)).toMatchObject({ region: "east", reason: "cold-sooner" });
    // The warm pick is under the threshold and quick: it stays.
    expect(selectRegion([cold("east", 4000, 4200), warm("west", 0.3, 350)], 0.7)).toMatchObject({ region: "west", reason: "threshold" });
    // Equal: the warm region (strictly lower wins).
    expect(selectRegion([cold("east", 4000, 4200), warm("west", 0.95, 4200)], 0.7)).toMatchObject({ region: "west", reason: "least" });
    // An estimate missing on either side: the warm region, as before.
    expect(selectRegion([cold("east", 4000), warm("west", 0.95, 9000)], 0.7)?.region).toBe("west");
    expect(selectRegion([cold("east", 4000, 4200), warm("west", 0.95)], 0.7)?.region).toBe("west");
    // Compared with the warm region §6.2 picks (the first under the threshold), not the quickest warm one.
    expect(selectRegion([warm("central", 0.6, 5000), cold("east", 4000, 4200), warm("west", 0.1, 100)], 0.7)).toMatchObject({ region: "east", reason: "cold-sooner" });
  });

  it("expected TTFT: warm = a step + (waiting per instance + 1) prefills; cold = the cold start + (held + 1) prefills", () => {
    expect(expectedWarmTtftMs({ waiting: 6, serving: 2, prefillMs: 80, stepMs: 30 })).toBe(350);
    expect(expectedWarmTtftMs({ waiting: 0, serving: 3, prefillMs: 80, stepMs: 30 })).toBe(110);
    expect(expectedWarmTtftMs({ waiting: 10, serving: 0, prefillMs: 10, stepMs: 0 })).toBe(110);
    expect(expectedColdTtftMs(4000, 2, 80)).toBe(4240);
    expect(expectedColdTtftMs(Number.POSITIVE_INFINITY, 0, 80)).toBe(Number.POSITIVE_INFINITY);
  });

  it("skips unavailable and excluded regions, and returns undefined when none is left", () => {
    expect(selectRegion([c("east", 0.1, false), c("west", 0.2)], 0.7)?.region).toBe("west");
    expect(selectRegion([c("east", 0.1), c("west", 0.2)], 0.7, new Set(["east"]))?.region).toBe("west");
    expect(selectRegion([c("east", 0.1, false)], 0.7)).toBeUndefined();
  });

  it("orders regions: client's own, its proximity list, then the rest", () => {
    const prox = { west: ["central", "east"] };
    expect(preferenceOrder(["east", "central", "west"], "west", prox)).toEqual(["west", "central", "east"]);
    expect(preferenceOrder(["east", "central"], "west", prox)).toEqual(["central", "east"]);
    expect(preferenceOrder(["east", "central", "west"], undefined, prox)).toEqual(["east", "central", "west"]);
  });

  it("adds in-flight KV bytes to the reported utilization", () => {
    expect(correctedUtilization(0.5, 250, 1000)).toBeCloseTo(0.75);
    expect(correctedUtilization(0.5, 250, 0)).toBe(0.5);
  });
});

describe("selectRegion with prefix affinity (issue 34)", () => {
  const c = (region: string, utilization: number, prefixBlocks?: number) => ({ region, utilization, available: true, ...(prefixBlocks === undefined ? {} : { prefixBlocks }) });
  it("prefers the region under the threshold holding the longest prefix; the 0.70 rule still decides eligibility", () => {
    expect(selectRegion([c("a", 0.2, 0), c("b", 0.5, 40)], 0.7)).toMatchObject({ region: "b", reason: "prefix" });
    expect(selectRegion([c("a", 0.2, 10), c("b", 0.5, 40), c("c", 0.1, 39)], 0.7)).toMatchObject({ region: "b", reason: "prefix" });
    // The holder above the threshold: the first under it, as without prefixes.
    expect(selectRegion([c("a", 0.2, 0), c("b", 0.75, 40)], 0.7)).toMatchObject({ region: "a", reason: "threshold" });
    // A tie, or the first in preference order holding the most: the plain threshold pick.
    expect(selectRegion([c("a", 0.2, 40), c("b", 0.5, 40)], 0.7)).toMatchObject({ region: "a", reason: "threshold" });
    expect(selectRegion([c("a", 0.2), c("b", 0.5)], 0.7)).toMatchObject({ region: "a", reason: "threshold" });
    // None under the threshold: the least utilized, whatever it holds.
    expect(selectRegion([c("a", 0.9, 0), c("b", 0.8, 0), c("c", 0.95, 40)], 0.7)).toMatchObject({ region: "b", reason: "least" });
  });
});
