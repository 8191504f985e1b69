/**
 * DispatchMux over a framed connection (mux-frame.ts) instead of grpc-js: the global router's side
 * (`NegotiatedMuxCall`, a MuxClientCall for mux-client.ts) and the region's (`serveMuxSocket`, a MuxServerCall for
 * mux-server.ts). Both carry exactly what the gRPC stream carried (the same messages, backpressure through the
 * socket's own flow control, every request failing when the connection does) and keep the connection honest with
 * pings: the router pings every PING_EVERY_MS and gives the connection up when nothing answers within PING_ACK_MS
 * (what grpc-js's keepalive did: a frozen or unreachable region fails its streams rather than hang them); the region
 * closes a connection that sent nothing for IDLE_LIMIT_MS (three missed pings).
 *
 * A region that does not speak the framed protocol (an older `tidegate region`, which answers the magic as a bad
 * HTTP/2 preface and closes) is detected before any request is sent: the negotiating call then opens the gRPC
 * DispatchMux call instead and hands it what it held (`fallback`), and the link keeps to gRPC for FRAMED_RETRY_MS
 * (grpc-client.ts). A region that cannot be reached is not a refusal: the call fails, as the gRPC call would.
 */
import { EventEmitter } from "node:events";
import * as net from "node:net";
import * as tls from "node:tls";
import type { Clock, Timer } from "../../core/clock.js";
import { TidegateError } from "../../core/errors.js";
import type { Logger } from "../../core/log.js";
import { onreadInto } from "../../core/read-buffer.js";
import { tlsContextOptions, type TlsFiles } from "../../core/tls.js";
import { decodeMuxDown, decodeMuxUp, encodeMuxDown, encodeMuxUp } from "./mux-codec.js";
import type { MuxClientCall } from "./mux-client.js";
import { FRAME_HEADER_BYTES, FRAME_MESSAGE, FRAME_PING, FRAME_PONG, FrameError, FrameReader, MUX_ALPN, MUX_MAGIC, frame, messageFrame } from "./mux-frame.js";
import { serveMux } from "./mux-server.js";
import type { WireMuxEvent, WireMuxUp } from "./region-proto.js";
import type { RegionService } from "./service.js";

export const PING_EVERY_MS = 10_000;
export const PING_ACK_MS = 5_000;
export const IDLE_LIMIT_MS = 3 * PING_EVERY_MS + PING_ACK_MS;
/** Largest MuxUp the region accepts (grpc-js's default receive limit, as on the gRPC call). */
export const MAX_UP_BYTES = 4 * 1024 * 1024;
/** Largest MuxDown the router accepts: one event-loop turn's events of every request on the connection. */
export const MAX_DOWN_BYTES = 64 * 1024 * 1024;

/** host and port of "host:port" or "[v6]:port". */
export function splitAddress(address: string): { host: string; port: number } {
  const i = address.lastIndexOf(":");
  const port = Number(address.slice(i + 1));
  let host = address.slice(0, i);
  if (host.startsWith("[") && host.endsWith("]")) host = host.slice(1, -1);
  if (i < 0 || !Number.isInteger(port) || port < 0 || port > 65535) throw new TidegateError("invalid_config", `address ${JSON.stringify(address)}: expected host:port`);
  return { host, port };
}

export interface NegotiatedMuxCallOptions {
  address: string;
  tls?: TlsFiles;
  clock: Clock;
  /** The gRPC DispatchMux call, opened only when the region does not speak the framed protocol. */
  fallback: () => MuxClientCall;
  /** Called once the region refused the framed protocol (the link then opens the gRPC call directly). */
  onRefused: (why: string) => void;
}

/**
 * The router's side of one framed DispatchMux connection, a MuxClientCall. Until the region answers the magic, what
 * is written is held; on the answer it goes out in one write. A region that refuses the protocol before that (closes
 * on the magic, answers something else, or refuses the ALPN: `isRefusal`) gets the gRPC call instead, with what was
 * held; one that cannot be reached fails the call.
 */
