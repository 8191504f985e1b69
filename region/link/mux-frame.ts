/**
 * The framed DispatchMux connection (mux-socket.ts): the same MuxUp / MuxDown protobuf messages as the gRPC
 * DispatchMux stream (region/proto/region.proto), carried on a plain TCP (or TLS) connection to the region's gRPC port
 * instead of through grpc-js's HTTP/2 message pipeline, which cost a single stream ~0.4 ms each way and ~20 µs of
 * CPU per message on each side (router/README.md "The dispatch connection").
 *
 * The client opens with MUX_MAGIC (16 bytes; an HTTP/2 client's preface starts with "PRI", so the port tells the two
 * apart by the first byte), or over TLS with ALPN MUX_ALPN; the region answers MUX_MAGIC. Then both sides send frames:
 *   type (1 byte: FRAME_MESSAGE, FRAME_PING, FRAME_PONG) · length (4 bytes, big-endian) · payload (length bytes).
 * A message frame carries one MuxUp (client → region) or one MuxDown (region → client); a ping carries nothing and is
 * answered by a pong, so either side can tell a silent peer from a dead one.
 */
export const MUX_MAGIC = Buffer.from("tidegate-mux/1\r\n", "latin1");
export const MUX_ALPN = "tidegate-mux/1";
export const FRAME_MESSAGE = 0;
export const FRAME_PING = 1;
export const FRAME_PONG = 2;
/** Bytes of a frame's header (type, length). */
export const FRAME_HEADER_BYTES = 5;
const HEADER = FRAME_HEADER_BYTES;

/** One whole frame (header and payload in one buffer: one write). */
export function frame(type: number, payload: Buffer = EMPTY): Buffer {
  const out = Buffer.allocUnsafe(HEADER + payload.length);
  out[0] = type;
  out.writeUInt32BE(payload.length, 1);
  payload.copy(out, HEADER);
  return out;
}
const EMPTY = Buffer.alloc(0);

/** Fills in the header of a message frame whose payload was encoded after FRAME_HEADER_BYTES of headroom. */
export function messageFrame(buf: Buffer): Buffer {
  buf[0] = FRAME_MESSAGE;
  buf.writeUInt32BE(buf.length - FRAME_HEADER_BYTES, 1);
  return buf;
}

/** A frame the reader refuses: over the size limit, or of an unknown type. */
export class FrameError extends Error {
  constructor(
    readonly reason: "message_too_large" | "undecodable_message",
    message: string,
  ) {
    super(message);
  }
}

/**
 * Splits a byte stream into frames. `push` hands every whole frame to `onFrame` in order (the payload is a view of
 * the chunk when the frame lies within one, valid during the call) and keeps the rest; it throws FrameError on a frame over `maxBytes` or
 * of an unknown type, after which the connection is unusable.
 */
export class FrameReader {
  private rest: Buffer | undefined;

  constructor(
    private readonly maxBytes: number,
    private readonly onFrame: (type: number, payload: Buffer) => void,
  ) {}

  /**
   * `transient`: `chunk` is a read buffer the socket reuses after this call (`net.connect`'s `onread`), so what is
   * kept of it is copied.
   */
  push(chunk: Buffer, transient = false): void {
    let buf = chunk;
    if (this.rest !== undefined) {
      buf = Buffer.concat([this.rest, chunk]);
      this.rest = undefined;
    }
    let pos = 0;
    while (buf.length - pos >= HEADER) {
      const type = buf[pos]!;
      if (type > FRAME_PONG) throw new FrameError("undecodable_message", `unknown frame type ${type}`);
      const len = buf.readUInt32BE(pos + 1);
      if (len > this.maxBytes) throw new FrameError("message_too_large", `frame of ${len} bytes over the limit of ${this.maxBytes}`);
      if (buf.length - pos - HEADER < len) break;
      this.onFrame(type, buf.subarray(pos + HEADER, pos + HEADER + len));
      pos += HEADER + len;
    }
    if (pos < buf.length) this.rest = transient && buf === chunk ? Buffer.from(buf.subarray(pos)) : buf.subarray(pos);
  }
}
