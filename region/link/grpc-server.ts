/**
 * The region side of the gRPC RegionLink (region/proto/region.proto): serves a RegionService to global routers.
 *
 * - Telemetry: a snapshot at once, then every interval (≤ 1 s) until the caller cancels, and one more at once
 *   whenever an instance is added, removed or changes state (RegionService.onChange).
 * - Dispatch: streams the generation; token events that are ready together (produced before the event loop's
 *   check phase) go out as one message, so a burst from the engine costs one frame, not one per token; writes wait
 *   for the transport to drain (backpressure). Cancelling the call aborts the generation upstream. Failures carry
 *   the TidegateError code in the status metadata (`tidegate-code`, `tidegate-started`).
 * - DispatchMux: many generations over one bidirectional stream (mux-server.ts); what GrpcRegionLink uses with a
 *   region that does not take the framed dispatch connection, which this port serves too (portListener below,
 *   mux-socket.ts).
 * - SendTargets: the service's ack.
 * Sockets get TCP_NODELAY so single token frames are not held back by Nagle's algorithm.
 * - Boundary refusals (issue 32): what the port refuses is reported through a BoundaryReporter on port
 *   `region_grpc` (grpcBoundary below: bad preface, other HTTP/2 protocol errors, rapid reset, undecodable or
 *   oversized messages).
 */
import * as net from "node:net";
import * as tls from "node:tls";
import * as grpc from "@grpc/grpc-js";
import { BoundaryReporter } from "../../core/boundary.js";
import { WallClock, type Clock } from "../../core/clock.js";
import { TidegateError, toTidegateError } from "../../core/errors.js";
import { silentLogger, type Logger } from "../../core/log.js";
import type { EngineEvent } from "../../core/ports.js";
import type { EventSink, Flow } from "../../core/push.js";
import {
  CODE_KEY,
  STARTED_KEY,
  doneToWire,
  instancesToWire,
  regionService,
  type WireInstances,
  requestFromWire,
  targetsFromWire,
  telemetryToWire,
  type WireDispatchEvents,
  type WireDispatchRequest,
  type WireMuxEvent,
  type WireMuxUp,
  type WireTargets,
  type WireTargetsAck,
  type WireTelemetry,
} from "./region-proto.js";
import { grpcBoundary } from "../../core/grpc-boundary.js";
import { serveMux } from "./mux-server.js";
import { DEFAULT_TELEMETRY_INTERVAL_MS, type RegionService } from "./service.js";
import { tlsContextOptions, type TlsFiles } from "../../core/tls.js";
import { MUX_ALPN, MUX_MAGIC } from "./mux-frame.js";
import { serveMuxSocket, splitAddress } from "./mux-socket.js";

export interface RegionGrpcServerOptions {
  /** host:port to bind; port 0 picks a free port (default 127.0.0.1:0). */
  address?: string;
  tls?: TlsFiles;
  /** Clock for telemetry periods (default WallClock). */
  clock?: Clock;
  log?: Logger;
  /** Adds more services to the same server before it binds (the region adds the agents' registry). */
  extraServices?: (server: grpc.Server) => void;
  /** Where refusals at this port are reported (default: a reporter logging to `log`, counting nowhere). */
  boundary?: BoundaryReporter;
}

/** A running server. `address` is host:port with the bound port. */
export interface RegionGrpcServer {
  address: string;
  port: number;
  /** Telemetry streams open now: > 0 while the global tier (or a planner) follows this region. */
  telemetryStreams(): number;
  /** Stops accepting calls, cancels the open ones, and releases the port. */
  close(): Promise<void>;
}

const MIN_TELEMETRY_INTERVAL_MS = 50;

function statusOf(err: unknown, started: boolean): Partial<grpc.StatusObject> {
  const te = toTidegateError(err);
  const metadata = new grpc.Metadata();
  metadata.set(CODE_KEY, te.code);
  metadata.set(STARTED_KEY, started ? "1" : "0");
  return { code: te.grpcCode, details: te.message, metadata };
}

/**
 * Streams one generation over `call` (the region's push path, core/push.ts), batching the tokens that are ready in
 * the same event-loop turn into one message; while the call's transport is full the engine is paused until 'drain'.
 */
