/**
 * The configuration a command runs with: the `--config` files merged over the embedded default and validated, then
 * the flags that override config keys applied. A command's `run` and `--print-config` call the same function here,
 * so what is printed is what runs (`dev --print-config --port 8093` prints router.port 8093). Bad flag values are
 * usage errors (TidegateError invalid_request) naming the flag. Light on purpose: nothing here loads a tier's runtime
 * (or ioredis), so a command that stops at its configuration or a port in use stops at once.
 */
import type { FlagValues } from "./args.js";
import { loadConfig, type TidegateConfig } from "../core/config.js";
import "../region/config-sections.js"; // region's config sections (keystage, loading), before any config is parsed
import { TidegateError } from "../core/errors.js";
import { portFromFlags } from "./flags.js";

const str = (flags: FlagValues, name: string): string | undefined => (typeof flags[name] === "string" ? flags[name] : undefined);

/** `--config` alone: the files merged over the embedded default, validated. */
export function configFromFlags(flags: FlagValues): TidegateConfig {
  return loadConfig(str(flags, "config"));
}

/** `config` with the queue switched to Redis at `redisUrl` (the `--redis-url` flag); unchanged when undefined. */
export function withRedisUrl(config: TidegateConfig, redisUrl: string | undefined): TidegateConfig {
  return redisUrl === undefined ? config : { ...config, queue: { ...config.queue, backend: "redis", redisUrl } };
}

/**
 * `tidegate dev` and `tidegate global`: `--port` and `--host` (router.port, router.host), `--redis-url` (queue.backend
 * "redis" and queue.redisUrl), `--recover-journal` (queue.recoverJournal).
 */
export function routerConfigFromFlags(flags: FlagValues): TidegateConfig {
  const config = configFromFlags(flags);
  const router = { ...config.router, port: portFromFlags(flags, config.router.port), host: str(flags, "host") ?? config.router.host };
  const queue = flags["recover-journal"] === true ? { ...config.queue, recoverJournal: true } : config.queue;
  return withRedisUrl({ ...config, router, queue }, str(flags, "redis-url"));
}

/**
 * `tidegate region`: `--grpc-host` and `--grpc-port` replace the host and port of the `--region`'s
 * regions[].grpcAddress (port 0: any free one). Throws when --region is not in the config, or missing while they are
 * given (`run` requires it; `--print-config` alone does not).
 */
export function regionConfigFromFlags(flags: FlagValues): TidegateConfig {
  const config = configFromFlags(flags);
  const name = str(flags, "region");
  const known = config.regions.map((r) => r.name).join(", ");
  if (name === undefined && flags["grpc-host"] === undefined && flags["grpc-port"] === undefined) return config;
  if (name === undefined) throw new TidegateError("invalid_request", `--region is required (one of ${known})`);
  if (!config.regions.some((r) => r.name === name)) throw new TidegateError("invalid_request", `--region ${JSON.stringify(name)} is not in the config (${known})`);
  return {
    ...config,
    regions: config.regions.map((r) => {
      if (r.name !== name) return r;
      const at = r.grpcAddress.lastIndexOf(":");
      const port = portFromFlags(flags, Number(r.grpcAddress.slice(at + 1)), "grpc-port");
      return { ...r, grpcAddress: `${str(flags, "grpc-host") ?? r.grpcAddress.slice(0, at)}:${port}` };
    }),
  };
}

/**
 * `tidegate planner`: `--redis-url` (queue.redisUrl), `--key-prefix` (queue.keyPrefix), `--interval-ms`
 * (planner.intervalMs, > 0), `--advisory` (planner.advisory).
 */
export function plannerConfigFromFlags(flags: FlagValues): TidegateConfig {
  const config = configFromFlags(flags);
  const intervalMs = typeof flags["interval-ms"] === "number" ? flags["interval-ms"] : config.planner.intervalMs;
  if (!(intervalMs > 0)) throw new TidegateError("invalid_request", `--interval-ms must be > 0, got ${intervalMs}`);
  return {
    ...config,
    queue: { ...config.queue, redisUrl: str(flags, "redis-url") ?? config.queue.redisUrl, keyPrefix: str(flags, "key-prefix") ?? config.queue.keyPrefix },
    planner: { ...config.planner, intervalMs, advisory: flags.advisory === true || config.planner.advisory },
  };
}
