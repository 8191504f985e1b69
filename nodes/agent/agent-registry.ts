/**
 * The AgentRegistry service (nodes/proto/agent.proto), which the REGION serves and node agents call: every agent
 * started with --region-address announces itself (NodeAnnouncement: identity, GPU slots, stores, engines) every
 * interval. addAgentRegistryService plugs a handler into the region's gRPC server; RegistryClient is the agent's
 * side (announcer.ts).
 */
import * as grpc from "@grpc/grpc-js";
import { TidegateError } from "../../core/errors.js";
import type { NodeAnnouncement } from "./handle.js";
import { announcementFromWire, announcementToWire, errorFromStatus, registryService, statusOf, type WireAgentInfo, type WireAnnounceReply } from "./agent-proto.js";
import { channelCredentials, tlsChannelOptions, type TlsFiles } from "../../core/tls.js";

/** The region's answer: `known` = the region has adopted this node; `message` says why not, or anything worth a log line. */
export interface AnnounceReply {
  known: boolean;
  message: string;
}

/**
 * Adds AgentRegistry to `server` (before bindAsync). `onAnnounce` sees each announcement converted from the wire;
 * a throw becomes the call's gRPC status (a TidegateError keeps its code in `tidegate-code` metadata).
 */
export function addAgentRegistryService(server: grpc.Server, onAnnounce: (a: NodeAnnouncement) => AnnounceReply): void {
  server.addService(registryService().service, {
    Announce: (call: grpc.ServerUnaryCall<WireAgentInfo, WireAnnounceReply>, cb: grpc.sendUnaryData<WireAnnounceReply>) => {
      try {
        const a = announcementFromWire(call.request);
        if (a.nodeId === "") throw new TidegateError("invalid_request", "AgentInfo.node_id must not be empty", { param: "node_id" });
        const r = onAnnounce(a);
        cb(null, { known: r.known, message: r.message });
      } catch (err) {
        cb(statusOf(err) as grpc.ServiceError, null);
      }
    },
  });
}

interface RawRegistry extends grpc.Client {
  Announce(req: WireAgentInfo, opts: grpc.CallOptions, cb: (err: grpc.ServiceError | null, res?: WireAnnounceReply) => void): void;
}

/** An agent's client for the region's AgentRegistry at `address` (host:port; mutual TLS with `tls`). */
export class RegistryClient {
  private readonly c: RawRegistry;

  /**
   * `maxReconnectBackoffMs` caps gRPC's reconnect backoff (default 120 s) so a region that comes back is reached
   * within about one announce interval.
   */
  constructor(
    readonly address: string,
    maxReconnectBackoffMs = 1000,
    tls?: TlsFiles,
  ) {
    const Ctor = registryService();
    this.c = new Ctor(address, channelCredentials(tls), {
      ...tlsChannelOptions(tls),
      "grpc.initial_reconnect_backoff_ms": Math.min(maxReconnectBackoffMs, 1000),
      "grpc.max_reconnect_backoff_ms": maxReconnectBackoffMs,
    }) as unknown as RawRegistry;
  }

  /** One Announce call with a deadline; rejects with TidegateError (upstream_error when the region is unreachable). */
  announce(a: NodeAnnouncement, deadlineMs: number): Promise<AnnounceReply> {
    return new Promise((resolve, reject) =>
      this.c.Announce(announcementToWire(a), { deadline: Date.now() + deadlineMs }, (err, res) => (err ? reject(errorFromStatus(err)) : resolve({ known: res!.known, message: res!.message }))),
    );
  }

  close(): void {
    this.c.close();
  }
}
