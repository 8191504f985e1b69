import { describe, expect, it } from "vitest";
import { nestedLeaveConfigOut } from "../../core/perf/nested.js";
import { errorOn, fitProfile } from "../../core/perf/fit.js";
import { fitAll } from "../../core/perf/evaluate.js";
import type { MeasuredRow } from "../../core/perf/data.js";
import { latencyFigures, type LatencyRecord } from "../../sim/replay/loading.js";
import { batchChecks, runsChecks, type FillRound, type TtftRound } from "./verdicts/batch.js";
import { burstChecks, pdBurstChecks, type BurstRow } from "./verdicts/burst.js";
import { atLeast, atMost, envOverrides, failuresNote, ratio, verdictOf } from "./verdicts/common.js";
import { binomialOverTree, dataplaneMet } from "./verdicts/dataplane.js";
import { keystageChecks, type KeystageArm } from "./verdicts/keystage.js";
import { judgedHostSize, lambdaP90VsSsd, maasChecks, type MaasRow, type MaasTraceRuns } from "./verdicts/maas.js";
import { replayChecks, type ReplayFigures } from "./verdicts/replay.js";
import { routerChecks, type RouterFigures } from "./verdicts/router.js";
import { scaleoutChecks } from "./verdicts/scaleout.js";

// Issue 36: for each bench, results where a target is missed in a way `met` used to let through.

describe("verdict building blocks", () => {
  it("no data, +Infinity and two unserved sides never pass", () => {
    expect(atMost(Number.NaN, 1)).toBe(false);
    expect(atMost(Number.POSITIVE_INFINITY, Number.POSITIVE_INFINITY)).toBe(false);
    expect(atLeast(Number.POSITIVE_INFINITY, 2)).toBe(false);
    expect(ratio(Number.POSITIVE_INFINITY, Number.POSITIVE_INFINITY)).toBeNaN();
    expect(ratio(Number.POSITIVE_INFINITY, 100)).toBeNaN();
    // Issue 45: a baseline that failed (+Infinity) is no bar; this used to be 0, a pass of every "≤" check.
    expect(ratio(100, Number.POSITIVE_INFINITY)).toBeNaN();
    expect(ratio(100, Number.NaN)).toBeNaN();
    expect(ratio(100, 0)).toBeNaN();
    expect(ratio(100, 200)).toBe(0.5);
  });

  it("a check's note names each arm that failed and how many; none failed, no note", () => {
    expect(failuresNote([{ arm: "blitzscale", failed: 0, requests: 100 }, { arm: "ssd", failed: 0, requests: 100 }])).toBe("");
    expect(failuresNote([{ arm: "blitzscale", failed: 0, requests: 100 }, { arm: "ssd", failed: 3, requests: 100 }])).toBe(" (ssd: 3 of 100 requests failed)");
    expect(failuresNote([{ arm: "JSQ", failed: 2, requests: 9, what: "requests unserved" }, { arm: "x", failed: Number.NaN, requests: 9 }])).toBe(" (JSQ: 2 of 9 requests unserved; x: NaN of 9 requests failed)");
  });

  it("a run shrunk by the environment is partial and not met, even when every check holds", () => {
    const shrunk = envOverrides(["SCALEOUT_NS", "UNSET_SETTING"], { SCALEOUT_NS: "2" });
    expect(shrunk).toEqual(["SCALEOUT_NS=2"]);
    expect(verdictOf({ a: true }, shrunk)).toEqual({ met: false, partial: true, shrunk: ["SCALEOUT_NS=2"], missed: [] });
    expect(verdictOf({ a: true }).met).toBe(true);
    expect(verdictOf([]).met).toBe(false); // nothing checked is not a pass
  });
});

