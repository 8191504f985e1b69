/**
 * The openai-http adapter's streamed requests (POST, plain http) on a minimal HTTP/1.1 client: the request written
 * in one `socket.write` as it is made, the response's status line and headers parsed here, and its body (chunked or
 * with a length) handed to the caller as bytes straight from the socket's reads. node:http does the same through a
 * ClientRequest, llhttp, an IncomingMessage stream and a tick per request to flush: ~40% of the region's CPU per
 * streamed request and one stream's first token later by that much (router/README.md "The dispatch connection").
 * Everything else the adapter sends (/metrics, control, https) stays on node:http.
 *
 * Reads land in the process's read buffer (core/read-buffer.ts: no Buffer, stream event or 'data' listener per
 * read) and go to whoever holds the connection: the exchange under way, or the idle check. What the parser keeps past
 * a read (a response head split over reads, an error body) it copies; body bytes go to the handler as views valid
 * during the call.
 *
 * Connections are kept alive and reused; an idle one is closed after IDLE_MS (below node's default server
 * keep-alive timeout of 5 s, so a request is not written into a connection the server is closing), and one whose
 * response did not end cleanly, or that said `connection: close`, is not reused.
 */
import * as net from "node:net";
import { onreadInto } from "../../core/read-buffer.js";

/** An idle connection is closed after this long. */
export const IDLE_MS = 4_000;
/** Largest response head accepted (status line and headers). */
const MAX_HEAD_BYTES = 64 * 1024;

/** What one response reports, in order: `head` once, `body` per read, then `end` or `fail` once. */
export interface H1Handler {
  head(status: number, headers: ReadonlyMap<string, string>): void;
  /** Body bytes as they come (chunk framing removed): a view of the read buffer, valid only during the call. */
  body(bytes: Buffer): void;
  end(): void;
  fail(err: Error): void;
}

/** One request under way. */
export interface H1Call {
  pause(): void;
  resume(): void;
  /** Ends the request (the connection is closed, not reused); `fail` is not called. */
  destroy(): void;
}

/** A pooled connection: its reads go to `onBytes` (false pauses the socket, as `onread` lets a callback). */
interface Conn {
  socket: net.Socket;
  onBytes: (bytes: Buffer) => boolean;
}

/** An idle connection: the listeners that drop it when the server closes it or sends what nobody asked for. */
interface Idle {
  conn: Conn;
  timer: NodeJS.Timeout;
  drop: () => void;
}

/** A pool of keep-alive connections to one host:port. */
export class H1Pool {
  private readonly idle: Idle[] = [];
  private closed = false;

  constructor(
    private readonly host: string,
    private readonly port: number,
  ) {}

  /**
   * Sends `head` (request line and headers, ending in the blank line) and `body` in one write, on an idle connection
   * or a new one. A connection that fails before the response's head fails the call with node's socket error (its
   * `code`: ECONNREFUSED, ECONNRESET, …); no head within `headMs` fails it with a timeout.
   */
  request(head: string, body: string, handler: H1Handler, headMs: number): H1Call {
    const reused = this.idle.pop();
    if (reused !== undefined) this.unidle(reused);
    const conn = reused?.conn ?? this.connect();
    const call = new Exchange(conn, handler, headMs, (c) => this.release(c));
    conn.socket.write(head + body);
    return call;
  }

  private connect(): Conn {
    const conn = { onBytes: () => true } as unknown as Conn;
    conn.socket = net.connect({ host: this.host, port: this.port, noDelay: true, onread: onreadInto((bytes) => conn.onBytes(bytes)) });
    return conn;
  }

  /** Idle connections now (tests). */
  get idleCount(): number {
    return this.idle.length;
  }

  close(): void {
    this.closed = true;
    for (const c of this.idle.splice(0)) {
      this.unidle(c);
      c.conn.socket.destroy();
    }
  }

  private unidle(c: Idle): void {
    clearTimeout(c.timer);
    c.conn.socket.off("close", c.drop);
    c.conn.socket.off("error", c.drop);
  }

