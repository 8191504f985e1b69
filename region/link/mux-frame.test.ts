import { describe, expect, it } from "vitest";
import { FRAME_MESSAGE, FRAME_PING, FrameError, FrameReader, frame } from "./mux-frame.js";

describe("FrameReader", () => {
  it("splits frames across reads, and copies what it keeps of a transient read buffer before the buffer is reused", () => {
    const got: [number, string][] = [];
    const r = new FrameReader(1024, (type, payload) => got.push([type, payload.toString("latin1")]));
    const bytes = Buffer.concat([frame(FRAME_MESSAGE, Buffer.from("hello")), frame(FRAME_PING), frame(FRAME_MESSAGE, Buffer.from("world!"))]);
    // One reused read buffer, as `net.connect`'s onread gives: every read overwrites it.
    const shared = Buffer.alloc(64);
    for (const [from, to] of [[0, 3], [3, 12], [12, 17], [17, bytes.length]] as const) {
      bytes.copy(shared, 0, from, to);
      r.push(shared.subarray(0, to - from), true);
      shared.fill(0xee);
    }
    expect(got).toEqual([[FRAME_MESSAGE, "hello"], [FRAME_PING, ""], [FRAME_MESSAGE, "world!"]]);
  });

  it("refuses a frame over its limit and an unknown type", () => {
    const r = new FrameReader(4, () => {});
    expect(() => r.push(frame(FRAME_MESSAGE, Buffer.from("12345")))).toThrow(FrameError);
    const t = new FrameReader(4, () => {});
    expect(() => t.push(Buffer.from([9, 0, 0, 0, 0]))).toThrow(/unknown frame type 9/);
  });
});