describe("bench:burst", () => {
  const row = (meanTtftMs: number, p99TtftMs: number, failed = 0, untilServingS = 100): BurstRow => ({ requests: 1000, failed, meanTtftMs, p99TtftMs, p90TtftMs: p99TtftMs / 2, untilServingS });
  const results = (blitz: BurstRow, lambda = row(300, 1500, 0, 80)) => ({
    "llama3.1-8b": { "azure-code": { ssd: row(1000, 5000), allcache: row(200, 900), network: row(800, 4000), "blitzscale-best-effort": row(400, 1200), blitzscale: blitz, lambdascale: lambda, "faasnet-tree": row(800, 4000, 0, 100), "nccl-ring": row(800, 4000, 0, 95) } },
  });

  it("passes when the judged configuration serves every request within its ratios", () => {
    expect(burstChecks(results(row(300, 950))).every((c) => c.ok)).toBe(true);
  });

  it("λScale's checks (issue 35): GPU time until serving ≤ 0.85 × the binary tree's, p90 TTFT ≤ 0.5 × ssd's; an arm not run misses", () => {
    const gpu = (c: ReturnType<typeof burstChecks>) => c.find((x) => x.check.includes("GPU time until serving / faasnet-tree"))!;
    expect(gpu(burstChecks(results(row(300, 950)))).value).toBe(0.8);
    expect(gpu(burstChecks(results(row(300, 950), row(300, 1500, 0, 90)))).ok).toBe(false);
    const p90 = burstChecks(results(row(300, 950), row(300, 6000, 0, 80))).find((x) => x.check.includes("p90 TTFT / ssd"))!;
    expect(p90).toMatchObject({ value: 1.2, ok: false });
    const r = results(row(300, 950)) as Record<string, Record<string, Record<string, BurstRow>>>;
    delete r["llama3.1-8b"]!["azure-code"]!["faasnet-tree"];
    expect(burstChecks(r).find((x) => x.check.includes("faasnet-tree (not run)"))!.ok).toBe(false);
  });

  it("a configuration that fails requests misses, even with a lower TTFT over the ones it served", () => {
    const checks = burstChecks(results(row(100, 500, 7)));
    expect(checks.filter((c) => c.check.includes("blitzscale") || c.check.includes("zigzag")).every((c) => !c.ok)).toBe(true);
    expect(checks.find((c) => c.check.includes("zigzag mean"))!.check).toContain("7 of 1000 requests failed");
    expect(verdictOf(checks).met).toBe(false);
  });

  it("the run's figures count a failed request as an SLO miss and +Infinity TTFT", () => {
    const ok: LatencyRecord = { arrivalMs: 0, firstTokenMs: 10, doneMs: 20, promptTokens: 100, outputTokens: 2 };
    const failed: LatencyRecord = { arrivalMs: 0, firstTokenMs: -1, doneMs: 5, promptTokens: 100, outputTokens: 0, error: "dropped" };
    const slo = { prefillMs: () => 100, decodeIterMs: 100 };
    const f = latencyFigures([ok, ok, ok, failed], slo);
    expect(f.failed).toBe(1);
    expect(f.meanTtftMs).toBe(Number.POSITIVE_INFINITY);
    expect(f.p99TtftMs).toBe(Number.POSITIVE_INFINITY);
    expect(f.sloAttainment).toBe(0.75);
    expect(latencyFigures([], slo).meanTtftMs).toBeNaN();
  });
});

describe("bench:burst, disaggregated setting (issue 48)", () => {
  it("passes a switch ≥ 3× sooner than a load and KV within 1.2× beside a multicast; fails a NaN, a failed request, or KV past 1.2×", () => {
    const sw = (switchMedianMs: number, failed = 0) => ({ switchMedianMs, failed, requests: 100 });
    const ld = (loadMedianMs: number, failed = 0) => ({ loadMedianMs, failed, requests: 100 });
    const ok = pdBurstChecks(sw(10), ld(100), 1.1);
    expect(ok.map((c) => c.ok)).toEqual([true, true]);
    expect(ok[0]!.value).toBeCloseTo(0.1, 9);
    // 40 / 100 = 0.4 > 1/3; no switch or no load (NaN) never passes; nor a run that failed a request.
    expect(pdBurstChecks(sw(40), ld(100), 1)[0]!.ok).toBe(false);
    expect(pdBurstChecks(sw(Number.NaN), ld(100), 1)[0]!.ok).toBe(false);
    expect(pdBurstChecks(sw(1), ld(Number.NaN), 1)[0]!.ok).toBe(false);
    expect(pdBurstChecks(sw(1, 2), ld(100), 1)[0]).toMatchObject({ ok: false, check: expect.stringContaining("pdSwitch: 2 of 100 requests failed") });
    expect(pdBurstChecks(sw(1), ld(100), 1.25)[1]!.ok).toBe(false);
  });
});

