/**
 * The node agent's gRPC server (nodes/proto/agent.proto) over a NodeAgent. Wire input is validated (plan JSON
 * through planFromJson, then validatePlan inside NodeAgent.run); failures become gRPC statuses carrying the
 * data-plane reason, peer and block in metadata. Cancelling a Run call cancels the transfer. Once bound, the server
 * tells the agent its address (NodeAgent.setGrpcAddress) for announcements and engine-sim's --parameters-from.
 * What the port refuses (bad preface, protocol errors, rapid reset, undecodable or oversized messages) is reported
 * through a BoundaryReporter on port `agent_grpc` (region/link/grpc-server.ts grpcBoundary; README "Boundary
 * refusals").
 */
import { parseEngineSettingsJson } from "../../core/engine-settings.js";
import * as grpc from "@grpc/grpc-js";
import { BoundaryReporter, DATA_REFUSALS } from "../../core/boundary.js";
import { WallClock } from "../../core/clock.js";
import { TidegateError } from "../../core/errors.js";
import type { Logger } from "../../core/log.js";
import { planFromJson } from "../multicast/plan-json.js";
import type { NodeAgent } from "./node.js";
import { serverCredentials, type TlsFiles } from "../../core/tls.js";
import { grpcBoundary } from "../../core/grpc-boundary.js";
import {
  agentService,
  announcementToWire,
  engineToWire,
  statusOf,
  type WireAgentInfo,
  type WireEngineInfo,
  type WireLoadReply,
  type WireLoadRequest,
  type WireRunEvent,
  type WireRunRequest,
  type WireStartEngineRequest,
  type WireVerifyReply,
} from "./agent-proto.js";

/** A running agent gRPC server; close() stops it (forcefully after 2 s). */
export interface AgentGrpcServer {
  address: string;
  port: number;
  close(): Promise<void>;
}

type Unary<Req, Res> = (call: grpc.ServerUnaryCall<Req, Res>, cb: grpc.sendUnaryData<Res>) => void;

function unary<Req, Res>(fn: (req: Req) => Res): Unary<Req, Res> {
  return (call, cb) => {
    try {
      cb(null, fn(call.request));
    } catch (err) {
      cb(statusOf(err) as grpc.ServiceError, null);
    }
  };
}

function unaryAsync<Req, Res>(fn: (req: Req) => Promise<Res>): Unary<Req, Res> {
  return (call, cb) => {
    let p: Promise<Res>;
    try {
      p = fn(call.request);
    } catch (err) {
      p = Promise.reject(err);
    }
    p.then(
      (res) => cb(null, res),
      (err: unknown) => cb(statusOf(err) as grpc.ServiceError, null),
    );
  };
}

/** How often the data port's refusals are drained from the native addon and reported. */
export const DATA_REFUSALS_POLL_MS = 1000;

/**
 * Serves `agent` on `address` (host:port, port 0 = any). Refusals at this port (`agent_grpc`) and at the agent's
 * data port (`agent_data`, drained from the addon every DATA_REFUSALS_POLL_MS) go to `boundary` (default: a
 * reporter that only logs to `log`).
 */
