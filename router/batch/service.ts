/**
 * Composition of the batch tier for a router process: the stores chosen by config (`queue.backend`: embedded in
 * `queue.dataDir`, or Redis at `queue.redisUrl` under `queue.keyPrefix`), the dispatcher on the region links, the
 * intake, the metrics, and the hono sub-app to mount at /v1.
 */
import type { Redis } from "ioredis";
import { guardRedis, logRedisHealth, openRedis } from "../../core/redis.js";
import type { Hono } from "hono";
import type { Clock } from "../../core/clock.js";
import { engineSettingsLookup, gpusPerInstanceOf, type TidegateConfig } from "../../core/config.js";
import { throughputAtSlo } from "../../core/perf/model.js";
import { silentLogger, type Logger } from "../../core/log.js";
import type { Registry } from "../../core/metrics.js";
import type { RegionLink } from "../../core/ports.js";
import type { DemandHistory } from "../../forecasts/history.js";
import { NiwRecorder } from "../../forecasts/niw-recorder.js";
import { perRequestMsOf } from "../dispatch/cold-wake.js";
import { Dispatcher } from "../dispatch/dispatcher.js";
import { tokenPaceFrom } from "../pace.js";
import { DEFAULT_MAX_BATCH } from "../../core/perf/model.js";
import { QueueMetrics } from "../dispatch/dispatch-metrics.js";
import { DirFileStore } from "../queue/dir-files.js";
import { EmbeddedQueueStore } from "../queue/embedded.js";
import { RedisFileStore, RedisQueueStore } from "../queue/redis.js";
import type { FileStore, QueueStore } from "../queue/types.js";
import { intakeBatch } from "./intake.js";
import { MODEL_SPECS, kvBytesPerToken, type GpuType } from "../../core/models.js";
import { instanceKvBytesFrom } from "../selector.js";
import { batchRoutes } from "./routes.js";

export interface BatchServiceOptions {
  config: TidegateConfig;
  clock: Clock;
  log?: Logger;
  /** Maintenance period; default 1000 ms. */
  maintenanceIntervalMs?: number;
  /** Intake grace for batches left validating (see DispatcherOptions); default 10 000 ms. */
  intakeGraceMs?: number;
  /**
   * Where dispatched batch demand is recorded per (model, region) and minute (forecasts/niw-recorder.ts), for the
   * planner's β × NIW buffer: the planner's own history (in memory in `tidegate dev`, Redis otherwise).
   */
  niwHistory?: DemandHistory;
  /** Stores to use instead of those `queue.backend` names (the week replay keeps both in memory). */
  stores?: { store: QueueStore; files: FileStore };
  /** KV tokens one serving instance holds, for the fill policy (default: `kvCapacityTokensFrom(config)`). */
  kvCapacityTokens?: (model: string, gpu: GpuType) => number;
}

export interface BatchService {
  /** Mount at /v1 (usable before start: new batches wait for the dispatcher). */
  routes: Hono;
  store: QueueStore;
  files: FileStore;
  /** The dispatcher once started. */
  readonly dispatcher: Dispatcher | undefined;
  /** Starts dispatching to `links` (subscribes to telemetry, starts maintenance); metrics go to `registry` if given. */
  start(links: readonly RegionLink[], registry?: Registry): Dispatcher;
  /** Stops the dispatcher and closes the stores (and the Redis connection it opened). */
  close(): Promise<void>;
}

/**
 * KV tokens one serving instance of a model holds on a GPU type: `engines.models[model].kvCapacityTokens`, else
 * `engines.kvCapacityTokens` when set (in-process sim engines use them), else GPU memory × 0.9 − weights over KV
 * bytes per token (core/models.ts); 0 when unknown.
 */
/**
 * Tokens/s (prompt + output) one instance of a model serves on a GPU type when it only has to keep up, not meet an
 * interactive SLO (60 s to the first token, 1 s a step): the deadline review's unit of capacity (router/dispatch/
 * deadlines.ts). 0 for a (model, GPU) without a profile.
 */
export function instanceTokensPerSFrom(config: TidegateConfig): (model: string, gpu: string) => number {
  // Computed once per (model, GPU): each maintenance pass asks for every endpoint.
  const known = new Map<string, number>();
  return (model, gpu) => {
    const key = `${model}|${gpu}`;
    let tps = known.get(key);
    if (tps === undefined) {
      const tp = gpusPerInstanceOf(config, model, gpu);
      try {
        tps = tp === undefined ? 0 : throughputAtSlo(model, gpu, tp, { ttftMs: 60_000, tbtMs: 1000 }).totalTokensPerS;
      } catch {
        tps = 0; // no performance profile for this (model, GPU, TP): no capacity counted
      }
      known.set(key, tps);
    }
    return tps;
  };
}

export function kvCapacityTokensFrom(config: TidegateConfig): (model: string, gpu: GpuType) => number {
  const bytes = instanceKvBytesFrom(config);
  const settingsOf = engineSettingsLookup(config.engines);
  return (model, gpu) => {
    const tokens = settingsOf(model).kvCapacityTokens;
    if (tokens !== undefined) return tokens;
    const spec = MODEL_SPECS[model];
    return spec === undefined ? 0 : Math.floor(bytes(model, gpu) / kvBytesPerToken(spec));
  };
}

