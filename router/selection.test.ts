import { describe, expect, it } from "vitest";
import { correctedUtilization, preferenceOrder, selectRegion } from "./selection.js";

describe("selectRegion (SageServe §6.2)", () => {
  const c = (region: string, utilization: number, available = true) => ({ region, utilization, available });

  it("takes the first region in preference order under the threshold", () => {
    expect(selectRegion([c("east", 0.75), c("central", 0.65), c("west", 0.1)], 0.7)).toEqual({ region: "central", reason: "threshold" });
  });

  it("a region exactly at the threshold is not under it", () => {
    expect(selectRegion([c("east", 0.7), c("west", 0.69)], 0.7)?.region).toBe("west");
  });

  it("falls back to the least utilized when all are over", () => {
    expect(selectRegion([c("east", 0.9), c("central", 0.8), c("west", 0.95)], 0.7)).toEqual({ region: "central", reason: "least" });
  });

  it("scale from zero: a region serving the model beats any cold one; with none serving, the soonest cold start wins", () => {
    const cold = (region: string, coldStartMs: number) => ({ region, utilization: Number.POSITIVE_INFINITY, available: true, coldStartMs });
    expect(selectRegion([cold("east", 500), c("west", 3)], 0.7)).toEqual({ region: "west", reason: "least" });
    expect(selectRegion([cold("east", 4000), cold("central", 900), cold("west", 900)], 0.7)).toEqual({ region: "central", reason: "cold" });
    expect(selectRegion([cold("east", 4000), cold("central", 900)], 0.7, new Set(["central"]))?.region).toBe("east");
    expect(selectRegion([cold("east", 4000), c("west", 0.1, false)], 0.7)).toEqual({ region: "east", reason: "cold" });
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
