/**
 * bench:planner — the planner's ILP at three sizes, each against bounds measured in the same run (BENCH.md):
 *   4 × 3 × 1   HiGHS MIP proved optimal ≤ 50 ms (median of rounds, after a warm-up solve)
 *   50 × 10 × 4 decomposition within 1% of optimal (gap to the HiGHS LP bound, a lower bound on the optimum) ≤ 2 s
 *   1000 × 20 × 4 decomposition within 2% of the LP (Lagrangian) bound ≤ 10 s
 * and prints HiGHS on the monolithic MIP (the slack-free DESIGN model, time-limited) for each size. Last line: JSON.
 */
import { cpus, loadavg, totalmem } from "node:os";
import { createRequire } from "node:module";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { buildIlp } from "../../planner/ilp.js";
import { decompose } from "../../planner/decompose.js";
import { HighsSolver } from "../../core/solver.js";
import { solvePlan } from "../../planner/solve.js";
import { syntheticFleet } from "../../planner/synthetic.js";

const req = createRequire(import.meta.url);
/** The highs package version, read beside its resolved entry point (package.json is not exported). */
function highsVersion(): string {
  const entry = req.resolve("highs");
  const pkg = readFileSync(join(dirname(entry), "..", "package.json"), "utf8");
  return (JSON.parse(pkg) as { version: string }).version;
}
const median = (a: number[]) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)]!;
const log = (s: string) => process.stdout.write(s + "\n");

async function main() {
  log(`machine: nproc ${cpus().length}, memory ${(totalmem() / 2 ** 30).toFixed(1)} GiB, load average ${loadavg().map((l) => l.toFixed(1)).join(" ")}, node ${process.version}, highs ${highsVersion()}`);
  const solver = await HighsSolver.create();
  const out: Record<string, unknown> = { bench: "planner" };
  // Size 1: small, monolithic MIP.
  {
    const { fleet, demand } = syntheticFleet(4, 3, 1, 1);
    const model = buildIlp(fleet, demand);
    solvePlan(model, solver); // warm-up (wasm instantiation)
    const times: number[] = [];
    const cpuTimes: number[] = [];
    let status = "";
    let gap = Number.NaN;
    for (let r = 0; r < 9; r++) {
      const c0 = process.cpuUsage();
      const t0 = performance.now();
      const s = solvePlan(model, solver);
      times.push(performance.now() - t0);
      const c = process.cpuUsage(c0);
      cpuTimes.push((c.user + c.system) / 1000);
      status = s.status;
      gap = s.gap;
      log(`4x3x1 round ${r}: ${s.path} ${s.status} objective ${s.objective.toFixed(3)} gap ${s.gap} wall ${times.at(-1)!.toFixed(1)} ms, process CPU ${cpuTimes.at(-1)!.toFixed(1)} ms`);
    }
    // On a shared, oversubscribed box wall time includes waiting for a core; CPU time is printed beside it.
    out.small = { endpoints: model.endpoints.length, status, gap, medianMs: median(times), medianCpuMs: median(cpuTimes) };
  }
  // Sizes 2 and 3: decomposition vs bounds vs monolithic HiGHS.
  for (const [name, M, R, G, limitMs, monoS, withLp] of [["mid", 50, 10, 4, 1800, 15, true], ["large", 1000, 20, 4, 8000, 15, false]] as const) {
    const { fleet, demand } = syntheticFleet(M, R, G, 1);
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    const model = buildIlp(fleet, demand);
    const buildMs = performance.now() - t0;
    const d = decompose(model, { timeLimitMs: limitMs - buildMs, targetGap: name === "mid" ? 0.005 : 0.01 });
    const totalMs = performance.now() - t0;
    const cu = process.cpuUsage(c0);
    const cpuMs = (cu.user + cu.system) / 1000;
    let bound = d.bound;
    let lpMs = Number.NaN;
    if (withLp) {
      const lp = solver.solve(model, { relax: true, timeLimitS: 30 });
      lpMs = lp.solveMs;
      if (lp.status === "optimal") bound = Math.max(bound, lp.objective);
      log(`${M}x${R}x${G}: HiGHS LP bound ${lp.objective.toFixed(2)} (${lp.status}, ${lp.solveMs.toFixed(0)} ms)`);
    }
    const gap = (d.objective - bound) / d.objective;
    log(`${M}x${R}x${G}: ${model.endpoints.length} endpoints, ${model.numCols} cols, ${model.numRows} rows; build ${buildMs.toFixed(0)} ms; decomposition objective ${d.objective.toFixed(2)}, Lagrangian bound ${d.bound.toFixed(2)}, gap to best bound ${(100 * gap).toFixed(3)}%, ${d.iterations} iterations, total ${totalMs.toFixed(0)} ms wall, ${cpuMs.toFixed(0)} ms CPU`);
    // The DESIGN ILP as written (no unmet slacks: with them, "serve nobody" is trivially feasible).
    const mono = solver.solve(model, { timeLimitS: monoS, mipRelGap: 1e-4, noSlack: true });
    const monoGapToBound = Number.isFinite(mono.objective) ? (mono.objective - bound) / mono.objective : Number.NaN;
    log(`${M}x${R}x${G}: monolithic HiGHS MIP on the slack-free model (limit ${monoS} s): ${mono.status}, ${Number.isFinite(mono.objective) ? `objective ${mono.objective.toFixed(2)}, gap to bound ${(100 * monoGapToBound).toFixed(3)}%` : "no feasible solution"}, ${mono.solveMs.toFixed(0)} ms; speed-up ${(mono.solveMs / totalMs).toFixed(1)}×`);
    out[name] = { endpoints: model.endpoints.length, gap, totalMs, cpuMs, lpMs, monolithic: { status: mono.status, feasible: Number.isFinite(mono.objective), gapToBound: monoGapToBound, ms: mono.solveMs } };
  }
  const small = out.small as { status: string; medianMs: number };
  const mid = out.mid as { gap: number; totalMs: number };
  const large = out.large as { gap: number; totalMs: number };
  out.loadAverage1m = loadavg()[0];
  out.target = { smallMs: 50, midGap: 0.01, midMs: 2000, largeGap: 0.02, largeMs: 10000 };
  // Also judged on process CPU time, printed for a box shared with other jobs (the target is judged on wall time).
  const smallCpu = (out.small as { medianCpuMs: number }).medianCpuMs;
  const midCpu = (out.mid as { cpuMs: number }).cpuMs;
  const largeCpu = (out.large as { cpuMs: number }).cpuMs;
  out.metOnCpuTime = small.status === "optimal" && smallCpu <= 50 && mid.gap <= 0.01 && midCpu <= 2000 && large.gap <= 0.02 && largeCpu <= 10000;
  out.met = small.status === "optimal" && small.medianMs <= 50 && mid.gap <= 0.01 && mid.totalMs <= 2000 && large.gap <= 0.02 && large.totalMs <= 10000;
  log(JSON.stringify(out));
}

main().catch((err: unknown) => {
  log(JSON.stringify({ bench: "planner", error: err instanceof Error ? err.message : String(err), target: { smallMs: 50, midGap: 0.01, midMs: 2000, largeGap: 0.02, largeMs: 10000 }, met: false }));
});
