/**
 * A hand-written protobuf codec for `DispatchEvents` (region/proto/region.proto), the one message sent per token
 * batch. Same wire format as protobufjs (so the .proto stays the contract and any gRPC client can read it), without
 * protobufjs's object conversion and its allocations on the hot path:
 *   texts  = 1: repeated string   → tag 0x0A, length, UTF-8 bytes (one field per text)
 *   tokens = 2: repeated uint32   → packed: tag 0x12, byte length, varints (unpacked 0x10 varints also decoded)
 *   done   = 3: Done              → tag 0x1A, length, { finish_reason = 1 string, prompt/completion/total = 2/3/4 }
 * Unknown fields are skipped. Malformed input throws a RangeError (grpc-js turns it into an INTERNAL status).
 */
import type { WireDispatchEvents, WireDone } from "./wire.js";

/** Bytes of `v` as a protobuf varint. */
export function varintSize(v: number): number {
  let n = 1;
  while (v >= 0x80) {
    v = Math.floor(v / 128);
    n++;
  }
  return n;
}

/** Writes `v` as a varint at `pos`; returns the position after it. */
export function writeVarint(buf: Buffer, pos: number, v: number): number {
  while (v >= 0x80) {
    buf[pos++] = (v & 0x7f) | 0x80;
    v = Math.floor(v / 128);
  }
  buf[pos++] = v;
  return pos;
}

function uint(v: number, field: string): number {
  if (!Number.isInteger(v) || v < 0 || v > 0xffffffff) throw new RangeError(`DispatchEvents.${field}: expected a uint32, got ${v}`);
  return v;
}

/** Encodes one DispatchEvents message. */
export function encodeDispatchEvents(m: WireDispatchEvents): Buffer {
  const n = m.texts.length;
  if (m.tokens.length !== n) throw new RangeError(`DispatchEvents: ${n} texts but ${m.tokens.length} token counts`);
  let size = 0;
  const textBytes: number[] = new Array<number>(n);
  for (let i = 0; i < n; i++) {
    const b = Buffer.byteLength(m.texts[i]!, "utf8");
    textBytes[i] = b;
    size += 1 + varintSize(b) + b;
  }
  let packed = 0;
  for (let i = 0; i < n; i++) packed += varintSize(uint(m.tokens[i]!, "tokens"));
  if (n > 0) size += 1 + varintSize(packed) + packed;
  let doneSize = 0;
  const d = m.done;
  let reasonBytes = 0;
  if (d !== null) {
    reasonBytes = Buffer.byteLength(d.finish_reason, "utf8");
    doneSize = 1 + varintSize(reasonBytes) + reasonBytes + 1 + varintSize(uint(d.prompt_tokens, "done.prompt_tokens")) + 1 + varintSize(uint(d.completion_tokens, "done.completion_tokens")) + 1 + varintSize(uint(d.total_tokens, "done.total_tokens"));
    size += 1 + varintSize(doneSize) + doneSize;
  }
  const buf = Buffer.allocUnsafe(size);
  let pos = 0;
  for (let i = 0; i < n; i++) {
    buf[pos++] = 0x0a;
    pos = writeVarint(buf, pos, textBytes[i]!);
    pos += buf.write(m.texts[i]!, pos, "utf8");
  }
  if (n > 0) {
    buf[pos++] = 0x12;
    pos = writeVarint(buf, pos, packed);
    for (let i = 0; i < n; i++) pos = writeVarint(buf, pos, m.tokens[i]!);
  }
  if (d !== null) {
    buf[pos++] = 0x1a;
    pos = writeVarint(buf, pos, doneSize);
    buf[pos++] = 0x0a;
    pos = writeVarint(buf, pos, reasonBytes);
    pos += buf.write(d.finish_reason, pos, "utf8");
    buf[pos++] = 0x10;
    pos = writeVarint(buf, pos, d.prompt_tokens);
    buf[pos++] = 0x18;
    pos = writeVarint(buf, pos, d.completion_tokens);
    buf[pos++] = 0x20;
    pos = writeVarint(buf, pos, d.total_tokens);
  }
  return buf;
}

