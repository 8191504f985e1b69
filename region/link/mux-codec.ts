/**
 * A hand-written protobuf codec for `MuxDown` (region/proto/region.proto), the down-message of the DispatchMux
 * stream: a list of `MuxEvent`s of any number of requests. A MuxEvent's fields 1..3 are DispatchEvents' (encoded by
 * codec.ts), plus
 *   rid   = 4: uint32   → tag 0x20, varint
 *   error = 5: MuxError → tag 0x2A, length, { code = 1 string, message = 2 string, started = 3 bool }
 * and MuxDown is `events = 1` → tag 0x0A, length, MuxEvent (one field per event). Same wire format as protobufjs.
 * Unknown fields are skipped; malformed input throws a RangeError.
 */
import { Reader, decodeDone, encodeDispatchEvents, utf8At, varintSize, writeVarint } from "./codec.js";
import type { WireDispatchRequest, WireDone, WireMuxError, WireMuxEvent, WireMuxUp } from "./wire.js";

/**
 * Encodes one MuxDown message carrying `events`, after `headroom` bytes left for the caller (the framed connection's
 * header: mux-socket.ts writes header and message in one buffer).
 */
export function encodeMuxDown(events: readonly WireMuxEvent[], headroom = 0): Buffer {
  const pieces: Buffer[] = [];
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
    // events = 1 (0x0A, length) · the DispatchEvents fields · rid = 4 (0x20, varint) · error = 5.
    const head = Buffer.allocUnsafe(1 + varintSize(evLen) + 1 + varintSize(ev.rid));
    head[0] = 0x0a;
    const at = writeVarint(head, 1, evLen);
    pieces.push(head.subarray(0, at), body);
    const tail = head.subarray(at);
    tail[0] = 0x20;
    writeVarint(tail, 1, ev.rid);
    pieces.push(tail);
    if (errBuf !== undefined) pieces.push(errBuf);
    size += head.length + body.length + (errBuf?.length ?? 0);
  }
  const out = Buffer.allocUnsafe(headroom + size);
  let p = headroom;
  for (const piece of pieces) p += piece.copy(out, p);
  return out;
}

function decodeString(r: Reader): string {
  const e = r.bytesEnd();
  const s = utf8At(r.buf, r.pos, e);
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

/**
 * Encodes one MuxUp (the framed connection's up-message, mux-socket.ts), protobufjs's wire format:
 *   rid = 1 uint32 (0x08) · open = 2 DispatchRequest (0x12, length, { id 1, model 2, kind 3 strings; prompt_tokens 4,
 *   max_tokens 5, priority 6 uint32; body_json 7 string; batch 8 bool }) · cancel = 3 bool (0x18).
 * Fields at their default (0, "", false) are left out, as protobufjs leaves them. `headroom` bytes are left free
 * before the message (the framed connection's header: header and message in one buffer).
 */
export function encodeMuxUp(up: WireMuxUp, headroom = 0): Buffer {
  uint32(up.rid, "MuxUp.rid");
  const o = up.open;
  let openLen = 0;
  let strs: [string, string, string, string] = ["", "", "", ""];
  const lens = [0, 0, 0, 0];
  if (o !== null) {
    strs = [o.id, o.model, o.kind, o.body_json];
    for (let i = 0; i < 4; i++) {
      const n = (lens[i] = Buffer.byteLength(strs[i]!, "utf8"));
      if (n > 0) openLen += 1 + varintSize(n) + n;
    }
    for (const [v, f] of [[o.prompt_tokens, "prompt_tokens"], [o.max_tokens, "max_tokens"], [o.priority, "priority"]] as const) if (uint32(v, `DispatchRequest.${f}`) !== 0) openLen += 1 + varintSize(v);
    if (o.batch === true) openLen += 2;
  }
  const size = (up.rid === 0 ? 0 : 1 + varintSize(up.rid)) + (o === null ? 0 : 1 + varintSize(openLen) + openLen) + (up.cancel ? 2 : 0);
  const buf = Buffer.allocUnsafe(headroom + size);
  let p = headroom;
  if (up.rid !== 0) {
    buf[p++] = 0x08;
    p = writeVarint(buf, p, up.rid);
  }
  if (o !== null) {
    buf[p++] = 0x12;
    p = writeVarint(buf, p, openLen);
    const str = (tag: number, i: number) => {
      const n = lens[i]!;
      if (n === 0) return;
      buf[p++] = tag;
      p = writeVarint(buf, p, n);
      p += buf.write(strs[i]!, p, n, "utf8");
    };
    const num = (tag: number, v: number) => {
      if (v === 0) return;
      buf[p++] = tag;
      p = writeVarint(buf, p, v);
    };
    str(0x0a, 0);
    str(0x12, 1);
    str(0x1a, 2);
    num(0x20, o.prompt_tokens);
    num(0x28, o.max_tokens);
    num(0x30, o.priority);
    str(0x3a, 3);
    if (o.batch === true) {
      buf[p++] = 0x40;
      buf[p++] = 1;
    }
  }
  if (up.cancel) {
    buf[p++] = 0x18;
    buf[p++] = 1;
  }
  return buf;
}

/** Decodes one MuxUp as proto-loader does (defaults filled, `open` null when absent); malformed input throws a RangeError. */
export function decodeMuxUp(buf: Buffer): WireMuxUp {
  const out: WireMuxUp = { rid: 0, open: null, cancel: false };
  const r = new Reader(buf, 0, buf.length);
  while (r.pos < r.end) {
    const tag = r.varint();
    const field = tag >>> 3;
    const wt = tag & 7;
    if (field === 1 && wt === 0) out.rid = r.varint() >>> 0;
    else if (field === 3 && wt === 0) out.cancel = r.varint() !== 0;
    else if (field === 2 && wt === 2) {
      const end = r.bytesEnd();
      const o: WireDispatchRequest = { id: "", model: "", kind: "", prompt_tokens: 0, max_tokens: 0, priority: 0, body_json: "", batch: false };
      const sub = new Reader(r.buf, r.pos, end);
      while (sub.pos < end) {
        const t = sub.varint();
        const f = t >>> 3;
        const w = t & 7;
        if (w === 2 && (f === 1 || f === 2 || f === 3 || f === 7)) {
          const s = decodeString(sub);
          if (f === 1) o.id = s;
          else if (f === 2) o.model = s;
          else if (f === 3) o.kind = s;
          else o.body_json = s;
        } else if (w === 0 && f >= 4 && f <= 6) {
          const v = sub.varint() >>> 0;
          if (f === 4) o.prompt_tokens = v;
          else if (f === 5) o.max_tokens = v;
          else o.priority = v;
        } else if (w === 0 && f === 8) o.batch = sub.varint() !== 0;
        else sub.skip(w);
      }
      r.pos = end;
      out.open = o;
    } else r.skip(wt);
  }
  return out;
}

function uint32(v: number, what: string): number {
  if (!Number.isInteger(v) || v < 0 || v > 0xffffffff) throw new RangeError(`${what}: expected a uint32, got ${v}`);
  return v;
}
