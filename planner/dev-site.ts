/**
 * The plans site as `tidegate dev` wires it, kept out of bin/commands/dev.ts: the planner's state in the data
 * directory (`openDevPlannerState`: demand history and plan reports under `<queue.dataDir>/planner/`, kept across
 * restarts), keys (config, environment, or the dev key persisted there too), a day of the shipped ServeGen aggregates
 * seeded into each (model, region) once per data directory, where nothing was recorded (planner/seed-once.ts, stated
 * in the log), the /plans
 * sub-app over the stored plans with the actual-load overlay, and the lines to print at start (the URL to open and
 * the key — on stdout, never in the log).
 */
import type { Hono } from "hono";
import type { Clock } from "../core/clock.js";
import type { TidegateConfig } from "../core/config.js";
import type { Logger } from "../core/log.js";
import type { Registry } from "../core/metrics.js";
import type { DemandHistory } from "../forecasts/history.js";
import { join } from "node:path";
import { defaultDataDir } from "../core/paths.js";
import { FileHistory } from "./file-history.js";
import { FilePlanStore } from "./file-store.js";
import { devPlanKeys } from "./keys.js";
import type { PlanActions } from "./loop.js";
import { plansSite } from "./routes.js";
import { seedDevHistoryOnce, seedListFile } from "./seed-once.js";
import { planFleet } from "./fingerprint.js";
import type { PlanStore } from "./store.js";

/** What dev.ts mounts and prints. */
export interface DevPlansSite {
  routes: Hono;
  /** The admin keys in force (config, environment or the dev key): the router's admin routes take them too. */
  adminKeys: readonly string[];
  /** Connects approve/reject/plan now to the running loop and the site's counters to the router's /metrics. */
  attach(actions: PlanActions, registry: Registry): void;
  /** The lines for stdout once the router listens at `url`. */
  banner(url: string): string;
}

/**
 * Opens `tidegate dev`'s planner state: the demand history in `<queue.dataDir>/planner/history/` (file-history.ts,
 * hours within 8 days of `nowMs`) and the plan reports in `<queue.dataDir>/planner/plans/` (file-store.ts). Damaged
 * files are set aside, not fatal; `devPlansSite` logs what was kept and what was set aside.
 */
export async function openDevPlannerState(config: TidegateConfig, nowMs: number): Promise<{ history: FileHistory; plans: FilePlanStore }> {
  const dir = join(config.queue.dataDir, "planner");
  return { history: await FileHistory.open(join(dir, "history"), { nowMs }), plans: await FilePlanStore.open(join(dir, "plans")) };
}

/** The log lines for what the stores found on disk (FileHistory, FilePlanStore); nothing for other stores. */
function openedLines(history: DemandHistory, store: PlanStore): { info: string[]; warn: string[] } {
  const info: string[] = [];
  const warn: string[] = [];
  for (const o of [history instanceof FileHistory ? history.opened : undefined, store instanceof FilePlanStore ? store.opened : undefined]) {
    for (const a of o?.setAside ?? []) warn.push(`${join(o!.dir, a.file)} could not be read (${a.why}): moved to ${a.movedTo}; everything else in ${o!.dir} is kept`);
  }
  if (history instanceof FileHistory) info.push(`planner history in ${history.dir}: ${history.opened.hours} hour(s) kept from earlier starts${history.opened.expired > 0 ? `, ${history.opened.expired} older than 8 days removed` : ""}`);
  if (store instanceof FilePlanStore) info.push(`plan reports in ${store.dir}: ${store.opened.plans} kept from earlier starts`);
  return { info, warn };
}

/**
 * Seeds `history` (series not seeded before, seed-once.ts) and builds the site (see the file comment). `env` is
 * process.env, read once here at start-up.
 */
export async function devPlansSite(o: { config: TidegateConfig; clock: Clock; history: DemandHistory; store: PlanStore; log: Logger; env: Readonly<Record<string, string | undefined>>; dataDir?: string }): Promise<DevPlansSite> {
  const { keys, devKey } = devPlanKeys(o.config, o.env);
  const opened = openedLines(o.history, o.store);
  for (const line of opened.info) o.log.info(line);
  for (const line of opened.warn) o.log.warn(line);
  // Each (model, region) is seeded once per data directory, only where nothing was recorded (seed-once.ts).
  const seed = await seedDevHistoryOnce(o.history, o.config, { dataDir: o.dataDir ?? defaultDataDir(), nowMs: o.clock.now(), listFile: seedListFile(o.config.queue.dataDir) });
  for (const line of seed.lines) o.log[line.level](line.msg);
  // Plans of another configuration kept in the same data directory are counted on the index, not mixed in.
  const site = plansSite({ store: o.store, keys, history: o.history, clock: o.clock, log: o.log, fleet: planFleet(o.config) });
  return {
    routes: site.app,
    adminKeys: keys.admin,
    attach: (actions, registry) => {
      site.setActions(actions);
      site.registerMetrics(registry);
    },
    banner: (url) =>
      `plan reports: open ${url}/login and sign in with ${devKey === undefined ? "an admin key from your config or TIDEGATE_ADMIN_KEYS" : `the admin key ${devKey.key}`}\n` +
      (devKey === undefined ? "" : `  (kept in ${devKey.file}; the same key on every start with this data directory; scripts: Authorization: Bearer <key>)\n`),
  };
}
