/**
 * `npm run bench:strategies` (issues 31, 46): cost at the SLO across scale-out regimes, and where forecasting pays.
 *
 * - SLO (every model): p95 TTFT ≤ max(1,000 ms, 2 × the model's unloaded p95 TTFT) and p95 TPOT ≤ 100 ms, written into
 *   the fleet's config `slo` so the planner sizes capacity for it too. The unloaded p95 is one prompt's prefill on an
 *   idle instance (core/perf) over the first week's first two days' prompts.
 * - Weeks: the seeded week generator at three seeds (`--weeks 42,43,44`); each judged on days 3–5, the planner warmed
 *   by the day before (recorded, not simulated). One rate scale per week.
 * - Regimes (strategies-runs.ts REGIMES): how a scale-out lands, from network loading (seconds after the spot move)
 *   to SageServe's provisioning delays (a redeploy of 10 minutes). The main regime is `network`.
 * - Arms: `reactive` (SageServe §7.2), `reactive-hpa` (the Kubernetes HPA), `lt-ua` (SageServe §6.5.1), `lt-hpa` (the
 *   HPA above a forecast floor), `predictive-hpa` (the HPA on the utilization forecast one scale-out ahead) and the
 *   oracle (the default strategy planned on each coming hour's true demand), each with one knob on a ladder.
 * - Cost at the SLO: each arm's frontier on each week's judged days — from a starting rung toward cheaper settings
 *   while the SLO holds, toward safer ones until it holds — and the instance-hours where it crosses the SLO,
 *   interpolated between the cheapest setting that met it and the next cheaper one (verdicts/strategies.ts costAtSlo).
 *   No rung decides: an arm is what it costs at the edge. Across weeks: the mean and the spread; a difference within
 *   the spread is a tie.
 * - Checks: the default strategy (core/defaults.ts) ≤ +1% of tuned reactive-hpa with network loading, ≥ 10% below it
 *   and ≥ 25% below reactive with SageServe's provisioning delays, the cheapest arm of the main regime, and no later
 *   than reactive-hpa to recover from an 8× burst (SageServe §7.3.4) at its edge setting.
 *
 * Runs: the main regime and SageServe's provisioning delays on every week with their arms; the other regimes on the
 * first week with three arms (HPA, the default, the oracle), for the crossover table (`--all-weeks` runs them on
 * every week). Finished runs are kept in `out/bench-strategies/runs/<code version>/` (`--cache none` to keep none),
 * so a stopped bench resumes where it stopped. `--weeks`, `--regimes`, `--arms`, `--judge-days` change what is
 * measured (then `met` is false and the line says partial); `--parallel N` runs N replays at a time (default: one
 * per core, at most 2). The last line is the JSON summary with its targets and `met`.
 */
import { cpus, loadavg, totalmem } from "node:os";
import { loadWeekInputs } from "../../bin/replay-week-cli.js";
import { DEFAULT_STRATEGY } from "../../core/defaults.js";
import { getProfile } from "../../core/perf/model.js";
import type { ModelSlo, SloConfig } from "../../core/config.js";
import type { FleetSpec } from "../../sim/week/fleet.js";
import { latencyTarget, minuteP95, recoveryMinutes } from "../../sim/week/burst.js";
import { WorkloadStream } from "../../sim/workload/generator.js";
import type { WorkloadSpec } from "../../sim/workload/spec.js";
import { jsonFigure, verdictOf } from "./verdicts/common.js";
import { COST_AT_SLO_TARGET as target, cheapestArm, compareArms, costAtSlo, costAtSloChecks, recoversNoLater, type CostAtSlo } from "./verdicts/strategies.js";
import { REGIMES, RunCache, armsFor, searchFrontier, type Arm, type Regime, type RunFigures } from "./strategies-runs.js";
import { weekPool } from "./week-runs.js";

const MAIN = "network";
const SAGESERVE = "sageserve-provision";
const CORE_ARMS = ["reactive-hpa", DEFAULT_STRATEGY, "oracle"];

function flag(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i === -1 ? undefined : process.argv[i + 1];
}
const list = (s: string | undefined) => (s === undefined ? undefined : s.split(",").map((x) => x.trim()).filter((x) => x !== ""));

/** A window of a week: `days` from day `from` (0-based offset), at the whole week's rate scale. */
function windowOf(week: WorkloadSpec, rateScale: number[], from: number, days: number): WorkloadSpec {
  return { ...week, startDay: week.startDay + from, days, targetRequests: Math.round((week.targetRequests * days) / week.days), rateScale };
}

