/**
 * A typed client for one node agent (region/proto/agent.proto): what the region controller, tests and the data
 * plane bench use to load models, start roles and collect block arrivals. Failed calls reject with the agent's
 * DataPlaneError (reason, peer, block) rebuilt from the status metadata.
 */
import * as grpc from "@grpc/grpc-js";
import type { BlockArrival, RunResult } from "../../native/index.js";
import type { MulticastPlan } from "../multicast/schedule.js";
import type { AgentInfo, LoadSpec } from "./node.js";
import { agentService, errorFromStatus, type WireAgentInfo, type WireLoadReply, type WireRunEvent, type WireVerifyReply } from "./proto.js";

type Callback<T> = (err: grpc.ServiceError | null, res?: T) => void;
interface RawClient extends grpc.Client {
  Info(req: object, cb: Callback<WireAgentInfo>): void;
  Load(req: object, cb: Callback<WireLoadReply>): void;
  Verify(req: object, cb: Callback<WireVerifyReply>): void;
  Drop(req: object, cb: Callback<object>): void;
  Run(req: object): grpc.ClientReadableStream<WireRunEvent>;
}

/** One Run call: the plan, its run id (same on every node) and every node's data address. */
export interface RunCall {
  model: string;
  plan: MulticastPlan;
  runId: number;
  addresses: Record<string, { host: string; port: number }>;
  stallMs?: number;
  connectMs?: number;
}

/** A client for one agent at `address` (host:port, insecure channel). close() releases it. */
export class AgentClient {
  private readonly c: RawClient;

  constructor(address: string) {
    const Ctor = agentService();
    this.c = new Ctor(address, grpc.credentials.createInsecure()) as unknown as RawClient;
  }

  private call<T>(fn: (cb: Callback<T>) => void): Promise<T> {
    return new Promise((resolve, reject) => fn((err, res) => (err ? reject(errorFromStatus(err)) : resolve(res as T))));
  }

  async info(): Promise<AgentInfo> {
    const i = await this.call<WireAgentInfo>((cb) => this.c.Info({}, cb));
    return { nodeId: i.node_id, dataHost: i.data_host, dataPort: i.data_port, transport: i.transport, fallback: i.fallback, memoryBytes: i.memory_bytes };
  }

  async load(s: LoadSpec): Promise<WireLoadReply> {
    return this.call((cb) => this.c.Load({ model: s.model, total_bytes: s.totalBytes, block_count: s.blockCount, fill: s.fill, file_path: s.filePath ?? "", seed: s.seed ?? 0 }, cb));
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
