/**
 * The global side of DispatchMux (region/proto/region.proto): one bidirectional stream per (router, region), the
 * framed connection (mux-socket.ts) or the gRPC call, carrying every dispatch, so a request costs a message, not a gRPC call (call setup was ~1.6 ms CPU per request).
 *
 * - `open(req, listener)` writes `open` under a fresh rid and returns the request's MuxRequest, which hands each
 *   message to the listener as it arrives (push, core/push.ts). `cancel()` writes `cancel` and forgets the rid.
 * - When the stream fails or ends, every open request fails with the stream's error (the caller maps it to
 *   upstream_error, or mid-stream upstream_error after the first event) and the stream is marked dead; the link
 *   opens a new one for the next request. Reconnecting the channel backs off as configured on it.
 * - Backpressure (shared stream): a request whose listener says it is full pauses the whole stream, which
 *   back-pressures the region through TCP's (or HTTP/2's) flow control; it resumes when every such request has resumed. A
 *   consumer that keeps the stream paused for longer than `stallLimitMs` would starve the others: that request fails
 *   (upstream_error "consumer stalled") and is cancelled at the region.
 */
import type { Clock, Timer } from "../../core/clock.js";
import { TidegateError } from "../../core/errors.js";
import type { WireDispatchRequest, WireMuxEvent, WireMuxUp } from "./region-proto.js";

/** What a MuxRequest hands its messages to (GrpcRegionLink.open's translation into a sink, core/push.ts). */
export interface MuxListener {
  /** One message of the request's events; false pauses the shared stream until `MuxRequest.resume`. */
  message(m: WireMuxEvent): boolean;
  /** The request or the stream failed; nothing follows. */
  fail(err: unknown): void;
}

/**
 * What a MuxStream runs on: the gRPC DispatchMux call (grpc-js's ClientDuplexStream fits) or the framed connection
 * (mux-socket.ts). `data` carries one MuxDown's events; `error` or `status` ends the call.
 */
export interface MuxClientCall {
  write(up: WireMuxUp): unknown;
  cancel(): void;
  pause(): unknown;
  resume(): unknown;
  on(event: "data", fn: (events: WireMuxEvent[]) => void): unknown;
  on(event: "error", fn: (err: Error) => void): unknown;
  on(event: "status", fn: (s: { details: string }) => void): unknown;
}

/** One request on a MuxStream: its messages go to its listener as they arrive (no queue, no promise per message). */
export class MuxRequest {
  private failed = false;
  /** True while this request holds the stream paused. */
  full = false;
  stallTimer: Timer | undefined;

  constructor(
    readonly rid: number,
    private readonly owner: MuxStream,
    private readonly listener: MuxListener,
  ) {}

  /** The listener has room again: the stream resumes once no request holds it paused. Idempotent. */
  resume(): void {
    if (this.full) this.owner.unfull(this);
  }

  /** Tells the region to stop this request (if the stream still carries it) and forgets it. Idempotent. */
  cancel(): void {
    this.owner.cancel(this);
  }

  /** Called by the stream. */
  push(m: WireMuxEvent): void {
    if (this.failed) return;
    if (!this.listener.message(m) && !this.full) this.owner.makeFull(this);
  }

  /** Called by the stream: fails the request (once). */
  fail(err: unknown): void {
    if (this.failed) return;
    this.failed = true;
    this.listener.fail(err);
  }
}

/** One DispatchMux call and the requests it carries. */
export class MuxStream {
  private readonly requests = new Map<number, MuxRequest>();
  private readonly fullSet = new Set<MuxRequest>();
  private nextRid = 1;
  /** False once the call failed or ended: the link opens another. */
  alive = true;

  constructor(
    private readonly call: MuxClientCall,
    private readonly clock: Clock,
    private readonly stallLimitMs: number,
    private readonly describe: string,
  ) {
    call.on("data", (events: WireMuxEvent[]) => {
      for (const ev of events) {
        const r = this.requests.get(ev.rid);
        if (r === undefined) continue; // cancelled here; the region had not seen the cancel yet
        if (ev.done !== null || ev.error !== null) this.forget(r);
        r.push(ev);
      }
    });
    call.on("error", (err: Error) => this.failAll(err));
    call.on("status", (s: { details: string }) => this.failAll(new TidegateError("upstream_error", `${describe}: the dispatch stream ended (${s.details})`)));
  }

  /** Requests open on this stream now. */
  get size(): number {
    return this.requests.size;
  }

  /** Starts `req` on the stream; its messages go to `listener`. */
  open(req: WireDispatchRequest, listener: MuxListener): MuxRequest {
    const rid = this.nextRid;
    this.nextRid = this.nextRid >= 0xffffffff ? 1 : this.nextRid + 1;
    const r = new MuxRequest(rid, this, listener);
    this.requests.set(rid, r);
    this.call.write({ rid, open: req, cancel: false });
    return r;
  }

  /** Cancels the call; every open request fails. */
  close(): void {
    this.call.cancel();
  }

  cancel(r: MuxRequest): void {
    if (this.requests.get(r.rid) !== r) return;
    this.forget(r);
    if (this.alive) this.call.write({ rid: r.rid, open: null, cancel: true });
  }

  makeFull(r: MuxRequest): void {
    r.full = true;
    this.fullSet.add(r);
    if (this.fullSet.size === 1) this.call.pause();
    r.stallTimer = this.clock.after(this.stallLimitMs, () => {
      r.stallTimer = undefined;
      this.cancel(r);
      r.fail(new TidegateError("upstream_error", `${this.describe}: request consumer stalled for over ${this.stallLimitMs} ms on the shared dispatch stream`));
    });
  }

  unfull(r: MuxRequest): void {
    r.full = false;
    r.stallTimer?.cancel();
    r.stallTimer = undefined;
    if (this.fullSet.delete(r) && this.fullSet.size === 0) this.call.resume();
  }

  private forget(r: MuxRequest): void {
    this.requests.delete(r.rid);
    if (r.full) this.unfull(r);
  }

  private failAll(err: unknown): void {
    this.alive = false;
    for (const r of [...this.requests.values()]) {
      this.forget(r);
      r.fail(err);
    }
  }
}