function serveDispatch(service: RegionService, call: grpc.ServerWritableStream<WireDispatchRequest, WireDispatchEvents>, log: Logger): void {
  const upstream = new AbortController();
  let finished = false;
  call.on("cancelled", () => {
    if (!finished) upstream.abort(new TidegateError("cancelled", "the router cancelled the request"));
  });
  let started = false;
  let texts: string[] = [];
  let tokens: number[] = [];
  let flushScheduled = false;
  let full = false;
  let flow: Flow | undefined;
  let pauseAsked = false;
  const flush = () => {
    flushScheduled = false;
    if (texts.length === 0 || upstream.signal.aborted) return;
    const msg: WireDispatchEvents = { texts, tokens, done: null };
    texts = [];
    tokens = [];
    if (!call.write(msg) && !full) {
      full = true;
      call.once("drain", () => {
        full = false;
        flow?.resume();
      });
    }
  };
  const fail = (err: unknown) => {
    finished = true;
    if (upstream.signal.aborted) return; // the caller is gone: nobody to tell
    flush();
    const te = toTidegateError(err);
    if (te.code === "internal") log.error("dispatch failed", { err });
    call.emit("error", statusOf(te, started));
  };
  let req: ReturnType<typeof requestFromWire>;
  try {
    req = requestFromWire(call.request);
  } catch (err) {
    return fail(err);
  }
  const sink: EventSink = {
    event(ev: EngineEvent) {
      if (finished || upstream.signal.aborted) return false;
      started = true;
      if (ev.type === "token") {
        texts.push(ev.text);
        tokens.push(ev.tokens);
        if (!flushScheduled) {
          flushScheduled = true;
          setImmediate(flush);
        }
        if (!full) return true;
        if (flow === undefined) pauseAsked = true;
        return false;
      }
      finished = true;
      const msg: WireDispatchEvents = { texts, tokens, done: doneToWire(ev) };
      texts = [];
      tokens = [];
      call.write(msg);
      call.end();
      return true;
    },
    fail,
  };
  flow = service.open(req, sink, upstream.signal);
  if (pauseAsked && !full) flow.resume();
}

/** Starts the gRPC server for `service`; resolves once bound. */
export async function startRegionGrpcServer(service: RegionService, opts: RegionGrpcServerOptions = {}): Promise<RegionGrpcServer> {
  const clock = opts.clock ?? new WallClock();
  const log = opts.log ?? silentLogger;
  const reporter = opts.boundary ?? new BoundaryReporter({ clock, log });
  const boundary = grpcBoundary(reporter, "region_grpc", clock);
  // Channelz stays on here: with it off, grpc-js 1.14 does not track sessions and forceShutdown() leaves open
  // connections serving.
  const server = new grpc.Server({ "grpc.keepalive_permit_without_calls": 1, "grpc.http2.min_ping_interval_without_data_ms": 5000 });
  const telemetryCalls = new Set<grpc.ServerWritableStream<unknown, unknown>>();
  server.addService(regionService().service, {
    Telemetry(call: grpc.ServerWritableStream<{ interval_ms: number }, WireTelemetry>) {
      const entry = call as grpc.ServerWritableStream<unknown, unknown>;
      telemetryCalls.add(entry);
      const asked = call.request.interval_ms;
      const intervalMs = asked === 0 ? DEFAULT_TELEMETRY_INTERVAL_MS : Math.min(DEFAULT_TELEMETRY_INTERVAL_MS, Math.max(MIN_TELEMETRY_INTERVAL_MS, asked));
      const send = () => {
        if (call.cancelled || call.writableEnded) return;
        try {
          call.write(telemetryToWire(service.snapshot()));
        } catch (err) {
          log.error("telemetry snapshot failed", { region: service.region, err });
        }
      };
      send();
      const timer = clock.every(intervalMs, send);
      // What serves changed (an instance came up, drained, went away): one snapshot at once, after the burst of
      // changes in this turn, so the router does not route on the old set until the next tick.
      let pushing: { cancel(): void } | undefined;
      const unsubscribe = service.onChange?.(() => {
        pushing ??= clock.after(0, () => {
          pushing = undefined;
          send();
        });
      });
      const stop = () => {
        timer.cancel();
        pushing?.cancel();
        unsubscribe?.();
        telemetryCalls.delete(entry);
      };
      call.once("cancelled", stop);
      call.once("close", stop);
      call.once("finish", stop);
    },
    Dispatch(call: grpc.ServerWritableStream<WireDispatchRequest, WireDispatchEvents>) {
      serveDispatch(service, call, log);
    },
    DispatchMux(call: grpc.ServerDuplexStream<WireMuxUp, WireMuxEvent[]>) {
      serveMux(service, call, log);
    },
    Instances(_call: grpc.ServerUnaryCall<object, WireInstances>, callback: grpc.sendUnaryData<WireInstances>) {
      try {
        callback(null, instancesToWire(service.listing()));
      } catch (err) {
        const status = statusOf(err, false);
        callback({ code: status.code ?? grpc.status.INTERNAL, details: status.details ?? "", metadata: status.metadata ?? new grpc.Metadata(), name: "TidegateError", message: status.details ?? "" });
      }
    },
    SendTargets(call: grpc.ServerUnaryCall<WireTargets, WireTargetsAck>, callback: grpc.sendUnaryData<WireTargetsAck>) {
      try {
        const ack = service.acceptTargets(targetsFromWire(call.request));
        callback(null, { region: ack.region, decision_id: ack.decisionId, accepted: ack.accepted });
      } catch (err) {
        const status = statusOf(err, false);
        callback({ code: status.code ?? grpc.status.INTERNAL, details: status.details ?? "", metadata: status.metadata ?? new grpc.Metadata(), name: "TidegateError", message: status.details ?? "" });
      }
    },
  });

  opts.extraServices?.(server);
  const address = opts.address ?? "127.0.0.1:0";
  const { host: bindHost } = splitAddress(address);
  // One port for both protocols (portListener below): gRPC connections go to grpc-js through its connection
  // injector, framed dispatch connections (mux-socket.ts) to serveMuxSocket.
  const injector = server.createConnectionInjector(grpc.ServerCredentials.createInsecure());
  const listener = await portListener(address, opts.tls, {
    grpc: (socket) => injector.injectConnection(socket),
    mux: (socket, rest) => serveMuxSocket(service, socket, rest, { clock, log, refuse: (reason, peer, detail) => reporter.refuse("region_grpc", reason, peer, detail) }),
    refuse: (peer, detail) => reporter.refuse("region_grpc", "bad_preface", peer, detail),
  });
  const port = listener.port;
  boundary.watch(server);
  const host = bindHost.includes(":") ? `[${bindHost}]` : bindHost;
  log.info("region gRPC server listening", { region: service.region, address: `${host}:${port}` });
  return {
    address: `${host}:${port}`,
    port,
    telemetryStreams: () => telemetryCalls.size,
    close: () =>
      new Promise<void>((resolve) => {
        // Telemetry streams end cleanly (the router reconnects); in-flight dispatches are cancelled, which aborts
        // their generations upstream.
        for (const call of telemetryCalls) call.end();
        telemetryCalls.clear();
        server.forceShutdown();
        injector.destroy();
        listener.close();
        resolve();
      }),
  };
}

