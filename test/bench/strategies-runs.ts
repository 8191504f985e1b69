/**
 * What bench:strategies runs (issue 46): scale-out regimes, arms with their knob ladders, the frontier search on each
 * week's judged days, and a cache of finished runs so an interrupted bench resumes where it stopped.
 *
 * - A **regime** is how a scale-out lands: the fleet's loading source and spot behaviour. Its measured scale-out time
 *   (instance-time provisioning and loading per scale-out) is printed beside every result.
 * - An **arm** is a strategy (and planner) with one knob, a ladder of settings from cheapest to safest.
 * - The **search** runs an arm on one week's judged days at a starting rung, then toward cheaper settings while the SLO
 *   holds, or toward safer ones until it holds: it ends with the cheapest setting that met the SLO and the next
 *   cheaper one (which missed), between which verdicts/strategies.ts `costAtSlo` reads the cost at the SLO.
 */
import { createHash } from "node:crypto";
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { repoRoot } from "../../core/paths.js";
import { namedLoading } from "../../region/liveload/liveload-config.js";
import { withLoading, type FleetSpec } from "../../sim/week/fleet.js";
import type { PlannerName } from "../../sim/week/planner.js";
import type { WeekResult } from "../../sim/week/result.js";
import type { WorkloadSpec } from "../../sim/workload/spec.js";
import { meets, type FrontierRun } from "./verdicts/strategies.js";
import type { WeekJob } from "./week-runs.js";

/** How scale-outs land in one run of the bench. */
export interface Regime {
  name: string;
  summary: string;
  fleet(base: FleetSpec): FleetSpec;
}

/** The regimes, fastest scale-out first. `network` is the main one (the ≤ +1% check, the winner). */
export const REGIMES: readonly Regime[] = [
  { name: "network", summary: "the spot move (SageServe §7.1: median 1 min, at most 5), then the parameters over the network from the pool's copy (BlitzScale Table 1)", fleet: (f) => withLoading(f, namedLoading("network", "regime")) },
  { name: "ssd", summary: "the spot move, then ServerlessLLM's host-memory cache, SSD on a miss (BlitzScale Table 1)", fleet: (f) => withLoading(f, namedLoading("ssd", "regime")) },
  { name: "sageserve-spot", summary: "SageServe §7.1's delays: a spot instance keeps its model, so a reclaim is the spot move alone (median 1 min)", fleet: (f) => withLoading(f, undefined) },
  { name: "sageserve-provision", summary: "SageServe §7.1's provisioning delays: the spot work took the VM, so every scale-out redeploys its model (the spot move, then 10 min)", fleet: (f) => ({ ...withLoading(f, undefined), delays: { ...f.delays, spotKeepsModel: false } }) },
];

/** One arm: a strategy (and planner) and its knob's ladder, cheapest first; `start` is the first rung tried. */
export interface Arm {
  name: string;
  strategy: string;
  planner?: PlannerName;
  knob: string;
  ladder: readonly number[];
  start: number;
  /** The strategy parameters and fleet for one rung. */
  setting(value: number, fleet: FleetSpec): { params: Record<string, number>; fleet: FleetSpec };
}

const UTILIZATION = [0.9, 0.8, 0.7, 0.6, 0.55, 0.5, 0.45, 0.4, 0.35, 0.3, 0.25, 0.2];
/** Share of the SLO capacity the planner counts on: above 1 plans fewer instances than the SLO model asks for. */
const HEADROOM = [1.3, 1.15, 1, 0.85, 0.7, 0.55, 0.4, 0.3, 0.2];
const hpaSetting = (u: number, fleet: FleetSpec) => ({ params: { targetUtilization: u }, fleet });
const headroomSetting = (h: number, fleet: FleetSpec) => ({ params: {}, fleet: { ...fleet, plannedUtilization: h } });