  private release(conn: Conn): void {
    const socket = conn.socket;
    if (this.closed || socket.destroyed) return void socket.destroy();
    const entry: Idle = {
      conn,
      timer: setTimeout(() => entry.drop(), IDLE_MS),
      drop: () => {
        const i = this.idle.indexOf(entry);
        if (i !== -1) this.idle.splice(i, 1);
        this.unidle(entry);
        socket.destroy();
      },
    };
    entry.timer.unref();
    // Closed by the server, failed, or sent bytes nobody asked for: not reusable.
    socket.on("close", entry.drop);
    socket.on("error", entry.drop);
    conn.onBytes = () => {
      entry.drop();
      return false;
    };
    this.idle.push(entry);
  }
}

const enum State {
  Head,
  ChunkSize,
  ChunkData,
  ChunkDataEnd,
  Trailers,
  Length,
  UntilClose,
  Done,
}

/** One request/response on a socket. */
class Exchange implements H1Call {
  private state = State.Head;
  private head: Buffer | undefined;
  private remaining = 0;
  private line = "";
  private keepAlive = true;
  private finished = false;
  private paused = false;
  private headTimer: NodeJS.Timeout | undefined;
  private readonly socket: net.Socket;
  private readonly onEnd = () => this.closedEarly(null);
  private readonly onError = (err: Error) => this.closedEarly(err);

  constructor(
    private readonly conn: Conn,
    private readonly handler: H1Handler,
    headMs: number,
    private readonly release: (c: Conn) => void,
  ) {
    const socket = conn.socket;
    this.socket = socket;
    conn.onBytes = (bytes) => {
      this.read(bytes);
      return !this.paused;
    };
    socket.on("end", this.onEnd);
    socket.on("close", this.onEnd);
    socket.on("error", this.onError);
    socket.resume();
    this.headTimer = setTimeout(() => this.abort(new Error(`no response headers within ${headMs} ms`)), headMs);
  }

  pause(): void {
    if (this.finished) return;
    this.paused = true;
    this.socket.pause();
  }

  resume(): void {
    if (this.finished) return;
    this.paused = false;
    this.socket.resume();
  }

  destroy(): void {
    if (!this.finished) this.finish(false);
  }

  private abort(err: Error): void {
    if (this.finished) return;
    this.finish(false);
    this.handler.fail(err);
  }

  private closedEarly(err: Error | null): void {
    if (this.finished) return;
    if (this.state === State.UntilClose && err === null) {
      this.finish(false);
      this.handler.end();
      return;
    }
    this.abort(err ?? Object.assign(new Error(this.state === State.Head ? "socket hang up" : "the upstream connection closed before the response ended"), { code: "ECONNRESET" }));
  }

  private finish(reusable: boolean): void {
    this.finished = true;
    clearTimeout(this.headTimer);
    this.conn.onBytes = () => true;
    this.socket.off("end", this.onEnd);
    this.socket.off("close", this.onEnd);
    this.socket.off("error", this.onError);
    // Not reusable: closed here, so that nothing (a late error included) reaches a socket nobody listens to.
    if (reusable) this.release(this.conn);
    else this.socket.destroy();
  }

  private read(chunk: Buffer): void {
    let buf = chunk;
    try {
      while (buf.length > 0 && !this.finished) buf = this.step(buf);
    } catch (err) {
      this.abort(err as Error);
    }
  }

