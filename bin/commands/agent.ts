/**
 * `tidegate agent`: the node agent, one per GPU node. Holds model parameter blocks in host memory, runs this
 * node's role in multicast plans over the native data plane, starts and stops engines on its GPU slots, and
 * announces the node to its region (nodes/agent/README.md).
 */
import type { Command } from "../command.js";
import { WallClock } from "../../core/clock.js";
import { BoundaryReporter } from "../../core/boundary.js";
import { TidegateError } from "../../core/errors.js";
import { loggerFromFlags } from "../flags.js";
import { Announcer } from "../../nodes/agent/announcer.js";
import { EngineSupervisor } from "../../nodes/agent/engine-supervisor.js";
import { NodeAgent } from "../../nodes/agent/node.js";
import { RegistryClient } from "../../nodes/agent/agent-registry.js";
import { startAgentServer } from "../../nodes/agent/agent-server.js";
import { agentRegistry } from "../../nodes/agent/agent-metrics.js";
import { startProbeServer } from "../../core/probe-server.js";
import { tlsFromFlags } from "../../core/tls.js";
import { untilSignal } from "../signals.js";

function port(flags: Record<string, unknown>, name: string): number {
  const v = flags[name];
  if (typeof v !== "number" || !Number.isInteger(v) || v < 0 || v > 65535) throw new TidegateError("invalid_request", `--${name} must be an integer in [0, 65535], got ${String(v)}`);
  return v;
}

function nonNegativeInt(flags: Record<string, unknown>, name: string, min: number): number {
  const v = flags[name];
  if (typeof v !== "number" || !Number.isInteger(v) || v < min) throw new TidegateError("invalid_request", `--${name} must be an integer ≥ ${min}, got ${String(v)}`);
  return v;
}

function hostPort(v: string, name: string): string {
  const i = v.lastIndexOf(":");
  const p = Number(v.slice(i + 1));
  if (i <= 0 || !Number.isInteger(p) || p < 1 || p > 65535) throw new TidegateError("invalid_request", `--${name} must be host:port, got ${JSON.stringify(v)}`);
  return v;
}