/** How long a new connection may take to send its first bytes before it is refused (bad_preface). */
export const PREFACE_TIMEOUT_MS = 10_000;

interface PortRoutes {
  /** A gRPC (HTTP/2) connection: plaintext (what was read to route it put back), or TLS whose ALPN is h2 (already verified). */
  grpc(socket: net.Socket): void;
  /** A framed dispatch connection whose magic was read; `rest` followed it. */
  mux(socket: net.Socket, rest: Buffer): void;
  refuse(peer: string | undefined, detail: string): void;
}

/**
 * The region's port: TCP, or TLS requiring a client certificate signed by the CA. A TLS connection is routed by its
 * ALPN (h2 → gRPC, MUX_ALPN → the framed dispatch connection); a plaintext one by its first bytes (MUX_MAGIC → the
 * framed connection, anything else — an HTTP/2 preface or garbage — to gRPC, which refuses what is not HTTP/2 as
 * before). The bytes read to decide are handed on: a plaintext gRPC connection gets them back in its buffer
 * (`unshift`), which node's http2 session reads before its socket's handle.
 */
async function portListener(address: string, tlsFiles: TlsFiles | undefined, routes: PortRoutes): Promise<{ port: number; close(): void }> {
  const { host, port } = splitAddress(address);
  const sockets = new Set<net.Socket>();
  const sniff = (socket: net.Socket, encrypted: boolean) => {
    const peer = socket.remoteAddress;
    let got: Buffer = Buffer.alloc(0);
    const timer = setTimeout(() => {
      routes.refuse(peer, `no preface within ${PREFACE_TIMEOUT_MS} ms; closed`);
      socket.destroy();
    }, PREFACE_TIMEOUT_MS);
    const onData = (chunk: Buffer) => {
      got = got.length === 0 ? chunk : Buffer.concat([got, chunk]);
      const n = Math.min(got.length, MUX_MAGIC.length);
      const isMux = got.subarray(0, n).equals(MUX_MAGIC.subarray(0, n));
      if (isMux && got.length < MUX_MAGIC.length) return;
      clearTimeout(timer);
      socket.off("data", onData);
      socket.pause();
      if (isMux) {
        routes.mux(socket, got.subarray(MUX_MAGIC.length));
        socket.resume();
      } else if (encrypted) {
        routes.refuse(peer, "a TLS connection that chose the dispatch protocol sent something else; closed");
        socket.destroy();
      } else {
        // Back into the socket's buffer: node's http2 session reads what a socket already holds before its handle.
        socket.unshift(got);
        routes.grpc(socket);
      }
    };
    socket.on("data", onData);
    socket.once("close", () => clearTimeout(timer));
  };
  const track = (socket: net.Socket) => {
    sockets.add(socket);
    socket.once("close", () => sockets.delete(socket));
    socket.setNoDelay(true);
    socket.on("error", () => {}); // each route reports its own; an unrouted socket just goes
  };
  let srv: net.Server;
  if (tlsFiles === undefined) {
    srv = net.createServer((socket) => {
      track(socket);
      sniff(socket, false);
    });
  } else {
    srv = tls.createServer({ ...tlsContextOptions(tlsFiles), requestCert: true, rejectUnauthorized: true, ALPNProtocols: ["h2", MUX_ALPN] }, (socket) => {
      track(socket);
      if (socket.alpnProtocol === MUX_ALPN) sniff(socket, true);
      else routes.grpc(socket);
    });
  }
  await new Promise<void>((resolve, reject) => {
    srv.once("error", (err) => reject(new TidegateError("invalid_config", `cannot bind gRPC on ${address}: ${err.message}`, { cause: err })));
    srv.listen({ host, port }, () => resolve());
  });
  return {
    port: (srv.address() as net.AddressInfo).port,
    close() {
      srv.close();
      for (const s of sockets) s.destroy();
    },
  };
}
