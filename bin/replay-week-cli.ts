/**
 * The `--workload week` path of `tidegate replay` (bin/commands/replay.ts dispatches on --workload): loads the fleet
 * and workload files (or the defaults), runs one or more strategies on the same seeded workload with a progress
 * bar, prints requests per wall second and writes the JSON + HTML reports (and the comparison page).
 */
import type { FlagSpec, FlagValues } from "./args.js";
import { ValidationError, parseJson } from "../core/validate.js";
import { readFileSync } from "node:fs";
import { DEFAULT_STRATEGY } from "../core/defaults.js";
import { STRATEGY_NAMES } from "../region/strategies/strategy-registry.js";
import { DEFAULT_WORKLOAD_JSON, parseWorkload, workloadDataDirs, type WorkloadSpec } from "../sim/workload/spec.js";
import { LOADING_FLAG_VALUES, namedLoading } from "../region/liveload/liveload-config.js";
import { loadFleet, withLoading, type FleetSpec } from "../sim/week/fleet.js";
import { PLANNER_NAMES, createPlanner, type PlannerName } from "../sim/week/planner.js";
import { ProgressBar } from "../sim/week/progress.js";
import { runWeek } from "../sim/week/replay.js";
import { writeReports } from "../sim/week/report.js";
import type { WeekResult } from "../sim/week/result.js";

/** Flags of the week path (merged into `tidegate replay`'s flag table). */
export const WEEK_FLAGS: Record<string, FlagSpec> = {
  strategy: { type: "string", help: `week: scaling strategy, or a comma list, or "all" (${STRATEGY_NAMES.join(", ")})`, default: DEFAULT_STRATEGY },
  fleet: { type: "string", help: "week: fleet file (JSON: {fleet, engines, actuator, weights, spot}); default: built-in 3 regions × 256 H100" },
  "workload-file": { type: "string", help: "week: workload file (JSON, see sim/workload/spec.ts); default: built-in ServeGen week" },
  days: { type: "number", help: "week: override the workload's days (requests scale with it)" },
  requests: { type: "number", help: "week: override the workload's total requests" },
  seed: { type: "number", help: "week: override the workload's seed" },
  out: { type: "string", help: "week: report directory", default: "out/replay-week" },
  quiet: { type: "boolean", help: "week: no progress bar", default: false },
  "data-dir": { type: "string", help: "the data folder (default: the shipped core/data, which holds the Azure traces and the week's ServeGen per-client series, packed; the Mooncake traces are not shipped: name a full copy of the public data, e.g. ../shared/data)" },
  loading: { type: "string", help: `week: every region's loading source, as config controller.loading (${LOADING_FLAG_VALUES.join(", ")}; none = the fleet file's actuator delays; default: the fleet file's own)` },
  planner: { type: "string", help: `week: hourly planner (${PLANNER_NAMES.join(", ")}); ilp = planner/ forecast + HiGHS ILP; ilp-oracle = the same planner on the workload's true demand of each coming hour (a bound, not a forecaster)`, default: "ilp" },
};

/** Parses the --planner flag. */
export function plannerName(flag: unknown): PlannerName {
  const name = typeof flag === "string" ? flag : "ilp";
  if (!(PLANNER_NAMES as readonly string[]).includes(name)) throw new ValidationError("--planner", `must be one of ${PLANNER_NAMES.join(", ")}, got ${JSON.stringify(name)}`);
  return name as PlannerName;
}

