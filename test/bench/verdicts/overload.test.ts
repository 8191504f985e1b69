import { describe, expect, it } from "vitest";
import { OVERLOAD_TARGET, devOverloadChecks, goodputSlo, overloadBenchVerdict, overloadChecks, overloadVerdict, recoverySeconds, type DevOverloadFigures, type OverloadFigures } from "./overload.js";

const GOOD: OverloadFigures = {
  capacityTokensPerS: 1000,
  goodputTokensPerS: 950,
  shedP99Ms: 8,
  admittedTtftP99Ms: 150,
  unloadedTtftP99Ms: 100,
  ejected: 0,
  rssGrowth: 0.05,
  recoveryS: 1,
  tenantGoodput: [500, 450],
  shed: 1200,
  other: 0,
  cutStreams: 0,
  capacity: { requests: 900, failed: 0 },
  unloaded: { requests: 400, failed: 0 },
};
/** Just past a limit: what a figure rounded before the comparison would have let through. */
const JUST = 1e-6;

describe("bench:overload verdict", () => {
  it("meets with every figure in bounds", () => {
    expect(overloadVerdict(GOOD)).toEqual({ met: true, missed: [] });
  });

  it("each failure mode fails its check", () => {
    const missed = (f: Partial<OverloadFigures>) => overloadVerdict({ ...GOOD, ...f }).missed;
    expect(missed({ goodputTokensPerS: 800 })).toEqual(["goodput over unloaded capacity"]);
    expect(missed({ shed: 0, shedP99Ms: Number.NaN })).toEqual(["p99 latency of a 429 (ms)"]); // an overload nothing shed
    expect(missed({ shedP99Ms: 25 })).toEqual(["p99 latency of a 429 (ms)"]);
    expect(missed({ admittedTtftP99Ms: 250 })).toEqual(["admitted p99 TTFT over unloaded"]);
    expect(missed({ unloadedTtftP99Ms: Number.NaN })).toEqual(["admitted p99 TTFT over unloaded"]);
    expect(missed({ ejected: 1 })).toEqual(["engines ejected"]);
    expect(missed({ rssGrowth: 0.3 })).toEqual(["router RSS growth"]);
    expect(missed({ recoveryS: Number.POSITIVE_INFINITY })).toEqual(["TTFT back to normal after the overload (s)"]);
    expect(missed({ tenantGoodput: [700, 300] })).toEqual(["tenant a's share of goodput", "tenant b's share of goodput"]);
    expect(missed({ tenantGoodput: [0, 0], goodputTokensPerS: 0 })).toContain("tenant a's share of goodput");
    expect(overloadVerdict(GOOD, ["BENCH_OVERLOAD_SECONDS=5"])).toMatchObject({ met: false, partial: true });
    expect(overloadChecks(GOOD)).toHaveLength(10);
  });

  it("issue 45: a request neither 200 nor 429 (5xx, timeout), or a stream cut short, fails its own check", () => {
    const missed = (f: Partial<OverloadFigures>) => overloadVerdict({ ...GOOD, ...f }).missed;
    expect(missed({ other: 1 })).toEqual(["overload requests answered neither 200 nor 429 (5xx, timeouts)"]);
    expect(missed({ cutStreams: 2 })).toEqual(["admitted overload streams cut short"]);
    expect(missed({ other: Number.NaN })).toEqual(["overload requests answered neither 200 nor 429 (5xx, timeouts)"]);
  });

  it("issue 45: a baseline that failed requests (capacity, the unloaded phase) fails the checks that read it, naming it", () => {
    const missed = (f: Partial<OverloadFigures>) => overloadVerdict({ ...GOOD, ...f }).missed;
    expect(missed({ capacity: { requests: 900, failed: 3 } })).toEqual(["goodput over unloaded capacity (capacity: 3 of 900 requests failed)"]);
    expect(missed({ unloaded: { requests: 400, failed: 1 } })).toEqual(["goodput over unloaded capacity (unloaded: 1 of 400 requests failed)", "admitted p99 TTFT over unloaded (unloaded: 1 of 400 requests failed)"]);
    // The unloaded p99 on failed requests (+Infinity) is no bar: the ratio is NaN, not 0.
    expect(overloadChecks({ ...GOOD, unloadedTtftP99Ms: Number.POSITIVE_INFINITY })[2]).toMatchObject({ ok: false });
    expect(overloadChecks({ ...GOOD, unloadedTtftP99Ms: Number.POSITIVE_INFINITY })[2]!.value).toBeNaN();
    expect(overloadChecks({ ...GOOD, capacityTokensPerS: Number.POSITIVE_INFINITY })[0]!.ok).toBe(false);
  });

  it("issue 45: NaN and +Infinity in any figure fail its check", () => {
    const inf = Number.POSITIVE_INFINITY;
    const nan = Number.NaN;
    for (const x of [nan, inf]) {
      for (const f of [{ goodputTokensPerS: x }, { capacityTokensPerS: x }, { shedP99Ms: x }, { admittedTtftP99Ms: x }, { unloadedTtftP99Ms: x }, { ejected: x }, { rssGrowth: x }, { recoveryS: x }, { tenantGoodput: [x, 450] as [number, number] }, { other: x }, { cutStreams: x }]) {
        expect(overloadVerdict({ ...GOOD, ...f }).met, JSON.stringify(f)).toBe(false);
      }
    }
  });

  it("issue 45: a figure just past each threshold fails, one just inside passes", () => {
    const T = OVERLOAD_TARGET;
    const met = (f: Partial<OverloadFigures>) => overloadVerdict({ ...GOOD, ...f }).met;
    expect(met({ goodputTokensPerS: 1000 * T.goodputRatio * (1 - JUST) })).toBe(false);
    expect(met({ goodputTokensPerS: 1000 * T.goodputRatio * (1 + JUST), tenantGoodput: [450, 450] })).toBe(true);
    expect(met({ shedP99Ms: T.shedP99Ms + JUST })).toBe(false);
    expect(met({ shedP99Ms: T.shedP99Ms - JUST })).toBe(true);
    expect(met({ admittedTtftP99Ms: 100 * T.admittedTtftP99Ratio * (1 + JUST) })).toBe(false);
    expect(met({ admittedTtftP99Ms: 100 * T.admittedTtftP99Ratio * (1 - JUST) })).toBe(true);
    expect(met({ ejected: 1 })).toBe(false);
    expect(met({ rssGrowth: T.rssGrowth + JUST })).toBe(false);
    expect(met({ rssGrowth: T.rssGrowth - JUST })).toBe(true);
    expect(met({ recoveryS: T.recoveryS + JUST })).toBe(false);
    expect(met({ recoveryS: T.recoveryS - JUST })).toBe(true);
    expect(met({ tenantGoodput: [T.tenantShareMin * 1000 * (1 - JUST), 1000 - T.tenantShareMin * 1000 * (1 - JUST)] })).toBe(false);
    expect(met({ tenantGoodput: [T.tenantShareMax * 1000 * (1 + JUST), 1000 - T.tenantShareMax * 1000 * (1 + JUST)] })).toBe(false);
    expect(met({ tenantGoodput: [T.tenantShareMax * 1000 * (1 - JUST), 1000 - T.tenantShareMax * 1000 * (1 - JUST)] })).toBe(true);
    expect(met({ other: 1 })).toBe(false);
    expect(met({ cutStreams: 1 })).toBe(false);
  });

  it("the goodput SLO widens the configured floor to twice the unloaded p99s (every threshold is in OVERLOAD_TARGET)", () => {
    expect(goodputSlo(300, 20)).toEqual({ ttftMs: 1000, tpotMs: 100 });
    expect(goodputSlo(700, 60)).toEqual({ ttftMs: 1400, tpotMs: 120 });
    expect(goodputSlo(Number.NaN, 20).ttftMs).toBeNaN();
    expect(OVERLOAD_TARGET).toMatchObject({ other: 0, cutStreams: 0, goodputSlo: { ttftFloorMs: 1000, ttftOverUnloadedP99: 2, tpotFloorMs: 100, tpotOverUnloadedP99: 2 }, recoveryNormalOverUnloadedMean: 1.5 });
  });

  it("recoverySeconds: the first window from which every later one is normal", () => {
    const s = (startMs: number, ttftMs: number, shed = false) => ({ startMs, ttftMs, shed });
    // Windows after t=1000: [0,1) slow, [1,2) shed, [2,3) normal, [3,4) normal → 2 s.
    expect(recoverySeconds([s(500, 900), s(1100, 900), s(2200, 10, true), s(3300, 50), s(4100, 40)], 1000, 100)).toBe(2);
    expect(recoverySeconds([s(1100, 50), s(2100, 60)], 1000, 100)).toBe(0);
    expect(recoverySeconds([s(1100, 50), s(2100, 600)], 1000, 100)).toBe(Number.POSITIVE_INFINITY);
    expect(recoverySeconds([s(500, 50)], 1000, 100)).toBeNaN();
  });
});

