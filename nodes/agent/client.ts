/**
 * A typed client for one node agent (nodes/proto/agent.proto), the gRPC AgentHandle: what the region controller,
 * tests and the data plane bench use to load models, start roles, collect block arrivals and start engines. Failed
 * calls reject with the agent's TidegateError (DataPlaneError with reason, peer, block for transfers) rebuilt from
 * the status metadata.
 */
import { engineSettingsJson } from "../../core/engine-settings.js";
import * as grpc from "@grpc/grpc-js";
import { isTidegateError } from "../../core/errors.js";
import type { BlockArrival, RunResult } from "../../native/index.js";
import type { AgentHandle, EngineInfo, EngineSpec, NodeAnnouncement, RunCall } from "./handle.js";
import type { LoadSpec } from "./node.js";
import { agentService, announcementFromWire, engineFromWire, errorFromStatus, type WireAgentInfo, type WireEngineInfo, type WireLoadReply, type WireRunEvent, type WireVerifyReply } from "./agent-proto.js";
import { channelCredentials, tlsChannelOptions, type TlsFiles } from "../../core/tls.js";

export type { RunCall } from "./handle.js";

type Callback<T> = (err: grpc.ServiceError | null, res?: T) => void;
interface RawClient extends grpc.Client {
  Info(req: object, cb: Callback<WireAgentInfo>): void;
  Load(req: object, cb: Callback<WireLoadReply>): void;
  Verify(req: object, cb: Callback<WireVerifyReply>): void;
  Drop(req: object, cb: Callback<object>): void;
  Run(req: object): grpc.ClientReadableStream<WireRunEvent>;
  StartEngine(req: object, cb: Callback<WireEngineInfo>): void;
  StopEngine(req: object, cb: Callback<WireEngineInfo>): void;
}

/**
 * A client for one agent at `address` (host:port, insecure channel). `nodeId` is what the caller knows the node as
 * (from its announcement); it defaults to the address. close() releases the channel.
 */
export class AgentClient implements AgentHandle {
  readonly nodeId: string;
  private readonly c: RawClient;

  /** `tls`: mutual TLS to an agent started with --tls-* (its certificate checked against `tls.serverName` if set). */
  constructor(
    readonly address: string,
    nodeId?: string,
    tls?: TlsFiles,
  ) {
    this.nodeId = nodeId ?? address;
    const Ctor = agentService();
    this.c = new Ctor(address, channelCredentials(tls), tlsChannelOptions(tls)) as unknown as RawClient;
  }

  private call<T>(fn: (cb: Callback<T>) => void): Promise<T> {
    return new Promise((resolve, reject) => fn((err, res) => (err ? reject(errorFromStatus(err)) : resolve(res as T))));
  }

  /** The agent's whole announcement (Info): identity, node, stores and engines. */
  async info(): Promise<NodeAnnouncement> {
    return announcementFromWire(await this.call<WireAgentInfo>((cb) => this.c.Info({}, cb)));
  }

  announcement(): Promise<NodeAnnouncement> {
    return this.info();
  }

  async load(s: LoadSpec): Promise<{ blockBytes: number; present: number }> {
    const r = await this.call<WireLoadReply>((cb) => this.c.Load({ model: s.model, total_bytes: s.totalBytes, block_count: s.blockCount, fill: s.fill, file_path: s.filePath ?? "", seed: s.seed ?? 0 }, cb));
    return { blockBytes: r.block_bytes, present: r.present };
  }

  async startEngine(s: EngineSpec): Promise<EngineInfo> {
    const req = { instance_id: s.instanceId, model: s.model, gpu: s.gpu, gpus: s.gpus, command_template: s.commandTemplate ?? "", time_scale: s.timeScale ?? 0, start_timeout_ms: s.startTimeoutMs ?? 0, await_blocks: s.awaitBlocks === true, pipeline: s.pipeline ?? "", stage: s.stage ?? "", settings: engineSettingsJson(s.settings) };
    return engineFromWire(await this.call<WireEngineInfo>((cb) => this.c.StartEngine(req, cb)));
  }

  /** Resolves once the engine exited; undefined when the agent has no such engine (NOT_FOUND). */
  async stopEngine(instanceId: string, graceMs: number): Promise<EngineInfo | undefined> {
    try {
      return engineFromWire(await this.call<WireEngineInfo>((cb) => this.c.StopEngine({ instance_id: instanceId, grace_ms: Math.max(1, Math.round(graceMs)) }, cb)));
    } catch (err) {
      if (isTidegateError(err, "not_found")) return undefined;
      throw err;
    }
  }

  async verify(model: string, seed: number): Promise<{ firstMismatch: number; present: number }> {
    const v = await this.call<WireVerifyReply>((cb) => this.c.Verify({ model, seed }, cb));
    return { firstMismatch: v.first_mismatch, present: v.present };
  }

  async drop(model: string): Promise<void> {
    await this.call((cb) => this.c.Drop({ model }, cb));
  }

  /** Runs the agent's role; `onBlock` sees each arrival as it streams in. Aborting `signal` cancels the call. */
  run(r: RunCall, onBlock?: (a: BlockArrival) => void, signal?: AbortSignal): Promise<RunResult> {
    const stream = this.c.Run({
      model: r.model,
      plan_json: JSON.stringify(r.plan),
      run_id: r.runId,
      addresses: Object.entries(r.addresses).map(([node_id, a]) => ({ node_id, host: a.host, port: a.port })),
      stall_ms: r.stallMs ?? 0,
      connect_ms: r.connectMs ?? 0,
    });
    signal?.addEventListener("abort", () => stream.cancel(), { once: true });
    const arrivals: BlockArrival[] = [];
    return new Promise((resolve, reject) => {
      let done: RunResult | undefined;
      stream.on("data", (ev: WireRunEvent) => {
        if (ev.block) {
          const a = { block: ev.block.block, from: ev.block.from, atMs: ev.block.at_ms, bytes: ev.block.bytes };
          arrivals.push(a);
          onBlock?.(a);
        }
        if (ev.done) {
          const p = ev.done.profile;
          const profile = p === null
            ? { startMonoMs: 0, dialMs: 0, firstByteMs: -1, lastByteMs: -1, checksumMs: 0, recvCalls: 0, sendCalls: 0, waits: 0 }
            : { startMonoMs: p.start_mono_ms, dialMs: p.dial_ms, firstByteMs: p.first_byte_ms, lastByteMs: p.last_byte_ms, checksumMs: p.checksum_ms, recvCalls: p.recv_calls, sendCalls: p.send_calls, waits: p.waits };
          done = { bytesSent: ev.done.bytes_sent, bytesReceived: ev.done.bytes_received, elapsedMs: ev.done.elapsed_ms, arrivals, profile };
        }
      });
      stream.on("error", (e: grpc.ServiceError) => reject(errorFromStatus(e)));
      stream.on("end", () => (done ? resolve(done) : reject(errorFromStatus({ code: grpc.status.UNKNOWN, details: "run stream ended without a result", message: "run stream ended without a result", metadata: new grpc.Metadata(), name: "Error" }))));
    });
  }

  close(): void {
    this.c.close();
  }
}