export const command: Command = {
  name: "agent",
  summary: "run a node agent: model blocks in host memory, multicast roles, engine processes, announced to its region",
  description: [
    "Serves the NodeAgent gRPC service (nodes/proto/agent.proto) for one node: Info (the node's announcement),",
    "Load a model's blocks (empty, from a packed file, or a seeded pattern), Run this node's role in a multicast plan",
    "(blocks stream back as they arrive), Verify, Drop, StartEngine, StopEngine. Data moves on a separate port over",
    "TCP or RDMA verbs (RC queue pairs, RDMA WRITE WITH IMMEDIATE; native/README.md). --transport auto uses verbs",
    "where an RDMA device with an active port exists and TCP otherwise, and says which on the ready line;",
    "--transport verbs where none can be used is an error. Every node of a plan must run the same transport.",
    "TIDEGATE_VERBS_DEVICE picks the device (default: the first), TIDEGATE_VERBS_GID_INDEX the GID (default: an IPv4",
    "RoCE v2 one).",
    "",
    "Engines: StartEngine runs `tidegate engine-sim --parameters-from <this agent>` or a command template such as",
    "`vllm serve {model} --port {port}` (placeholders {model} {port} {host} {gpu} {tp} {instance}; split into argv",
    "without a shell; an unknown placeholder is INVALID_ARGUMENT) on a free port of --engine-host that the agent picks.",
    "It is refused with FAILED_PRECONDITION when the model's block store is missing or incomplete or the engine's GPU",
    "type is not --gpu-type, and with RESOURCE_EXHAUSTED when its gpus exceed the free slots (--gpu-slots minus the",
    "gpus of engines not exited). The same instance id while it runs returns the running engine. engine-sim is",
    "\"running\" once it printed its URL; a template engine stays \"starting\" (health is the region's to check). A model",
    "whose engine runs cannot be dropped or reloaded. Each engine runs under a keeper process, in its own process group",
    "that the keeper kills (SIGTERM, SIGKILL after 2 s) when this agent exits, even on kill -9. SIGINT/SIGTERM stop",
    "every engine (SIGTERM, SIGKILL after 3 s) before the agent exits. Engines outlive a region restart; Info lists",
    "them (and the last 32 exited ones, with their exit code and last stderr lines).",
    "",
    "Announcing: with --region-address the agent calls AgentRegistry.Announce there every --announce-interval-ms with",
    "its announcement (identity, region, GPU type and slots, stores with their last use, engines); it logs once when",
    "the region is unreachable, once when it answers again, and the region's message when it does not know the node.",
    "",
    "When ready it prints one line on stdout:",
    "  tidegate agent <node-id>: grpc <host:port> data <host:port> transport <tcp|verbs>[ (<why not verbs>)] metrics <url>",
    "(/metrics, /livez, and /readyz = /healthz: 200 once the region answered an announce, on --metrics-port).",
    "",
    "Example:",
    "  tidegate agent --node-id gpu-07 --data-host 10.0.0.7 --grpc-host 10.0.0.7 --grpc-port 7070 \\",
    "    --region us-east --gpu-slots 8 --region-address 10.0.0.2:7000",
  ].join("\n"),
  flags: {
    "node-id": { type: "string", help: "this node's id in multicast plans (required)" },
    "data-host": { type: "string", help: "data-plane bind address, also the address peers dial", default: "127.0.0.1" },
    "data-port": { type: "number", help: "data-plane port (0 = any free port)", default: 0 },
    "grpc-host": { type: "string", help: "gRPC bind host", default: "127.0.0.1" },
    "grpc-port": { type: "number", help: "gRPC port (0 = any free port)", default: 0 },
    transport: { type: "string", help: "tcp, verbs or auto", default: "auto" },
    "memory-bytes": { type: "number", help: "host memory the agent may use for blocks (default: physical memory)" },
    region: { type: "string", help: "the region this node belongs to (announced)", default: "" },
    "gpu-type": { type: "string", help: "this node's GPU type (announced)", default: "h100-80gb" },
    "gpu-slots": { type: "number", help: "GPUs engines may use, integer ≥ 0 (0: no engine can start; logged as a warning)", default: 8 },
    "nvlink-domain": { type: "string", help: "the NVLink domain this node's GPUs share with other nodes' (announced; the region's multicast plans load one node per domain over the network and the rest over NVLink)", default: "" },
    "link-mbit": { type: "number", help: "this node's network link rate in Mbit/s (announced; the region orders multicast chains by it until the data plane has measured the node; 0 = unknown)", default: 0 },
    "region-address": { type: "string", help: "the region's gRPC address host:port to announce to (default: announce nowhere)" },
    "announce-interval-ms": { type: "number", help: "how often to announce to --region-address", default: 1000 },
    "metrics-host": { type: "string", help: "HTTP bind host for /metrics, /livez, /readyz and /healthz", default: "127.0.0.1" },
    "metrics-port": { type: "number", help: "HTTP port for /metrics and the probes (0 = any free port)", default: 0 },
    "engine-host": { type: "string", help: "address engines bind to, also the host of their URLs (default: --data-host)" },
    "tls-ca": { type: "string", help: "PEM CA that signs the region's and engines' peers (mutual TLS on this agent's gRPC and its announces)" },
    "tls-cert": { type: "string", help: "PEM certificate chain of this agent (server and client)" },
    "tls-key": { type: "string", help: "PEM private key of this agent" },
    "tls-server-name": { type: "string", help: "the name this agent's certificate carries, for engines that dial it by IP" },
    "log-level": { type: "string", help: "debug, info, warn or error", default: "info" },
  },
  async run(flags) {
    const nodeId = flags["node-id"];
    if (typeof nodeId !== "string" || nodeId === "") throw new TidegateError("invalid_request", "--node-id is required");
    const transport = String(flags.transport);
    if (transport !== "tcp" && transport !== "verbs" && transport !== "auto") throw new TidegateError("invalid_request", `--transport must be tcp, verbs or auto, got ${JSON.stringify(transport)}`);
    const mem = flags["memory-bytes"];
    if (mem !== undefined && (typeof mem !== "number" || !Number.isInteger(mem) || mem <= 0)) throw new TidegateError("invalid_request", "--memory-bytes must be a positive integer");
    const gpuType = String(flags["gpu-type"]);
    if (gpuType === "") throw new TidegateError("invalid_request", "--gpu-type must not be empty");
    const gpuSlots = nonNegativeInt(flags, "gpu-slots", 0);
    const linkMbit = flags["link-mbit"];
    if (typeof linkMbit !== "number" || !Number.isFinite(linkMbit) || linkMbit < 0) throw new TidegateError("invalid_request", `--link-mbit must be a number ≥ 0, got ${String(linkMbit)}`);
    const nvlinkDomain = String(flags["nvlink-domain"]);
    const intervalMs = nonNegativeInt(flags, "announce-interval-ms", 1);
    const regionAddress = flags["region-address"] === undefined ? undefined : hostPort(String(flags["region-address"]), "region-address");
    const dataHost = String(flags["data-host"]);
    const engineHost = flags["engine-host"] === undefined ? dataHost : String(flags["engine-host"]);
    if (engineHost === "") throw new TidegateError("invalid_request", "--engine-host must not be empty");
    const log = loggerFromFlags(flags, "agent").child({ node: nodeId });
    if (gpuSlots === 0) log.warn("--gpu-slots is 0: this node can host no engine (every StartEngine is refused with RESOURCE_EXHAUSTED)");
    // The supervisor reads the agent's gRPC address at each start (engine-sim --parameters-from); it is set once the server is bound.
    let agent: NodeAgent | undefined;
    const tls = tlsFromFlags(flags);
    const engines = new EngineSupervisor({ engineHost, parametersFrom: () => agent!.address, log: log.child({ part: "engines" }), ...(tls === undefined ? {} : { parametersTls: tls }) });
    agent = NodeAgent.open({ nodeId, dataHost, dataPort: port(flags, "data-port"), transport, memoryBytes: mem, log, region: String(flags.region), gpuType, gpuSlots, engines, nvlinkDomain, linkBytesPerS: (linkMbit * 1e6) / 8 });
    const stopped = untilSignal();
    let announcer: Announcer | undefined;
    let registry: RegistryClient | undefined;
    const a0 = agent;
    const metrics = agentRegistry({ announcement: () => a0.announcement(), regionReachable: () => announcer?.regionReachable });
    // What the gRPC and data ports refuse: logged (rate-limited) and counted on /metrics (core/boundary.ts).
    const boundary = new BoundaryReporter({ clock: new WallClock(), log, registry: metrics });
    const server = await startAgentServer(agent, `${String(flags["grpc-host"])}:${port(flags, "grpc-port")}`, log, tls, boundary);
    const info = agent.info();
    if (regionAddress !== undefined) {
      // The region's certificate names its Service, the address dialled: no server-name override towards it.
      const r = new RegistryClient(regionAddress, Math.max(100, intervalMs), tls === undefined ? undefined : { ...tls, serverName: undefined });
      const a = agent;
      registry = r;
      announcer = new Announcer({ regionAddress, intervalMs, clock: new WallClock(), log, announcement: () => a.announcement(), send: (x) => r.announce(x, Math.max(1000, intervalMs)) });
      announcer.start();
    }
    const ann = announcer;
    const probes = await startProbeServer({
      host: String(flags["metrics-host"]),
      port: port(flags, "metrics-port"),
      registry: metrics,
      log,
      // Ready once the region answered an announce (always, when announcing nowhere).
      ready: () => {
        const ok = ann === undefined || ann.regionReachable === true;
        return { ready: ok, status: ok ? "ok" : `region ${String(regionAddress)} has not answered an announce`, detail: { nodeId } };
      },
    });
    process.stdout.write(`tidegate agent ${nodeId}: grpc ${server.address} data ${info.dataHost}:${info.dataPort} transport ${info.transport}${info.fallback === "" ? "" : ` (${info.fallback})`} metrics ${probes.url}\n`);
    const sig = await stopped;
    log.info("stopping", { signal: sig });
    await announcer?.stop();
    registry?.close();
    await probes.close();
    await server.close();
    await agent.close();
    return 0;
  },
};
