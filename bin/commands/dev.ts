/**
 * `tidegate dev`: every tier in one process on the embedded default (core/config DEFAULT_CONFIG_JSON: 3 regions,
 * 4 models) or a config file — one region per config region (buildRegion, simulated engines in real time), wired to
 * the global router through in-process RegionLinks — serving the OpenAI API on http://127.0.0.1:8080.
 */
import type { Command } from "../command.js";
import { untilSignal } from "../signals.js";
import { createBatchService, withRedisUrl } from "../../router/batch/service.js";
import { WallClock, type Clock } from "../../core/clock.js";
import { loadConfig, type TidegateConfig } from "../../core/config.js";
import "../../region/config-sections.js"; // region's config sections (keystage, loading), before any config is parsed
import { regionLoading, schedulerOf } from "../../region/liveload/liveload-config.js";
import type { Logger } from "../../core/log.js";
import { loggerFromFlags, portFromFlags } from "../flags.js";
import { DevConsole, openDevLog, progressText, showProgress, type DevLogTarget, type RegionProgress } from "../dev-output.js";
import type { GenerateRequest, RegionLink } from "../../core/ports.js";
import type { RegionName } from "../../core/models.js";
import { SAGESERVE_DELAYS } from "../../region/actuator/sim.js";
import { configNeedsSolver, simulatedFleetHost, type SimFleetSettings } from "../../region/runtime/sim-region.js";
import { HighsSolver, type Solver } from "../../core/solver.js";
import { seededRandom } from "../../core/random.js";
import type { Gateway } from "../../region/gateway/gateway.js";
import { InProcessRegionLink } from "../../region/link/in-process-link.js";
import { buildRegion, type EngineHost } from "../../region/runtime/build-region.js";
import { agentsInProcess } from "../../region/runtime/agents-host.js";
import { fixedEngines, simEngineFactory } from "../../region/runtime/static-host.js";
import { urlEngineFactory } from "../../region/process/spawn.js";
import { watchEngineHealth, type EngineHealthWatch } from "../../region/process/engine-health.js";
import type { Engine } from "../../core/ports.js";
import { parameterScaleLines } from "../../region/runtime/runtime.js";
import { GlobalRouter } from "../../router/server.js";
import { RegionMetrics, type RegionMetricsSink } from "../../region/process/region-metrics.js";
import type { RegionService } from "../../region/link/service.js";
import { createRegistry } from "../../core/metrics.js";
import { PlannerMetrics } from "../../planner/metrics.js";
import type { RouterMount } from "../../router/app.js";
import { MemoryLeaderLock } from "../../planner/leader.js";
import { devPlansSite, openDevPlannerState } from "../../planner/dev-site.js";
import { startPlannerService } from "../../planner/service.js";

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
function loadingLine(config: TidegateConfig): string {
  const parts = config.regions.flatMap((r) => {
    const l = regionLoading(config, r.name);
    return l === undefined ? [] : [`${r.name} ${l.source}/${schedulerOf(l)}`];
  });
  return parts.length === 0 ? "" : `; loads from ${parts.join(", ")}`;
}

/** Serving and wanted instances per region of an `agents` stack (its regions are the config's, in order). */
function regionProgress(config: TidegateConfig, stack: DevStack): RegionProgress[] {
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
 * with the config's engines.*. An InProcessRegionLink per region serves its runtime's service, and one GlobalRouter
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
        if (config.engines.kind === "openai-http") return fixedEngines(urlEngineFactory(clock, logger.child({ region: config.regions[index]!.name }), config.engines.priorityField));
        // In-process sim engines report exact stats cheaply: read them at every decision (statsRefreshMs 0).
        return fixedEngines(simEngineFactory(config, clock), { statsRefreshMs: 0 });
    }
  };
  config.regions.forEach((rc, index) => {
    const sink = regionMetrics.sink(rc.name);
    const r = buildRegion({
      config,
      region: rc.name,
      clock,
      log: logger.child({ region: rc.name }),
      metrics: sink,
      host: host(index),
      ...(opts.onRouted === undefined ? {} : { onRouted: (req: GenerateRequest, id: string) => opts.onRouted!(rc.name, req, id) }),
    });
    sinks.push(sink);
    regions.push(r);
    gateways.push(r.gateway);
    links.push(new InProcessRegionLink(r.service, { clock, telemetryIntervalMs, log: logger }));
  });
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