  /** Consumes what it can of `buf` in the current state; returns the rest. */
  private step(buf: Buffer): Buffer {
    switch (this.state) {
      case State.Head: {
        const all = this.head === undefined ? buf : Buffer.concat([this.head, buf]);
        const end = all.indexOf("\r\n\r\n");
        if (end === -1) {
          if (all.length > MAX_HEAD_BYTES) throw new Error(`response head over ${MAX_HEAD_BYTES} bytes`);
          this.head = all === buf ? Buffer.from(buf) : all;
          return EMPTY;
        }
        this.head = undefined;
        this.parseHead(all.toString("latin1", 0, end));
        return all.subarray(end + 4);
      }
      case State.Length: {
        const n = Math.min(this.remaining, buf.length);
        this.remaining -= n;
        const rest = buf.subarray(n);
        if (n > 0) this.handler.body(n === buf.length ? buf : buf.subarray(0, n));
        if (this.remaining === 0 && !this.finished) this.complete();
        return rest;
      }
      case State.UntilClose:
        this.handler.body(buf);
        return EMPTY;
      case State.ChunkSize:
      case State.Trailers:
      case State.ChunkDataEnd: {
        const nl = buf.indexOf(0x0a);
        if (nl === -1) {
          this.line += buf.toString("latin1");
          if (this.line.length > 4096) throw new Error("chunk-size line over 4096 bytes");
          return EMPTY;
        }
        const line = (this.line + buf.toString("latin1", 0, nl)).replace(/\r$/, "");
        this.line = "";
        const rest = buf.subarray(nl + 1);
        if (this.state === State.ChunkDataEnd) {
          if (line.length !== 0) throw new Error("chunk data not followed by CRLF");
          this.state = State.ChunkSize;
        } else if (this.state === State.ChunkSize) {
          const semi = line.indexOf(";");
          const hex = (semi === -1 ? line : line.slice(0, semi)).trim();
          if (!/^[0-9a-fA-F]{1,8}$/.test(hex)) throw new Error(`bad chunk size ${JSON.stringify(line.slice(0, 40))}`);
          this.remaining = parseInt(hex, 16);
          this.state = this.remaining === 0 ? State.Trailers : State.ChunkData;
        } else if (line.length === 0) this.complete(); // Trailers: the blank line ends the message
        return rest;
      }
      case State.ChunkData: {
        const n = Math.min(this.remaining, buf.length);
        this.remaining -= n;
        if (this.remaining === 0) this.state = State.ChunkDataEnd;
        this.handler.body(n === buf.length ? buf : buf.subarray(0, n));
        return buf.subarray(n);
      }
      default:
        return EMPTY;
    }
  }

  private parseHead(text: string): void {
    const lines = text.split("\r\n");
    const m = /^HTTP\/1\.([01]) (\d{3})/.exec(lines[0] ?? "");
    if (m === null) throw new Error(`bad status line ${JSON.stringify((lines[0] ?? "").slice(0, 60))}`);
    const status = Number(m[2]);
    const headers = new Map<string, string>();
    for (let i = 1; i < lines.length; i++) {
      const l = lines[i]!;
      const c = l.indexOf(":");
      if (c <= 0) throw new Error(`bad header line ${JSON.stringify(l.slice(0, 60))}`);
      headers.set(l.slice(0, c).trim().toLowerCase(), l.slice(c + 1).trim());
    }
    const connection = headers.get("connection")?.toLowerCase();
    this.keepAlive = m[1] === "1" ? connection !== "close" : connection === "keep-alive";
    clearTimeout(this.headTimer);
    this.headTimer = undefined;
    const te = headers.get("transfer-encoding")?.toLowerCase();
    const length = headers.get("content-length");
    if (te !== undefined && te.split(",").at(-1)!.trim() === "chunked") this.state = State.ChunkSize;
    else if (length !== undefined) {
      if (!/^\d+$/.test(length)) throw new Error(`bad content-length ${JSON.stringify(length)}`);
      this.remaining = Number(length);
      this.state = State.Length;
    } else if (status === 204 || status === 304) this.state = State.Length;
    else {
      this.state = State.UntilClose;
      this.keepAlive = false;
    }
    this.handler.head(status, headers);
    if (!this.finished && this.state === State.Length && this.remaining === 0) this.complete();
  }

  private complete(): void {
    this.state = State.Done;
    this.finish(this.keepAlive);
    this.handler.end();
  }
}

const EMPTY = Buffer.alloc(0);
