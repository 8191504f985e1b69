/**
 * The global side of DispatchMux (region/proto/region.proto): one bidirectional stream per (router, region)
 * carrying every dispatch, so a request costs a message, not a gRPC call (call setup was ~1.6 ms CPU per request).
 *
 * - `open(req)` writes `open` under a fresh rid and returns the request's MuxRequest: a queue of its events plus one
 *   waiter (flowing mode). `cancel()` writes `cancel` and forgets the rid.
 * - When the stream fails or ends, every open request fails with the stream's error (the caller maps it to
 *   upstream_error, or mid-stream upstream_error after the first event) and the stream is marked dead; the link
 *   opens a new one for the next request. Reconnecting the channel backs off as configured on it.
 * - Backpressure (shared stream): a request whose queue reaches `HIGH_WATER` messages pauses the whole stream,
 *   which back-pressures the region through HTTP/2 flow control; it resumes when every such queue is back under
 *   half of it. A consumer that keeps the stream paused for longer than `stallLimitMs` would starve the others: that
 *   request fails (upstream_error "consumer stalled"), is cancelled at the region, and its queue is dropped.
 */
import type * as grpc from "@grpc/grpc-js";
import type { Clock, Timer } from "../../core/clock.js";
import { TidegateError } from "../../core/errors.js";
import type { WireDispatchRequest, WireMuxEvent, WireMuxUp } from "./region-proto.js";

/** Messages queued for one request before the shared stream is paused. */
const HIGH_WATER = 64;

/** One request on a MuxStream. */
export class MuxRequest {
  private readonly queue: WireMuxEvent[] = [];
  private head = 0;
  private error: unknown;
  private waiter: { resolve: (m: WireMuxEvent) => void; reject: (e: unknown) => void } | undefined;
  /** True while this request's queue holds the stream paused. */
  full = false;
  stallTimer: Timer | undefined;

  constructor(
    readonly rid: number,
    private readonly owner: MuxStream,
  ) {}

  /** The next queued event batch, or undefined when none is queued. */
  shift(): WireMuxEvent | undefined {
    if (this.head === this.queue.length) return undefined;
    const m = this.queue[this.head++]!;
    if (this.head === this.queue.length) {
      this.queue.length = 0;
      this.head = 0;
    }
    if (this.full && this.queue.length - this.head < HIGH_WATER / 2) this.owner.unfull(this);
    return m;
  }

  /** Resolves with the next event batch; rejects with the request's or the stream's error. */
  next(): Promise<WireMuxEvent> {
    const m = this.shift();
    if (m !== undefined) return Promise.resolve(m);
    if (this.error !== undefined) return Promise.reject(this.error);
    return new Promise((resolve, reject) => (this.waiter = { resolve, reject }));
  }

  /** Tells the region to stop this request (if the stream still carries it) and forgets it. Idempotent. */
  cancel(): void {
    this.owner.cancel(this);
  }

  /** Called by the stream. */
  push(m: WireMuxEvent): void {
    const w = this.waiter;
    if (w !== undefined) {
      this.waiter = undefined;
      w.resolve(m);
      return;
    }
    this.queue.push(m);
    if (!this.full && this.queue.length - this.head >= HIGH_WATER) this.owner.makeFull(this);
  }

  /** Called by the stream: fails the request (queued events still come first). */
  fail(err: unknown): void {
    if (this.error !== undefined) return;
    this.error = err;
    const w = this.waiter;
    this.waiter = undefined;
    w?.reject(err);
  }

  /** Called by the stream: fails the request at once, dropping what is queued. */
  failNow(err: unknown): void {
    this.queue.length = 0;
    this.head = 0;
    this.fail(err);
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
    private readonly call: grpc.ClientDuplexStream<WireMuxUp, WireMuxEvent[]>,
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
    call.on("status", (s: grpc.StatusObject) => this.failAll(new TidegateError("upstream_error", `${describe}: the dispatch stream ended (${s.details})`)));
  }

  /** Requests open on this stream now. */
  get size(): number {
    return this.requests.size;
  }

  /** Starts `req` on the stream. */
  open(req: WireDispatchRequest): MuxRequest {
    const rid = this.nextRid;
    this.nextRid = this.nextRid >= 0xffffffff ? 1 : this.nextRid + 1;
    const r = new MuxRequest(rid, this);
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
      r.failNow(new TidegateError("upstream_error", `${this.describe}: request consumer stalled for over ${this.stallLimitMs} ms on the shared dispatch stream`));
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
