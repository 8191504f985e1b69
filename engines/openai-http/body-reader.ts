/**
 * Reading a streamed HTTP response body in flowing mode: 'data' events go into a queue with one pending waiter.
 * Cheaper per chunk than the Readable async iterator (no per-chunk read()/promise machinery inside streams), which
 * matters on the openai-http adapter's hot path (one SSE chunk per token). The response is paused while
 * `HIGH_WATER` chunks wait, so a slow consumer back-pressures the upstream server through TCP.
 */
import type { IncomingMessage } from "node:http";

const HIGH_WATER = 64;

/** The body chunks of one response, in order; `next()` resolves undefined at the end and rejects on a socket error. */
export class BodyReader {
  private readonly queue: Buffer[] = [];
  private head = 0;
  private ended = false;
  private error: unknown;
  private waiter: { resolve: (b: Buffer | undefined) => void; reject: (e: unknown) => void } | undefined;
  private paused = false;

  constructor(private readonly res: IncomingMessage) {
    res.on("data", this.onData);
    res.once("end", this.onEnd);
    res.once("error", this.onError);
    // A destroyed response (aborted request, socket reset) may close without 'end' or 'error'.
    res.once("close", this.onClose);
  }

  /** The next queued chunk, or undefined when none is queued (not the end: see `next`). */
  shift(): Buffer | undefined {
    if (this.head === this.queue.length) return undefined;
    const b = this.queue[this.head++]!;
    if (this.head === this.queue.length) {
      this.queue.length = 0;
      this.head = 0;
    }
    if (this.paused && this.queue.length - this.head < HIGH_WATER / 2) {
      this.paused = false;
      this.res.resume();
    }
    return b;
  }

  /** Resolves with the next chunk, undefined at the end of the body; rejects with the response's error. */
  next(): Promise<Buffer | undefined> {
    const b = this.shift();
    if (b !== undefined) return Promise.resolve(b);
    if (this.error !== undefined) return Promise.reject(this.error);
    if (this.ended) return Promise.resolve(undefined);
    return new Promise((resolve, reject) => (this.waiter = { resolve, reject }));
  }

  private readonly onData = (b: Buffer) => {
    const w = this.waiter;
    if (w !== undefined) {
      this.waiter = undefined;
      w.resolve(b);
      return;
    }
    this.queue.push(b);
    if (!this.paused && this.queue.length - this.head >= HIGH_WATER) {
      this.paused = true;
      this.res.pause();
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

  private readonly onClose = () => {
    if (this.ended || this.error !== undefined) return;
    if (this.res.complete) return this.onEnd();
    // A connection that closed mid-body was reset: the code lets the adapter's liveness (liveness.ts) count it.
    this.onError(Object.assign(new Error("the upstream connection closed before the response ended"), { code: "ECONNRESET" }));
  };
}
