/**
 * The writes of one streamed response (router/completions.ts relayStream), one per relayed event. The first goes
 * through `res.write` (it sends the status line and headers with it). Each later one is framed here as one HTTP/1.1
 * chunk (`<byte length in hex>\r\n<data>\r\n`, the bytes node's `res.write` sends for it) and written to the socket
 * in one `socket.write`. `res.write` would instead queue four writes (length, CRLF, data, CRLF), cork the socket
 * and uncork it on the next tick into one `writev`: a `nextTick`, four buffered writes and the buffer list for every
 * token of every stream (about a tenth of the global router's CPU under bench:router's 32 streams).
 *
 * Straight to the socket only while node has nothing of this response queued outside it (`res` is the socket's
 * current response, its headers went out, nothing waits in its own output buffer) and the response is chunked;
 * otherwise (an HTTP/1.0 client, a pipelined response not yet at the head of its connection, a destroyed socket)
 * `res.write` as before. Either way the bytes on the wire are the same, and `res.end()` ends the body as usual.
 */
import type { Socket } from "node:net";
import type { ServerResponse } from "node:http";

/** Writes the events of one chunked response in order. */
export class ChunkWriter {
  private started = false;

  constructor(private readonly res: ServerResponse) {}

  /**
   * Writes `data` (one or more whole SSE events; never empty). Returns false when the connection's buffer is over
   * its high-water mark: wait for `drained()` before writing more.
   */
  write(data: string): boolean {
    const sock = this.direct();
    if (sock === undefined) {
      this.started = true;
      return this.res.write(data);
    }
    return sock.write(`${Buffer.byteLength(data).toString(16)}\r\n${data}\r\n`);
  }

  /** Writes `data` (the last events) and ends the response: node frames it with the body's end, one write. */
  end(data: string): void {
    this.res.end(data);
  }

  /** Resolves when the connection can take more data (drain) or is gone (close); never rejects. */
  drained(): Promise<void> {
    const res = this.res;
    const sock = res.socket;
    // res's own 'drain' follows a res.write that returned false; the socket's, a direct write that did.
    const emitters = sock === null ? [res] : [res, sock];
    return new Promise((resolve) => {
      if (res.destroyed || sock?.destroyed === true) return resolve();
      const done = () => {
        for (const e of emitters) {
          e.off("drain", done);
          e.off("close", done);
        }
        resolve();
      };
      for (const e of emitters) {
        e.on("drain", done);
        e.on("close", done);
      }
    });
  }

  /** The socket to write to directly, or undefined when this write must go through `res.write`. */
  private direct(): Socket | undefined {
    if (!this.started) return undefined;
    const res = this.res;
    const sock = res.socket;
    if (sock === null || sock.destroyed || !res.chunkedEncoding || res.writableEnded || !res.headersSent) return undefined;
    // Bytes node still holds for this response outside the socket (a pipelined response waiting for its turn).
    if (res.writableLength !== sock.writableLength) return undefined;
    return sock;
  }
}
