/**
 * The `loading` configuration key (issue 12): where a region's new instances get their parameters from and what
 * they do while they load, as one of the named loading sources (sources.ts). This module registers it with core's
 * config as a per-region setting (core/config/sections.ts) when it loads, so core/config parseConfig reads it at
 * `controller.loading` (every region) and `regions[].loading` (one region, over the controller's: regionLoading
 * below); a process loads it through region/config-sections.ts. Absent = the actuator's configured deploy delays
 * (SageServe §7.1's constants for the sim actuator).
 *
 * {
 *   "source": "blitzscale",                  // ssd | allcache | network | blitzscale | lambdascale | faasnet-tree | nccl-ring
 *   "scheduler": "zigzag",                   // optional: the source's own by default (sources.ts LOADING_SOURCES)
 *   "bandwidthsGbps": { "nvlink": 1600, "rdma": 100, "pcie": 128, "ssd": 10 },   // default BlitzScale Table 1, cluster A
 *   "keepAliveMs": 300000,                   // ssd's host cache (ServerlessLLM: 5 minutes)
 *   "blocksPerLayer": 1                      // blocks a network load moves one layer in
 * }
 *
 * Who uses it: the `sim` actuator (`tidegate dev` with controller.actuator "sim", the trace and week replays) through
 * region/runtime/sim-loading.ts. The `agents` actuator loads over the data plane itself (the `network` source) and
 * takes `network` or `blitzscale` with the stop-the-world, best-effort or zigzag scheduler, pairing loading instances
 * with serving engines live (liveload/live-pairs.ts), and `lambdascale` with lambda-pipelines (λScale's binomial
 * multicast; execution pipelines serve while they load: liveload/live-lambda.ts) or stop-the-world; it refuses any
 * other key at start-up (dataPlaneScheduler below; region/runtime/agents-host.ts). A `static` region never scales,
 * so it never loads.
 */
import type { TidegateConfig } from "../../core/config.js";
import { registerRegionSetting, type RegionSetting } from "../../core/config/region-settings.js";
import { TidegateError } from "../../core/errors.js";
import type { RegionName } from "../../core/models.js";
import { ObjectReader, ValidationError } from "../../core/validate.js";
import { LIVE_SCHEDULERS, LOADING_SOURCES, TABLE1_CLUSTER_A, type LiveScheduler, type LoadBandwidths, type LoadingSourceName } from "./sources.js";

export interface LoadingConfig {
  source: LoadingSourceName;
  /** Present only when the file names one (the source's own otherwise). */
  scheduler?: LiveScheduler;
  bandwidths: LoadBandwidths;
  keepAliveMs: number;
  blocksPerLayer: number;
}

declare module "../../core/config/region-settings.js" {
  interface RegionSettings {
    /**
     * Where new instances' parameters come from and what they do while loading (issue 12; region/liveload/liveload-config.ts):
     * at `controller.loading` for every region without its own, at `regions[].loading` for one region. Absent = the
     * actuator's configured deploy delays.
     */
    loading?: LoadingConfig;
  }
}

/** The `loading` key as core's config registry takes it (registered below, when this module loads). */
export const LOADING_SETTING: RegionSetting<"loading"> = { key: "loading", parse: (raw, path) => parseLoadingConfig(raw, path) };
registerRegionSetting(LOADING_SETTING);

/** Region `name`'s loading source: its own `loading`, else `controller.loading`, else none (configured delays). */
export function regionLoading(config: Pick<TidegateConfig, "regions" | "controller">, name: RegionName): LoadingConfig | undefined {
  return config.regions.find((r) => r.name === name)?.loading ?? config.controller.loading;
}

/** The scheduler a loading config runs: its own, else its source's. */
export function schedulerOf(c: Pick<LoadingConfig, "source" | "scheduler">): LiveScheduler {
  return c.scheduler ?? LOADING_SOURCES[c.source].scheduler;
}

