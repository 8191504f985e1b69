/**
 * The global side of the gRPC RegionLink (region/proto/region.proto): one channel per region process.
 *
 * - subscribe: one Telemetry stream shared by all subscribers while any exists; when it fails or ends (the region
 *   restarted, the network broke) it is reopened after a backoff that doubles from `reconnectInitialMs` to
 *   `reconnectMaxMs` and resets once telemetry flows again. The channel itself reconnects with the same bounds.
 * - dispatch: a request on the link's one DispatchMux stream (mux-client.ts; opened on first use, reopened on the
 *   next dispatch after it fails), on a framed connection to the same port (mux-socket.ts), or on the gRPC
 *   DispatchMux call when the region does not take one. Aborting the signal or stopping the iteration sends a cancel, and the region
 *   cancels the generation. When the stream breaks, every request on it fails. A failure before the first event is a TidegateError with the region's code
 *   (model_not_found, no_region_available, upstream_error, …) or upstream_error when the region is unreachable, so
 *   the router can retry elsewhere; a failure after it is upstream_error.
 * - submit: `dispatch` reported through callbacks (stream-callbacks.ts), text and finish included.
 * - sendTargets: unary with a deadline; resolves to the region's ack.
 */
import * as grpc from "@grpc/grpc-js";
import { callbackSink } from "./stream-callbacks.js";
import { WallClock, type Clock, type Timer } from "../../core/clock.js";
import { ERROR_CODES, TidegateError, type ErrorCode } from "../../core/errors.js";
import { silentLogger, type Logger } from "../../core/log.js";
import type { RegionName } from "../../core/models.js";
import type { EngineEvent, GenerateRequest, LinkCallbacks, RegionInstances, RegionLink, RegionTargets, RegionTelemetry, TargetsAck, Unsubscribe } from "../../core/ports.js";
import {
  CODE_KEY,
  STARTED_KEY,
  ackFromWire,
  doneFromWire,
  instancesFromWire,
  regionService,
  type WireInstances,
  requestToWire,
  targetsToWire,
  telemetryFromWire,
  type WireMuxError,
  type WireMuxEvent,
  type WireMuxUp,
  type WireTargetsAck,
  type WireTelemetry,
} from "./region-proto.js";
import { DEFAULT_TELEMETRY_INTERVAL_MS } from "./service.js";
import { MuxStream, type MuxClientCall, type MuxListener, type MuxRequest } from "./mux-client.js";
import { NegotiatedMuxCall } from "./mux-socket.js";
import { refused, streamOf, type EventSink, type Flow } from "../../core/push.js";
import { channelCredentials, tlsChannelOptions, type TlsFiles } from "../../core/tls.js";

export interface GrpcRegionLinkOptions {
  region: RegionName;
  /** host:port of the region's gRPC server. */
  address: string;
  tls?: TlsFiles;
  /** Telemetry period asked of the region (default 1000 ms; the region clamps it to [50, 1000]). */
  telemetryIntervalMs?: number;
  /** Reconnect backoff bounds (defaults 100 ms and 2000 ms). */
  reconnectInitialMs?: number;
  reconnectMaxMs?: number;
  /** How long one slow consumer may hold the shared dispatch stream paused before its request fails (default 30000 ms). */
  stallLimitMs?: number;
  /** Deadline of SendTargets (default 5000 ms). */
  targetsTimeoutMs?: number;
  /** Clock for the reconnect backoff (default WallClock). */
  clock?: Clock;
  log?: Logger;
}

type RegionClient = grpc.Client & {
  Telemetry(req: { interval_ms: number }): grpc.ClientReadableStream<WireTelemetry>;
  DispatchMux(): grpc.ClientDuplexStream<WireMuxUp, WireMuxEvent[]>;
  SendTargets(req: ReturnType<typeof targetsToWire>, options: grpc.CallOptions, cb: (err: grpc.ServiceError | null, ack?: WireTargetsAck) => void): grpc.ClientUnaryCall;
  Instances(req: object, options: grpc.CallOptions, cb: (err: grpc.ServiceError | null, reply?: WireInstances) => void): grpc.ClientUnaryCall;
};

function isServiceError(err: unknown): err is grpc.ServiceError {
  return err instanceof Error && "code" in err && "metadata" in err && err.metadata instanceof grpc.Metadata;
}

function metadataString(md: grpc.Metadata, key: string): string | undefined {
  const v = md.get(key)[0];
  return typeof v === "string" ? v : undefined;
}

/** How long after a region refused the framed dispatch connection the link keeps to the gRPC call. */
export const FRAMED_RETRY_MS = 60_000;