/**
 * The bench's SLO per model: p95 TTFT ≤ max(1,000, 2 × unloaded p95), p95 TPOT ≤ 100 ms. Unloaded TTFT of a request:
 * its prompt's prefill on one idle instance of the fleet's first GPU type for the model (core/perf profile), over
 * the first `sample` interactive arrivals of each model in `workload`.
 */
function benchSlo(fleet: FleetSpec, workload: WorkloadSpec, sample = 20_000): { slo: SloConfig; unloadedP95Ms: Record<string, number> } {
  const prompts: number[][] = workload.models.map(() => []);
  const stream = new WorkloadStream(workload);
  let left = sample * workload.models.length;
  for (let a = stream.next(); a !== undefined && left > 0; a = stream.next()) {
    if (a.niw || prompts[a.model]!.length >= sample) continue;
    prompts[a.model]!.push(a.promptTokens);
    left--;
  }
  const models: Record<string, ModelSlo> = {};
  const unloadedP95Ms: Record<string, number> = {};
  workload.models.forEach((m, mi) => {
    const [gpu, tp] = Object.entries(fleet.config.models.find((x) => x.name === m.name)!.gpusPerInstance)[0]!;
    const profile = getProfile(m.name, gpu, tp);
    const ttfts = prompts[mi]!.map((p) => profile.prefillMs(p)).sort((a, b) => a - b);
    const p95 = ttfts[Math.min(ttfts.length - 1, Math.ceil(0.95 * ttfts.length) - 1)] ?? 0;
    unloadedP95Ms[m.name] = Math.round(p95 * 10) / 10;
    models[m.name] = { ttftMs: Math.max(1000, Math.round(2 * p95)), tpotMs: 100, percentile: 0.95 };
  });
  return { slo: { ttftMs: 1000, tpotMs: 100, percentile: 0.95, models }, unloadedP95Ms };
}

const fmtMs = (ms: number) => (!Number.isFinite(ms) ? String(ms) : ms >= 60_000 ? `${(ms / 60_000).toFixed(1)} min` : `${(ms / 1000).toFixed(1)} s`);
const pct = (x: number) => (Number.isFinite(x) ? `${x >= 0 ? "+" : ""}${(x * 100).toFixed(1)}%` : String(x));

function runLine(regime: string, seed: number, arm: string, f: RunFigures, cached: boolean): string {
  const per = Object.entries(f.models).map(([m, x]) => `${m} ${x.ttftP95Ms}/${x.tpotP95Ms}${x.met ? "" : " MISS"}`).join("; ");
  return `  ${regime} week ${seed} ${arm} ${f.knob}: instance-h ${f.instanceHours}, margin ${jsonFigure(f.margin)} (${f.sloMet && f.margin <= 1 && f.batchAllWithinDeadline ? "met" : "missed"}), attainment ${(f.attainment * 100).toFixed(2)}%, unserved ${f.unserved}, failed after the first token ${f.failedAfterFirstToken}, batch ${f.batchAllWithinDeadline ? "in time" : "LATE"}, scale-out ${fmtMs(f.scaleOutMs)} × ${f.scaleOuts}${cached ? " (cached)" : ""} | p95 TTFT/TPOT ms: ${per}`;
}

interface Plan { regime: Regime; arms: Arm[]; seeds: number[] }

