/**
 * `tidegate planner`: the hourly planning loop as its own process. Reads demand history from Redis (recording it
 * from the regions' telemetry while it leads), plans every --interval-ms, sends targets to each region over gRPC
 * (config regions[].grpcAddress) unless advisory, and serves its reports at /plans behind the admin keys.
 */
import { hostname } from "node:os";
import { Hono, type Context } from "hono";
import { serve } from "@hono/node-server";
import { logRedisHealth, openRedis } from "../../core/redis.js";
import type { Command } from "../command.js";
import { WallClock } from "../../core/clock.js";
import { plannerConfigFromFlags } from "../config-flags.js";
import { ensurePortFree } from "../../core/listen.js";
import { TidegateError } from "../../core/errors.js";
import { newId } from "../../core/ids.js";
import { loggerFromFlags } from "../flags.js";
import { RedisHistory } from "../../forecasts/history-redis.js";
import { DEFAULT_FORECASTER_NAME, FORECASTER_NAMES, isForecasterName } from "../../forecasts/registry.js";
import { GrpcRegionLink } from "../../region/link/grpc-client.js";
import { RedisLeaderLock } from "../../planner/leader.js";
import { plansRoutes } from "../../planner/routes.js";
import { createRegistry } from "../../core/metrics.js";
import { PlannerMetrics } from "../../planner/metrics.js";
import { planKeysFrom } from "../../planner/keys.js";
import { RedisPlanStore } from "../../planner/store.js";
import { planFleet } from "../../planner/fingerprint.js";
import { startPlannerService } from "../../planner/service.js";
import { untilSignal } from "../signals.js";

