/**
 * `tidegate dev`'s stack, built in one process: one region per config region (buildRegion on the engine host
 * `controller.actuator` names), wired to one global router through in-process RegionLinks. bin/dev-run.ts starts it;
 * test/e2e/live-vs-replay.test.ts builds it on a scaled clock.
 */
import type { Clock } from "../core/clock.js";
import type { TidegateConfig } from "../core/config.js";
import { regionLoading, schedulerOf } from "../region/liveload/liveload-config.js";
import type { Logger } from "../core/log.js";
import type { RegionProgress } from "./dev-output.js";
import type { GenerateRequest, RegionLink } from "../core/ports.js";
import type { RegionName } from "../core/models.js";
import { SAGESERVE_DELAYS } from "../region/actuator/sim.js";
import { simulatedFleetHost, type SimFleetSettings } from "../region/runtime/sim-region.js";
import type { Solver } from "../core/solver.js";
import { seededRandom } from "../core/random.js";
import type { Gateway } from "../region/gateway/gateway.js";
import type { EngineHost } from "../region/runtime/build-region.js";
import { buildLinkedRegions } from "../region/runtime/linked-regions.js";
import { agentsInProcess } from "../region/runtime/agents-host.js";
import { fixedEngines, simEngineFactory } from "../region/runtime/static-host.js";
import { urlEngineFactory } from "../region/process/spawn.js";
import { watchEngineHealth, type EngineHealthWatch } from "../region/process/engine-health.js";
import type { Engine } from "../core/ports.js";
import { GlobalRouter } from "../router/server.js";
import { RegionMetrics, type RegionMetricsSink } from "../region/process/region-metrics.js";
import type { RegionService } from "../region/link/service.js";
import { createRegistry } from "../core/metrics.js";
import type { RouterMount } from "../router/app.js";

/** A region of the stack (buildRegion): ready once its configured instances serve. */
export interface DevRegion {
  readonly gateway: Gateway;
  readonly runtime: { readonly service: RegionService; readonly targets: { latest(): { decisionId: number } | undefined } };
  ready(timeoutMs?: number): Promise<void>;
  close(): Promise<void>;
}

/** A running in-process stack; `close()` stops the router, the links and every engine. */
export interface DevStack {
  router: GlobalRouter;
  gateways: Gateway[];
  links: RegionLink[];
  /** The regions, in config order (controller.actuator "agents", "sim" or "static"). */
  regions: DevRegion[];
  /**
   * Static regions: starts the engine-health watch `tidegate region` runs over fixed engines (region/process/
   * engine-health.ts; only engines that report liveness — openai-http — are ever found down), once every region is
   * ready; `close` stops it. A no-op for other actuators and when called again.
   */
  watchEngines(): void;
  close(): Promise<void>;
}

export interface DevStackOptions {
  config: TidegateConfig;
  clock: Clock;
  logger: Logger;
  /** Telemetry period of the in-process links (default 1000 ms, DESIGN: at least once a second). */
  telemetryIntervalMs?: number;
  mounts?: readonly RouterMount[];
  /**
   * controller.actuator "sim": deploy delays, weights, spot at start and random sources (default: SageServe §7.1's
   * delays, weights where a model is served, no spot, seed 1 — region/runtime/sim-region.ts startSimFleet).
   */
  sim?: SimFleetSettings;
  /** Each routing decision in a region's gateway (a trace, a test). */
  onRouted?: (region: RegionName, req: GenerateRequest, instanceId: string) => void;
}

/** The regions' loading sources for dev's banner ("" when none is configured). */
export function loadingLine(config: TidegateConfig): string {
  const parts = config.regions.flatMap((r) => {
    const l = regionLoading(config, r.name);
    return l === undefined ? [] : [`${r.name} ${l.source}/${schedulerOf(l)}`];
  });
  return parts.length === 0 ? "" : `; loads from ${parts.join(", ")}`;
}

/** Serving and wanted instances per region of an `agents` stack (its regions are the config's, in order). */
export function regionProgress(config: TidegateConfig, stack: DevStack): RegionProgress[] {
  return config.regions.map((r, i) => ({
    region: r.name,
    wanted: r.endpoints.reduce((s, e) => s + e.instances, 0),
    serving: stack.regions[i]?.gateway.instances().filter((x) => x.state === "serving").length ?? 0,
  }));
}