async function main(): Promise<void> {
  const seeds = (list(flag("weeks")) ?? ["42", "43", "44"]).map(Number);
  if (seeds.length === 0 || seeds.some((s) => !Number.isInteger(s))) throw new Error(`--weeks must list integer seeds, got ${flag("weeks")}`);
  const judgeDays = Number(flag("judge-days") ?? target.judgeDays);
  const parallel = Math.max(1, Number(flag("parallel") ?? Math.min(2, cpus().length)));
  const cacheFlag = flag("cache") ?? "out/bench-strategies/runs";
  const cache = new RunCache(cacheFlag === "none" ? undefined : cacheFlag);
  const arms = armsFor(DEFAULT_STRATEGY);
  const armNames = list(flag("arms"));
  const regimeNames = list(flag("regimes")) ?? REGIMES.map((r) => r.name);
  for (const n of regimeNames) if (!REGIMES.some((r) => r.name === n)) throw new Error(`unknown regime ${n}; known: ${REGIMES.map((r) => r.name).join(", ")}`);
  for (const n of armNames ?? []) if (!arms.some((a) => a.name === n)) throw new Error(`unknown arm ${n}; known: ${arms.map((a) => a.name).join(", ")}`);
  const allWeeks = process.argv.includes("--all-weeks");
  const plans: Plan[] = REGIMES.filter((r) => regimeNames.includes(r.name)).map((regime) => {
    const names = armNames ?? (regime.name === MAIN ? arms.map((a) => a.name) : regime.name === SAGESERVE ? ["reactive", ...CORE_ARMS] : CORE_ARMS);
    return { regime, arms: arms.filter((a) => names.includes(a.name)), seeds: allWeeks || regime.name === MAIN || regime.name === SAGESERVE ? seeds : seeds.slice(0, 1) };
  });
  const shrunk = [
    ...(flag("weeks") === undefined ? [] : [`--weeks ${flag("weeks")}`]),
    ...(judgeDays === target.judgeDays ? [] : [`--judge-days ${judgeDays}`]),
    ...(flag("regimes") === undefined ? [] : [`--regimes ${flag("regimes")}`]),
    ...(armNames === undefined ? [] : [`--arms ${flag("arms")}`]),
  ];

  const weeks = new Map(seeds.map((seed) => [seed, loadWeekInputs({ seed })]));
  const first = weeks.get(seeds[0]!)!;
  const { slo, unloadedP95Ms } = benchSlo(first.fleet, windowOf(first.workload, new WorkloadStream(first.workload).summary.rateScale, 0, 2));
  const judged = new Map(seeds.map((seed) => {
    const w = weeks.get(seed)!.workload;
    return [seed, windowOf(w, new WorkloadStream(w).summary.rateScale, target.judgeFromDay, judgeDays)];
  }));
  console.log(`machine: nproc ${cpus().length}, memory ${(totalmem() / 2 ** 30).toFixed(1)} GiB, ${cpus()[0]?.model ?? "cpu"}, load average ${loadavg().map((x) => x.toFixed(1)).join(" ")} (other sessions share this box)`);
  console.log(`versions: node ${process.version}, tidegate ${process.env.npm_package_version ?? "0.1.0"}, code ${cache.version || "(no git work tree: nothing cached)"}`);
  console.log(`inputs: weeks (seeds) ${seeds.join(", ")}, each judged on days ${target.judgeFromDay + 1}–${target.judgeFromDay + judgeDays} at its own rate scale; ${parallel} replays at a time; default strategy ${DEFAULT_STRATEGY}`);
  console.log(`SLO (p95): ${Object.entries(slo.models).map(([m, s]) => `${m} TTFT ≤ ${s.ttftMs} ms (unloaded p95 ${unloadedP95Ms[m]} ms), TPOT ≤ ${s.tpotMs} ms`).join("; ")}`);
  for (const p of plans) console.log(`regime ${p.regime.name}: ${p.regime.summary}; arms ${p.arms.map((a) => a.name).join(", ")}; weeks ${p.seeds.join(", ")}`);

  const pool = weekPool(parallel);
  let done = 0;
  let fromCache = 0;
  // results[regime][arm][week index] = the runs of that week's search
  const results = new Map<string, Map<string, RunFigures[][]>>();
  await Promise.all(plans.flatMap((p) => p.arms.map(async (arm) => {
    const perWeek: RunFigures[][] = [];
    let start = arm.start;
    for (const seed of p.seeds) {
      const fleet: FleetSpec = p.regime.fleet({ ...weeks.get(seed)!.fleet, config: { ...weeks.get(seed)!.fleet.config, slo } });
      const runs = await searchFrontier({ arm, regime: p.regime, fleet, workload: judged.get(seed)!, start, cacheKey: { seed, from: target.judgeFromDay, days: judgeDays, slo } }, pool.run, cache, (f, cached) => {
        done++;
        if (cached) fromCache++;
        console.log(`${runLine(p.regime.name, seed, arm.name, f, cached)}  [${done} runs, ${fromCache} cached]`);
      });
      perWeek.push(runs);
      // The next week starts where this one's edge was.
      const c = costAtSlo(runs);
      if (c.met !== undefined) start = arm.ladder.indexOf(c.met.knob);
    }
    let byArm = results.get(p.regime.name);
    if (byArm === undefined) results.set(p.regime.name, (byArm = new Map()));
    byArm.set(arm.name, perWeek);
  })));

  // Cost at the SLO per regime, arm and week.
  const costs: Record<string, Record<string, CostAtSlo[]>> = {};
  const regimesJson: Record<string, unknown> = {};
  const crossover: Record<string, unknown>[] = [];
  for (const p of plans) {
    const byArm = results.get(p.regime.name)!;
    const c: Record<string, CostAtSlo[]> = {};
    for (const a of p.arms) c[a.name] = byArm.get(a.name)!.map((runs) => costAtSlo(runs));
    costs[p.regime.name] = c;
    const hpa = c["reactive-hpa"]?.map((x) => x.instanceHours);
    const hpaRuns = byArm.get("reactive-hpa")?.flat() ?? [];
    const outs = hpaRuns.reduce((s, f) => s + f.scaleOuts, 0);
    const scaleOutMs = outs === 0 ? Number.NaN : hpaRuns.reduce((s, f) => s + (Number.isFinite(f.scaleOutMs) ? f.scaleOutMs * f.scaleOuts : 0), 0) / outs;
    console.log(`cost at the SLO, regime ${p.regime.name} (measured scale-out ${fmtMs(scaleOutMs)}; days ${target.judgeFromDay + 1}–${target.judgeFromDay + judgeDays}):`);
    const armsJson: Record<string, unknown> = {};
    for (const a of p.arms) {
      const cs = c[a.name]!;
      const ih = cs.map((x) => x.instanceHours);
      const vs = hpa === undefined || a.name === "reactive-hpa" ? undefined : compareArms(ih, hpa);
      const edges = cs.map((x) => (x.met === undefined ? "no setting met" : `${x.met.knob}${x.missed === undefined ? " (nothing cheaper ran)" : ` … ${x.missed.knob}`}`));
      console.log(`  ${a.name.padEnd(15)} ${ih.map((x) => jsonFigure(x, 1)).join(" / ")} instance-h (edge ${edges.join("; ")})${vs === undefined ? "" : `; vs reactive-hpa ${pct(vs.mean)} ± ${pct(vs.spread)}${vs.tie ? " (a tie: within the weeks' spread)" : ""} [${vs.perWeek.map(pct).join(", ")}]`}`);
      armsJson[a.name] = { knob: a.knob, costs: ih.map((x) => jsonFigure(x, 2)), edges: cs.map((x) => ({ met: x.met?.knob ?? null, missed: x.missed?.knob ?? null, bracketed: x.bracketed })), ...(vs === undefined ? {} : { vsReactiveHpa: { mean: jsonFigure(vs.mean, 4), spread: jsonFigure(vs.spread, 4), tie: vs.tie, perWeek: vs.perWeek.map((x) => jsonFigure(x, 4)) } }), runs: byArm.get(a.name)!.map((w) => w.map((f) => ({ knob: f.knob, instanceHours: f.instanceHours, margin: jsonFigure(f.margin), met: f.sloMet && f.margin <= 1 && f.batchAllWithinDeadline, attainment: f.attainment, failedAfterFirstToken: f.failedAfterFirstToken }))) };
    }
    regimesJson[p.regime.name] = { summary: p.regime.summary, scaleOutMs: jsonFigure(scaleOutMs, 0), weeks: p.seeds, arms: armsJson };
    if (hpa !== undefined) {
      const row = (arm: string) => (c[arm] === undefined ? undefined : compareArms(c[arm]!.map((x) => x.instanceHours), hpa));
      const d = row(DEFAULT_STRATEGY);
      const o = row("oracle");
      crossover.push({ regime: p.regime.name, scaleOutMs: jsonFigure(scaleOutMs, 0), defaultVsHpa: d === undefined ? null : jsonFigure(d.mean, 4), defaultTie: d?.tie ?? null, oracleVsHpa: o === undefined ? null : jsonFigure(o.mean, 4) });
    }
  }
  console.log(`where forecasting pays (cost at the SLO against tuned reactive-hpa; negative = cheaper):`);
  console.log(`  ${"regime".padEnd(20)} ${"scale-out".padStart(10)} ${`${DEFAULT_STRATEGY}`.padStart(16)} ${"oracle".padStart(8)}`);
  const cell = (x: unknown) => (typeof x === "number" || typeof x === "string" ? pct(Number(x)) : "not run");
  for (const r of crossover) console.log(`  ${String(r.regime).padEnd(20)} ${fmtMs(Number(r.scaleOutMs)).padStart(10)} ${`${cell(r.defaultVsHpa)}${r.defaultTie === true ? " (tie)" : ""}`.padStart(16)} ${cell(r.oracleVsHpa).padStart(8)}`);

  const ihTable = Object.fromEntries(Object.entries(costs).map(([r, c]) => [r, Object.fromEntries(Object.entries(c).map(([a, x]) => [a, x.map((y) => y.instanceHours)]))]));
  const checks = costAtSloChecks({ main: MAIN, sageserve: SAGESERVE, costs: ihTable }, DEFAULT_STRATEGY);
  const winner = cheapestArm(ihTable[MAIN] ?? {});

  // The 8× burst (SageServe §7.3.4): the first week's first 0.3 day, the first model × 8 in every region during
  // [5:40, 6:00), the default and reactive-hpa at their edge settings in the main regime.
  const recovery: Record<string, number> = {};
  const mainPlan = plans.find((p) => p.regime.name === MAIN);
  const burstArms = (mainPlan?.arms ?? []).filter((a) => a.name === "reactive-hpa" || a.name === DEFAULT_STRATEGY);
  if (mainPlan !== undefined && burstArms.length === 2) {
    const burstStartMs = (5 * 60 + 40) * 60_000;
    const burstModel = first.workload.models[0]!.name;
    const base = windowOf(first.workload, new WorkloadStream(first.workload).summary.rateScale, 0, 0.3);
    const burstWorkload: WorkloadSpec = { ...base, bursts: [{ startMs: burstStartMs, durationMs: 20 * 60_000, factor: 8, model: burstModel }] };
    const fleet = mainPlan.regime.fleet({ ...first.fleet, config: { ...first.fleet.config, slo } });
    const burst = await Promise.all(burstArms.map((arm) => {
      const knob = costs[MAIN]![arm.name]![0]!.met?.knob ?? arm.ladder[arm.start]!;
      const s = arm.setting(knob, fleet);
      return pool.run({ fleet: s.fleet, workload: burstWorkload, strategy: arm.strategy, strategyParams: s.params, minuteSeries: true });
    }));
    const startMin = burstStartMs / 60_000;
    const targetMs = latencyTarget(minuteP95(burst[0]!, burstModel), startMin);
    burst.forEach((r, i) => {
      const name = burstArms[i]!.name;
      recovery[name] = recoveryMinutes(minuteP95(r, burstModel), startMin, targetMs);
      console.log(`burst: ${name} recovers in ${recovery[name]} min to p95 TTFT ≤ ${Math.round(targetMs)} ms (${burstModel} × 8 for 20 min), ${r.requests.interactiveUnserved} unserved`);
    });
    checks.push({ check: `${DEFAULT_STRATEGY} recovers from the 8× burst no later than reactive-hpa`, value: recovery[DEFAULT_STRATEGY]!, limit: recovery["reactive-hpa"]!, ok: recoversNoLater(recovery[DEFAULT_STRATEGY]!, recovery["reactive-hpa"]!) });
  } else {
    checks.push({ check: `${DEFAULT_STRATEGY} recovers from the 8× burst no later than reactive-hpa (not run)`, value: Number.NaN, limit: Number.NaN, ok: false });
  }
  for (const c of checks) console.log(`  ${c.ok ? "ok  " : "MISS"} ${c.check}: ${jsonFigure(c.value)} (limit ${jsonFigure(c.limit)})`);
  const verdict = verdictOf(checks, shrunk);
  console.log(JSON.stringify({
    bench: "strategies",
    defaultStrategy: DEFAULT_STRATEGY,
    winner: winner ?? null,
    weeks: seeds,
    judgedDays: [target.judgeFromDay + 1, target.judgeFromDay + judgeDays],
    slo: Object.fromEntries(Object.entries(slo.models).map(([m, s]) => [m, { ttftMs: s.ttftMs, tpotMs: s.tpotMs, percentile: s.percentile, unloadedP95TtftMs: unloadedP95Ms[m] }])),
    crossover,
    regimes: regimesJson,
    burstRecoveryMin: Object.fromEntries(Object.entries(recovery).map(([k, v]) => [k, jsonFigure(v)])),
    runs: { total: done, cached: fromCache },
    checks: checks.map((c) => ({ ...c, value: jsonFigure(c.value, 4), limit: jsonFigure(c.limit, 4) })),
    target,
    met: verdict.met,
    missed: verdict.missed,
    ...(verdict.partial === true ? { partial: true, shrunk: verdict.shrunk } : {}),
  }));
}

try {
  await main();
} catch (err) {
  // BENCH.md: the JSON line comes even when the run fails.
  console.log(JSON.stringify({ bench: "strategies", met: false, target, error: err instanceof Error ? err.message : String(err) }));
  process.exitCode = 1;
}
