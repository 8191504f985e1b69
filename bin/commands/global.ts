/**
 * `tidegate global`: the global router as its own process. It connects to every region process over gRPC
 * (config regions[].grpcAddress, region/link/grpc-client.ts), follows their telemetry and serves the public
 * OpenAI-compatible API (router/).
 */
import type { Command } from "../command.js";
import { createBatchService } from "../../router/batch/service.js";
import { WallClock } from "../../core/clock.js";
import { routerConfigFromFlags } from "../config-flags.js";
import { ensurePortFree } from "../../core/listen.js";
import { loggerFromFlags } from "../flags.js";
import { TidegateError } from "../../core/errors.js";
import { GrpcRegionLink } from "../../region/link/grpc-client.js";
import type { TlsFiles } from "../../core/tls.js";
import { GlobalRouter } from "../../router/server.js";
import { untilSignal } from "../signals.js";
import type { Redis } from "ioredis";
import { logRedisHealth, openRedis } from "../../core/redis.js";
import { RedisHistory } from "../../forecasts/history-redis.js";
import type { RouterMount } from "../../router/app.js";
import { plansSite } from "../../planner/routes.js";
import { planKeysFrom } from "../../planner/keys.js";
import { RedisPlanStore } from "../../planner/store.js";
import { planFleet } from "../../planner/fingerprint.js";
import { capYoungGeneration } from "../../core/young-generation.js";

/** The three TLS flags together, or none (insecure loopback/dev links). */
function tlsFrom(flags: Record<string, unknown>): TlsFiles | undefined {
  const given = ["tls-ca", "tls-cert", "tls-key"].filter((k) => typeof flags[k] === "string").length;
  if (given === 0) return undefined;
  if (given !== 3) throw new TidegateError("invalid_request", "--tls-ca, --tls-cert and --tls-key go together");
  return { caFile: String(flags["tls-ca"]), certFile: String(flags["tls-cert"]), keyFile: String(flags["tls-key"]) };
}

