/**
 * Reading one Dispatch call of the gRPC RegionLink client (region/link/grpc-client.ts).
 */
import type * as grpc from "@grpc/grpc-js";
import type { WireDispatchEvents } from "./proto.js";

/** Messages queued before the call is paused. */
const HIGH_WATER = 64;

/**
 * The messages of one Dispatch call, read in flowing mode (cheaper per message than the Readable async iterator):
 * a queue plus one pending waiter. Pauses the call while `HIGH_WATER` messages wait, so a slow consumer
 * back-pressures the region through HTTP/2 flow control.
 */
export class Inbox {
  private readonly queue: WireDispatchEvents[] = [];
  private head = 0;
  private ended = false;
  private error: unknown;
  private waiter: { resolve: (m: WireDispatchEvents | undefined) => void; reject: (e: unknown) => void } | undefined;
  private paused = false;

  constructor(private readonly call: grpc.ClientReadableStream<WireDispatchEvents>) {
    call.on("data", this.onData);
    call.on("end", this.onEnd);
    call.on("error", this.onError);
  }

  /** The next queued message, or undefined when none is queued (not the end: see `next`). */
  shift(): WireDispatchEvents | undefined {
    if (this.head === this.queue.length) return undefined;
    const m = this.queue[this.head++]!;
    if (this.head === this.queue.length) {
      this.queue.length = 0;
      this.head = 0;
    }
    if (this.paused && this.queue.length - this.head < HIGH_WATER / 2) {
      this.paused = false;
      this.call.resume();
    }
    return m;
  }

  /** Resolves with the next message, undefined at the end of the stream; rejects with the call's error. */
  next(): Promise<WireDispatchEvents | undefined> {
    const m = this.shift();
    if (m !== undefined) return Promise.resolve(m);
    if (this.error !== undefined) return Promise.reject(this.error);
    if (this.ended) return Promise.resolve(undefined);
    return new Promise((resolve, reject) => (this.waiter = { resolve, reject }));
  }

  detach(): void {
    this.call.off("data", this.onData);
    this.call.off("end", this.onEnd);
    // Keep an error listener: a cancelled call still emits its CANCELLED status as an error.
    this.call.off("error", this.onError);
    this.call.on("error", () => undefined);
  }

  private readonly onData = (m: WireDispatchEvents) => {
    const w = this.waiter;
    if (w !== undefined) {
      this.waiter = undefined;
      w.resolve(m);
      return;
    }
    this.queue.push(m);
    if (!this.paused && this.queue.length - this.head >= HIGH_WATER) {
      this.paused = true;
      this.call.pause();
    }
  };

  private readonly onEnd = () => {
    this.ended = true;
    const w = this.waiter;
    this.waiter = undefined;
    w?.resolve(undefined);
  };

  private readonly onError = (err: unknown) => {
    this.error = err;
    const w = this.waiter;
    this.waiter = undefined;
    w?.reject(err);
  };
}