describe("bench:maas", () => {
  const row = (meanTtftMs: number, p99TtftMs: number, missRate: number, over: Partial<MaasRow> = {}): MaasRow => ({ requests: 100, failed: 0, meanTtftMs, p99TtftMs, missRate, coldTtftP99Ms: 900, coldLoadP99Ms: 640, ...over });
  const runs = (ssd: Record<string, MaasRow>, blitz: MaasRow): MaasTraceRuns => ({ ssd, arms: { allcache: row(200, 800, 0), blitzscale: blitz } });

  it("reads the ssd ratios at the largest host memory where ssd misses ≥ 30% of its scale-outs on the code trace", () => {
    const code = runs({ "4": row(800, 6000, 0.17), "2": row(1100, 6000, 0.32), "1": row(1900, 6000, 0.5) }, row(250, 860, 0.3));
    expect(judgedHostSize(code)).toBe("2");
    const checks = maasChecks({ "azure-code": code, "azure-conv": runs({ "4": row(200, 6000, 0.1), "2": row(300, 6000, 0.15), "1": row(250, 6000, 0.12) }, row(100, 700, 0.2)) });
    expect(checks.filter((c) => !c.ok).map((c) => c.check)).toEqual([]);
    expect(checks.find((c) => c.check.startsWith("azure-code: blitzscale mean"))!.value).toBeCloseTo(250 / 1100);
  });

  it("misses when no host memory of the sweep makes ssd miss 30%, and when blitzscale failed requests", () => {
    const low = runs({ "4": row(800, 6000, 0.17), "2": row(900, 6000, 0.2) }, row(250, 860, 0.3));
    const checks = maasChecks({ "azure-code": low });
    expect(checks[0]!.ok).toBe(false);
    expect(checks[0]!.value).toBeCloseTo(0.2);
    expect(checks.find((c) => c.check.includes("mean TTFT / ssd"))!.ok).toBe(false);
    const failed = maasChecks({ "azure-code": runs({ "2": row(1100, 6000, 0.4) }, row(250, 860, 0.3, { failed: 3 })) });
    expect(failed.filter((c) => c.check.includes("blitzscale")).every((c) => !c.ok)).toBe(true);
  });

  it("reports lambdascale's p90 TTFT over ssd's at the judged host memory (issue 35), NaN without the arm", () => {
    const code: MaasTraceRuns = { ssd: { "4": row(800, 6000, 0.17, { p90TtftMs: 9000 }), "2": row(1100, 6000, 0.32, { p90TtftMs: 4000 }) }, arms: { allcache: row(200, 800, 0), blitzscale: row(250, 860, 0.3), lambdascale: row(260, 870, 0.3, { p90TtftMs: 1000 }) } };
    expect(lambdaP90VsSsd({ "azure-code": code })).toEqual({ "azure-code": 0.25 });
    expect(lambdaP90VsSsd({ "azure-code": runs({ "2": row(1100, 6000, 0.32) }, row(250, 860, 0.3)) })["azure-code"]).toBeNaN();
  });
});

describe("bench:keystage", () => {
  const arm = (meanMs: number, goodputTokensPerS: number, completed = 3000): KeystageArm => ({ meanMs, goodputTokensPerS, completed, requests: 3000 });

  it("key-stage that left requests unfinished misses, whatever its latency over the finished ones", () => {
    const checks = keystageChecks([{ name: "cv8", cv: 8, keyStage: arm(1000, 50, 2990), wholePipeline: arm(5000, 10) }]);
    expect(checks).toHaveLength(2);
    expect(checks.every((c) => !c.ok)).toBe(true);
    expect(keystageChecks([{ name: "cv8", cv: 8, keyStage: arm(1000, 50), wholePipeline: arm(5000, 10) }]).every((c) => c.ok)).toBe(true);
  });

  it("a whole-pipeline goodput of 0 is no ratio to pass on; an unfinished key-stage mean (+Infinity) is no reduction", () => {
    expect(keystageChecks([{ name: "cv4", cv: 4, keyStage: arm(1000, 0), wholePipeline: arm(5000, 0) }]).find((c) => c.check.includes("goodput"))!.ok).toBe(false);
    expect(keystageChecks([{ name: "cv2", cv: 2, keyStage: arm(Number.POSITIVE_INFINITY, 5), wholePipeline: arm(Number.POSITIVE_INFINITY, 5) }])[0]!.ok).toBe(false);
  });
});