/** Every arm the bench knows; `defaultStrategy`'s arm with the true-demand planner is the oracle. */
export function armsFor(defaultStrategy: string): Arm[] {
  return [
    { name: "reactive", strategy: "reactive", knob: "outAbove (inBelow = outAbove − 0.4)", ladder: [0.9, 0.8, 0.7, 0.6, 0.55, 0.5, 0.45, 0.4, 0.35], start: 5, setting: (u, fleet) => ({ params: { outAbove: u, inBelow: Math.max(0.05, u - 0.4) }, fleet }) },
    { name: "reactive-hpa", strategy: "reactive-hpa", knob: "targetUtilization", ladder: UTILIZATION, start: 5, setting: hpaSetting },
    { name: "lt-ua", strategy: "lt-ua", knob: "planned share of SLO capacity", ladder: HEADROOM, start: 7, setting: headroomSetting },
    { name: "lt-hpa", strategy: "lt-hpa", knob: "targetUtilization (above the forecast floor)", ladder: UTILIZATION, start: 5, setting: hpaSetting },
    { name: "predictive-hpa", strategy: "predictive-hpa", knob: "targetUtilization (on the utilization forecast one scale-out ahead)", ladder: UTILIZATION, start: 5, setting: hpaSetting },
    { name: "oracle", strategy: defaultStrategy, planner: "ilp-oracle", knob: `targetUtilization (${defaultStrategy} planned on the true demand of each coming hour)`, ladder: UTILIZATION, start: 5, setting: hpaSetting },
  ];
}

/** What the bench keeps of one run (the cache holds this, not the whole WeekResult). */
export interface RunFigures extends FrontierRun {
  attainment: number;
  violatedHours: number;
  unserved: number;
  /** Interactive requests that failed after their first token (each a miss of its model's SLO; sim/week/result.ts). */
  failedAfterFirstToken: number;
  /** Per model: p95 TTFT / TPOT (ms; "Infinity" as a string in JSON) and whether it met its SLO. */
  models: Record<string, { ttftP95Ms: number; tpotP95Ms: number; met: boolean; instanceHours: number }>;
  /** Mean time from a scale-out's start to serving (ms): provisioning + loading instance-time per scale-out started. */
  scaleOutMs: number;
  scaleOuts: number;
}

/** The figures of one replay. */
export function figuresOf(knob: number, r: WeekResult): RunFigures {
  let margin = 0;
  let failedAfterFirstToken = 0;
  const models: RunFigures["models"] = {};
  for (const [m, x] of Object.entries(r.models)) {
    failedAfterFirstToken += x.slo.failedAfterFirstToken;
    margin = Math.max(margin, x.slo.ttftAtPercentileMs / x.slo.ttftMs, x.slo.tpotAtPercentileMs / x.slo.tpotMs);
    models[m] = { ttftP95Ms: x.slo.ttftAtPercentileMs, tpotP95Ms: x.slo.tpotAtPercentileMs, met: x.slo.met, instanceHours: x.instanceHours };
  }
  const k = r.totals.actionsByKind;
  const scaleOuts = (k.reclaim ?? 0) + (k.redeploy ?? 0) + (k.provision ?? 0);
  return {
    knob,
    instanceHours: r.totals.instanceHours,
    margin,
    sloMet: r.slo.met,
    batchAllWithinDeadline: r.batch.allWithinDeadline,
    attainment: r.slo.attainment,
    violatedHours: r.slo.violatedHours,
    unserved: r.requests.interactiveUnserved,
    failedAfterFirstToken,
    models,
    scaleOutMs: scaleOuts === 0 ? Number.NaN : (r.totals.provisioningInstanceHours * 3_600_000) / scaleOuts,
    scaleOuts,
  };
}

/**
 * Finished runs on disk, keyed by what they ran and the code that ran them (the commit, and a hash of uncommitted
 * changes): a bench stopped part-way resumes with what it finished; a code change starts afresh. `dir` undefined (or
 * no git work tree): nothing is kept.
 */