/** A RegionLink to a `tidegate region` process over gRPC. */
export class GrpcRegionLink implements RegionLink {
  readonly region: RegionName;
  private readonly client: RegionClient;
  private readonly opts: Required<Pick<GrpcRegionLinkOptions, "telemetryIntervalMs" | "reconnectInitialMs" | "reconnectMaxMs" | "targetsTimeoutMs" | "stallLimitMs">>;
  private readonly clock: Clock;
  private readonly log: Logger;
  private readonly subscribers = new Set<(t: RegionTelemetry) => void>();
  private readonly downListeners = new Map<(t: RegionTelemetry) => void, () => void>();
  private telemetryCall: grpc.ClientReadableStream<WireTelemetry> | undefined;
  private reconnectTimer: Timer | undefined;
  private backoffMs: number;
  private closed = false;
  private mux: MuxStream | undefined;
  /** The call under `mux`. */
  private muxCall: MuxClientCall | undefined;
  /** Telemetry streams opened so far (1 + reconnects); the tests read it. */
  telemetryConnects = 0;
  /** Dispatch streams opened so far (1 + reopens after failures), framed or gRPC; the tests read it. */
  muxConnects = 0;
  /**
   * Why and when the region last refused the framed dispatch connection (mux-socket.ts): the gRPC call is used for
   * the streams opened in the FRAMED_RETRY_MS after it (a region upgraded since takes the framed connection again).
   */
  framedRefused: { why: string; atMs: number } | undefined;
  private readonly address: string;
  private readonly tls: TlsFiles | undefined;

  /**
   * What carries the dispatch stream now (the tests read it): `framed` (the framed connection, offered and not
   * refused), `grpc` (the DispatchMux call, or a framed offer the region refused), or undefined while no stream is
   * open (none yet, or the last one failed).
   */
  get dispatchTransport(): "framed" | "grpc" | undefined {
    if (this.mux?.alive !== true) return undefined;
    return this.muxCall instanceof NegotiatedMuxCall && !this.muxCall.fellBack ? "framed" : "grpc";
  }

  constructor(options: GrpcRegionLinkOptions) {
    this.region = options.region;
    this.address = options.address;
    this.tls = options.tls;
    this.opts = {
      telemetryIntervalMs: options.telemetryIntervalMs ?? DEFAULT_TELEMETRY_INTERVAL_MS,
      reconnectInitialMs: options.reconnectInitialMs ?? 100,
      reconnectMaxMs: options.reconnectMaxMs ?? 2000,
      targetsTimeoutMs: options.targetsTimeoutMs ?? 5000,
      stallLimitMs: options.stallLimitMs ?? 30_000,
    };
    if (!(this.opts.reconnectInitialMs > 0) || this.opts.reconnectMaxMs < this.opts.reconnectInitialMs) {
      throw new RangeError(`reconnect backoff needs 0 < reconnectInitialMs ≤ reconnectMaxMs, got ${this.opts.reconnectInitialMs}, ${this.opts.reconnectMaxMs}`);
    }
    this.backoffMs = this.opts.reconnectInitialMs;
    this.clock = options.clock ?? new WallClock();
    this.log = options.log ?? silentLogger;
    const Ctor = regionService();
    this.client = new Ctor(options.address, channelCredentials(options.tls), {
      ...tlsChannelOptions(options.tls),
      "grpc.initial_reconnect_backoff_ms": this.opts.reconnectInitialMs,
      "grpc.min_reconnect_backoff_ms": this.opts.reconnectInitialMs,
      "grpc.max_reconnect_backoff_ms": this.opts.reconnectMaxMs,
      "grpc.keepalive_time_ms": 10_000,
      "grpc.keepalive_timeout_ms": 5_000,
      // The router retries in another region itself; channelz bookkeeping is per call. Both off for latency.
      "grpc.enable_retries": 0,
      "grpc.enable_channelz": 0,
    }) as unknown as RegionClient;
  }

  subscribe(onTelemetry: (t: RegionTelemetry) => void, onDown?: () => void): Unsubscribe {
    if (this.closed) throw new TidegateError("upstream_error", `link to region ${this.region} is closed`);
    this.subscribers.add(onTelemetry);
    if (onDown !== undefined) this.downListeners.set(onTelemetry, onDown);
    if (this.telemetryCall === undefined && this.reconnectTimer === undefined) this.openTelemetry();
    return () => {
      this.subscribers.delete(onTelemetry);
      this.downListeners.delete(onTelemetry);
      if (this.subscribers.size === 0) this.stopTelemetry();
    };
  }

  /** The request's events as a stream (core/push.ts streamOf over `open`). */
  dispatch(req: GenerateRequest, signal?: AbortSignal): AsyncIterableIterator<EngineEvent> {
    return streamOf((sink, s) => this.open(req, sink, s), signal);
  }

