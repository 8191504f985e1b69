/**
 * The `tidegate region` process wiring, plus a small HTTP server with /metrics (Prometheus) and /healthz. The region
 * is `buildRegion` (region/runtime/build-region.ts) on one of two engine hosts:
 * - agents (no `engines` factory; controller.actuator "agents"): `agentsOverGrpc` — node agents join through the
 *   AgentRegistry service on the gRPC port and the controller paces the planner's targets;
 * - static (`engines` given): `fixedEngines` — the configured engines, made before the servers start (one that
 *   cannot be made fails the start), watched by the engine-health check (engine-health.ts); targets are held, not
 *   acted on.
 * Either way the gRPC server for the global router serves the region runtime's service. Telemetry gauges are
 * refreshed from a snapshot every `metricsIntervalMs` on the Clock;
 * the SLO gauges read the gateway at each scrape. `close()` stops the servers, then the region
 * (in agents mode the engine processes stay with their agents, for the next region process to adopt).
 */
import { startProbeServer, type ProbeServer, type Readiness } from "../../core/probe-server.js";
import { BoundaryReporter } from "../../core/boundary.js";
import { WallClock, type Clock, type Timer } from "../../core/clock.js";
import type { TidegateConfig } from "../../core/config.js";
import { silentLogger, type Logger } from "../../core/log.js";
import type { Server as GrpcServer } from "@grpc/grpc-js";
import type { Gateway } from "../gateway/gateway.js";
import type { EngineFactory } from "../actuator/static.js";
import { withActuatorCounts, type RegionRuntime } from "../runtime/runtime.js";
import { buildRegion, type Region } from "../runtime/build-region.js";
import { agentsOverGrpc } from "../runtime/agents-host.js";
import { fixedEngines } from "../runtime/static-host.js";
import { startRegionGrpcServer, type RegionGrpcServer } from "../link/grpc-server.js";
import type { TlsFiles } from "../../core/tls.js";
import { RegionMetrics } from "./region-metrics.js";
import { watchEngineHealth, type EngineHealthWatch } from "./engine-health.js";

export interface RegionProcessOptions {
  config: TidegateConfig;
  region: string;
  /** Fixed engines (static mode); absent = agents mode. */
  engines?: EngineFactory;
  /** gRPC bind address (default: the region's config grpcAddress). */
  grpcAddress?: string;
  /** HTTP metrics bind (default 127.0.0.1, port 0 = any free port). */
  metricsHost?: string;
  metricsPort?: number;
  /** How often the telemetry gauges are refreshed (default 500 ms, so a stale engine shows within 2 s). */
  metricsIntervalMs?: number;
  /** Metrics to report into (default: a fresh RegionMetrics with the process's standard metrics). */
  metrics?: RegionMetrics;
  tls?: TlsFiles;
  clock?: Clock;
  log?: Logger;
  /** How long closing the engines may take before the process moves on (default 3000 ms). */
  closeTimeoutMs?: number;
  /** Static mode: how often engine liveness is checked (default 250 ms; region/process/engine-health.ts). */
  engineHealthIntervalMs?: number;
  /** Runs after everything else is closed (e.g. kills spawned engine processes). */
  onClose?: () => Promise<void>;
}

export interface RegionProcess {
  gateway: Gateway;
  /** The region runtime (its actuator: agents, or static for fixed engines). */
  runtime: RegionRuntime;
  grpcAddress: string;
  metricsUrl: string;
  close(): Promise<void>;
}

/**
 * Readiness of a region: the global tier follows its telemetry (at least one open telemetry stream) and every model
 * of the region has at least one serving instance whose stats are readable and whose engine is not believed down. Kubernetes: the region's Service must
 * publish not-ready addresses, or the global router could never connect to make it ready (deploy/kubernetes).
 */