export class RunCache {
  private readonly dir: string | undefined;
  readonly version: string;

  constructor(root: string | undefined) {
    this.version = codeVersion();
    this.dir = root === undefined || this.version === "" ? undefined : join(root, this.version);
    if (this.dir !== undefined) mkdirSync(this.dir, { recursive: true });
  }

  private path(key: unknown): string | undefined {
    return this.dir === undefined ? undefined : join(this.dir, `${createHash("sha256").update(JSON.stringify(key)).digest("hex").slice(0, 24)}.json`);
  }

  get(key: unknown): RunFigures | undefined {
    const p = this.path(key);
    if (p === undefined || !existsSync(p)) return undefined;
    return JSON.parse(readFileSync(p, "utf8"), (_k, v) => (v === "Infinity" ? Number.POSITIVE_INFINITY : v === "NaN" ? Number.NaN : v)) as RunFigures;
  }

  put(key: unknown, f: RunFigures): void {
    const p = this.path(key);
    if (p === undefined) return;
    // Written whole, then renamed: a crash never leaves half a result to resume from.
    writeFileSync(`${p}.tmp`, JSON.stringify({ ...f, key }, (_k, v) => (typeof v === "number" && !Number.isFinite(v) ? String(v) : v)));
    renameSync(`${p}.tmp`, p);
  }
}

/** The commit and a hash of uncommitted changes to tracked files ("" outside a git work tree). */
function codeVersion(): string {
  try {
    const git = (...args: string[]) => execFileSync("git", args, { cwd: repoRoot(), encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] });
    const head = git("rev-parse", "--short=12", "HEAD").trim();
    const diff = git("diff", "HEAD", "--", ".", ":(exclude)out");
    return diff === "" ? head : `${head}-dirty-${createHash("sha256").update(diff).digest("hex").slice(0, 8)}`;
  } catch {
    return "";
  }
}

/** Runs one job (a worker-thread replay). */
export type RunJob = (job: WeekJob) => Promise<WeekResult>;

/** One arm's search on one week's judged days. */
export interface SearchInput {
  arm: Arm;
  regime: Regime;
  fleet: FleetSpec;
  workload: WorkloadSpec;
  /** The rung to try first (the arm's `start`, or where an earlier week's search ended). */
  start: number;
  cacheKey: Record<string, unknown>;
}

/**
 * The search: from `start`, toward cheaper rungs while the SLO holds, toward safer ones while it does not; it stops
 * at the first rung on the other side (or the ladder's end). Returns every run, cheapest setting first.
 */
export async function searchFrontier(s: SearchInput, run: RunJob, cache: RunCache, onRun: (f: RunFigures, cached: boolean) => void): Promise<RunFigures[]> {
  const runs = new Map<number, RunFigures>();
  const at = async (index: number): Promise<RunFigures> => {
    const value = s.arm.ladder[index]!;
    const key = { ...s.cacheKey, regime: s.regime.name, arm: s.arm.name, knob: value };
    let f = cache.get(key);
    const cached = f !== undefined;
    if (f === undefined) {
      const set = s.arm.setting(value, s.fleet);
      const r = await run({ fleet: set.fleet, workload: s.workload, strategy: s.arm.strategy, strategyParams: set.params, ...(s.arm.planner === undefined ? {} : { planner: s.arm.planner }), minuteSeries: false });
      f = figuresOf(value, r);
      cache.put(key, f);
    }
    runs.set(index, f);
    onRun(f, cached);
    return f;
  };
  let i = Math.max(0, Math.min(s.arm.ladder.length - 1, s.start));
  if (meets(await at(i))) {
    while (i > 0 && meets(await at(--i)));
  } else {
    while (i < s.arm.ladder.length - 1 && !meets(await at(++i)));
  }
  return [...runs.entries()].sort((a, b) => a[0] - b[0]).map(([, f]) => f);
}