/** Builds the batch tier from config. */
export function createBatchService(o: BatchServiceOptions): BatchService {
  const q = o.config.queue;
  let redis: Redis | undefined;
  let store: QueueStore;
  let files: FileStore;
  if (o.stores !== undefined) {
    ({ store, files } = o.stores);
  } else if (q.backend === "redis") {
    // Auto-pipelining: concurrent completes and claims share socket writes (bench:queue measures the effect).
    redis = openRedis(q.redisUrl, q.redisTls, { maxRetriesPerRequest: 3, enableAutoPipelining: true });
    logRedisHealth(redis, q.redisUrl, o.log ?? silentLogger, "Batch API calls answer 503 and dispatch pauses until it is back");
    // While Redis is down every store call fails fast with queue_unavailable (503 at the API; the dispatcher pauses).
    store = guardRedis(new RedisQueueStore(redis, q.keyPrefix), redis, q.redisUrl);
    files = guardRedis(new RedisFileStore(redis, q.keyPrefix), redis, q.redisUrl);
  } else {
    store = new EmbeddedQueueStore(q.dataDir, { recover: q.recoverJournal, ...(o.log === undefined ? {} : { log: o.log }) });
    files = new DirFileStore(q.dataDir);
  }
  const models = o.config.models.map((m) => m.name);
  const knownModels = new Set(models);
  let dispatcher: Dispatcher | undefined;
  let niw: NiwRecorder | undefined;
  const routes = batchRoutes({
    store, files, clock: o.clock,
    maxFileBytes: q.maxFileBytes,
    completionWindowMs: q.completionWindowMs,
    apiKeys: o.config.router.apiKeys,
    retryAfterS: o.config.router.retryAfterS,
    onBatchCreated: (b) => dispatcher?.startIntake(b),
    onBatchCancelled: () => void dispatcher?.maintain(),
    capacityView: (id) => dispatcher?.capacityView(id),
  });
  return {
    routes, store, files,
    get dispatcher() {
      return dispatcher;
    },
    start: (links, registry) => {
      if (dispatcher !== undefined) throw new Error("batch service already started");
      const metrics = registry === undefined ? undefined : new QueueMetrics(registry, models, o.config.regions.map((r) => r.name));
      niw = o.niwHistory === undefined ? undefined : new NiwRecorder(o.niwHistory, models, o.config.regions.map((r) => r.name), o.clock, o.log);
      niw?.start();
      dispatcher = new Dispatcher({
        store, files, clock: o.clock, links, models,
        thresholds: { dispatchOneBelow: q.dispatchOneBelow, dispatchTwoBelow: q.dispatchTwoBelow },
        ...(q.fillIdle
          ? {
              fill: { dispatchOneBelow: q.dispatchOneBelow, dispatchTwoBelow: q.dispatchTwoBelow, fillTo: q.fillTo, fillToBeside: q.fillToBeside, fillToPreemptible: q.fillToPreemptible, reopenBelow: q.reopenBelow, reopenReports: q.reopenReports, maxPerReport: q.maxPerReport },
              kvCapacityTokens: o.kvCapacityTokens ?? kvCapacityTokensFrom(o.config),
            }
          : {}),
        instanceTokensPerS: instanceTokensPerSFrom(o.config),
        promoteAfterMs: q.promoteAfterMs,
        dedicatedAtRisk: q.dedicatedAtRisk,
        leaseMs: q.leaseMs,
        ownerTtlMs: q.ownerTtlMs,
        pace: q.paceDispatch,
        paceGroup: q.paceGroup,
        refill: q.refillIdle,
        coldWake: coldWakeFrom(o.config),
        ...(o.maintenanceIntervalMs === undefined ? {} : { maintenanceIntervalMs: o.maintenanceIntervalMs }),
        ...(o.intakeGraceMs === undefined ? {} : { intakeGraceMs: o.intakeGraceMs }),
        intake: async (batch) => void (await intakeBatch({ store, files, clock: o.clock, knownModels }, batch)),
        ...(metrics === undefined ? {} : { metrics }),
        ...(niw === undefined ? {} : { onDispatched: (model: string, region: string, tokens: number, atMs: number) => niw!.record(model, region, tokens, atMs) }),
        log: o.log ?? silentLogger,
      });
      dispatcher.start();
      return dispatcher;
    },
    close: async () => {
      await dispatcher?.stop();
      await niw?.stop();
      await store.close();
      await files.close();
      redis?.disconnect();
    },
  };
}

/** The dispatcher's cold-wake settings (router/dispatch/cold-wake.ts) from config `queue.coldStart*` and the performance model. */
function coldWakeFrom(config: TidegateConfig): NonNullable<ConstructorParameters<typeof Dispatcher>[0]["coldWake"]> {
  const q = config.queue;
  const pace = tokenPaceFrom(config);
  const settingsOf = engineSettingsLookup(config.engines);
  return {
    marginMs: q.coldStartMarginMs,
    maxWaitMs: q.coldStartAfterMs,
    perRequestMs: (model) => {
      const p = pace(model);
      return p === undefined ? undefined : perRequestMsOf(p.stepMs, settingsOf(model).maxBatch ?? DEFAULT_MAX_BATCH, q.coldStartOutputTokens);
    },
  };
}