export async function startAgentServer(agent: NodeAgent, address: string, log: Logger, tls?: TlsFiles, boundary?: BoundaryReporter): Promise<AgentGrpcServer> {
  const clock = new WallClock();
  const reporter = boundary ?? new BoundaryReporter({ clock, log });
  const refusals = grpcBoundary(reporter, "agent_grpc", clock);
  reporter.declare("agent_data", DATA_REFUSALS);
  const drainData = () => {
    for (const r of agent.dataRefusals()) reporter.refuse("agent_data", r.reason, r.peer, "", r.count);
  };
  const server = new grpc.Server();
  server.addService(agentService().service, {
    Info: unary<object, WireAgentInfo>(() => announcementToWire(agent.announcement())),
    StartEngine: unaryAsync<WireStartEngineRequest, WireEngineInfo>(async (req) => {
      const e = await agent.startEngine({
        instanceId: req.instance_id,
        model: req.model,
        gpu: req.gpu,
        gpus: req.gpus,
        commandTemplate: req.command_template,
        timeScale: req.time_scale === 0 ? undefined : req.time_scale,
        startTimeoutMs: req.start_timeout_ms === 0 ? undefined : req.start_timeout_ms,
        awaitBlocks: req.await_blocks === true,
        ...(req.pipeline === "" || req.pipeline === undefined ? {} : { pipeline: req.pipeline }),
        ...(req.stage === "" || req.stage === undefined ? {} : { stage: req.stage }),
        ...(req.settings === "" || req.settings === undefined ? {} : { settings: parseEngineSettingsJson(req.settings, "settings") }),
      });
      return engineToWire(e);
    }),
    StopEngine: unaryAsync<{ instance_id: string; grace_ms: number }, WireEngineInfo>(async (req) => {
      const e = await agent.stopEngine(req.instance_id, req.grace_ms === 0 ? 3000 : req.grace_ms);
      if (e === undefined) throw new TidegateError("not_found", `no engine ${JSON.stringify(req.instance_id)} on node ${agent.info().nodeId}`, { param: "instance_id" });
      return engineToWire(e);
    }),
    Load: unaryAsync<WireLoadRequest, WireLoadReply>(async (req) => {
      if (req.fill !== "empty" && req.fill !== "file" && req.fill !== "pattern")
        throw new TidegateError("invalid_request", `LoadRequest.fill must be empty, file or pattern, got ${JSON.stringify(req.fill)}`, { param: "fill" });
      if (req.model === "") throw new TidegateError("invalid_request", "LoadRequest.model must not be empty", { param: "model" });
      const r = await agent.load({ model: req.model, totalBytes: req.total_bytes, blockCount: req.block_count, fill: req.fill, filePath: req.file_path, seed: req.seed });
      return { model: req.model, block_count: req.block_count, block_bytes: r.blockBytes, total_bytes: req.total_bytes, present: r.present };
    }),
    Verify: unary<{ model: string; seed: number }, WireVerifyReply>((req) => {
      const v = agent.verify(req.model, req.seed);
      return { first_mismatch: v.firstMismatch, present: v.present };
    }),
    Drop: unary<{ model: string }, object>((req) => {
      agent.drop(req.model);
      return {};
    }),
    Run: (call: grpc.ServerWritableStream<WireRunRequest, WireRunEvent>) => {
      const ac = new AbortController();
      call.on("cancelled", () => ac.abort());
      const req = call.request;
      let started: Promise<void>;
      try {
        const plan = planFromJson(req.plan_json);
        const addresses = Object.fromEntries(req.addresses.map((a) => [a.node_id, { host: a.host, port: a.port }]));
        started = agent
          .run(
            { model: req.model, plan, runId: req.run_id, addresses, stallMs: req.stall_ms || undefined, connectMs: req.connect_ms || undefined },
            (a) => call.write({ block: { block: a.block, from: a.from, at_ms: a.atMs, bytes: a.bytes }, done: null }),
            ac.signal,
          )
          .then((r) => {
            const p = r.profile;
            const profile = { start_mono_ms: p.startMonoMs, dial_ms: p.dialMs, first_byte_ms: p.firstByteMs, last_byte_ms: p.lastByteMs, checksum_ms: p.checksumMs, recv_calls: p.recvCalls, send_calls: p.sendCalls, waits: p.waits };
            call.write({ block: null, done: { bytes_sent: r.bytesSent, bytes_received: r.bytesReceived, elapsed_ms: r.elapsedMs, profile } });
            call.end();
          });
      } catch (err) {
        started = Promise.reject(err);
      }
      started.catch((err: unknown) => {
        if (!ac.signal.aborted) call.emit("error", statusOf(err));
      });
    },
  });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync(address, serverCredentials(tls), (err, p) => (err ? reject(err) : resolve(p))),
  );
  refusals.watch(server);
  const host = address.slice(0, address.lastIndexOf(":"));
  agent.setGrpcAddress(`${host}:${port}`);
  log.info("agent grpc listening", { address: `${host}:${port}` });
  const dataTimer = clock.every(DATA_REFUSALS_POLL_MS, drainData);
  return {
    address: `${host}:${port}`,
    port,
    close: () =>
      new Promise<void>((resolve) => {
        dataTimer.cancel();
        drainData();
        server.tryShutdown(() => resolve());
        setTimeout(() => server.forceShutdown(), 2000).unref();
      }),
  };
}