/** A cursor over a protobuf buffer (also used by mux-codec.ts). */
export class Reader {
  pos: number;
  constructor(
    readonly buf: Uint8Array,
    start: number,
    readonly end: number,
  ) {
    this.pos = start;
  }

  varint(): number {
    let v = 0;
    let mul = 1;
    for (let i = 0; i < 10; i++) {
      if (this.pos >= this.end) throw new RangeError("DispatchEvents: truncated varint");
      const b = this.buf[this.pos++]!;
      v += (b & 0x7f) * mul;
      if (b < 0x80) return v;
      mul *= 128;
    }
    throw new RangeError("DispatchEvents: varint too long");
  }

  bytesEnd(): number {
    const len = this.varint();
    const end = this.pos + len;
    if (end > this.end) throw new RangeError("DispatchEvents: length past the end of the message");
    return end;
  }

  skip(wireType: number): void {
    if (wireType === 0) this.varint();
    else if (wireType === 1) this.pos += 8;
    else if (wireType === 2) this.pos = this.bytesEnd();
    else if (wireType === 5) this.pos += 4;
    else throw new RangeError(`DispatchEvents: unsupported wire type ${wireType}`);
    if (this.pos > this.end) throw new RangeError("DispatchEvents: field past the end of the message");
  }
}

/** The UTF-8 text of `buf[start, end)` (on a Buffer, without a view object in between). */
export function utf8At(buf: Uint8Array, start: number, end: number): string {
  return buf instanceof Buffer ? buf.toString("utf8", start, end) : Buffer.from(buf.buffer, buf.byteOffset + start, end - start).toString("utf8");
}

/** Decodes a Done sub-message ending at `end`; leaves `r` at `end`. */
export function decodeDone(r: Reader, end: number): WireDone {
  const d: WireDone = { finish_reason: "", prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 };
  const sub = new Reader(r.buf, r.pos, end);
  while (sub.pos < end) {
    const tag = sub.varint();
    const field = tag >>> 3;
    const wt = tag & 7;
    if (field === 1 && wt === 2) {
      const e = sub.bytesEnd();
      d.finish_reason = utf8At(sub.buf, sub.pos, e);
      sub.pos = e;
    } else if (field === 2 && wt === 0) d.prompt_tokens = sub.varint();
    else if (field === 3 && wt === 0) d.completion_tokens = sub.varint();
    else if (field === 4 && wt === 0) d.total_tokens = sub.varint();
    else sub.skip(wt);
  }
  r.pos = end;
  return d;
}

/** Decodes one DispatchEvents message. */
export function decodeDispatchEvents(buf: Buffer): WireDispatchEvents {
  const texts: string[] = [];
  const tokens: number[] = [];
  let done: WireDone | null = null;
  const r = new Reader(buf, 0, buf.length);
  while (r.pos < r.end) {
    const tag = r.varint();
    const field = tag >>> 3;
    const wt = tag & 7;
    if (field === 1 && wt === 2) {
      const e = r.bytesEnd();
      texts.push(buf.toString("utf8", r.pos, e));
      r.pos = e;
    } else if (field === 2 && wt === 2) {
      const e = r.bytesEnd();
      const packed = new Reader(buf, r.pos, e);
      while (packed.pos < e) tokens.push(packed.varint());
      r.pos = e;
    } else if (field === 2 && wt === 0) tokens.push(r.varint());
    else if (field === 3 && wt === 2) done = decodeDone(r, r.bytesEnd());
    else r.skip(wt);
  }
  if (tokens.length !== texts.length) throw new RangeError(`DispatchEvents: ${texts.length} texts but ${tokens.length} token counts`);
  return { texts, tokens, done };
}