export class NegotiatedMuxCall extends EventEmitter implements MuxClientCall {
  private readonly socket: net.Socket;
  private held: Buffer[] | undefined = [];
  private fallbackCall: MuxClientCall | undefined;
  private heldUps: WireMuxUp[] = [];
  /** Frames of this event-loop turn after its first, sent together at its end (`endTurn`). */
  private out: Buffer[] = [];
  /** A frame went out in this event-loop turn. */
  private turnWritten = false;
  private magicSeen = 0;
  private ended = false;
  private readonly reader: FrameReader;
  private pingTimer: Timer | undefined;
  private ackTimer: Timer | undefined;
  private paused = false;
  /** The TCP connection was made (a failure before it is the region being unreachable, not refusing). */
  private connected = false;
  /** The TLS handshake completed. */
  private secured = false;

  constructor(private readonly opts: NegotiatedMuxCallOptions) {
    super();
    const { host, port } = splitAddress(opts.address);
    this.reader = new FrameReader(MAX_DOWN_BYTES, (type, payload) => this.onFrame(type, payload));
    if (opts.tls === undefined) {
      // Reads land in the process's read buffer (core/read-buffer.ts): the frame reader copies what it keeps past a
      // read, decoded strings are copies.
      this.socket = net.connect({ host, port, noDelay: true, onread: onreadInto((bytes) => this.onRead(bytes)) });
      this.socket.once("connect", () => {
        this.connected = true;
        this.socket.write(MUX_MAGIC);
      });
    } else {
      const t = opts.tls;
      this.socket = tls.connect({ host, port, ...tlsContextOptions(t), ...(t.serverName === undefined ? (net.isIP(host) === 0 ? { servername: host } : {}) : { servername: t.serverName }), ALPNProtocols: [MUX_ALPN] });
      this.socket.setNoDelay(true);
      this.socket.once("connect", () => (this.connected = true));
      this.socket.once("secureConnect", () => {
        this.secured = true;
        const s = this.socket as tls.TLSSocket;
        if (s.alpnProtocol !== MUX_ALPN) return this.refuse(`the region did not select ALPN ${MUX_ALPN}`);
        s.write(MUX_MAGIC);
      });
    }
    if (opts.tls !== undefined) this.socket.on("data", (chunk: Buffer) => this.onData(chunk, false));
    this.socket.on("error", (err: Error) => {
      if (this.held !== undefined && this.isRefusal(err)) return this.refuse(err.message);
      this.fail(new Error(`dispatch connection to ${opts.address} failed: ${err.message}`, { cause: err }));
    });
    this.socket.on("close", () => {
      if (this.held !== undefined && this.isRefusal()) return this.refuse("the connection closed before the region answered");
      this.fail(new Error(`dispatch connection to ${opts.address} closed`));
    });
  }

  write(up: WireMuxUp): void {
    if (this.fallbackCall !== undefined) {
      this.fallbackCall.write(up);
      return;
    }
    if (this.ended) return;
    if (this.held !== undefined) {
      this.heldUps.push(up);
      this.held.push(frameOf(up));
      return;
    }
    // The first frame of an event-loop turn goes out at once (one request alone waits for nothing); the rest of
    // the turn's opens and cancels go out together at its end (a burst of requests: two syscalls, not one each).
    const f = frameOf(up);
    if (!this.turnWritten) {
      this.turnWritten = true;
      setImmediate(this.endTurn);
      this.socket.write(f);
    } else this.out.push(f);
  }

  private readonly endTurn = () => {
    this.turnWritten = false;
    const out = this.out;
    this.out = [];
    if (this.ended || out.length === 0) return;
    this.socket.write(out.length === 1 ? out[0]! : Buffer.concat(out));
  };

  cancel(): void {
    if (this.fallbackCall !== undefined) return this.fallbackCall.cancel();
    this.fail(new Error("the dispatch connection was closed by the router"));
  }

  pause(): void {
    this.hold(true);
  }

  resume(): void {
    this.hold(false);
  }