export function regionReadiness(region: string, models: readonly string[], gateway: Gateway, telemetryStreams: number): Readiness {
  const serving = gateway.instances().filter((i) => i.state === "serving");
  const missing = models.filter((m) => !serving.some((i) => i.model === m && !i.stale && i.down === undefined));
  const why = [...(telemetryStreams === 0 ? ["no telemetry stream from the global tier"] : []), ...(missing.length > 0 ? [`no serving instance of ${missing.join(", ")}`] : [])];
  return { ready: why.length === 0, status: why.length === 0 ? "ok" : why.join("; "), detail: { region, servingInstances: serving.length, telemetryStreams } };
}

/** Starts a region; resolves when both servers listen. */
export async function startRegionProcess(opts: RegionProcessOptions): Promise<RegionProcess> {
  const clock = opts.clock ?? new WallClock();
  const log = opts.log ?? silentLogger;
  const regionConfig = opts.config.regions.find((r) => r.name === opts.region);
  const models = [...new Set(regionConfig?.endpoints.map((e) => e.model) ?? [])];
  const all = opts.metrics ?? new RegionMetrics({ [opts.region]: models });
  const metrics = all.sink(opts.region);
  const common = { config: opts.config, region: opts.region, clock, log, metrics };
  let region: Region;
  let registry: ((server: GrpcServer) => void) | undefined;
  let health: EngineHealthWatch | undefined;
  if (opts.engines === undefined) {
    const agents = buildRegion({ ...common, host: agentsOverGrpc(opts.tls === undefined ? {} : { tls: opts.tls }) });
    registry = (server) => agents.registry(server);
    region = agents;
  } else {
    const fixed = buildRegion({ ...common, host: fixedEngines(opts.engines) });
    try {
      await fixed.ready();
    } catch (err) {
      await fixed.close();
      throw err;
    }
    // A dead or hung engine is taken out of service and comes back when it answers (engine-health.ts).
    health = watchEngineHealth(fixed.gateway, fixed.actuator.engines(), clock, log, { intervalMs: opts.engineHealthIntervalMs ?? 250, maxEjectedPercent: regionConfig?.maxEjectedPercent ?? 50 });
    region = fixed;
  }
  const { gateway, service, runtime } = region;
  let grpc: RegionGrpcServer | undefined;
  let probes: ProbeServer | undefined;
  let ticker: Timer | undefined;
  let closing: Promise<void> | undefined;
  const close = () =>
    (closing ??= (async () => {
      ticker?.cancel();
      health?.stop();
      await grpc?.close();
      await probes?.close();
      // An engine stuck on a dead upstream must not keep the region from stopping (and its children from being
      // stopped): closing the engines gets `closeTimeoutMs`, then the process moves on.
      const limitMs = opts.closeTimeoutMs ?? 3000;
      let timer: ReturnType<typeof setTimeout> | undefined;
      const timedOut = await Promise.race([
        region.close().then(() => false),
        new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(true), limitMs))),
      ]);
      clearTimeout(timer);
      if (timedOut) log.warn("engines did not close in time", { region: opts.region, limitMs });
      await opts.onClose?.();
    })());
  try {
    grpc = await startRegionGrpcServer(service, {
      address: opts.grpcAddress ?? regionConfig!.grpcAddress,
      clock,
      log,
      ...(opts.tls === undefined ? {} : { tls: opts.tls }),
      ...(registry === undefined ? {} : { extraServices: registry }),
      // What the gRPC port refuses: logged (rate-limited) and counted on this process's /metrics (core/boundary.ts).
      boundary: new BoundaryReporter({ clock, log, registry: all.registry }),
    });
    const observe = () => metrics.observe(withActuatorCounts(gateway.snapshot(), runtime.actuator), runtime.targets.latest()?.decisionId);
    observe();
    ticker = clock.every(opts.metricsIntervalMs ?? 500, observe);
    const grpcServer = grpc;
    probes = await startProbeServer({
      host: opts.metricsHost ?? "127.0.0.1",
      port: opts.metricsPort ?? 0,
      registry: all.registry,
      log,
      ready: () => regionReadiness(opts.region, models, gateway, grpcServer.telemetryStreams()),
    });
  } catch (err) {
    await close();
    throw err;
  }
  return { gateway, runtime, grpcAddress: grpc.address, metricsUrl: probes.url, close };
}
