/**
 * `tidegate agent`: the node agent, one per GPU node. Holds model parameter blocks in host memory and runs this
 * node's role in multicast plans over the native data plane (region/agent/README.md).
 */
import type { Command } from "../command.js";
import { TidegateError } from "../../core/errors.js";
import { loggerFromFlags } from "../flags.js";
import { NodeAgent } from "../../region/agent/node.js";
import { startAgentServer } from "../../region/agent/server.js";
import { untilSignal } from "./dev.js";

function port(flags: Record<string, unknown>, name: string): number {
  const v = flags[name];
  if (typeof v !== "number" || !Number.isInteger(v) || v < 0 || v > 65535) throw new TidegateError("invalid_request", `--${name} must be an integer in [0, 65535], got ${String(v)}`);
  return v;
}

export const command: Command = {
  name: "agent",
  summary: "run a node agent: model blocks in host memory, multicast roles over the native data plane",
  description: [
    "Serves the NodeAgent gRPC service (region/proto/agent.proto) for one node: Load a model's blocks (empty, from",
    "a packed file, or a seeded pattern), Run this node's role in a multicast plan (blocks stream back as they",
    "arrive), Verify, Drop. Data moves on a separate port over TCP, or RDMA verbs where a device exists (--transport",
    "auto falls back to TCP with a log line). When ready it prints one line on stdout:",
    "  tidegate agent <node-id>: grpc <host:port> data <host:port> transport <tcp|verbs>",
    "Stops cleanly on SIGINT/SIGTERM.",
    "",
    "Example:",
    "  tidegate agent --node-id gpu-07 --data-host 10.0.0.7 --grpc-port 7070",
  ].join("\n"),
  flags: {
    "node-id": { type: "string", help: "this node's id in multicast plans (required)" },
    "data-host": { type: "string", help: "data-plane bind address, also the address peers dial", default: "127.0.0.1" },
    "data-port": { type: "number", help: "data-plane port (0 = any free port)", default: 0 },
    "grpc-host": { type: "string", help: "gRPC bind host", default: "127.0.0.1" },
    "grpc-port": { type: "number", help: "gRPC port (0 = any free port)", default: 0 },
    transport: { type: "string", help: "tcp, verbs or auto", default: "auto" },
    "memory-bytes": { type: "number", help: "host memory the agent may use for blocks (default: physical memory)" },
    "log-level": { type: "string", help: "debug, info, warn or error", default: "info" },
  },
  async run(flags) {
    const nodeId = flags["node-id"];
    if (typeof nodeId !== "string" || nodeId === "") throw new TidegateError("invalid_request", "--node-id is required");
    const transport = String(flags.transport);
    if (transport !== "tcp" && transport !== "verbs" && transport !== "auto") throw new TidegateError("invalid_request", `--transport must be tcp, verbs or auto, got ${JSON.stringify(transport)}`);
    const mem = flags["memory-bytes"];
    if (mem !== undefined && (typeof mem !== "number" || !Number.isInteger(mem) || mem <= 0)) throw new TidegateError("invalid_request", "--memory-bytes must be a positive integer");
    const log = loggerFromFlags(flags, "agent").child({ node: nodeId });
    const agent = NodeAgent.open({ nodeId, dataHost: String(flags["data-host"]), dataPort: port(flags, "data-port"), transport, memoryBytes: mem, log });
    const stopped = untilSignal();
    const server = await startAgentServer(agent, `${String(flags["grpc-host"])}:${port(flags, "grpc-port")}`, log);
    const info = agent.info();
    process.stdout.write(`tidegate agent ${nodeId}: grpc ${server.address} data ${info.dataHost}:${info.dataPort} transport ${info.transport}\n`);
    const sig = await stopped;
    log.info("stopping", { signal: sig });
    await server.close();
    await agent.close();
    return 0;
  },
};