describe("bench:batch", () => {
  const fill = (ratio: number, batchComplete = true): FillRound => ({ directTokensPerS: 10_000, batchTokensPerS: 10_000 * ratio, batchComplete, directRequests: 10_000, directFailed: 0 });
  const ttft = (alone: number[], beside: number[], batchComplete = true): TtftRound => ({ aloneMs: alone, besideMs: beside, batchComplete, aloneFailed: 0, besideFailed: 0 });

  it("an empty beside arm is no data: the TTFT figure fails (it used to be a mean of 0)", () => {
    const r = batchChecks([fill(0.9), fill(0.9), fill(0.9)], [ttft([14, 15], [14.5]), ttft([14, 15], []), ttft([14, 15], [14.6])]);
    expect(r.ttftRatio).toBeNaN();
    expect(r.checks.find((c) => c.check.includes("TTFT"))!.ok).toBe(false);
    expect(r.checks.find((c) => c.check.includes("fill"))!.ok).toBe(true);
  });

  it("a round whose batch did not complete every request has no ratio", () => {
    const r = batchChecks([fill(0.95), fill(0.95, false), fill(0.95)], [ttft([14], [14.2]), ttft([14], [14.3]), ttft([14], [14.1])]);
    expect(r.fillRatio).toBeNaN();
    expect(verdictOf(r.checks).met).toBe(false);
    expect(verdictOf(batchChecks([fill(0.95)], [ttft([14], [14.2])]).checks).met).toBe(true);
  });

  it("fill must reach 0.9 now (issue 37): 0.85 fails", () => {
    expect(batchChecks([fill(0.85)], [ttft([14], [14.2])]).checks.find((c) => c.check.includes("fill"))!.ok).toBe(false);
  });

  it("--runs: every run must meet both; the worst run decides and a run with no figure fails", () => {
    const ok = runsChecks([{ fillRatio: 0.95, ttftRatio: 1.02 }, { fillRatio: 0.93, ttftRatio: 1.04 }]);
    expect(ok).toMatchObject({ worstFillRatio: 0.93, worstTtftRatio: 1.04 });
    expect(verdictOf(ok.checks).met).toBe(true);
    expect(verdictOf(runsChecks([{ fillRatio: 0.95, ttftRatio: 1.02 }, { fillRatio: 0.95, ttftRatio: 1.06 }]).checks).missed).toHaveLength(1);
    expect(verdictOf(runsChecks([{ fillRatio: 0.95, ttftRatio: 1.02 }, { fillRatio: Number.NaN, ttftRatio: 1.0 }]).checks).met).toBe(false);
    expect(verdictOf(runsChecks([]).checks).met).toBe(false);
  });

  it("a smaller BENCH_BATCH_N is partial, never met", () => {
    const r = batchChecks([fill(0.95)], [ttft([14], [14.2])]);
    expect(verdictOf(r.checks, envOverrides(["BENCH_BATCH_N"], { BENCH_BATCH_N: "500" }))).toMatchObject({ met: false, partial: true });
  });
});

