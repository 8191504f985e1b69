/**
 * `tidegate dev`'s start and stop, after bin/commands/dev.ts has read its configuration and found its port free
 * (loaded only then, so that a port in use is said before this module graph loads): the dev log, the planner state in
 * the data directory, the batch tier, the plans site, the stack (bin/dev-stack.ts) with its regions deployed before
 * the API opens, then the planner over the running regions, the banner, and a clean stop on SIGINT/SIGTERM.
 */
import type { FlagValues } from "./args.js";
import { untilSignal } from "./signals.js";
import { createBatchService } from "../router/batch/service.js";
import { WallClock } from "../core/clock.js";
import { DEFAULT_ROUTING_POLICY } from "../core/defaults.js";
import type { TidegateConfig } from "../core/config.js";
import { loggerFromFlags } from "./flags.js";
import { DevConsole, openDevLog, progressText, showProgress, type DevLogTarget } from "./dev-output.js";
import { configNeedsSolver, type SimFleetSettings } from "../region/runtime/sim-region.js";
import { HighsSolver } from "../core/solver.js";
import { InProcessRegionLink } from "../region/link/in-process-link.js";
import { parameterScaleLines } from "../region/runtime/runtime.js";
import { PlannerMetrics } from "../planner/metrics.js";
import { MemoryLeaderLock } from "../planner/leader.js";
import { devPlansSite, openDevPlannerState } from "../planner/dev-site.js";
import { startPlannerService } from "../planner/service.js";
import { DEFAULT_FORECASTER_NAME } from "../forecasts/registry.js";
import { buildDevStack, devSimSettings, loadingLine, regionProgress } from "./dev-stack.js";

/** Runs dev on `config` (routerConfigFromFlags) until a signal; resolves to the exit code. `startedAt`: Date.now() at the command's start. */
export async function runDev(flags: FlagValues, config: TidegateConfig, startedAt: number): Promise<number> {
  // The JSON log to a file (or stderr), so that the first screen is the banner; warnings and errors also on stderr.
  const term = new DevConsole(process.stderr);
  let devLog: DevLogTarget | undefined;
  const logger = loggerFromFlags(flags, "dev", (line, level) => devLog?.sink(line, level));
  devLog = openDevLog(typeof flags["log-file"] === "string" ? flags["log-file"] : undefined, config.queue.dataDir, term);
  const logWhere = devLog.file ?? "stderr";
  term.line(`tidegate dev: starting ${config.regions.length} region${config.regions.length === 1 ? "" : "s"}; log: ${logWhere}`);
  const { port, host } = config.router;
  const clock = new WallClock();
  // Batch tier (issue 3): Files/Batch API at /v1 on the embedded queue, or Redis with --redis-url.
  // One demand history for the planner: IW from region telemetry, NIW from what the batch dispatcher sends.
  // Kept with the plans in <queue.dataDir>/planner/ across restarts (planner/dev-site.ts openDevPlannerState).
  const { history, plans } = await openDevPlannerState(config, clock.now());
  const batch = createBatchService({ config, clock, log: logger.child({ tier: "batch" }), niwHistory: history });
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
  const stopped = untilSignal();
  let planner: Awaited<ReturnType<typeof startPlannerService>> | undefined;
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
    // The planner starts over regions that serve (tier: planner; /plans "Plan now" from here on).
    const plannerMetrics = new PlannerMetrics(stack.router.deps.metrics.registry, config.models.map((m) => m.name), config.regions.map((r) => r.name));
    planner = await startPlannerService({
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
      forecaster: DEFAULT_FORECASTER_NAME,
      log: logger.child({ tier: "planner" }),
      // Its first plan waits for the regions' telemetry: it plans on their instances and expected scale-out times.
      firstRoundAfterTelemetryMs: 5000,
    });
    site.attach(planner.loop, stack.router.deps.metrics.registry);
    await stack.router.listen(host, port);
  } catch (err) {
    await planner?.close();
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
      `scaling: ${config.controller.strategy} (controller.strategy); routing: ${config.routing?.preset ?? DEFAULT_ROUTING_POLICY} (routing.policy)\n` +
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
}