export const command: Command = {
  name: "planner",
  summary: "run the hourly planner loop (forecast + ILP), leader-elected through Redis",
  description: [
    "Every --interval-ms (default: config planner.intervalMs), the replica holding the Redis leader lock",
    "(<key-prefix>planner:leader, expiring after two intervals) forecasts each (model, region) from the history",
    "in Redis, solves the ILP over the config's fleet, and sends each region its targets with a monotonic",
    "decisionId over gRPC; --advisory (or config planner.advisory) publishes plans without sending them.",
    "Reports are kept in Redis (<key-prefix>plans, the newest 168), served at http://<host>:<port>/plans and",
    "written to --out when given; /metrics has the sign-in and action counters (tidegate_plans_*) and each plan's",
    "targets and forecasts (tidegate_planner_*); /livez answers while the process runs, /readyz (and /healthz)",
    "while Redis answers.",
    "",
    "Keys for /plans (open http://<host>:<port>/login in a browser, or send Authorization: Bearer <key>):",
    "  admin   (read, approve/reject advisory plans, plan now): config router.adminKeys, or TIDEGATE_ADMIN_KEYS",
    "  planner (read only):                                      config router.plannerKeys, or TIDEGATE_PLANNER_KEYS",
    "  The environment variables are comma-separated lists, read once at start-up; every key is ≥ 8 characters.",
    "  With no key at all, /plans refuses everyone (the command warns at start).",
    "",
    "Example:",
    "  tidegate planner --config fleet.json --redis-url redis://127.0.0.1:6379 --port 8090 --out plans/",
  ].join("\n"),
  flags: {
    config: { type: "string", help: "config file (JSON), merged over the embedded default; FILE,FILE… merges several in order" },
    "redis-url": { type: "string", help: "Redis for history and the leader lock (default: config queue.redisUrl)" },
    "key-prefix": { type: "string", help: "Redis key prefix (default: config queue.keyPrefix)" },
    "interval-ms": { type: "number", help: "planning interval (default: config planner.intervalMs)" },
    advisory: { type: "boolean", help: "publish plans without sending targets", default: false },
    forecaster: { type: "string", help: FORECASTER_NAMES.join(" | "), default: DEFAULT_FORECASTER_NAME },
    port: { type: "number", help: "port for /plans (0 picks a free port)", default: 0 },
    host: { type: "string", help: "address for /plans", default: "127.0.0.1" },
    out: { type: "string", help: "also write each report as JSON + HTML here" },
    "tls-ca": { type: "string", help: "PEM CA that signs the regions' certificates (enables mTLS to regions)" },
    "tls-cert": { type: "string", help: "PEM client certificate chain of this planner" },
    "tls-key": { type: "string", help: "PEM private key of this planner" },
    "log-level": { type: "string", help: "debug, info, warn or error", default: "info" },
  },
  config: plannerConfigFromFlags,
  async run(flags) {
    const config = plannerConfigFromFlags(flags);
    const log = loggerFromFlags(flags, "planner");
    const fname = String(flags.forecaster);
    if (!isForecasterName(fname)) throw new TidegateError("invalid_request", `unknown --forecaster ${JSON.stringify(fname)}`);
    const { intervalMs, advisory } = config.planner;
    const { keyPrefix: prefix, redisUrl } = config.queue;
    await ensurePortFree(String(flags.host), Number(flags.port), "--port");
    const redis = openRedis(redisUrl, config.queue.redisTls, { maxRetriesPerRequest: 2 });
    logRedisHealth(redis, redisUrl, log, "no history, plans or leader lock until it is back");
    const clock = new WallClock();
    const history = new RedisHistory(redis, { keyPrefix: prefix });
    // Reports go to Redis so the global router (or another replica) can serve them too.
    const store = new RedisPlanStore(redis, prefix);
    const holder = `${hostname()}-${process.pid}-${newId("").slice(0, 6)}`;
    const lock = new RedisLeaderLock(redis, prefix);
    const given = ["tls-ca", "tls-cert", "tls-key"].filter((k) => typeof flags[k] === "string").length;
    if (given !== 0 && given !== 3) throw new TidegateError("invalid_request", "--tls-ca, --tls-cert and --tls-key go together");
    const tls = given === 3 ? { caFile: String(flags["tls-ca"]), certFile: String(flags["tls-cert"]), keyFile: String(flags["tls-key"]) } : undefined;
    const links = config.regions.map((r) => new GrpcRegionLink({ region: r.name, address: r.grpcAddress, clock, log, ...(tls === undefined ? {} : { tls }) }));
    const out = typeof flags.out === "string" ? flags.out : undefined;
    const registry = createRegistry();
    const metrics = new PlannerMetrics(registry, config.models.map((m) => m.name), config.regions.map((r) => r.name));
    const planner = await startPlannerService({ config, clock, links, history, store, lock, holder, intervalMs, advisory, forecaster: fname, log, onReport: (r) => metrics.observe(r), ...(out === undefined ? {} : { outDir: out }) });
    const app = new Hono();
    const keys = planKeysFrom(config, process.env);
    if (keys.admin.length + keys.planner.length === 0) log.warn("no admin or planner key: /plans refuses everyone (set router.adminKeys or TIDEGATE_ADMIN_KEYS)");
    // Probes: live while the process answers; ready while Redis (history, leader lock, reports) answers.
    app.get("/livez", (c) => c.json({ status: "ok" }));
    const ready = (c: Context) => {
      const ok = redis.status === "ready";
      return c.json({ status: ok ? "ok" : `redis ${redis.status}`, leading: planner.loop.leading, holder }, ok ? 200 : 503);
    };
    app.get("/readyz", ready);
    app.get("/healthz", ready);
    app.route("/", plansRoutes({ store, keys, actions: planner.loop, history, clock, log: log.child({ tier: "plans" }), registry, fleet: planFleet(config) }));
    app.get("/metrics", async (c) => c.body(await registry.metrics(), 200, { "content-type": registry.contentType }));
    const server = serve({ fetch: app.fetch, port: Number(flags.port), hostname: String(flags.host) }, (info) => {
      log.info("planner listening", { url: `http://${String(flags.host)}:${info.port}/plans`, holder, intervalMs, advisory });
      process.stdout.write(`tidegate planner: /plans on http://${String(flags.host)}:${info.port} (holder ${holder}, every ${intervalMs} ms${advisory ? ", advisory" : ""})\n`);
    });
    const sig = await untilSignal();
    log.info("stopping", { signal: sig });
    await planner.close();
    await Promise.all(links.map((l) => l.close()));
    await new Promise<void>((resolve) => server.close(() => resolve()));
    redis.disconnect();
    return 0;
  },
};
