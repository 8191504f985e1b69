import { describe, expect, it } from "vitest";
import { verdictOf } from "./common.js";
import { LIVE_LOADING_TARGET, liveLoadingChecks, type LiveLoadingArm } from "./live-loading.js";

// Issue 45: every check of bench:live-loading fails on a failed baseline, a NaN, an Infinity and a figure just past its limit.

const arm = (name: string, meanTtftMs: number, failed = 0): LiveLoadingArm => ({ name, meanTtftMs, sent: 200, failed });
const GOOD = () => [arm("network", 1000), arm("blitzscale-best-effort", 600), arm("blitzscale", 580)];
const JUST = 1e-6;

describe("bench:live-loading verdict, issue 45", () => {
  it("meets when pairing helps and zigzag is no worse than best effort", () => {
    expect(verdictOf(liveLoadingChecks(GOOD()))).toEqual({ met: true, missed: [] });
  });

  it("a baseline arm that failed requests fails each check against it, naming it", () => {
    const checks = liveLoadingChecks([arm("network", 1000, 4), arm("blitzscale-best-effort", 600), arm("blitzscale", 580)]);
    expect(checks.map((c) => c.ok)).toEqual([false, false, true]);
    expect(checks[0]!.check).toBe("best-effort mean TTFT while loading / network (network: 4 of 200 requests failed)");
    expect(liveLoadingChecks([arm("network", 1000), arm("blitzscale-best-effort", 600, 1), arm("blitzscale", 580)]).map((c) => c.ok)).toEqual([false, true, false]);
  });

  it("NaN or +Infinity in any arm's mean fails the checks that read it (a network mean of +Infinity used to pass)", () => {
    for (const x of [Number.NaN, Number.POSITIVE_INFINITY]) {
      for (const i of [0, 1, 2]) {
        const arms = GOOD();
        arms[i] = { ...arms[i]!, meanTtftMs: x };
        expect(verdictOf(liveLoadingChecks(arms)).met, `${arms[i]!.name} ${x}`).toBe(false);
      }
    }
  });

  it("a ratio just past each limit fails, one just inside passes", () => {
    const T = LIVE_LOADING_TARGET;
    const met = (be: number, zz: number) => verdictOf(liveLoadingChecks([arm("network", 1000), arm("blitzscale-best-effort", be), arm("blitzscale", zz)])).met;
    expect(met(1000 * T.pairedVsNetworkMean, 500)).toBe(false); // strictly below network's
    expect(met(1000 * T.pairedVsNetworkMean * (1 - JUST), 500)).toBe(true);
    expect(met(800, 800 * T.zigzagVsBestEffortMean * (1 + JUST))).toBe(false);
    expect(met(800, 800 * T.zigzagVsBestEffortMean * (1 - JUST))).toBe(true);
  });
});
