/**
 * The plans site as `tidegate dev` wires it, kept out of bin/commands/dev.ts: keys (config, environment, or the
 * dev key persisted under queue.dataDir), a day of ServeGen seeded into the planner's history (planner/seed.ts,
 * stated in the log), the /plans sub-app over the in-memory store with the actual-load overlay, and the lines to
 * print at start (the URL to open and the key — on stdout, never in the log).
 */
import type { Hono } from "hono";
import type { Clock } from "../core/clock.js";
import type { TidegateConfig } from "../core/config.js";
import type { Logger } from "../core/log.js";
import type { Registry } from "../core/metrics.js";
import type { DemandHistory } from "../forecasts/history.js";
import { defaultDataDir } from "../region/engines/perf/generate.js";
import { devPlanKeys } from "./keys.js";
import type { PlanActions } from "./loop.js";
import { plansSite } from "./routes.js";
import { seedDevHistory } from "./seed.js";
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

/** Seeds `history` and builds the site (see the file comment). `env` is process.env, read once here at start-up. */
export async function devPlansSite(o: { config: TidegateConfig; clock: Clock; history: DemandHistory; store: PlanStore; log: Logger; env: Readonly<Record<string, string | undefined>>; dataDir?: string }): Promise<DevPlansSite> {
  const { keys, devKey } = devPlanKeys(o.config, o.env);
  const seed = await seedDevHistory(o.history, o.config, { dataDir: o.dataDir ?? defaultDataDir(), nowMs: o.clock.now() });
  for (const line of seed.lines) o.log[seed.seeded ? "info" : "warn"](seed.seeded ? `seeded planner history: ${line}` : line);
  const site = plansSite({ store: o.store, keys, history: o.history, clock: o.clock, log: o.log });
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