export const command: Command = {
  name: "dev",
  summary: "run every tier in one process on the embedded default (3 regions, 4 models, simulated engines)",
  description: [
    "Starts the global router, one region gateway per region with simulated engines running in real time, and",
    "in-process links between them. With no --config it runs the embedded default: regions us-east, us-central,",
    "us-west; models llama2-70b, bloom-176b, llama3.1-8b, llama3.2-3b. Stops cleanly on SIGINT/SIGTERM.",
    "",
    "Standard output is the banner: the URL, the admin key, where to look. The JSON log goes to",
    "<queue.dataDir>/dev.log (default .data/dev.log, overwritten at each start; --log-file FILE elsewhere,",
    "--log-file - to stderr); warnings and errors are also printed on stderr, with start-up progress (one line",
    "rewritten in place on a terminal).",
    "",
    "controller.actuator picks how instances come and go: \"agents\" (default: node agents in process, parameters over",
    "loopback TCP), \"sim\" (the replays' simulated actuator: SageServe deploy delays, no data plane) or \"static\".",
    "test/e2e/live-vs-replay.test.ts runs the \"sim\" wiring on a scaled wall clock against the week replay.",
    "",
    "Example:",
    "  tidegate dev",
    "  curl -N http://127.0.0.1:8080/v1/chat/completions -H 'content-type: application/json' \\",
    `    -d '{"model":"llama3.2-3b","messages":[{"role":"user","content":"hello"}],"stream":true}'`,
  ].join("\n"),
  flags: {
    config: { type: "string", help: "config file (JSON), merged over the embedded default; FILE,FILE… merges several in order" },
    port: { type: "number", help: "port of the public API (overrides router.port; 0 picks a free port)" },
    host: { type: "string", help: "address to listen on (overrides router.host)" },
    "log-level": { type: "string", help: "debug, info, warn or error", default: "info" },
    "log-file": { type: "string", help: "the JSON log's file (default <queue.dataDir>/dev.log, overwritten at each start); - sends it to stderr" },
    "redis-url": { type: "string", help: "batch queue on this Redis (sets queue.backend redis); default: config queue" },
    "recover-journal": { type: "boolean", help: "embedded queue: keep the journal's valid prefix and move a bad line and the rest aside (queue.recoverJournal)", default: false },
  },
  async run(flags) {
    const startedAt = Date.now();
    const config = loadConfig(typeof flags.config === "string" ? flags.config : undefined);
    if (flags["recover-journal"] === true) config.queue.recoverJournal = true;
    // The JSON log to a file (or stderr), so that the first screen is the banner; warnings and errors also on stderr.
    const term = new DevConsole(process.stderr);
    let devLog: DevLogTarget | undefined;
    const logger = loggerFromFlags(flags, "dev", (line, level) => devLog?.sink(line, level));
    devLog = openDevLog(typeof flags["log-file"] === "string" ? flags["log-file"] : undefined, config.queue.dataDir, term);
    const logWhere = devLog.file ?? "stderr";
    term.line(`tidegate dev: starting ${config.regions.length} region${config.regions.length === 1 ? "" : "s"}; log: ${logWhere}`);
    const port = portFromFlags(flags, config.router.port);
    const host = typeof flags.host === "string" ? flags.host : config.router.host;
    const clock = new WallClock();
    // Batch tier (issue 3): Files/Batch API at /v1 on the embedded queue, or Redis with --redis-url.
    // One demand history for the planner: IW from region telemetry, NIW from what the batch dispatcher sends.
    // Kept with the plans in <queue.dataDir>/planner/ across restarts (planner/dev-site.ts openDevPlannerState).
    const { history, plans } = await openDevPlannerState(config, clock.now());
    const batch = createBatchService({ config: withRedisUrl(config, typeof flags["redis-url"] === "string" ? flags["redis-url"] : undefined), clock, log: logger.child({ tier: "batch" }), niwHistory: history });
    // Planner tier (issues 4, 16): hourly plans at /plans (sign in at /login); an empty history is seeded from ServeGen.
    const site = await devPlansSite({ config, clock, history, store: plans, log: logger.child({ tier: "planner" }), env: process.env });
    // The router's admin routes (/admin/regions/{region}/instances) take the same admin keys as the plans site.
    const devConfig: TidegateConfig = { ...config, router: { ...config.router, adminKeys: [...site.adminKeys] } };
    if (config.controller.actuator === "agents") {
      logger.info("parameter blocks are scaled down for this machine", { models: parameterScaleLines(config) });
    }
    // A sim region whose loading runs zigzag plans each loading episode with HiGHS (controller.loading).
    const sim: SimFleetSettings | undefined = config.controller.actuator === "sim" && configNeedsSolver(config) ? devSimSettings(await HighsSolver.create()) : undefined;
    const stack = buildDevStack({ config: devConfig, clock, logger, ...(sim === undefined ? {} : { sim }), mounts: [{ path: "/v1", app: batch.routes }, { path: "/", app: site.routes }] });
    batch.start(stack.links, stack.router.deps.metrics.registry);
    const plannerMetrics = new PlannerMetrics(stack.router.deps.metrics.registry, config.models.map((m) => m.name), config.regions.map((r) => r.name));
    const planner = await startPlannerService({
      onReport: (r) => plannerMetrics.observe(r),
      config,
      clock,
      links: stack.links,
      history,
      store: plans,
      lock: new MemoryLeaderLock(clock),
      holder: "dev",
      intervalMs: config.planner.intervalMs,
      advisory: config.planner.advisory,
      forecaster: "blend",
      log: logger.child({ tier: "planner" }),
    });
    site.attach(planner.loop, stack.router.deps.metrics.registry);
    const stopped = untilSignal();
    const agents = config.controller.actuator === "agents";
    const progress = agents ? showProgress({ console: term, regions: () => regionProgress(config, stack), startedAtMs: startedAt }) : undefined;
    try {
      // The regions deploy their configured instances (blocks over the data plane, then engines) before the API opens.
      await Promise.all(stack.regions.map((r) => r.ready())).finally(() => progress?.stop());
      stack.watchEngines();
      if (agents) term.line(`tidegate dev: ${progressText(regionProgress(config, stack), Date.now() - startedAt)}`);
      // The router's last snapshot of each region may predate its first serving instance: send one now, so the API
      // opens with the regions' instances routable (not after up to one telemetry interval of 503s).
      for (const link of stack.links) if (link instanceof InProcessRegionLink) link.publishNow();
      await stack.router.listen(host, port);
    } catch (err) {
      await planner.close();
      await batch.close();
      await stack.close();
      devLog.close();
      throw err;
    }
    const url = stack.router.url();
    const model = config.models.at(-1)!.name;
    process.stdout.write(
      `tidegate dev: serving ${url} (regions: ${config.regions.map((r) => r.name).join(", ")}; models: ${config.models.map((m) => m.name).join(", ")})\n` +
        `try:\n  curl -N ${url}/v1/chat/completions -H 'content-type: application/json' \\\n` +
        `    -d '{"model":"${model}","messages":[{"role":"user","content":"hello"}],"stream":true,"max_tokens":20}'\n` +
        `batch: OpenAI Files and Batch API at ${url}/v1/files and ${url}/v1/batches (one model per input file)\n` +
        site.banner(url) +
        (config.controller.actuator === "agents"
          ? `instances and scaling: curl -s ${url}/admin/regions/${config.regions[0]!.name}/instances -H 'authorization: Bearer <admin key>'\n` +
            `  (the log has each scaling step: "scaling step", "transfer started"/"transfer finished", "instance serving")\n` +
            (loadingLine(config) === "" ? "" : `serve while loading${loadingLine(config)} (the log's "pairing a loading instance with a serving one")\n`) +
            `parameters (scaled for this machine): ${parameterScaleLines(config).join("; ")}\n`
          : config.controller.actuator === "sim"
            ? `instances and scaling (simulated actuator, SageServe deploy delays${loadingLine(config)}): curl -s ${url}/admin/regions/${config.regions[0]!.name}/instances -H 'authorization: Bearer <admin key>'\n`
            : "") +
        `metrics: ${url}/metrics (Prometheus)\n` +
        `log: ${logWhere} (JSON lines${devLog.file === undefined ? "" : "; warnings and errors also on stderr; --log-file - sends the log to stderr"})\n`,
    );
    const sig = await stopped;
    logger.info("shutting down", { signal: sig });
    await planner.close();
    await batch.close();
    await stack.close();
    devLog.close();
    process.stdout.write("tidegate dev: stopped\n");
    return 0;
  },
};
