/**
 * `tidegate region`: one region as its own process — its engines, the region gateway (endpoint by effective memory
 * utilization, then JSQ), the gRPC server the global router connects to (region/proto/region.proto) and an HTTP
 * port with /metrics and /healthz. See region/README.md.
 */
import type { Command } from "../command.js";
import { WallClock } from "../../core/clock.js";
import { regionConfigFromFlags } from "../config-flags.js";
import { ensurePortFree } from "../../core/listen.js";
import { TidegateError } from "../../core/errors.js";
import { loggerFromFlags, portFromFlags } from "../flags.js";
import type { EngineFactory } from "../../region/actuator/static.js";
import { spawnedEngines, urlEngineFactory } from "../../region/process/spawn.js";
import { engineSimFlags, simEngineParams } from "../../region/runtime/build-sim-engine.js";
import { simEngineFactory } from "../../region/runtime/static-host.js";
import { startRegionProcess } from "../../region/process/region-server.js";
import { RegionMetrics } from "../../region/process/region-metrics.js";
import { parameterScaleLines } from "../../region/runtime/runtime.js";
import { tlsFromFlags } from "../../core/tls.js";
import { untilSignal } from "../signals.js";


export const command: Command = {
  name: "region",
  summary: "run one region: gateway, controller and engines (scaled through node agents), telemetry over gRPC",
  description: [
    "Runs the region named by --region from the config file: the region gateway, a gRPC server for the global",
    "router (telemetry stream, request dispatch, targets, the admin listing) and an HTTP server with /metrics and",
    "/healthz. How instances come and go is controller.actuator:",
    "  \"agents\" (default)   the region scales: node agents (`tidegate agent --region NAME --region-address",
    "                      <this gRPC address>`) announce themselves here; the controller paces the planner's",
    "                      targets (controller.strategy, default predictive-hpa); a scale-out multicasts the model's",
    "                      parameter blocks to the new node over the data plane and the agent starts the engine:",
    "                      engine-sim while the blocks arrive (ready once all are there), or after them",
    "                      engines.commandTemplate such as \"vllm serve {model} --port {port}\";",
    "                      before any plan, regions[].endpoints[].instances are deployed. A restarted region adopts",
    "                      the engines its agents still run.",
    "  \"static\"            the fixed instances of regions[].endpoints, from the config's `engines` section:",
    "                      kind \"sim\" runs simulated engines inside this process (or, with --spawn-engines, one",
    "                      `tidegate engine-sim` child per instance behind the openai-http adapter); kind",
    "                      \"openai-http\" uses engines.urls[\"region/model\"] or [\"region/model/gpu\"]. The region acknowledges",
    "                      the planner's targets but does not scale (no controller pass runs).",
    "--spawn-engines and engines.kind \"openai-http\" imply \"static\".",
    "When ready it prints one line on stdout:",
    "  tidegate region <name>: grpc <host:port> metrics <url>",
    "so --grpc-port 0 and --metrics-port 0 can be used. Stops cleanly on SIGINT/SIGTERM.",
    "",
    "Example:",
    "  tidegate region --config fleet.json --region us-east --grpc-port 50051 --spawn-engines",
  ].join("\n"),
  flags: {
    config: { type: "string", help: "config file (JSON), merged over the embedded default; FILE,FILE… merges several in order" },
    region: { type: "string", help: "which region of the config to run (required)" },
    "grpc-host": { type: "string", help: "gRPC bind host (default: the host of regions[].grpcAddress)" },
    "grpc-port": { type: "number", help: "gRPC port (default: the port of regions[].grpcAddress; 0 = any free port)" },
    "metrics-host": { type: "string", help: "HTTP bind host for /metrics and /healthz", default: "127.0.0.1" },
    "metrics-port": { type: "number", help: "HTTP port for /metrics and /healthz (0 = any free port)", default: 0 },
    "spawn-engines": { type: "boolean", help: "run each sim instance as an engine-sim child process behind the openai-http adapter", default: false },
    "tls-ca": { type: "string", help: "PEM CA that signs the global router's client certificates (enables TLS)" },
    "tls-cert": { type: "string", help: "PEM certificate chain of this region" },
    "tls-key": { type: "string", help: "PEM private key of this region" },
    "tls-server-name": { type: "string", help: "with TLS in agents mode: the name node agents' certificates carry (they are dialled by IP)" },
    "log-level": { type: "string", help: "debug, info, warn or error", default: "info" },
  },
  config: regionConfigFromFlags,
  async run(flags) {
    const config = regionConfigFromFlags(flags);
    if (typeof flags.region !== "string") throw new TidegateError("invalid_request", `--region is required (one of ${config.regions.map((r) => r.name).join(", ")})`);
    const regionName = flags.region;
    const region = config.regions.find((r) => r.name === regionName)!;
    const log = loggerFromFlags(flags, "region").child({ region: regionName });
    const metricsPort = portFromFlags(flags, 0, "metrics-port");
    const at = region.grpcAddress.lastIndexOf(":");
    await ensurePortFree(region.grpcAddress.slice(0, at), Number(region.grpcAddress.slice(at + 1)), `--grpc-port / regions[].grpcAddress of ${regionName}`);
    await ensurePortFree(String(flags["metrics-host"]), metricsPort, "--metrics-port");
    if (config.controller.actuator === "sim") throw new TidegateError("invalid_request", `controller.actuator "sim" runs in-process simulated regions in \`tidegate dev\` (and the replays); a region process runs "agents" or "static"`);
    const clock = new WallClock();
    const spawn = flags["spawn-engines"] === true;
    if (spawn && config.engines.kind !== "sim") throw new TidegateError("invalid_request", "--spawn-engines runs simulated engines; the config says engines.kind \"openai-http\"");
    const agentsMode = !spawn && config.engines.kind === "sim" && config.controller.actuator === "agents";
    // Spawned engine-sim processes get the config's engines.* as flags, the in-process ones from the same builder.
    const spawned = spawn ? spawnedEngines(clock, (m, g) => engineSimFlags(simEngineParams(config, m, g)), { log }) : undefined;
    // One metrics object for the region process and its in-process engines' KV fabric (prefill/decode roles).
    const metrics = new RegionMetrics({ [regionName]: [...new Set(region.endpoints.map((e) => e.model))] });
    const engines: EngineFactory | undefined = agentsMode ? undefined : spawned?.factory ?? (config.engines.kind === "sim" ? simEngineFactory(config, clock, metrics.sink(regionName)) : urlEngineFactory(clock, log, config.engines.priorityField, config.engines.roles));
    if (agentsMode) log.info("agents mode: node agents announce themselves to this region; parameter blocks scaled for this deployment", { strategy: config.controller.strategy, parameters: parameterScaleLines(config) });
    const tls = tlsFromFlags(flags);
    const stopped = untilSignal();
    const starting = startRegionProcess({
      config,
      region: regionName,
      ...(engines === undefined ? {} : { engines }),
      ...(spawned === undefined ? {} : { onClose: () => spawned.stopAll() }),
      grpcAddress: region.grpcAddress,
      metrics,
      metricsHost: String(flags["metrics-host"]),
      metricsPort,
      clock,
      log,
      ...(tls === undefined ? {} : { tls }),
    });
    const proc = await starting.catch(async (err: unknown) => {
      await spawned?.stopAll();
      throw err;
    });
    process.stdout.write(`tidegate region ${regionName}: grpc ${proc.grpcAddress} metrics ${proc.metricsUrl}\n`);
    const sig = await stopped;
    log.info("shutting down", { signal: sig });
    await proc.close();
    // Everything tidegate opened is closed; a socket grpc-js keeps after a failed TLS handshake must not keep the
    // process alive. The timer is unref'd: it only fires if something else still holds the event loop.
    setTimeout(() => {
      log.warn("exiting with handles still open");
      process.exit(0);
    }, 2000).unref();
    return 0;
  },
};