  /** Stops (or restarts) reading the region's frames, on whichever transport carries them. */
  private hold(paused: boolean): void {
    const target = this.fallbackCall ?? this.socket;
    if (this.fallbackCall === undefined) this.paused = paused;
    if (paused) target.pause();
    else target.resume();
  }

  /** A read into the shared buffer (plain TCP); false pauses the socket (`onread`'s contract), as `pause` asked. */
  private onRead(chunk: Buffer): boolean {
    this.onData(chunk, true);
    return !this.paused;
  }

  private onData(chunk: Buffer, transient: boolean): void {
    if (this.ended) return;
    let buf = chunk;
    if (this.held !== undefined) {
      // The region's answer: MUX_MAGIC, possibly split over chunks.
      const want = MUX_MAGIC.length - this.magicSeen;
      const got = buf.subarray(0, want);
      if (!got.equals(MUX_MAGIC.subarray(this.magicSeen, this.magicSeen + got.length))) return this.refuse("the region answered something other than the framed protocol");
      this.magicSeen += got.length;
      if (this.magicSeen < MUX_MAGIC.length) return;
      buf = buf.subarray(want);
      const held = this.held;
      this.held = undefined;
      this.heldUps = [];
      if (held.length > 0) this.socket.write(held.length === 1 ? held[0]! : Buffer.concat(held));
      this.schedulePing();
      if (buf.length === 0) return;
    }
    this.ackTimer?.cancel();
    this.ackTimer = undefined;
    try {
      this.reader.push(buf, transient);
    } catch (err) {
      this.fail(new Error(`dispatch connection to ${this.opts.address}: ${(err as Error).message}`, { cause: err }));
    }
  }

  private onFrame(type: number, payload: Buffer): void {
    if (this.ended) return;
    if (type === FRAME_MESSAGE) {
      let events: WireMuxEvent[];
      try {
        events = decodeMuxDown(payload);
      } catch (err) {
        return this.fail(new Error(`dispatch connection to ${this.opts.address}: undecodable MuxDown (${(err as Error).message})`, { cause: err }));
      }
      this.emit("data", events);
    } else if (type === FRAME_PING) this.socket.write(frame(FRAME_PONG));
  }

  /** Pings every PING_EVERY_MS; a ping that nothing follows within PING_ACK_MS fails the connection. */
  private schedulePing(): void {
    this.pingTimer = this.opts.clock.after(PING_EVERY_MS, () => {
      if (this.ended) return;
      this.socket.write(frame(FRAME_PING));
      // A paused socket reads nothing, so it cannot see the answer: no verdict while the router holds it.
      if (!this.paused) {
        this.ackTimer ??= this.opts.clock.after(PING_ACK_MS, () => {
          this.ackTimer = undefined;
          this.fail(new Error(`dispatch connection to ${this.opts.address}: no answer to a ping within ${PING_ACK_MS} ms`));
        });
      }
      this.schedulePing();
    });
  }

  /**
   * Whether a failure before the region's answer means it does not take the framed protocol (an older region closes
   * on the magic, or its TLS refuses the ALPN) rather than that it cannot be reached (refused, unreachable, a TLS
   * handshake that failed on certificates): the first falls back to gRPC, the second fails the requests as the
   * gRPC call would.
   */
  private isRefusal(err?: Error): boolean {
    if (!this.connected) return false;
    if (this.opts.tls === undefined || this.secured) return true;
    return err !== undefined && NO_ALPN.test(err.message);
  }

  /** The region refused the framed connection and the gRPC call carries this stream (`refuse`). */
  get fellBack(): boolean {
    return this.fallbackCall !== undefined;
  }

  /** The region does not speak the framed protocol: the gRPC call takes over, with what was held. */
  private refuse(why: string): void {
    if (this.held === undefined || this.ended) return;
    this.held = undefined;
    this.ended = true;
    this.socket.destroy();
    this.opts.onRefused(why);
    const call = this.opts.fallback();
    this.fallbackCall = call;
    call.on("data", (events) => this.emit("data", events));
    call.on("error", (err) => this.emit("error", err));
    call.on("status", (s) => this.emit("status", s));
    for (const up of this.heldUps) call.write(up);
    this.heldUps = [];
    if (this.paused) call.pause();
  }

