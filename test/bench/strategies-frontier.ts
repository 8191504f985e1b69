/**
 * `npm run bench:strategies-frontier`: where LT-UA stands against the Kubernetes-HPA baseline when the target in
 * issue 11 (LT-UA ≥ 10% fewer instance-hours than `reactive-hpa` at p95 interactive TTFT ≤ 1.05× and no more unserved
 * requests) is out of reach at the defaults. The same seeded week as bench:strategies, run for a few settings of each
 * (two at a time in worker threads), so the two instance-hours ↔ p95 TTFT frontiers can be compared: `reactive-hpa` at
 * target utilizations 0.6 / 0.7 (default) / 0.8; LT-UA at its defaults, with the planner counting on 1.15 × an
 * instance's capacity at the SLO instead of 1 (`plannedUtilization`: fewer instances planned, toward HPA's instance-hours),
 * and going below the target in the window's tail only while observed demand is ≤ 0.1× the forecast instead of 0.2×
 * (`belowForecastFactor`: toward LT-U's p95). `met`: some LT-UA point meets the target against the HPA frontier
 * at its own latency (the HPA settings' instance-hours interpolated at LT-UA's p95 / 1.05; verdicts/strategies.ts
 * frontierJudgement), not against one fixed setting that three LT-UA variants race. Prints machine, inputs and every point; the last line is the JSON summary.
 * `--days N` shortens the week (partial, met false).
 */
import { cpus, loadavg, totalmem } from "node:os";
import { loadWeekInputs } from "../../bin/replay-week-cli.js";
import { sharedDataDir } from "../../core/paths.js";
import type { FleetSpec } from "../../sim/week/fleet.js";
import type { WeekResult } from "../../sim/week/result.js";
import { verdictOf } from "./verdicts/common.js";
import { STRATEGIES_TARGET, frontierJudgement, type FrontierPoint } from "./verdicts/strategies.js";
import { runWeeks, type WeekJob } from "./week-runs.js";

interface Point { label: string; strategy: string; params: Record<string, number>; plannedUtilization?: number }

const POINTS: Point[] = [
  { label: "reactive-hpa target 0.6", strategy: "reactive-hpa", params: { targetUtilization: 0.6 } },
  { label: "reactive-hpa target 0.7 (default)", strategy: "reactive-hpa", params: {} },
  { label: "reactive-hpa target 0.8", strategy: "reactive-hpa", params: { targetUtilization: 0.8 } },
  { label: "lt-ua (default)", strategy: "lt-ua", params: {} },
  { label: "lt-ua plannedUtilization 1.15", strategy: "lt-ua", params: {}, plannedUtilization: 1.15 },
  { label: "lt-ua belowForecastFactor 0.1", strategy: "lt-ua", params: { belowForecastFactor: 0.1 } },
];

function flag(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i === -1 ? undefined : process.argv[i + 1];
}

function round(x: number, digits = 3): number | string {
  return Number.isFinite(x) ? Math.round(x * 10 ** digits) / 10 ** digits : String(x);
}

async function main(): Promise<void> {
  const days = flag("days");
  const { fleet, workload } = loadWeekInputs({ ...(days === undefined ? {} : { days: Number(days) }), "data-dir": sharedDataDir() });
  const parallel = Math.max(1, Number(flag("parallel") ?? Math.min(2, cpus().length)));
  console.log(`machine: nproc ${cpus().length}, memory ${(totalmem() / 2 ** 30).toFixed(1)} GiB, load average ${loadavg().map((x) => x.toFixed(1)).join(" ")}`);
  console.log(`inputs: seed ${workload.seed}, ${workload.days} days, ${workload.targetRequests} requests, ${POINTS.length} points, ${parallel} at a time`);
  const fleetFor = (p: Point): FleetSpec => (p.plannedUtilization === undefined ? fleet : { ...fleet, plannedUtilization: p.plannedUtilization });
  const jobs: WeekJob[] = POINTS.map((p) => ({ fleet: fleetFor(p), workload, strategy: p.strategy, strategyParams: p.params, minuteSeries: false }));
  const results = await runWeeks(jobs, parallel, (r, job) => {
    const p = POINTS[jobs.indexOf(job)]!;
    console.log(`  ${p.label.padEnd(34)} instance-h ${r.totals.instanceHours}  IW TTFT p50/p95/p99 ${r.interactive.ttftMs.p50}/${r.interactive.ttftMs.p95}/${r.interactive.ttftMs.p99} ms  unserved ${r.requests.interactiveUnserved}  batch all within deadline ${r.batch.allWithinDeadline}`);
  });
  const at = (label: string): WeekResult => results[POINTS.findIndex((p) => p.label === label)]!;
  const hpa = at("reactive-hpa target 0.7 (default)");
  const points = POINTS.map((p, i) => {
    const r = results[i]!;
    return { label: p.label, instanceHours: r.totals.instanceHours, p95TtftMs: round(r.interactive.ttftMs.p95, 1), unserved: r.requests.interactiveUnserved, batchAllWithinDeadline: r.batch.allWithinDeadline };
  });
  const frontier: FrontierPoint[] = POINTS.map((p, i) => {
    const r = results[i]!;
    return { label: p.label, strategy: p.strategy, instanceHours: r.totals.instanceHours, provisioningGpuHours: r.totals.provisioningGpuHours, p95TtftMs: r.interactive.ttftMs.p95, unserved: r.requests.interactiveUnserved, batchAllWithinDeadline: r.batch.allWithinDeadline };
  });
  const hpaFrontier = frontier.filter((x) => x.strategy === "reactive-hpa");
  const vsHpa = frontier
    .filter((x) => x.strategy === "lt-ua")
    .map((x) => ({
      label: x.label,
      instanceHoursReduction: round(1 - x.instanceHours / hpa.totals.instanceHours),
      p95TtftRatio: round(x.p95TtftMs / hpa.interactive.ttftMs.p95),
      ...frontierJudgement(x, hpaFrontier),
    }));
  for (const v of vsHpa) console.log(`  ${v.label} vs reactive-hpa (default): instance-hours ${(Number(v.instanceHoursReduction) * 100).toFixed(1)}% fewer, p95 TTFT × ${v.p95TtftRatio}; against the HPA frontier at its p95 (${v.against.length === 0 ? "no HPA setting as slow" : `${v.against.join(" – ")}: ${Number(v.hpaInstanceHours.toFixed(1))} instance-h`})${v.meets ? " — meets the target" : ""}`);
  const target = { vsReactiveHpaFrontier: STRATEGIES_TARGET.vsReactiveHpa, fullWeekDays: STRATEGIES_TARGET.fullWeekDays };
  const verdict = verdictOf({ someLtUaPointBeatsTheHpaFrontier: vsHpa.some((v) => v.meets) }, workload.days === STRATEGIES_TARGET.fullWeekDays ? [] : [`--days ${workload.days}`]);
  console.log(JSON.stringify({ bench: "strategies-frontier", days: workload.days, requests: hpa.requests.total, points, ltUaVsReactiveHpa: vsHpa, target, met: verdict.met, ...(verdict.partial === true ? { partial: true, shrunk: verdict.shrunk } : {}) }));
}

try {
  await main();
} catch (err) {
  console.log(JSON.stringify({ bench: "strategies-frontier", met: false, target: STRATEGIES_TARGET.vsReactiveHpa, error: err instanceof Error ? err.message : String(err) }));
  process.exitCode = 1;
}
