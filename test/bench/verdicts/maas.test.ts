import { describe, expect, it } from "vitest";
import { verdictOf } from "./common.js";
import { MAAS_TARGET, maasChecks, type MaasRow, type MaasTraceRuns } from "./maas.js";

// Issue 45: every check of bench:maas fails on a failed baseline, a NaN, an Infinity and a figure just past its limit.

const row = (meanTtftMs: number, p99TtftMs: number, missRate: number, over: Partial<MaasRow> = {}): MaasRow => ({ requests: 100, failed: 0, meanTtftMs, p99TtftMs, missRate, coldTtftP99Ms: 900, coldLoadP99Ms: 640, ...over });
const code = (over: { ssd?: MaasRow; allcache?: MaasRow; blitzscale?: MaasRow } = {}): MaasTraceRuns => ({
  ssd: { "4": row(800, 6000, 0.17), "2": over.ssd ?? row(1100, 6000, 0.32) },
  arms: { allcache: over.allcache ?? row(200, 800, 0), blitzscale: over.blitzscale ?? row(250, 860, 0.3) },
});
const run = (c: MaasTraceRuns) => maasChecks({ "azure-code": c });
const find = (checks: ReturnType<typeof run>, prefix: string) => checks.find((c) => c.check.startsWith(prefix))!;
const MEAN = "azure-code: blitzscale mean TTFT / ssd";
const P99 = "azure-code: blitzscale p99 TTFT / allcache";
const COLD = "azure-code: blitzscale cold-start TTFT p99";
const JUST = 1e-6;

describe("bench:maas verdict, issue 45", () => {
  it("meets with every arm serving everything within its ratios", () => {
    expect(verdictOf(run(code()))).toEqual({ met: true, missed: [] });
  });

  it("a baseline that failed requests fails the check against it and names it (its +Infinity mean used to give 0, a pass)", () => {
    const ssd = row(Number.POSITIVE_INFINITY, 6000, 0.32, { failed: 4 });
    const mean = find(run(code({ ssd })), MEAN);
    expect(mean).toMatchObject({ ok: false, check: `${MEAN} at 2 models per host (ssd (2/host): 4 of 100 requests failed)` });
    expect(mean.value).toBeNaN();
    // One failed of 100 leaves allcache's p99 finite: the ratio is a number, and still no pass.
    const p99 = find(run(code({ allcache: row(Number.POSITIVE_INFINITY, 800, 0, { failed: 1 }) })), P99);
    expect(p99).toMatchObject({ ok: false, check: `${P99} (allcache: 1 of 100 requests failed)` });
  });

  it("blitzscale failing requests fails all its checks", () => {
    const checks = run(code({ blitzscale: row(250, 860, 0.3, { failed: 1 }) }));
    expect(checks.filter((c) => c.check.includes("blitzscale")).every((c) => !c.ok && c.check.includes("blitzscale: 1 of 100 requests failed"))).toBe(true);
  });

  it("NaN or +Infinity in any figure fails its check", () => {
    for (const x of [Number.NaN, Number.POSITIVE_INFINITY]) {
      expect(find(run(code({ blitzscale: row(x, 860, 0.3) })), MEAN).ok).toBe(false);
      expect(find(run(code({ ssd: row(x, 6000, 0.32) })), MEAN).ok).toBe(false);
      expect(find(run(code({ blitzscale: row(250, x, 0.3) })), P99).ok).toBe(false);
      expect(find(run(code({ allcache: row(200, x, 0) })), P99).ok).toBe(false);
      expect(find(run(code({ blitzscale: row(250, 860, 0.3, { coldTtftP99Ms: x }) })), COLD).ok).toBe(false);
      expect(find(run(code({ blitzscale: row(250, 860, 0.3, { coldLoadP99Ms: -x }) })), COLD).ok).toBe(false);
      expect(run(code({ ssd: row(1100, 6000, x) }))[0]!.ok).toBe(false); // no judged host memory
    }
  });

  it("a figure just past each limit fails, one just inside passes", () => {
    const at = (f: number) => [
      find(run(code({ blitzscale: row(1100 * MAAS_TARGET.blitzVsSsdMeanCode * f, 860, 0.3) })), MEAN).ok,
      find(run(code({ blitzscale: row(250, 800 * MAAS_TARGET.blitzVsAllcacheP99 * f, 0.3) })), P99).ok,
      find(run(code({ blitzscale: row(250, 860, 0.3, { coldTtftP99Ms: 640 + MAAS_TARGET.coldTtftOverLoadMs * f }) })), COLD).ok,
    ];
    expect(at(1 + JUST)).toEqual([false, false, false]);
    expect(at(1 - JUST)).toEqual([true, true, true]);
    // ssd's code-trace miss rate just under 30% at every host memory: no setting to judge at.
    expect(run(code({ ssd: row(1100, 6000, MAAS_TARGET.ssdMissRateCode * (1 - JUST)) }))[0]!.ok).toBe(false);
    expect(run(code({ ssd: row(1100, 6000, MAAS_TARGET.ssdMissRateCode * (1 + JUST)) }))[0]!.ok).toBe(true);
  });
});