/** Dev's sim fleet: SageServe §7.1's delays, seed 1, weights where a model is served, no spot; HiGHS for zigzag loading. */
export function devSimSettings(solver?: Solver): SimFleetSettings {
  return { delays: SAGESERVE_DELAYS, random: (ri: number) => seededRandom(1, ri), ...(solver === undefined ? {} : { solver }) };
}

/**
 * Builds the stack: every region is `buildRegion` (region/runtime/build-region.ts) on the engine host
 * `controller.actuator` names — "agents" (the default): in-process node agents with real native block stores and
 * loopback TCP transfers, simulated engines started on them once their blocks arrived, the controller pacing the
 * planner's targets (`agentsInProcess`); "sim": the replays' simulated actuator (`simulatedFleetHost`, the host
 * startSimFleet gives the trace and week replays); "static": the configured `instances` per endpoint as fixed
 * in-process simulated engines (`fixedEngines`). Every simulated engine comes from region/runtime/build-sim-engine.ts
 * with the config's engines.*. An InProcessRegionLink per region serves its runtime's service (buildLinkedRegions,
 * the loop the replays share), and one GlobalRouter
 * runs over all links; the router is not listening yet.
 */
export function buildDevStack(opts: DevStackOptions): DevStack {
  const { config, clock, logger } = opts;
  const gateways: Gateway[] = [];
  const links: RegionLink[] = [];
  const regions: DevRegion[] = [];
  // The region metrics `tidegate region` exports, for every region, served on the router's /metrics below.
  const regionMetrics = new RegionMetrics(Object.fromEntries(config.regions.map((r) => [r.name, [...new Set(r.endpoints.map((e) => e.model))]])), createRegistry(false));
  const sinks: RegionMetricsSink[] = [];
  const telemetryIntervalMs = opts.telemetryIntervalMs ?? 1000;
  const sim = opts.sim ?? devSimSettings();
  const host = (index: number): EngineHost => {
    switch (config.controller.actuator) {
      case "agents":
        return agentsInProcess();
      case "sim":
        return simulatedFleetHost({ config, ...sim }, index);
      case "static":
        // engines.kind "openai-http": the engines at engines.urls, as `tidegate region` reaches them.
        if (config.engines.kind === "openai-http") return fixedEngines(urlEngineFactory(clock, logger.child({ region: config.regions[index]!.name }), config.engines.priorityField, config.engines.roles));
        // In-process sim engines report exact stats cheaply: read them at every decision (statsRefreshMs 0).
        return fixedEngines(simEngineFactory(config, clock, regionMetrics.sink(config.regions[index]!.name)), { statsRefreshMs: 0 });
    }
  };
  for (const { region, link } of buildLinkedRegions({
    config,
    clock,
    log: logger,
    telemetryIntervalMs,
    host,
    metrics: (name: RegionName) => {
      const sink = regionMetrics.sink(name);
      sinks.push(sink);
      return sink;
    },
    ...(opts.onRouted === undefined ? {} : { onRouted: opts.onRouted }),
  })) {
    regions.push(region);
    gateways.push(region.gateway);
    links.push(link);
  }
  const router = new GlobalRouter({ config, links, clock, logger, ...(opts.mounts === undefined ? {} : { mounts: opts.mounts }) });
  for (const m of regionMetrics.registry.getMetricsAsArray()) router.deps.metrics.registry.registerMetric(regionMetrics.registry.getSingleMetric(m.name)!);
  const observe = () => {
    regions.forEach((r, i) => sinks[i]!.observe(r.runtime.service.snapshot(), r.runtime.targets.latest()?.decisionId));
  };
  const metricsTicker = clock.every(1000, observe);
  let closed: Promise<void> | undefined;
  let watches: EngineHealthWatch[] | undefined;
  return {
    router,
    gateways,
    links,
    regions,
    watchEngines: () => {
      if (watches !== undefined || config.controller.actuator !== "static") return;
      watches = config.regions.map((rc, i) => {
        const g = gateways[i]!;
        const engines = g.instances().flatMap((x): Engine[] => { const e = g.engine(x.instanceId); return e === undefined ? [] : [e]; });
        return watchEngineHealth(g, engines, clock, logger.child({ region: rc.name }), { maxEjectedPercent: rc.maxEjectedPercent ?? 50 });
      });
    },
    close: () =>
      (closed ??= (async () => {
        for (const w of watches ?? []) w.stop();
        metricsTicker.cancel();
        await router.close();
        await Promise.all(links.map((l) => l.close()));
        await Promise.all(regions.map((r) => r.close()));
      })()),
  };
}
