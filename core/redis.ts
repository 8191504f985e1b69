/**
 * Opening Redis from config, the one way every process does it (the batch queue, the global router's plan store, the
 * planner's history and leader lock): `queue.redisUrl` (redis:// or rediss:// for TLS; an ACL user and its password
 * go in the URL, `redis://user:password@host:port`) and `queue.redisTls` (CA, client certificate and key files; any
 * of them turns TLS on). Messages and logs name Redis by `redisEndpoint` (host and port), never with credentials.
 *
 * `guardRedis` makes a store fail fast and clearly while its connection is down: calls get a `queue_unavailable`
 * TidegateError (HTTP 503, with Retry-After at the router) instead of waiting on ioredis's offline queue or
 * surfacing a connection error as a 500.
 */
import { readFileSync } from "node:fs";
import { Redis, type RedisOptions } from "ioredis";
import { TidegateError } from "./errors.js";
import type { Logger } from "./log.js";
import type { RedisTlsConfig } from "./config/redis-tls.js";

// Config-side pieces (read while parsing `queue`, without loading ioredis): core/config/redis-tls.ts.
export { readRedisTls, redactUrl, type RedisTlsConfig } from "./config/redis-tls.js";

/** host:port of a Redis URL, for messages ("127.0.0.1:6379"). */
export function redisEndpoint(url: string): string {
  const m = /^rediss?:\/\/(?:[^@/]*@)?([^/?#]+)/.exec(url);
  return m?.[1] ?? "redis";
}

function readPem(path: string, what: string): Buffer {
  try {
    return readFileSync(path);
  } catch (err) {
    throw new TidegateError("invalid_config", `queue.redisTls.${what}: cannot read ${JSON.stringify(path)}: ${(err as Error).message}`, { cause: err });
  }
}

/** The TLS options for `url` and `tls`, or undefined when the connection is plain. */
export function redisTlsOptions(url: string, tls: RedisTlsConfig = {}): RedisOptions["tls"] | undefined {
  const on = url.startsWith("rediss://") || tls.caFile !== undefined || tls.certFile !== undefined;
  if (!on) return undefined;
  return {
    ...(tls.caFile === undefined ? {} : { ca: readPem(tls.caFile, "caFile") }),
    ...(tls.certFile === undefined ? {} : { cert: readPem(tls.certFile, "certFile") }),
    ...(tls.keyFile === undefined ? {} : { key: readPem(tls.keyFile, "keyFile") }),
    ...(tls.serverName === undefined ? {} : { servername: tls.serverName }),
  };
}

/**
 * A client for `url` with `tls` and the given ioredis options. A lost connection is retried every 50, 100, 150 …
 * ms up to every 1 s (ioredis's default grows to 2 s), so service resumes within a second of Redis's return.
 */
export function openRedis(url: string, tls: RedisTlsConfig | undefined, options: RedisOptions = {}): Redis {
  const tlsOptions = redisTlsOptions(url, tls);
  return new Redis(url, { retryStrategy: (times) => Math.min(times * 50, 1000), ...options, ...(tlsOptions === undefined ? {} : { tls: tlsOptions }) });
}

/**
 * Logs a lost connection once (ioredis reports every failed reconnect) and its return once; `what` says what the
 * loss means to this process.
 */
export function logRedisHealth(client: Redis, url: string, log: Logger, what: string): void {
  let downSinceMs: number | undefined;
  client.on("error", (err: unknown) => {
    if (downSinceMs === undefined) log.error(`Redis connection lost: ${what}`, { redis: redisEndpoint(url), err });
    downSinceMs ??= Date.now();
  });
  client.on("ready", () => {
    // Warn, not info: whoever saw the loss (an error) sees its end at the same log level.
    if (downSinceMs !== undefined) log.warn("Redis connection is back", { redis: redisEndpoint(url), downMs: Date.now() - downSinceMs });
    downSinceMs = undefined;
  });
}

/** True for errors that mean Redis cannot be reached now (as opposed to a reply Redis gave). */
export function isRedisUnavailable(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  if (err.name === "MaxRetriesPerRequestError") return true;
  const code = (err as { code?: unknown }).code;
  if (code === "ECONNREFUSED" || code === "ECONNRESET" || code === "EPIPE" || code === "ETIMEDOUT") return true;
  return /^(Connection is closed|Stream isn't writeable|LOADING )/.test(err.message);
}

/** The error a guarded call gets while Redis is down. */
export function queueUnavailable(url: string, cause?: unknown): TidegateError {
  return new TidegateError("queue_unavailable", `the batch queue is unavailable: Redis at ${redisEndpoint(url)} cannot be reached; retry shortly (interactive requests are not affected)`, cause === undefined ? {} : { cause });
}

/**
 * `target` (a store over `client`) with every method failing fast while the connection is lost (once the client
 * was ready, any state but ready: closed, waiting to reconnect, or trying to) and connection errors turned into
 * `queue_unavailable`. Before the first connection completes, calls wait for it as usual (start-up).
 */
export function guardRedis<T extends object>(target: T, client: Redis, url: string): T {
  let wasReady = client.status === "ready";
  client.on("ready", () => void (wasReady = true));
  return new Proxy(target, {
    get(obj, prop, receiver) {
      const v = Reflect.get(obj, prop, receiver) as unknown;
      if (typeof v !== "function") return v;
      return async (...args: unknown[]) => {
        if (client.status !== "ready" && (wasReady || client.status === "end")) throw queueUnavailable(url);
        try {
          return await (v as (...a: unknown[]) => Promise<unknown>).apply(obj, args);
        } catch (err) {
          throw isRedisUnavailable(err) ? queueUnavailable(url, err) : err;
        }
      };
    },
  });
}
