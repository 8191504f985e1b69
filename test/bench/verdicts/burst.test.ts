import { describe, expect, it } from "vitest";
import { BURST_TARGET, burstChecks, type BurstRow } from "./burst.js";
import { verdictOf } from "./common.js";

// Issue 45: every check of bench:burst fails on a failed baseline, a NaN, an Infinity and a figure just past its limit.

const row = (meanTtftMs: number, p99TtftMs: number, p90TtftMs: number, untilServingS: number, failed = 0): BurstRow => ({ requests: 1000, failed, meanTtftMs, p99TtftMs, p90TtftMs, untilServingS });
type Arms = Record<string, BurstRow>;
const GOOD: Arms = {
  ssd: row(1000, 5000, 2000, 100),
  allcache: row(200, 900, 400, 20),
  network: row(800, 4000, 1600, 50),
  "blitzscale-best-effort": row(400, 1200, 600, 60),
  blitzscale: row(300, 950, 500, 60),
  lambdascale: row(300, 1500, 600, 40),
  "faasnet-tree": row(800, 4000, 1600, 100),
};
const run = (arms: Arms) => burstChecks({ "llama3.1-8b": { "azure-code": arms } });
/** Each check: the arm judged, its baseline, the figure and the limit (verdicts/burst.ts). */
const CHECKS: { name: string; judged: string; baseline: string; figure: "meanTtftMs" | "p99TtftMs" | "p90TtftMs" | "untilServingS"; limit: number }[] = [
  { name: "blitzscale mean TTFT / ssd", judged: "blitzscale", baseline: "ssd", figure: "meanTtftMs", limit: BURST_TARGET.blitzVsSsdMean },
  { name: "blitzscale p99 TTFT / allcache", judged: "blitzscale", baseline: "allcache", figure: "p99TtftMs", limit: BURST_TARGET.blitzVsAllcacheP99 },
  { name: "zigzag mean TTFT / best-effort", judged: "blitzscale", baseline: "blitzscale-best-effort", figure: "meanTtftMs", limit: BURST_TARGET.zigzagVsBestEffort },
  { name: "zigzag p99 TTFT / best-effort", judged: "blitzscale", baseline: "blitzscale-best-effort", figure: "p99TtftMs", limit: BURST_TARGET.zigzagVsBestEffort },
  { name: "lambdascale p99 TTFT / network", judged: "lambdascale", baseline: "network", figure: "p99TtftMs", limit: BURST_TARGET.lambdaVsNetworkP99Code },
  { name: "lambdascale GPU time until serving / faasnet-tree", judged: "lambdascale", baseline: "faasnet-tree", figure: "untilServingS", limit: BURST_TARGET.lambdaVsTreeGpu },
  { name: "lambdascale p90 TTFT / ssd", judged: "lambdascale", baseline: "ssd", figure: "p90TtftMs", limit: BURST_TARGET.lambdaVsSsdP90 },
];
const find = (checks: ReturnType<typeof run>, name: string) => checks.find((c) => c.check.startsWith(`llama3.1-8b azure-code: ${name}`))!;
const JUST = 1e-6;

describe("bench:burst verdict, issue 45", () => {
  it("meets with every arm serving everything within its ratios", () => {
    expect(verdictOf(run(GOOD))).toEqual({ met: true, missed: [] });
    expect(run(GOOD)).toHaveLength(CHECKS.length);
  });

  it("a baseline that failed requests fails every check against it, naming it — +Infinity figures or finite ones", () => {
    for (const c of CHECKS) {
      const b = GOOD[c.baseline]!;
      // latencyFigures: one failed request makes the mean +Infinity (and the p99 when over 1% fail); until-serving stays finite.
      const failed = { ...b, failed: 3, meanTtftMs: Number.POSITIVE_INFINITY };
      const check = find(run({ ...GOOD, [c.baseline]: failed }), c.name);
      expect(check.ok, c.name).toBe(false);
      expect(check.check).toContain(`(${c.baseline}: 3 of 1000 requests failed)`);
      // 2 failed of 1000: the p99 is finite, the ratio a number, and still no pass.
      expect(find(run({ ...GOOD, [c.baseline]: { ...b, failed: 2 } }), c.name).ok, c.name).toBe(false);
    }
    expect(find(run({ ...GOOD, ssd: { ...GOOD.ssd!, failed: 3, meanTtftMs: Number.POSITIVE_INFINITY } }), "blitzscale mean TTFT / ssd").value).toBeNaN();
  });

  it("a judged arm that failed requests fails its checks, whatever its ratio", () => {
    for (const c of CHECKS) expect(find(run({ ...GOOD, [c.judged]: { ...GOOD[c.judged]!, failed: 1 } }), c.name).ok, c.name).toBe(false);
  });

  it("NaN or +Infinity on either side fails", () => {
    for (const c of CHECKS) {
      for (const x of [Number.NaN, Number.POSITIVE_INFINITY]) {
        for (const arm of [c.judged, c.baseline]) expect(find(run({ ...GOOD, [arm]: { ...GOOD[arm]!, [c.figure]: x } }), c.name).ok, `${c.name} ${arm} ${x}`).toBe(false);
      }
    }
  });

  it("a ratio just over its limit fails, one just under passes", () => {
    for (const c of CHECKS) {
      const base = GOOD[c.baseline]![c.figure];
      const at = (f: number) => find(run({ ...GOOD, [c.judged]: { ...GOOD[c.judged]!, [c.figure]: base * c.limit * f } }), c.name).ok;
      expect(at(1 + JUST), c.name).toBe(false);
      expect(at(1 - JUST), c.name).toBe(true);
    }
  });
});
