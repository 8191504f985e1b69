/**
 * `npm run bench:strategies`: the five scaling strategies on the same seeded week (one run each, the same workload
 * and fleet; runs go two at a time in worker threads on this 2-core box), LT-UA judged against two baselines
 * measured in the same bench (issue 11): `reactive`, SageServe §7.2's rule exactly (so its −22.8% compares like
 * for like), and `reactive-hpa`, Kubernetes HPA semantics, what operators run today. Figures: instance-hours,
 * GPU-hours lost to provisioning, interactive p95 TTFT with unserved requests counted as SLO misses (+Infinity),
 * each strategy's unserved count, batch requests within deadline; then the 8× burst (SageServe §7.3.4): one
 * model's load × 8 for 20 minutes in the last third of an hour, and the minutes each of the five takes to return
 * to the latency target. Prints machine, versions, inputs and every run; the last line is the JSON summary with
 * its targets and `met`. `--days N` shortens the week (`met` is then false: the targets are for the week);
 * `--parallel N` runs N strategies at a time (default: one per core, at most 2).
 *
 * `--loading SOURCE` (issue 12) puts a loading source in the loop: every region's config `controller.loading`
 * (region/liveload/liveload-config.ts), so scale-outs take the source's layer arrivals at BlitzScale Table 1's bandwidths,
 * loading instances serve through its live scheduler (blitzscale: zigzag pairing), and the regions report the
 * source's scale-out time to the planner (its model-start cost) instead of SageServe's constants. The whole bench
 * then runs on it, and reactive and LT-UA also run once more on the constant delays in the same bench, so LT-UA's
 * instance-hours against reactive print beside today's figure; the JSON gains `loading` with both and the aim
 * (LT-UA ≥ 30% fewer instance-hours than reactive at p95 TTFT × ≤ 1.05), a check of its own.
 */
import { cpus, loadavg, totalmem } from "node:os";
import { latencyTarget, minuteP95, recoveryMinutes } from "../../sim/week/burst.js";
import { describeBandwidths } from "../../region/liveload/sources.js";
import { loadWeekInputs } from "../../bin/replay-week-cli.js";
import { withLoading } from "../../sim/week/fleet.js";
import { createPlanner } from "../../sim/week/planner.js";
import { writeReports } from "../../sim/week/report.js";
import type { WeekResult } from "../../sim/week/result.js";
import { lineChart } from "../../sim/week/svg.js";
import type { WorkloadSpec } from "../../sim/workload/spec.js";
import { jsonFigure, verdictOf } from "./verdicts/common.js";
import { LOADING_AIM, STRATEGIES_TARGET as target, strategiesChecks, versus as versusOf, type WeekFigures } from "./verdicts/strategies.js";
import { runWeeks } from "./week-runs.js";

try {
  await main();
} catch (err) {
  // BENCH.md: the JSON line comes even when the run fails.
  console.log(JSON.stringify({ bench: "strategies", met: false, target, error: err instanceof Error ? err.message : String(err) }));
  process.exitCode = 1;
}

function flag(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i === -1 ? undefined : process.argv[i + 1];
}

/** +Infinity (a percentile on unserved requests, a burst never recovered) as a JSON-safe string. */
function finite(x: number): number | string {
  return Number.isFinite(x) ? x : String(x);
}

/** What the verdict reads of a week. */
function figuresOf(r: WeekResult): WeekFigures {
  return { instanceHours: r.totals.instanceHours, provisioningGpuHours: r.totals.provisioningGpuHours, p95TtftMs: r.interactive.ttftMs.p95, unserved: r.requests.interactiveUnserved, batchAllWithinDeadline: r.batch.allWithinDeadline };
}

function line(r: WeekResult): string {
  return `  ${r.strategy.padEnd(12)} instance-h ${r.totals.instanceHours}  GPU-h provisioning ${r.totals.provisioningGpuHours}  spot instance-h ${r.totals.spotInstanceHours}  IW TTFT p50/p95/p99 ${r.interactive.ttftMs.p50}/${r.interactive.ttftMs.p95}/${r.interactive.ttftMs.p99} ms  batch ${r.batch.withinDeadline}/${r.batch.submitted} within deadline (late ${r.batch.late}, missed ${r.batch.missedDeadlineUndone})  unserved ${r.requests.interactiveUnserved}  actions ${r.totals.scalingActions}  ${r.requestsPerWallS} req/s wall`;
}