describe("bench:replay", () => {
  const good: ReplayFigures = { replayWallMs: 900, requests: 100, served: 100, ttftMape: 0.02, tpotMape: 0.02, nestedLocoTtftMape: 0.049, nestedLocoTpotMape: 0.024 };
  /** Profiles of one profiler, each the same curves × a factor: a prompt sweep at batch 1 and a batch sweep at 512. */
  const synthetic = (repeats: number[]): MeasuredRow[] => {
    const rows: MeasuredRow[] = [];
    const points = [...[128, 256, 512, 1024, 2048].map((promptTokens) => ({ promptTokens, batch: 1 })), ...[2, 4, 8].map((batch) => ({ promptTokens: 512, batch }))];
    for (const [model, f] of [["a", 1], ["b", 2], ["c", 3], ["d", 5]] as const) {
      for (const { promptTokens, batch } of points) {
        for (const repeat of repeats) rows.push({ source: "s", model, gpu: "g", tp: 1, promptTokens, batch, outputTokens: 64, repeat, prefillMs: f * (20 + (batch * promptTokens) / 10), decodeIterMs: f * (10 + 2 * batch) });
      }
    }
    return rows;
  };

  it("an error with no held-out rows is no data (NaN), and no data fails", () => {
    const rows = synthetic([0, 1]);
    const e = errorOn(fitProfile(rows.filter((r) => r.model === "a")), []);
    expect(e.ttftMape).toBeNaN();
    expect(e.tpotMape).toBeNaN();
    // Every row is a training row (no 5th run): the held-out figure has nothing to score.
    const report = fitAll(rows);
    expect(report.heldOutRows).toBe(0);
    expect(report.ttftMape).toBeNaN();
    const checks = replayChecks({ ...good, ttftMape: report.ttftMape, tpotMape: report.tpotMape });
    expect(checks.filter((c) => !c.ok).map((c) => c.check)).toEqual(["held-out TTFT MAPE", "held-out TPOT MAPE"]);
    expect(verdictOf(replayChecks(good)).met).toBe(true);
  });

  it("the nested figure is the one held to 5%: a miss there is a miss, whatever plain LOCO says", () => {
    expect(verdictOf(replayChecks({ ...good, nestedLocoTtftMape: 0.0501 })).missed).toEqual(["nested LOCO TTFT MAPE"]);
    expect(verdictOf(replayChecks({ ...good, served: 99 })).met).toBe(false);
  });

  it("nested LOCO predicts every left-out configuration exactly when the profiles share their shape", () => {
    const n = nestedLeaveConfigOut(synthetic([0, 1]), [{ siblingWeight: 0 }, { siblingWeight: 0.5 }]);
    expect(n.configurations).toBe(32);
    expect(n.ttftMape).toBeCloseTo(0, 9);
    expect(n.tpotMape).toBeCloseTo(0, 9);
    expect(n.chosen.reduce((a, b) => a + b, 0)).toBe(32);
  });

  it("nested LOCO uses nothing of the outer configuration: ×100 on its runs leaves its prediction unchanged", () => {
    const rows = synthetic([0, 1]).map((r) => (r.model === "b" && r.promptTokens === 1024 ? { ...r, prefillMs: r.prefillMs * 100 } : r));
    const n = nestedLeaveConfigOut(rows, [{ siblingWeight: 0 }, { siblingWeight: 0.5 }]);
    // The scaled configuration is predicted at its unscaled value (|y − 100y| / 100y = 0.99 on its 2 runs); the
    // others are fitted with it as a peer knot, so only their row share of the error is left to bound.
    expect(n.ttftMape).toBeGreaterThanOrEqual((0.99 * 2) / n.ttftRows - 1e-9);
  });
});

describe("bench:scaleout and bench:dataplane", () => {
  it("a missing N, or a transfer time that is not the data plane's (none measured), fails", () => {
    const rows = [{ n: 2, totalMs: 2300, transferMs: 2100 }, { n: 4, totalMs: 4000, transferMs: 3600 }, { n: 8, totalMs: 4400, transferMs: 4000 }];
    expect(scaleoutChecks(rows).every((c) => c.ok)).toBe(true);
    expect(scaleoutChecks(rows.slice(0, 1)).filter((c) => !c.ok)).toHaveLength(2);
    expect(scaleoutChecks([{ ...rows[0]!, transferMs: Number.NaN }, rows[1]!, rows[2]!])[0]!.ok).toBe(false);
    // Overhead 600 ms on a 2 s transfer: allowed max(300, 300) = 300.
    expect(scaleoutChecks([{ n: 2, totalMs: 2600, transferMs: 2000 }, rows[1]!, rows[2]!])[0]!.ok).toBe(false);
    expect(verdictOf(scaleoutChecks(rows), envOverrides(["SCALEOUT_NS"], { SCALEOUT_NS: "2,4,8" })).met).toBe(false);
  });

  it("DATAPLANE_NODES=2 measures one N: not met for 2, 4 and 8", () => {
    const target = { p2pFractionOfRawTcp: 0.9, multicastTimeOverIdealMax: 1.15, nodes: [2, 4, 8], binomialOverTreeMin: 1.5, speedupNodes: 9 };
    const N9 = { binomial: { ratio: 1.1, seconds: 20 }, tree: { ratio: 1.05, seconds: 40 } };
    const all = { N2: { chain: { ratio: 1.05 }, binomial: { ratio: 1.06 } }, N4: { chain: { ratio: 1.08 }, binomial: { ratio: 1.09 } }, N8: { chain: { ratio: 1.1 }, binomial: { ratio: 1.12 } }, N9 };
    const f = { error: undefined, p2pFraction: 0.95, notRun: undefined, multicast: all, hetero: { bandwidthFirstCopyS: 1, insertionFirstCopyS: 2 }, shrunk: [] };
    expect(dataplaneMet(f, target)).toBe(true);
    expect(dataplaneMet({ ...f, multicast: { N2: all.N2 } }, target)).toBe(false);
    // λScale's baseline: binomial only 1.4× faster than the binary tree at 8 targets, or no tree run there, misses.
    expect(binomialOverTree({ multicast: all }, 9)).toBe(2);
    expect(dataplaneMet({ ...f, multicast: { ...all, N9: { ...N9, tree: { ratio: 1, seconds: 28 } } } }, target)).toBe(false);
    expect(dataplaneMet({ ...f, multicast: { ...all, N9: { binomial: N9.binomial } } }, target)).toBe(false);
    expect(dataplaneMet({ ...f, shrunk: ["DATAPLANE_NODES=2,4,8"] }, target)).toBe(false);
  });
});

