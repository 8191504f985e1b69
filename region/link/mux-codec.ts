/**
 * A hand-written protobuf codec for `MuxDown` (region/proto/region.proto), the down-message of the DispatchMux
 * stream: a list of `MuxEvent`s of any number of requests. A MuxEvent's fields 1..3 are DispatchEvents' (encoded by
 * codec.ts), plus
 *   rid   = 4: uint32   → tag 0x20, varint
 *   error = 5: MuxError → tag 0x2A, length, { code = 1 string, message = 2 string, started = 3 bool }
 * and MuxDown is `events = 1` → tag 0x0A, length, MuxEvent (one field per event). Same wire format as protobufjs.
 * Unknown fields are skipped; malformed input throws a RangeError.
 */
import { Reader, decodeDone, encodeDispatchEvents, varintSize, writeVarint } from "./codec.js";
import type { WireDone, WireMuxError, WireMuxEvent } from "./wire.js";

/** Encodes one MuxDown message carrying `events`. */
export function encodeMuxDown(events: readonly WireMuxEvent[]): Buffer {
  const parts: Buffer[] = new Array<Buffer>(events.length);
  let size = 0;
  for (let i = 0; i < events.length; i++) {
    const ev = events[i]!;
    const body = encodeDispatchEvents(ev);
    const e = ev.error;
    let errBuf: Buffer | undefined;
    if (e !== null) {
      const code = Buffer.from(e.code, "utf8");
      const msg = Buffer.from(e.message, "utf8");
      const errLen = 1 + varintSize(code.length) + code.length + 1 + varintSize(msg.length) + msg.length + (e.started ? 2 : 0);
      errBuf = Buffer.allocUnsafe(1 + varintSize(errLen) + errLen);
      let p = 0;
      errBuf[p++] = 0x2a;
      p = writeVarint(errBuf, p, errLen);
      errBuf[p++] = 0x0a;
      p = writeVarint(errBuf, p, code.length);
      p += code.copy(errBuf, p);
      errBuf[p++] = 0x12;
      p = writeVarint(errBuf, p, msg.length);
      p += msg.copy(errBuf, p);
      if (e.started) {
        errBuf[p++] = 0x18;
        errBuf[p++] = 1;
      }
    }
    if (!Number.isInteger(ev.rid) || ev.rid < 0 || ev.rid > 0xffffffff) throw new RangeError(`MuxEvent.rid: expected a uint32, got ${ev.rid}`);
    const evLen = body.length + 1 + varintSize(ev.rid) + (errBuf?.length ?? 0);
    const head = Buffer.allocUnsafe(1 + varintSize(evLen));
    head[0] = 0x0a;
    writeVarint(head, 1, evLen);
    const tail = Buffer.allocUnsafe(1 + varintSize(ev.rid));
    tail[0] = 0x20;
    writeVarint(tail, 1, ev.rid);
    parts[i] = errBuf === undefined ? Buffer.concat([head, body, tail]) : Buffer.concat([head, body, tail, errBuf]);
    size += parts[i]!.length;
  }
  return Buffer.concat(parts, size);
}

function decodeString(r: Reader): string {
  const e = r.bytesEnd();
  const s = Buffer.from(r.buf.buffer, r.buf.byteOffset + r.pos, e - r.pos).toString("utf8");
  r.pos = e;
  return s;
}

function decodeError(r: Reader, end: number): WireMuxError {
  const out: WireMuxError = { code: "", message: "", started: false };
  const sub = new Reader(r.buf, r.pos, end);
  while (sub.pos < end) {
    const tag = sub.varint();
    const field = tag >>> 3;
    const wt = tag & 7;
    if (field === 1 && wt === 2) out.code = decodeString(sub);
    else if (field === 2 && wt === 2) out.message = decodeString(sub);
    else if (field === 3 && wt === 0) out.started = sub.varint() !== 0;
    else sub.skip(wt);
  }
  r.pos = end;
  return out;
}

function decodeEvent(r: Reader, end: number): WireMuxEvent {
  const texts: string[] = [];
  const tokens: number[] = [];
  let done: WireDone | null = null;
  let error: WireMuxError | null = null;
  let rid = 0;
  const sub = new Reader(r.buf, r.pos, end);
  while (sub.pos < end) {
    const tag = sub.varint();
    const field = tag >>> 3;
    const wt = tag & 7;
    if (field === 1 && wt === 2) texts.push(decodeString(sub));
    else if (field === 2 && wt === 2) {
      const e = sub.bytesEnd();
      const packed = new Reader(sub.buf, sub.pos, e);
      while (packed.pos < e) tokens.push(packed.varint());
      sub.pos = e;
    } else if (field === 2 && wt === 0) tokens.push(sub.varint());
    else if (field === 3 && wt === 2) done = decodeDone(sub, sub.bytesEnd());
    else if (field === 4 && wt === 0) rid = sub.varint();
    else if (field === 5 && wt === 2) error = decodeError(sub, sub.bytesEnd());
    else sub.skip(wt);
  }
  if (tokens.length !== texts.length) throw new RangeError(`MuxEvent: ${texts.length} texts but ${tokens.length} token counts`);
  r.pos = end;
  return { rid, texts, tokens, done, error };
}

/** Decodes one MuxDown message into its events, in order. */
export function decodeMuxDown(buf: Buffer): WireMuxEvent[] {
  const out: WireMuxEvent[] = [];
  const r = new Reader(buf, 0, buf.length);
  while (r.pos < r.end) {
    const tag = r.varint();
    if (tag >>> 3 === 1 && (tag & 7) === 2) out.push(decodeEvent(r, r.bytesEnd()));
    else r.skip(tag & 7);
  }
  return out;
}