  /**
   * One request in push form on the shared DispatchMux stream: each message's tokens go to `sink` in the call that
   * delivers the message, then `done`, or the failure (mapped as the region sent it); `sink.event` returning false
   * pauses the shared stream until the flow resumes. Aborting `signal` cancels the request at the region.
   */
  open(req: GenerateRequest, sink: EventSink, signal?: AbortSignal): Flow {
    if (this.closed) return refused(sink, new TidegateError("upstream_error", `link to region ${this.region} is closed`));
    if (signal?.aborted) return refused(sink, new TidegateError("cancelled", `request ${req.id} cancelled`, { cause: signal.reason }));
    return new MuxPush(this.muxStream(), req, sink, signal, (m) => this.muxError(m, req), (err, started) => this.dispatchError(err, started, req, signal));
  }

  /** `open` reported through callbacks at this link's clock times; failures (refusals included) reach onError. */
  submit(req: GenerateRequest, callbacks: LinkCallbacks, signal?: AbortSignal): void {
    const sink = callbackSink(() => this.clock.now(), callbacks);
    // A refusal known at once reaches onError after this call returns, as every other report does.
    if (this.closed || signal?.aborted === true) queueMicrotask(() => this.open(req, sink, signal));
    else this.open(req, sink, signal);
  }

  /** The region's admin listing (unary, with the targets deadline). */
  instances(): Promise<RegionInstances> {
    if (this.closed) return Promise.reject(new TidegateError("upstream_error", `link to region ${this.region} is closed`));
    return new Promise((resolve, reject) => {
      this.client.Instances({}, { deadline: Date.now() + this.opts.targetsTimeoutMs }, (err, reply) => {
        if (err !== null) return reject(this.remoteError(err, "Instances"));
        if (reply === undefined) return reject(new TidegateError("upstream_error", `region ${this.region} sent no listing`));
        try {
          resolve(instancesFromWire(reply));
        } catch (e) {
          reject(e);
        }
      });
    });
  }

  sendTargets(targets: RegionTargets): Promise<TargetsAck> {
    if (this.closed) return Promise.reject(new TidegateError("upstream_error", `link to region ${this.region} is closed`));
    return new Promise((resolve, reject) => {
      this.client.SendTargets(targetsToWire(targets), { deadline: Date.now() + this.opts.targetsTimeoutMs }, (err, ack) => {
        if (err !== null) return reject(this.remoteError(err, "SendTargets"));
        if (ack === undefined) return reject(new TidegateError("upstream_error", `region ${this.region} sent no ack`));
        resolve(ackFromWire(ack));
      });
    });
  }

  /** Cancels telemetry and reconnects, closes the channel; later calls fail with upstream_error. Idempotent. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.subscribers.clear();
    this.stopTelemetry();
    this.mux?.close();
    this.mux = undefined;
    this.client.close();
  }

  private openTelemetry(): void {
    this.reconnectTimer = undefined;
    if (this.closed || this.subscribers.size === 0) return;
    this.telemetryConnects++;
    const call = this.client.Telemetry({ interval_ms: this.opts.telemetryIntervalMs });
    this.telemetryCall = call;
    call.on("data", (w: WireTelemetry) => {
      this.backoffMs = this.opts.reconnectInitialMs;
      const t = telemetryFromWire(w);
      for (const cb of [...this.subscribers]) {
        try {
          cb(t);
        } catch (err) {
          this.log.error("telemetry subscriber failed", { region: this.region, err });
        }
      }
    });
    call.on("error", (err: Error) => {
      if (this.telemetryCall === call) this.log.warn("telemetry stream failed", { region: this.region, err });
    });
    call.on("status", () => {
      if (this.telemetryCall !== call) return; // cancelled by us
      this.telemetryCall = undefined;
      if (this.closed || this.subscribers.size === 0) return;
      for (const down of [...this.downListeners.values()]) {
        try {
          down();
        } catch (err) {
          this.log.error("telemetry down listener failed", { region: this.region, err });
        }
      }
      const delayMs = this.backoffMs;
      this.backoffMs = Math.min(this.opts.reconnectMaxMs, this.backoffMs * 2);
      this.reconnectTimer = this.clock.after(delayMs, () => this.openTelemetry());
    });
  }

  private stopTelemetry(): void {
    this.reconnectTimer?.cancel();
    this.reconnectTimer = undefined;
    const call = this.telemetryCall;
    this.telemetryCall = undefined;
    call?.cancel();
  }

  /** The open DispatchMux stream, or a new one when there is none or it failed. */
  private muxStream(): MuxStream {
    if (this.mux?.alive === true) return this.mux;
    this.muxConnects++;
    const grpcCall = () => this.client.DispatchMux() as MuxClientCall;
    const refused = this.framedRefused;
    const call =
      refused === undefined || this.clock.now() - refused.atMs >= FRAMED_RETRY_MS
        ? new NegotiatedMuxCall({
            address: this.address,
            ...(this.tls === undefined ? {} : { tls: this.tls }),
            clock: this.clock,
            fallback: grpcCall,
            onRefused: (why) => {
              this.framedRefused = { why, atMs: this.clock.now() };
              this.log.warn("region does not take the framed dispatch connection; using the gRPC DispatchMux call", { region: this.region, why });
            },
          })
        : grpcCall();
    this.muxCall = call;
    this.mux = new MuxStream(call, this.clock, this.opts.stallLimitMs, `region ${this.region}`);
    return this.mux;
  }

