import { describe, expect, it } from "vitest";
import { devOverloadChecks, overloadBenchVerdict, overloadChecks, overloadVerdict, recoverySeconds, type DevOverloadFigures, type OverloadFigures } from "./overload.js";

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
};

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
    expect(overloadChecks(GOOD)).toHaveLength(8);
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