/** Loads fleet + workload with flag overrides; errors are ValidationErrors naming the field. */
export function loadWeekInputs(flags: FlagValues): { fleet: FleetSpec; workload: WorkloadSpec } {
  const loaded = loadFleet(typeof flags.fleet === "string" ? flags.fleet : undefined);
  const fleet = typeof flags.loading === "string" ? withLoading(loaded, namedLoading(flags.loading, "--loading")) : loaded;
  let json: Record<string, unknown> = { ...DEFAULT_WORKLOAD_JSON };
  if (typeof flags["workload-file"] === "string") {
    const file = flags["workload-file"];
    let text: string;
    try {
      text = readFileSync(file, "utf8");
    } catch (err) {
      throw new ValidationError(file, `cannot read workload file: ${(err as Error).message}`);
    }
    const parsed = parseJson(text, `workload file ${file}`, "invalid_config");
    if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) throw new ValidationError(file, "a workload file holds one JSON object");
    json = parsed as Record<string, unknown>;
  }
  if (typeof flags.days === "number") {
    const days = flags.days;
    const base = parseWorkload(json, fleet.config);
    json = { ...json, days, targetRequests: Math.max(1, Math.round((base.targetRequests * days) / base.days)) };
  }
  if (typeof flags.requests === "number") json = { ...json, targetRequests: flags.requests };
  if (typeof flags.seed === "number") json = { ...json, seed: flags.seed };
  if (typeof flags["data-dir"] === "string") json = { ...json, ...workloadDataDirs(flags["data-dir"]) };
  return { fleet, workload: parseWorkload(json, fleet.config) };
}

/** Parses the --strategy flag into strategy names. */
export function strategyList(flag: unknown): string[] {
  const raw = typeof flag === "string" ? flag : DEFAULT_STRATEGY;
  const list = raw === "all" ? [...STRATEGY_NAMES] : raw.split(",").map((s) => s.trim()).filter((s) => s !== "");
  list.forEach((s, i) => {
    if (!(STRATEGY_NAMES as string[]).includes(s)) throw new ValidationError(`--strategy[${i}]`, `unknown strategy ${JSON.stringify(s)}; known: ${STRATEGY_NAMES.join(", ")}`);
  });
  return list;
}

/** Runs each strategy on the same inputs; one progress bar per run. */
export async function runStrategies(fleet: FleetSpec, workload: WorkloadSpec, strategies: string[], quiet: boolean, log: (line: string) => void, planner: PlannerName = "ilp"): Promise<WeekResult[]> {
  const results: WeekResult[] = [];
  for (const strategy of strategies) {
    const bar = quiet ? undefined : new ProgressBar(strategy.padEnd(8));
    const p = await createPlanner(fleet, planner, workload);
    let r: WeekResult;
    try {
      r = await runWeek({ fleet, workload, strategy, planner: p, onProgress: (x) => bar?.update(x.fraction, x.requests) });
    } finally {
      await p.close?.();
    }
    bar?.done(r.requests.total);
    log(`${strategy}: ${r.requests.total} requests in ${(r.wallMs / 1000).toFixed(1)} s wall = ${r.requestsPerWallS} requests per wall second; instance-hours ${r.totals.instanceHours}, GPU-h provisioning ${r.totals.provisioningGpuHours}, IW p95 TTFT ${r.interactive.ttftMs.p95} ms, p95 TPOT ${r.interactive.tpotMs.p95} ms, SLO ${r.slo.met ? "met" : `missed (${r.slo.unmetModels.join(", ")})`} with attainment ${(r.slo.attainment * 100).toFixed(2)}% and ${r.slo.violatedHours} hours in violation, batch within deadline ${r.batch.allWithinDeadline}`);
    results.push(r);
  }
  return results;
}

/** `tidegate replay --workload week ...`; resolves to the exit code. */
export async function runWeekCommand(flags: FlagValues): Promise<number> {
  const { fleet, workload } = loadWeekInputs(flags);
  const strategies = strategyList(flags.strategy);
  const results = await runStrategies(fleet, workload, strategies, flags.quiet === true, (l) => process.stdout.write(l + "\n"), plannerName(flags.planner));
  const files = writeReports(typeof flags.out === "string" ? flags.out : "out/replay-week", results);
  process.stdout.write(`reports: ${files.join(" ")}\n`);
  return 0;
}
