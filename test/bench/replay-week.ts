/**
 * `npm run bench:replay-week`: the ~10M-request seeded week (3 regions, 4 models, planner every simulated hour,
 * region controllers with LT-UA, router selection, NIW dispatch, simulated engines) replayed in virtual time in
 * this process, with a progress bar. Prints the machine, versions, inputs, the run, requests per wall second and
 * the ratio to real time; the last line is the JSON summary. Targets: ≤ 600 s wall, ≤ 4 GiB peak RSS.
 * `--days N` shortens the run for development (the targets are for the full week). `--loading SOURCE` is every
 * region's loading source (config controller.loading; region/liveload/liveload-config.ts): default `blitzscale`, layer-wise
 * loading with zigzag pairing (issue 12: the targets hold with it enabled); `none` = SageServe §7.1's constant
 * load delays.
 */
import { cpus, loadavg, totalmem } from "node:os";
import { resourceUsage } from "node:process";
import { DEFAULT_STRATEGY } from "../../core/defaults.js";
import { describeBandwidths } from "../../region/liveload/sources.js";
import { loadWeekInputs } from "../../bin/replay-week-cli.js";
import { createPlanner } from "../../sim/week/planner.js";
import { ProgressBar } from "../../sim/week/progress.js";
import { runWeek } from "../../sim/week/replay.js";
import { writeReports } from "../../sim/week/report.js";

function flag(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i === -1 ? undefined : process.argv[i + 1];
}

const days = flag("days");
const strategy = flag("strategy") ?? DEFAULT_STRATEGY;
const loading = flag("loading") ?? "blitzscale";
const { fleet, workload } = loadWeekInputs({ ...(days === undefined ? {} : { days: Number(days) }), loading });
console.log(`machine: nproc ${cpus().length}, memory ${(totalmem() / 2 ** 30).toFixed(1)} GiB, ${cpus()[0]?.model ?? "cpu"}, load average ${loadavg().map((x) => x.toFixed(1)).join(" ")} (other sessions share this box)`);
console.log(`versions: node ${process.version}, tidegate ${process.env.npm_package_version ?? "0.1.0"}`);
console.log(`inputs: seed ${workload.seed}, ${workload.days} days, target ${workload.targetRequests} requests, ${workload.models.length} models, ${workload.regions.length} regions, strategy ${strategy}, planner ${(await createPlanner(fleet)).name}, loading ${loading === "none" ? "none (SageServe §7.1 delays)" : `${loading} (${describeBandwidths(fleet.config.controller.loading!.bandwidths)})`}`);
const target = { wallS: 600, maxRssGiB: 4, requestsAtLeast: 9_000_000 };
const loadAtStart = loadavg()[0]!;
const round1 = (x: number) => Math.round(x * 10) / 10;
try {
  const bar = new ProgressBar("replay-week");
  let peakRss = 0;
  const planner = await createPlanner(fleet);
  const r = await runWeek({
    fleet, workload, strategy, planner,
    onProgress: (p) => {
      bar.update(p.fraction, p.requests);
      peakRss = Math.max(peakRss, process.memoryUsage().rss);
    },
  });
  bar.done(r.requests.total);
  await planner.close?.();
  const maxRssBytes = Math.max(peakRss, resourceUsage().maxRSS * 1024);
  const wallS = r.wallMs / 1000;
  const load = { atStart1m: round1(loadAtStart), atEnd1m: round1(loadavg()[0]!), nproc: cpus().length };
  console.log(`run: ${r.requests.total} requests (${r.requests.interactive} interactive, ${r.requests.batch} batch) in ${wallS.toFixed(1)} s wall (load average ${load.atStart1m} at the start, ${load.atEnd1m} at the end, ${load.nproc} cores); ${r.requestsPerWallS} requests per wall second; ${(r.virtualMs / r.wallMs).toFixed(0)}× real time; planner ${r.plans} hours, ${r.plannerMs} ms; peak RSS ${(maxRssBytes / 2 ** 20).toFixed(0)} MiB`);
  if (r.loading !== undefined) console.log(`loading: ${r.loading.sources.join(", ")}: ${JSON.stringify(r.loading.counters)}`);
  console.log(`outcome: instance-hours ${r.totals.instanceHours}, GPU-h provisioning ${r.totals.provisioningGpuHours}, IW p95 TTFT ${r.interactive.ttftMs.p95} ms, batch within deadline ${r.batch.withinDeadline}/${r.batch.submitted} (${r.batch.sentTwice} sent twice after their lease ran out)`);
  console.log(`reports: ${writeReports("out/bench-replay-week", [r]).join(" ")}`);
  const fullWeek = workload.days === 7;
  // --days other than 7 is a development run: partial (met false), named in the JSON line.
  const met = fullWeek && wallS <= target.wallS && maxRssBytes / 2 ** 30 <= target.maxRssGiB && r.requests.total >= target.requestsAtLeast;
  console.log(JSON.stringify({ bench: "replay-week", requests: r.requests.total, days: workload.days, loading, loadingCounters: r.loading?.counters ?? null, wallS: round1(wallS), loadAverage: load, requestsPerWallS: r.requestsPerWallS, realTimeRatio: Math.round(r.virtualMs / r.wallMs), maxRssGiB: Math.round((maxRssBytes / 2 ** 30) * 100) / 100, target, met, ...(fullWeek ? {} : { partial: true, shrunk: [`--days ${workload.days}`] }) }));
} catch (err) {
  console.log(JSON.stringify({ bench: "replay-week", days: workload.days, loading, loadAverage: { atStart1m: round1(loadAtStart), atEnd1m: round1(loadavg()[0]!), nproc: cpus().length }, target, met: false, error: err instanceof Error ? err.message : String(err) }));
  process.exitCode = 1;
}