  /** A region-reported failure of one mux request, mapped as `remoteError` maps a Dispatch status. */
  private muxError(e: WireMuxError, req: GenerateRequest): TidegateError {
    if (e.started) return new TidegateError("upstream_error", `region ${this.region} failed request ${req.id} mid-stream: ${e.message}`);
    if (e.code in ERROR_CODES && e.code !== "internal" && e.code !== "cancelled") return new TidegateError(e.code as ErrorCode, e.message);
    return new TidegateError("upstream_error", `region ${this.region} (${e.code}): request ${req.id}: ${e.message}`);
  }

  private dispatchError(err: unknown, started: boolean, req: GenerateRequest, signal: AbortSignal | undefined): TidegateError {
    if (signal?.aborted) return new TidegateError("cancelled", `request ${req.id} cancelled`, { cause: err });
    if (err instanceof TidegateError) return err;
    const remote = this.remoteError(err, `request ${req.id}`);
    const remoteStarted = isServiceError(err) && metadataString(err.metadata, STARTED_KEY) === "1";
    if (started || remoteStarted) return new TidegateError("upstream_error", `region ${this.region} failed request ${req.id} mid-stream: ${remote.message}`, { cause: err });
    return remote;
  }

  /** The region's own TidegateError code when it sent one (except internal/cancelled), else upstream_error. */
  private remoteError(err: unknown, what: string): TidegateError {
    if (!isServiceError(err)) return new TidegateError("upstream_error", `region ${this.region}: ${what} failed${err instanceof Error ? ` (${err.message})` : ""}`, { cause: err });
    const code = metadataString(err.metadata, CODE_KEY);
    if (code !== undefined && code in ERROR_CODES && code !== "internal" && code !== "cancelled") {
      return new TidegateError(code as ErrorCode, err.details, { cause: err });
    }
    return new TidegateError("upstream_error", `region ${this.region} (${grpc.status[err.code] ?? err.code}): ${what}: ${err.details}`, { cause: err });
  }
}


/** One mux request's events pushed to a sink (GrpcRegionLink.open). */
class MuxPush implements Flow, MuxListener {
  private readonly r: MuxRequest;
  private ended = false;
  private started = false;
  private readonly onAbort: () => void;

  constructor(
    mux: MuxStream,
    req: GenerateRequest,
    private readonly sink: EventSink,
    private readonly signal: AbortSignal | undefined,
    private readonly muxError: (e: WireMuxError) => TidegateError,
    private readonly dispatchError: (err: unknown, started: boolean) => TidegateError,
  ) {
    this.onAbort = () => {
      this.r.cancel();
      this.fail(new TidegateError("cancelled", `request ${req.id} cancelled`, { cause: signal?.reason }));
    };
    signal?.addEventListener("abort", this.onAbort, { once: true });
    this.r = mux.open(requestToWire(req), this);
  }

  resume(): void {
    this.r.resume();
  }

  message(m: WireMuxEvent): boolean {
    if (this.ended) return true;
    let room = true;
    const { texts, tokens } = m;
    for (let i = 0; i < texts.length; i++) {
      this.started = true;
      if (!this.sink.event({ type: "token", text: texts[i]!, tokens: tokens[i] ?? 1 })) room = false;
      if (this.ended) return true;
    }
    if (m.error !== null) {
      this.fail(this.muxError(m.error));
      return true;
    }
    if (m.done !== null) {
      this.started = true;
      this.finish();
      this.sink.event(doneFromWire(m.done));
      return true;
    }
    return room;
  }

  fail(err: unknown): void {
    if (this.ended) return;
    this.finish();
    this.sink.fail(this.dispatchError(err, this.started));
  }

  private finish(): void {
    this.ended = true;
    this.signal?.removeEventListener("abort", this.onAbort);
    this.r.cancel();
  }
}
