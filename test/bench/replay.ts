/**
 * bench:replay — how fast `tidegate replay --trace azure-conv` runs: the Azure 2023 conversation trace (19,366
 * requests over one hour) through the dev fleet's region selection, gateway routing and simulated engines in
 * virtual time (sim/replay). Each round reads the trace, replays it and computes every percentile, timed by the
 * wall clock (and CPU time, since this machine is shared: load average is printed). Round 1 runs cold (JIT not
 * warmed, as a user's `tidegate replay` does); the figure is the median over rounds, the cold round is printed too.
 *
 * Figures: replayWallMs (median), coldWallMs, requestsPerWallS and ratio to real time (trace span / wall). Target
 * (issue 2): replayWallMs ≤ 2000 (an absolute target: README "Benchmarks" says why). Also prints the performance
 * model's error (core/perf) two ways, each held to ≤ 5% MAPE for TTFT and for time per output token
 * (TPOT): on the held-out 5th run of every configuration (close to in-sample: the other 4 runs of the same point are
 * fitted), and by nested leave-one-configuration-out (issue 36, perf/nested.ts: a configuration = one measured
 * (model, GPU, TP, prompt, batch) point with all its output lengths and runs, predicted by a fit that never saw it,
 * with the fit's one choice — the sibling sweep's weight — made by an inner LOCO on the other configurations only).
 * Informational, not in met: plain LOCO at the shipped weight (evaluate.ts; optimistic, since the weight was chosen
 * on that figure), LOCO per (prompt, batch, output) run setting (the finer grouping behind the pre-issue-11 6.18%),
 * and the GPU-ratio derivation checked on whole profiles. An error with nothing to score is NaN ("no data") and
 * fails (verdicts/replay.ts). BENCH_ROUNDS changes the run: it is then partial (met false). The last line printed
 * is one JSON object; exits 0 whether or not met.
 */
import { cpus, loadavg, totalmem } from "node:os";
import { loadConfig } from "../../core/config.js";
import "../../region/config-sections.js"; // region's config sections (keystage, loading), before any config is parsed
import { readAllMeasured } from "../../core/perf/data.js";
import { checkDerivation, fitAll, leaveConfigOut, runSettingKey } from "../../core/perf/evaluate.js";
import { defaultDataDir, sharedDataDir } from "../../core/paths.js";
import { formatGroups } from "../../sim/replay/stats.js";
import { replayTrace, type TraceSummary } from "../../sim/replay/summary.js";
import { readTrace } from "../../sim/replay/traces.js";
import { nestedLeaveConfigOut, FIT_CANDIDATES } from "../../core/perf/nested.js";
import { packageVersion as version, median } from "./common.js";
import { envOverrides, jsonFigure, verdictOf } from "./verdicts/common.js";
import { REPLAY_TARGET as TARGET, replayChecks } from "./verdicts/replay.js";

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const SHRUNK = envOverrides(["BENCH_ROUNDS"]);
const TRACE = "azure-conv";
const SEED = 1;