/** Reads a `loading` object at `path` (undefined when absent); every error names its field. */
export function parseLoadingConfig(v: unknown, path: string): LoadingConfig | undefined {
  if (v === undefined) return undefined;
  const r = new ObjectReader(v, path);
  const source = r.string("source", undefined, { oneOf: Object.keys(LOADING_SOURCES) }) as LoadingSourceName;
  const scheduler = r.has("scheduler") ? (r.string("scheduler", undefined, { oneOf: LIVE_SCHEDULERS }) as LiveScheduler) : (r.allow("scheduler"), undefined);
  if (scheduler === "lambda-pipelines" && source !== "lambdascale") r.fail("scheduler", `lambda-pipelines runs on the lambdascale source's binomial multicast, not ${source}`);
  const br = r.object("bandwidthsGbps");
  const gbps = (key: string, bits: number) => br.number(key, bits / 1e9, { gt: 0, max: 1e6 }) * 1e9;
  const bandwidths: LoadBandwidths = {
    nvlinkBitsPerS: gbps("nvlink", TABLE1_CLUSTER_A.nvlinkBitsPerS),
    rdmaBitsPerS: gbps("rdma", TABLE1_CLUSTER_A.rdmaBitsPerS),
    pcieBitsPerS: gbps("pcie", TABLE1_CLUSTER_A.pcieBitsPerS),
    ssdBitsPerS: gbps("ssd", TABLE1_CLUSTER_A.ssdBitsPerS),
  };
  br.done();
  const keepAliveMs = r.number("keepAliveMs", 5 * 60_000, { min: 0 });
  const blocksPerLayer = r.number("blocksPerLayer", 1, { integer: true, min: 1, max: 64 });
  r.done();
  const config: LoadingConfig = { source, ...(scheduler === undefined ? {} : { scheduler }), bandwidths, keepAliveMs, blocksPerLayer };
  // `--print-config` writes the key back in the file's form (Gbps), so its output reads back in (not enumerable: the
  // object compares as plain data).
  Object.defineProperty(config, "toJSON", { enumerable: false, value: () => loadingConfigJson(config) });
  return config;
}

/** A loading config in the file's form (bandwidths in Gbps under `bandwidthsGbps`). */
export function loadingConfigJson(c: LoadingConfig): Record<string, unknown> {
  const b = c.bandwidths;
  return {
    source: c.source,
    ...(c.scheduler === undefined ? {} : { scheduler: c.scheduler }),
    bandwidthsGbps: { nvlink: b.nvlinkBitsPerS / 1e9, rdma: b.rdmaBitsPerS / 1e9, pcie: b.pcieBitsPerS / 1e9, ssd: b.ssdBitsPerS / 1e9 },
    keepAliveMs: c.keepAliveMs,
    blocksPerLayer: c.blocksPerLayer,
  };
}

/**
 * The `agents` actuator's live scheduler for a region's loading key. Its instances load over the data plane (the
 * parameter pool's multicast: the `network` source, `blitzscale`'s network half, `lambdascale`'s binomial
 * multicast); `stop-the-world` serves once loaded, `best-effort` and `zigzag` pair each loading instance with a
 * serving engine (liveload/live-pairs.ts), `lambda-pipelines` serves λScale's execution pipelines while they load
 * (liveload/live-lambda.ts). Anything else (ssd, allcache: another place to load from; lambdascale with a BlitzScale
 * scheduler) is refused at start-up, naming the region, rather than run as something else.
 */
export function dataPlaneScheduler(region: string, loading: LoadingConfig | undefined): "stop-the-world" | "best-effort" | "zigzag" | "lambda-pipelines" {
  if (loading === undefined) return "stop-the-world";
  const s = schedulerOf(loading);
  if ((loading.source === "network" || loading.source === "blitzscale") && (s === "stop-the-world" || s === "best-effort" || s === "zigzag")) return s;
  if (loading.source === "lambdascale" && (s === "stop-the-world" || s === "lambda-pipelines")) return s;
  throw new TidegateError("invalid_config", `region ${region}: loading ${loading.source}/${s} runs only on the sim actuator (controller.actuator "sim", the replays); the agents actuator loads over the data plane: loading.source "network" or "blitzscale" with scheduler "stop-the-world", "best-effort" or "zigzag", or "lambdascale" with "lambda-pipelines" or "stop-the-world"`);
}

/** What a `--loading` flag takes: a source name (with Table 1's bandwidths and its own scheduler) or `none`. */
export const LOADING_FLAG_VALUES: readonly string[] = [...Object.keys(LOADING_SOURCES), "none"];

/** A `--loading` flag's value as a loading config (`none` = undefined: the actuator's delays). */
export function namedLoading(name: string, flag: string): LoadingConfig | undefined {
  if (name === "none") return undefined;
  if (!(name in LOADING_SOURCES)) throw new ValidationError(flag, `must be one of ${LOADING_FLAG_VALUES.join(", ")}, got ${JSON.stringify(name)}`);
  return parseLoadingConfig({ source: name }, flag);
}