describe("bench:router", () => {
  const good: RouterFigures = {
    throughputVsNginx: 0.99,
    addedTtftP50Ms: 2,
    nginxAddedTtftP50Ms: 1,
    addedTtftP50MsSingleStream: 0.4,
    cpuUsPerToken: { global: 9, region: 9.5 },
    cpuVsNodePipe: { global: 1.2, region: 1.4 },
    streams: { direct: { failed: 0, total: 280 }, nginx: { failed: 0, total: 280 }, pipe: { failed: 0, total: 280 }, tidegate: { failed: 0, total: 280 } },
  };
  const missed = (f: RouterFigures) => routerChecks(f).filter((c) => !c.ok).map((c) => c.check);

  it("meets every target, and each figure over its limit fails its own check only", () => {
    expect(missed(good)).toEqual([]);
    expect(verdictOf(routerChecks(good)).met).toBe(true);
    expect(missed({ ...good, cpuVsNodePipe: { global: 1.51, region: 1.4 } })).toEqual(["cpuGlobalVsNodePipe"]);
    expect(missed({ ...good, cpuVsNodePipe: { global: 1.2, region: 1.6 } })).toEqual(["cpuRegionVsNodePipe"]);
    expect(missed({ ...good, cpuUsPerToken: { global: 11, region: 9 } })).toEqual(["cpuGlobal"]);
    expect(missed({ ...good, throughputVsNginx: 0.96 })).toEqual(["throughput"]);
    expect(missed({ ...good, streams: { ...good.streams, direct: { failed: 1, total: 280 } } })).toEqual(["addedTtft32Streams (direct: 1 of 280 streams failed)", "addedTtftSingleStream (direct: 1 of 280 streams failed)", "addedTtftSingleStreamTwoHops (direct: 1 of 280 streams failed)", "noFailedStreams (direct: 1 of 280 streams failed)"]);
  });

  it("one stream 0.5–1 ms added misses issue 15's target only; over 1 ms misses issue 32's too", () => {
    expect(missed({ ...good, addedTtftP50MsSingleStream: 0.8 })).toEqual(["addedTtftSingleStream"]);
    expect(missed({ ...good, addedTtftP50MsSingleStream: 1.2 })).toEqual(["addedTtftSingleStream", "addedTtftSingleStreamTwoHops"]);
  });

  it("a ratio to arm P that was not measured (NaN: P's CPU read 0 ticks) or is infinite fails", () => {
    expect(missed({ ...good, cpuVsNodePipe: { global: Number.NaN, region: 1.4 } })).toEqual(["cpuGlobalVsNodePipe"]);
    expect(missed({ ...good, cpuVsNodePipe: { global: 1.2, region: Number.POSITIVE_INFINITY } })).toEqual(["cpuRegionVsNodePipe"]);
    expect(missed({ ...good, addedTtftP50MsSingleStream: Number.NaN })).toEqual(["addedTtftSingleStream", "addedTtftSingleStreamTwoHops"]);
  });

  it("nginx's added TTFT at or under zero asks tidegate's to be at or under zero; an unmeasured one fails", () => {
    expect(missed({ ...good, nginxAddedTtftP50Ms: -0.3, addedTtftP50Ms: 0.1 })).toEqual(["addedTtft32Streams"]);
    expect(missed({ ...good, nginxAddedTtftP50Ms: -0.3, addedTtftP50Ms: -0.1 })).toEqual([]);
    expect(missed({ ...good, nginxAddedTtftP50Ms: Number.NaN })).toEqual(["addedTtft32Streams"]);
  });

  it("a shrunk run is partial and not met even when every check holds", () => {
    const v = verdictOf(routerChecks(good), envOverrides(["BENCH_ROUNDS"], { BENCH_ROUNDS: "1" }));
    expect(v.met).toBe(false);
    expect(v.partial).toBe(true);
  });
});