async function main(): Promise<void> {
  console.log(`machine: ${cpus().length} cpus (${cpus()[0]?.model ?? "?"}), ${(totalmem() / 2 ** 30).toFixed(1)} GiB, load average ${loadavg().map((l) => l.toFixed(2)).join(" ")}`);
  console.log(`versions: node ${process.version}, typescript ${version("typescript")}, prom-client ${version("prom-client")}`);
  // The trace ships (core/data); the measured profiles the model is judged against are the full data folder's.
  const dataDir = defaultDataDir();
  const measuredDir = sharedDataDir();
  console.log(`inputs: trace ${TRACE} (${dataDir}), measured profiles (${measuredDir}), seed ${SEED}, fleet = embedded dev config (3 regions × 4 models × 2 H100 instances), ${ROUNDS} rounds`);

  const rows = readAllMeasured(measuredDir);
  const fit = fitAll(rows);
  const lco = leaveConfigOut(rows);
  const lcoRun = leaveConfigOut(rows, runSettingKey);
  const pct = (x: number) => (Number.isNaN(x) ? "no data" : `${(x * 100).toFixed(2)}%`);
  const nestedStarted = performance.now();
  const nested = nestedLeaveConfigOut(rows);
  const chosen = nested.chosen.map((n, i) => (n > 0 ? `${FIT_CANDIDATES[i]!.siblingWeight} × ${n}` : "")).filter((x) => x !== "").join(", ");
  console.log(`performance model: held-out (5th run of every (prompt, batch, output) run setting, ${fit.heldOutRows} runs) TTFT MAPE ${pct(fit.ttftMape)}, TPOT MAPE ${pct(fit.tpotMape)}`);
  console.log(`performance model: nested leave-one-configuration-out (${nested.configurations} configurations; the sibling weight chosen from {${FIT_CANDIDATES.map((c) => c.siblingWeight).join(", ")}} by an inner LOCO on each outer fold's training configurations only; chosen: ${chosen}; ${((performance.now() - nestedStarted) / 1000).toFixed(0)} s) TTFT MAPE ${pct(nested.ttftMape)}, TPOT MAPE ${pct(nested.tpotMape)} — the figure held to ≤ 5%`);
  console.log(`performance model, informational: plain leave-one-configuration-out at the shipped weight (chosen on this figure, so optimistic) (${lco.configurations} (model, GPU, TP, prompt, batch) configurations; ${lco.ttftRows} TTFT / ${lco.tpotRows} TPOT runs) TTFT MAPE ${pct(lco.ttftMape)}, TPOT MAPE ${pct(lco.tpotMape)}; per (model, GPU, TP):`);
  for (const p of lco.perProfile) console.log(`  ${p.key.padEnd(28)} TTFT ${pct(p.ttftMape).padStart(6)}  TPOT ${pct(p.tpotMape).padStart(6)}`);
  const worst = (pick: (e: (typeof lco.perConfig)[number]) => number) =>
    [...lco.perConfig].sort((a, b) => pick(b) - pick(a)).slice(0, 3).map((e) => `${e.key} ${pct(pick(e))}`).join(", ");
  console.log(`  worst configurations: TTFT ${worst((e) => e.ttftMape)}; TPOT ${worst((e) => e.tpotMape)}`);
  console.log(`performance model, informational: leaving out one (prompt, batch, output) run setting instead (${lcoRun.configurations}; other output lengths at the same prompt and batch stay in the fit): TTFT ${pct(lcoRun.ttftMape)}, TPOT ${pct(lcoRun.tpotMape)}`);
  const derivation = checkDerivation(rows);
  console.log(
    `performance model, informational: the GPU-ratio derivation that makes the H100 Llama-3 profiles, checked on whole measured profiles: ` +
      derivation.map((d) => `${d.key} from ${d.reference}'s ratios TTFT ${pct(d.ttftMape)} TPOT ${pct(d.tpotMape)}`).join("; "),
  );

  const config = loadConfig();
  const walls: number[] = [];
  const cpusMs: number[] = [];
  let last: TraceSummary | undefined;
  for (let round = 1; round <= ROUNDS; round++) {
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    const trace = readTrace(TRACE, dataDir);
    const { summary } = await replayTrace(trace, config, SEED);
    const wallMs = performance.now() - t0;
    const cpu = process.cpuUsage(cpu0);
    const cpuMs = (cpu.user + cpu.system) / 1000;
    walls.push(wallMs);
    cpusMs.push(cpuMs);
    last = summary;
    const all = summary.groups.find((g) => g.key === "*@*")!;
    console.log(
      `round ${round}${round === 1 ? " (cold)" : ""}: ${summary.requests} requests, served ${summary.served}, ${summary.events} events, wall ${wallMs.toFixed(0)} ms, cpu ${cpuMs.toFixed(0)} ms, ` +
        `${Math.round(summary.requests / (wallMs / 1000))} req/wall s; TTFT p50 ${all.ttftMs.p50.toFixed(1)} ms p99 ${all.ttftMs.p99.toFixed(1)} ms, E2E p50 ${all.e2eMs.p50.toFixed(0)} ms (load average ${loadavg()[0]!.toFixed(2)})`,
    );
  }
  const s = last!;
  console.log(`latency of the last round (ms), per model and region:\n${formatGroups(s.groups)}`);
  const replayWallMs = median(walls);
  const checks = replayChecks({ replayWallMs, requests: s.requests, served: s.served, ttftMape: fit.ttftMape, tpotMape: fit.tpotMape, nestedLocoTtftMape: nested.ttftMape, nestedLocoTpotMape: nested.tpotMape });
  const verdict = verdictOf(checks, SHRUNK);
  for (const c of checks.filter((x) => !x.ok)) console.log(`target missed: ${c.check} = ${jsonFigure(c.value, 4)} (limit ${c.limit})`);
  if (verdict.partial === true) console.log(`partial run (met false): ${SHRUNK.join(", ")}`);
  const result = {
    bench: "replay",
    trace: TRACE,
    requests: s.requests,
    served: s.served,
    traceSpanS: Number(s.traceSpanS.toFixed(1)),
    replayWallMs: Number(replayWallMs.toFixed(0)),
    coldWallMs: Number(walls[0]!.toFixed(0)),
    replayCpuMs: Number(median(cpusMs).toFixed(0)),
    requestsPerWallS: Math.round(s.requests / (replayWallMs / 1000)),
    realTimeRatio: Math.round((s.traceSpanS * 1000) / replayWallMs),
    rounds: walls.map((w) => Number(w.toFixed(0))),
    loadAverage1m: Number(loadavg()[0]!.toFixed(2)),
    ttftMape: jsonFigure(fit.ttftMape, 4),
    tpotMape: jsonFigure(fit.tpotMape, 4),
    nestedLocoTtftMape: jsonFigure(nested.ttftMape, 4),
    nestedLocoTpotMape: jsonFigure(nested.tpotMape, 4),
    nestedSiblingWeightsChosen: Object.fromEntries(nested.chosen.map((n, i) => [String(FIT_CANDIDATES[i]!.siblingWeight), n]).filter(([, n]) => n !== 0)),
    locoTtftMape: jsonFigure(lco.ttftMape, 4),
    locoTpotMape: jsonFigure(lco.tpotMape, 4),
    locoConfigurations: lco.configurations,
    locoRunSettingTtftMape: jsonFigure(lcoRun.ttftMape, 4),
    locoRunSettingTpotMape: jsonFigure(lcoRun.tpotMape, 4),
    derivationCheck: derivation.map((d) => ({ profile: d.key, reference: d.reference, ttftMape: Number(d.ttftMape.toFixed(4)), tpotMape: Number(d.tpotMape.toFixed(4)) })),
    target: TARGET,
    met: verdict.met,
    ...(verdict.partial === true ? { partial: true, shrunk: verdict.shrunk } : {}),
    ...(verdict.missed.length > 0 ? { missed: verdict.missed } : {}),
  };
  console.log(JSON.stringify(result));
}

main().catch((err: unknown) => {
  console.error(err);
  console.log(JSON.stringify({ bench: "replay", error: String(err), target: TARGET, met: false }));
});