describe("bench:overload's tidegate dev arm (issue 49)", () => {
  const DEV: DevOverloadFigures = { shedP99Ms: 12, shed: 900, admittedTtftP99Ms: 420, admitted: 300, sloTtftMs: 1000, cutAfter200: 0 };
  it("holds 429 p99 ≤ 50 ms, admitted p99 TTFT ≤ the SLO and no stream cut after its 200, beside the multi-process checks", () => {
    expect(overloadBenchVerdict(GOOD, DEV)).toEqual({ met: true, missed: [] });
    const missed = (d: Partial<DevOverloadFigures>) => overloadBenchVerdict(GOOD, { ...DEV, ...d }).missed;
    expect(missed({ shedP99Ms: 51 })).toEqual(["dev: p99 latency of a 429 (ms)"]);
    expect(missed({ admittedTtftP99Ms: 1001 })).toEqual(["dev: admitted p99 TTFT over the TTFT SLO"]);
    expect(missed({ cutAfter200: 1 })).toEqual(["dev: streams cut after their 200"]);
    expect(overloadBenchVerdict({ ...GOOD, shedP99Ms: 25 }, DEV).missed).toEqual(["p99 latency of a 429 (ms)"]);
  });

  it("an arm that did not run, shed nothing, admitted nothing or left an admitted request unserved fails", () => {
    expect(overloadBenchVerdict(GOOD, undefined)).toMatchObject({ met: false, missed: ["dev arm: tidegate dev under 10 × capacity ran"] });
    expect(devOverloadChecks({ ...DEV, shed: 0, shedP99Ms: Number.NaN })[0]!.ok).toBe(false);
    expect(devOverloadChecks({ ...DEV, admitted: 0, admittedTtftP99Ms: Number.NaN }).map((c) => c.ok)).toEqual([true, false, false]);
    expect(devOverloadChecks({ ...DEV, admittedTtftP99Ms: Number.POSITIVE_INFINITY })[1]!.ok).toBe(false);
    expect(overloadBenchVerdict(GOOD, DEV, ["BENCH_OVERLOAD_DEV_SECONDS=5"])).toMatchObject({ met: false, partial: true });
  });
});
