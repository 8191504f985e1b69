/**
 * Week replays in worker threads, for the strategies benchmarks: one job per worker, at most `parallel` at once (one
 * per core on this 2-core box). A worker started from this module runs its job and posts the WeekResult back.
 */
import { Worker, isMainThread, parentPort, workerData } from "node:worker_threads";
import type { FleetSpec } from "../../sim/week/fleet.js";
import { createPlanner, type PlannerName } from "../../sim/week/planner.js";
import { runWeek } from "../../sim/week/replay.js";
import type { WeekResult } from "../../sim/week/result.js";
import type { WorkloadSpec } from "../../sim/workload/spec.js";

export interface WeekJob {
  fleet: FleetSpec;
  workload: WorkloadSpec;
  strategy: string;
  strategyParams?: Record<string, number>;
  /** The replay's planner (default `ilp`; `ilp-oracle` plans on the workload's true demand). */
  planner?: PlannerName;
  minuteSeries: boolean;
}

const data = workerData as { weekJob?: WeekJob } | null | undefined;
if (!isMainThread && data?.weekJob !== undefined) {
  const job = data.weekJob;
  const planner = await createPlanner(job.fleet, job.planner ?? "ilp", job.workload);
  const r = await runWeek({ fleet: job.fleet, workload: job.workload, strategy: job.strategy, ...(job.strategyParams === undefined ? {} : { strategyParams: job.strategyParams }), planner, minuteSeries: job.minuteSeries });
  await planner.close?.();
  parentPort!.postMessage(r);
}

/** Runs `jobs`, at most `parallel` at once, each in its own worker thread; `onDone` hears each result as it lands. */
export async function runWeeks(jobs: WeekJob[], parallel: number, onDone: (r: WeekResult, job: WeekJob) => void): Promise<WeekResult[]> {
  const out: WeekResult[] = new Array(jobs.length);
  let next = 0;
  const lane = async () => {
    while (next < jobs.length) {
      const i = next++;
      out[i] = await new Promise<WeekResult>((resolve, reject) => {
        const w = new Worker(new URL(import.meta.url), { workerData: { weekJob: jobs[i] } });
        w.once("message", (r: WeekResult) => resolve(r));
        w.once("error", reject);
        w.once("exit", (code) => code !== 0 && reject(new Error(`worker for ${jobs[i]!.strategy} exited with ${code}`)));
      });
      onDone(out[i]!, jobs[i]!);
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, parallel) }, lane));
  return out;
}

/**
 * A pool of `parallel` worker lanes that jobs join one at a time from anywhere (the strategies bench's sweeps run
 * each arm's settings in turn, and the arms side by side): `run(job)` resolves when its worker has.
 */
export function weekPool(parallel: number): { run(job: WeekJob): Promise<WeekResult> } {
  let free = Math.max(1, parallel);
  const waiting: (() => void)[] = [];
  return {
    run: async (job) => {
      if (free === 0) await new Promise<void>((resolve) => waiting.push(resolve));
      else free--;
      try {
        const [r] = await runWeeks([job], 1, () => undefined);
        return r!;
      } finally {
        const next = waiting.shift();
        if (next !== undefined) next();
        else free++;
      }
    },
  };
}