  /** Ends the connection; MuxStream fails its requests with `err` (a plain Error: the link maps it, as a gRPC status). */
  private fail(err: Error): void {
    if (this.ended) return;
    this.ended = true;
    this.held = undefined;
    this.pingTimer?.cancel();
    this.ackTimer?.cancel();
    this.socket.destroy();
    this.emit("error", err);
  }
}

/** OpenSSL's alert when the server supports none of the ALPN protocols offered (an older region's TLS port). */
const NO_ALPN = /no.application.protocol/i;

/** `up` as one message frame (header and message in one buffer). */
function frameOf(up: WireMuxUp): Buffer {
  return messageFrame(encodeMuxUp(up, FRAME_HEADER_BYTES));
}

/** How serveMuxSocket reports a connection it refuses (the port's boundary reporter). */
export type MuxRefusal = (reason: "undecodable_message" | "message_too_large" | "unanswered_ping", peer: string | undefined, detail: string) => void;

/**
 * The region's side of one framed connection whose magic has been read (`rest`: what followed it in the same read):
 * answers the magic and serves DispatchMux (mux-server.ts) on it until it ends. An undecodable or oversized frame
 * is refused (reported, connection closed); so is a connection silent for IDLE_LIMIT_MS.
 */
export function serveMuxSocket(service: RegionService, socket: net.Socket, rest: Buffer, opts: { clock: Clock; log: Logger; refuse: MuxRefusal }): void {
  const peer = socket.remoteAddress;
  const call = new EventEmitter() as EventEmitter & { write(events: WireMuxEvent[]): boolean; end(): void };
  let closed = false;
  const close = (event: "end" | "error" | "close") => {
    if (closed) return;
    closed = true;
    idle.cancel();
    call.emit(event);
    socket.destroy();
  };
  call.write = (events) => {
    if (closed) return true;
    // Header and message in one buffer, one write.
    return socket.write(messageFrame(encodeMuxDown(events, FRAME_HEADER_BYTES)));
  };
  call.end = () => {
    if (!closed) socket.end();
  };
  socket.on("drain", () => call.emit("drain"));
  // Checked every PING_EVERY_MS rather than a timer re-armed per read (one per token burst).
  let lastHeardMs = opts.clock.now();
  const idle = opts.clock.every(PING_EVERY_MS, () => {
    if (opts.clock.now() - lastHeardMs <= IDLE_LIMIT_MS) return;
    opts.refuse("unanswered_ping", peer, `nothing received for ${IDLE_LIMIT_MS} ms on a dispatch connection; closed`);
    close("error");
  });
  const reader = new FrameReader(MAX_UP_BYTES, (type, payload) => {
    if (type === FRAME_MESSAGE) {
      let up: WireMuxUp;
      try {
        up = decodeMuxUp(payload);
      } catch (err) {
        throw new FrameError("undecodable_message", `undecodable MuxUp: ${(err as Error).message}`);
      }
      call.emit("data", up);
    } else if (type === FRAME_PING) socket.write(frame(FRAME_PONG));
  });
  const onData = (chunk: Buffer) => {
    if (closed) return;
    lastHeardMs = opts.clock.now();
    try {
      reader.push(chunk);
    } catch (err) {
      if (!(err instanceof FrameError)) throw err;
      opts.refuse(err.reason, peer, `${err.message} on a dispatch connection; closed`);
      close("error");
    }
  };
  socket.on("data", onData);
  socket.on("end", () => close("end"));
  socket.on("error", (err) => {
    opts.log.debug("dispatch connection failed", { peer, err });
    close("error");
  });
  socket.on("close", () => close("close"));
  serveMux(service, call, opts.log);
  socket.write(MUX_MAGIC);
  if (rest.length > 0) onData(rest);
}