async function main(): Promise<void> {
  const days = flag("days");
  const loadingName = flag("loading");
  const { fleet, workload } = loadWeekInputs({ ...(days === undefined ? {} : { days: Number(days) }), ...(loadingName === undefined ? {} : { loading: loadingName }) });
  const loading = fleet.config.controller.loading;
  // Runs at a time: one per core by default; more helps when other sessions load the box (fair share per thread).
  const parallel = Math.max(1, Number(flag("parallel") ?? Math.min(2, cpus().length)));
  console.log(`machine: nproc ${cpus().length}, memory ${(totalmem() / 2 ** 30).toFixed(1)} GiB, ${cpus()[0]?.model ?? "cpu"}, load average ${loadavg().map((x) => x.toFixed(1)).join(" ")} (other sessions share this box)`);
  console.log(`versions: node ${process.version}, tidegate ${process.env.npm_package_version ?? "0.1.0"}`);
  console.log(`inputs: seed ${workload.seed}, ${workload.days} days from ServeGen day ${workload.startDay}, ${workload.targetRequests} requests, batch token share ${workload.niwTokenShare}, planner ${(await createPlanner(fleet)).name}, planned utilization ${fleet.plannedUtilization}, ${parallel} runs at a time`);

  console.log(`loading: ${loading === undefined ? "none (SageServe §7.1 constant load delays)" : `${loading.source} (${describeBandwidths(loading.bandwidths)}), every region (controller.loading)`}`);
  console.log("week: all five strategies on the same seeded workload (two baselines: SageServe's reactive rule and Kubernetes HPA)");
  const strategies = ["reactive", "reactive-hpa", "lt-i", "lt-u", "lt-ua"];
  // With a loading source, reactive and LT-UA once more on the constant delays (today's figure), in the same runs.
  const constantFleet = withLoading(fleet, undefined);
  const constantJobs = loading === undefined ? [] : ["reactive", "lt-ua"].map((strategy) => ({ fleet: constantFleet, workload, strategy, minuteSeries: false }));
  const all = await runWeeks([...strategies.map((strategy) => ({ fleet, workload, strategy, minuteSeries: false })), ...constantJobs], parallel, (r, job) => console.log(`${line(r)}${job.fleet === constantFleet && loading !== undefined ? "  [constant delays]" : r.loading === undefined ? "" : `  [loading ${JSON.stringify(r.loading.counters)}]`}`));
  const week = all.slice(0, strategies.length);
  const constant = all.slice(strategies.length);
  const by = (name: string) => week.find((r) => r.strategy === name)!;
  const ua = by("lt-ua");
  const versus = (r: WeekResult, b: WeekResult) => versusOf(figuresOf(r), figuresOf(b));
  /** A Versus for the JSON line: ratios rounded, NaN (a side not measured) as a string. */
  const jsonVersus = (v: ReturnType<typeof versus>) => ({ ...v, instanceHoursReduction: jsonFigure(v.instanceHoursReduction), p95TtftRatio: jsonFigure(v.p95TtftRatio), provisioningReduction: jsonFigure(v.provisioningReduction) });
  for (const baseline of ["reactive", "reactive-hpa"]) {
    for (const r of week.filter((x) => x.strategy !== baseline && x.strategy !== "reactive")) {
      const v = versus(r, by(baseline));
      console.log(`  ${r.strategy} vs ${baseline}: instance-hours ${(v.instanceHoursReduction * 100).toFixed(1)}% fewer, GPU-h provisioning ${(v.provisioningReduction * 100).toFixed(1)}% lower, IW p95 TTFT × ${jsonFigure(v.p95TtftRatio)}, unserved ${v.unserved} vs ${v.baselineUnserved}`);
    }
  }

  // Burst: 7.2 h from the same start; llama2-70b × 8 in every region during [5:40, 6:00).
  const burstStartMs = (5 * 60 + 40) * 60_000;
  const burstModel = workload.models[0]!.name;
  const burstWorkload: WorkloadSpec = { ...workload, days: 0.3, targetRequests: Math.round((workload.targetRequests * 0.3) / workload.days), bursts: [{ startMs: burstStartMs, durationMs: 20 * 60_000, factor: 8, model: burstModel }] };
  console.log(`burst: ${burstModel} × 8 during [${burstStartMs / 60_000}, ${burstStartMs / 60_000 + 20}) min of a ${burstWorkload.days}-day replay (${burstWorkload.targetRequests} requests before the burst); all five strategies`);
  const burst = await runWeeks(strategies.map((strategy) => ({ fleet, workload: burstWorkload, strategy, minuteSeries: true })), parallel, () => undefined);
  const startMin = burstStartMs / 60_000;
  const targetMs = latencyTarget(minuteP95(burst[0]!, burstModel), startMin);
  const recovery: Record<string, number> = {};
  const burstUnserved: Record<string, number> = {};
  for (const r of burst) {
    const series = minuteP95(r, burstModel);
    recovery[r.strategy] = recoveryMinutes(series, startMin, targetMs);
    burstUnserved[r.strategy] = r.requests.interactiveUnserved;
    const during = Array.from(series.subarray(startMin, startMin + 40)).map((v) => (Number.isNaN(v) ? null : Number.isFinite(v) ? Math.round(v) : "unserved"));
    console.log(`  ${r.strategy.padEnd(12)} recovery ${recovery[r.strategy]} min to p95 TTFT ≤ ${Math.round(targetMs)} ms, ${r.requests.interactiveUnserved} unserved; per-minute p95 from the burst start: ${JSON.stringify(during)}`);
  }
  const burstHtml = lineChart(`Burst: ${burstModel} per-minute p95 TTFT around the 8× burst (target ${Math.round(targetMs)} ms)`, burst.map((r) => ({ name: r.strategy, values: (r.minuteP95TtftMs?.[burstModel] ?? []).slice(startMin - 30, startMin + 70) })), { yLabel: "ms (x: minutes from 30 min before the burst)", log: true });
  const files = writeReports("out/bench-strategies", week, { html: `<h2>8× burst</h2>${burstHtml}`, json: { burst: { model: burstModel, startMin, targetMs, recovery } } });
  console.log(`reports: ${files.join(" ")}`);

  // Issue 12: LT-UA against reactive with the loading source in the loop, beside the same pair on constant delays.
  const loadingVersus = loading === undefined ? undefined : { withLoading: versus(ua, by("reactive")), constantDelays: versus(constant[1]!, constant[0]!) };
  const loadingFigures =
    loading === undefined || loadingVersus === undefined
      ? undefined
      : { source: loading.source, withLoading: jsonVersus(loadingVersus.withLoading), constantDelays: jsonVersus(loadingVersus.constantDelays), aim: LOADING_AIM, counters: Object.fromEntries(week.map((r) => [r.strategy, r.loading?.counters ?? null])) };
  if (loadingVersus !== undefined) {
    const f = (v: ReturnType<typeof versus>) => `${(v.instanceHoursReduction * 100).toFixed(1)}% fewer instance-hours, IW p95 TTFT × ${jsonFigure(v.p95TtftRatio)}`;
    console.log(`loading ${loading!.source}: LT-UA vs reactive ${f(loadingVersus.withLoading)}; on constant delays (today's figure, same bench) ${f(loadingVersus.constantDelays)}; aim ≥ ${LOADING_AIM.instanceHoursReduction * 100}% at × ≤ ${LOADING_AIM.p95TtftRatioAtMost}`);
  }
  const vsReactive = versus(ua, by("reactive"));
  const vsHpa = versus(ua, by("reactive-hpa"));
  const checks = strategiesChecks({
    days: workload.days,
    vsReactive,
    vsReactiveHpa: vsHpa,
    ltUaBatchAllWithinDeadline: ua.batch.allWithinDeadline,
    burstRecoveryMin: { ltUa: recovery["lt-ua"]!, reactiveHpa: recovery["reactive-hpa"]! },
    ...(loadingVersus === undefined ? {} : { loading: loadingVersus.withLoading }),
  });
  const figures = {
    bench: "strategies",
    days: workload.days,
    requests: by("reactive").requests.total,
    ltUa: { vsReactive: jsonVersus(vsReactive), vsReactiveHpa: jsonVersus(vsHpa) },
    unserved: Object.fromEntries(week.map((r) => [r.strategy, r.requests.interactiveUnserved])),
    instanceHours: Object.fromEntries(week.map((r) => [r.strategy, r.totals.instanceHours])),
    p95TtftMs: Object.fromEntries(week.map((r) => [r.strategy, finite(r.interactive.ttftMs.p95)])),
    batchAllWithinDeadline: Object.fromEntries(week.map((r) => [r.strategy, r.batch.allWithinDeadline])),
    burstRecoveryMin: Object.fromEntries(strategies.map((k) => [k, finite(recovery[k]!)])),
    burstUnserved,
    ...(loadingFigures === undefined ? {} : { loading: loadingFigures }),
    checks,
  };
  const verdict = verdictOf(checks, workload.days === target.fullWeekDays ? [] : [`--days ${workload.days}`]);
  console.log(JSON.stringify({ ...figures, target, met: verdict.met, ...(verdict.partial === true ? { partial: true, shrunk: verdict.shrunk } : {}) }));
}