export const command: Command = {
  name: "global",
  summary: "run the global router: public OpenAI-compatible API, region selection, batch queue",
  description: [
    "Serves POST /v1/chat/completions, POST /v1/completions, GET /v1/models, /healthz and /metrics, choosing a",
    "region per request (SageServe §6.2: first region under router.memoryThreshold in the client's preference",
    "order, else the least utilized). Regions are reached over gRPC at config regions[].grpcAddress; a region",
    "whose telemetry is older than router.telemetryStaleMs is not chosen. Stops cleanly on SIGINT/SIGTERM.",
    "With the Redis queue it also serves the planner's reports at /plans (sign in at /login with a key from",
    "router.adminKeys / router.plannerKeys or TIDEGATE_ADMIN_KEYS / TIDEGATE_PLANNER_KEYS; read only here).",
    "",
    "Example:",
    "  tidegate region --config fleet.json --region us-east &",
    "  tidegate global --config fleet.json --port 8080",
  ].join("\n"),
  flags: {
    config: { type: "string", help: "config file (JSON), merged over the embedded default; FILE,FILE… merges several in order" },
    port: { type: "number", help: "port of the public API (overrides router.port; 0 picks a free port)" },
    host: { type: "string", help: "address to listen on (overrides router.host)" },
    "telemetry-interval-ms": { type: "number", help: "telemetry period asked of each region (50..1000)", default: 500 },
    "tls-ca": { type: "string", help: "PEM CA that signs the regions' certificates (enables mTLS to regions)" },
    "tls-cert": { type: "string", help: "PEM client certificate chain of this router" },
    "tls-key": { type: "string", help: "PEM private key of this router" },
    "log-level": { type: "string", help: "debug, info, warn or error", default: "info" },
    "redis-url": { type: "string", help: "batch queue on this Redis (sets queue.backend redis); default: config queue" },
    "recover-journal": { type: "boolean", help: "embedded queue: keep the journal's valid prefix and move a bad line and the rest aside (queue.recoverJournal)", default: false },
  },
  config: routerConfigFromFlags,
  async run(flags) {
    const config = routerConfigFromFlags(flags);
    const logger = loggerFromFlags(flags, "global");
    const { port, host } = config.router;
    await ensurePortFree(host, port, "--port / router.port");
    const telemetryIntervalMs = Number(flags["telemetry-interval-ms"]);
    if (!(telemetryIntervalMs >= 50 && telemetryIntervalMs <= 1000)) throw new Error(`--telemetry-interval-ms must be in [50, 1000], got ${telemetryIntervalMs}`);
    config.regions.forEach((r, i) => {
      const port = Number(r.grpcAddress.slice(r.grpcAddress.lastIndexOf(":") + 1));
      if (!Number.isInteger(port) || port <= 0 || port > 65535) {
        throw new TidegateError("invalid_config", `regions[${i}].grpcAddress: the global router needs a fixed host:port to reach region ${r.name}, got ${JSON.stringify(r.grpcAddress)}`);
      }
    });
    const tls = tlsFrom(flags);
    // V8 would grow the young generation to 32 MiB under sustained load and keep it (core/young-generation.ts).
    capYoungGeneration(config.router.youngGenerationMiB);
    const clock = new WallClock();
    const links = config.regions.map(
      (r) => new GrpcRegionLink({ region: r.name, address: r.grpcAddress, telemetryIntervalMs, clock, log: logger.child({ region: r.name }), ...(tls === undefined ? {} : { tls }) }),
    );
    // Planner tier (issue 4): with the Redis backend, serve the reports `tidegate planner` keeps there at /plans, and
    // record dispatched batch demand into the history it forecasts from (its β × NIW buffer).
    let plansRedis: Redis | undefined;
    if (config.queue.backend === "redis") {
      plansRedis = openRedis(config.queue.redisUrl, config.queue.redisTls, { maxRetriesPerRequest: 2 });
      logRedisHealth(plansRedis, config.queue.redisUrl, logger.child({ tier: "plans" }), "plan reports and the NIW history wait until it is back");
    }
    const niwHistory = plansRedis === undefined ? undefined : new RedisHistory(plansRedis, { keyPrefix: config.queue.keyPrefix });
    // Batch tier (issue 3): Files/Batch API at /v1 and the NIW dispatcher; --redis-url switches the queue to Redis.
    const batch = createBatchService({ config, clock, log: logger.child({ tier: "batch" }), ...(niwHistory === undefined ? {} : { niwHistory }) });
    const mounts: RouterMount[] = [{ path: "/v1", app: batch.routes }];
    const plans = plansRedis === undefined ? undefined : plansSite({ store: new RedisPlanStore(plansRedis, config.queue.keyPrefix), keys: planKeysFrom(config, process.env), clock, log: logger.child({ tier: "plans" }), fleet: planFleet(config), ...(niwHistory === undefined ? {} : { history: niwHistory }) });
    if (plans !== undefined) mounts.push({ path: "/", app: plans.app });
    const router = new GlobalRouter({ config, links, clock, logger, mounts });
    plans?.registerMetrics(router.deps.metrics.registry);
    batch.start(links, router.deps.metrics.registry);
    const stopped = untilSignal();
    const close = async () => {
      await batch.close();
      await router.close();
      await Promise.all(links.map((l) => l.close()));
      plansRedis?.disconnect();
    };
    try {
      await router.listen(host, port);
    } catch (err) {
      await close();
      throw err;
    }
    process.stdout.write(`tidegate global: serving ${router.url()} (regions: ${config.regions.map((r) => `${r.name}@${r.grpcAddress}`).join(", ")})\n`);
    const sig = await stopped;
    logger.info("shutting down", { signal: sig });
    await close();
    process.stdout.write("tidegate global: stopped\n");
    return 0;
  },
};
