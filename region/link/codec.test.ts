import * as protoLoader from "@grpc/proto-loader";
import { describe, expect, it } from "vitest";
import { decodeDispatchEvents, encodeDispatchEvents } from "./codec.js";
import { regionProtoPath, type WireDispatchEvents } from "./region-proto.js";

// protobufjs's own (de)serializers for the same message, as proto-loader builds them.
const def = protoLoader.loadSync(regionProtoPath(), { keepCase: true, longs: Number, enums: String, defaults: true, arrays: true });
const reference = (def["tidegate.region.v1.Region"] as protoLoader.ServiceDefinition).Dispatch!;

const cases: WireDispatchEvents[] = [
  { texts: [" tide"], tokens: [1], done: null },
  { texts: [" a", "", " ünïcødé ✓", "x".repeat(300)], tokens: [1, 2, 3, 200_000], done: null },
  { texts: [], tokens: [], done: { finish_reason: "length", prompt_tokens: 7, completion_tokens: 50, total_tokens: 57 } },
  { texts: [" last"], tokens: [1], done: { finish_reason: "stop", prompt_tokens: 0, completion_tokens: 4_000_000_000, total_tokens: 4_000_000_000 } },
];

describe("DispatchEvents codec", () => {
  it("round-trips and matches protobufjs in both directions", () => {
    for (const m of cases) {
      const mine = encodeDispatchEvents(m);
      expect(decodeDispatchEvents(mine)).toEqual(m);
      expect(reference.responseDeserialize(mine)).toEqual(m);
      const theirs = reference.responseSerialize(m);
      expect(decodeDispatchEvents(theirs)).toEqual(m);
    }
  });

  it("rejects malformed input and mismatched lists instead of returning garbage", () => {
    const good = encodeDispatchEvents({ texts: [" tide"], tokens: [1], done: null });
    expect(() => decodeDispatchEvents(good.subarray(0, good.length - 2))).toThrow(RangeError);
    expect(() => decodeDispatchEvents(Buffer.from([0x0a, 0x05, 0x41]))).toThrow(/past the end/);
    expect(() => encodeDispatchEvents({ texts: ["a", "b"], tokens: [1], done: null })).toThrow(/2 texts but 1/);
    expect(() => encodeDispatchEvents({ texts: ["a"], tokens: [-1], done: null })).toThrow(/uint32/);
  });
});
