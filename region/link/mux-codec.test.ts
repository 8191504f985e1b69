import * as protoLoader from "@grpc/proto-loader";
import { describe, expect, it } from "vitest";
import { decodeMuxDown, decodeMuxUp, encodeMuxDown, encodeMuxUp } from "./mux-codec.js";
import { regionProtoPath, type WireMuxEvent, type WireMuxUp } from "./region-proto.js";

// protobufjs's own (de)serializers for MuxDown (`{ events: MuxEvent[] }`), as proto-loader builds them.
const def = protoLoader.loadSync(regionProtoPath(), { keepCase: true, longs: Number, enums: String, defaults: true, arrays: true });
const reference = (def["tidegate.region.v1.Region"] as protoLoader.ServiceDefinition).DispatchMux!;

const events: WireMuxEvent[] = [
  { rid: 1, texts: [" tide"], tokens: [1], done: null, error: null },
  { rid: 300, texts: [" a", "", " ünïcødé ✓", "x".repeat(300)], tokens: [1, 2, 3, 200_000], done: null, error: null },
  { rid: 4_000_000_000, texts: [" last"], tokens: [1], done: { finish_reason: "stop", prompt_tokens: 3, completion_tokens: 4, total_tokens: 7 }, error: null },
  { rid: 7, texts: [], tokens: [], done: null, error: { code: "model_not_found", message: "no such model ✗", started: false } },
  { rid: 8, texts: [" x"], tokens: [1], done: null, error: { code: "upstream_error", message: "", started: true } },
];

describe("MuxDown codec", () => {
  it("round-trips many requests' events in one message and matches protobufjs in both directions", () => {
    for (const list of [events, [events[0]!], []]) {
      const mine = encodeMuxDown(list);
      expect(decodeMuxDown(mine)).toEqual(list);
      expect(reference.responseDeserialize(mine)).toEqual({ events: list });
      expect(decodeMuxDown(reference.responseSerialize({ events: list }))).toEqual(list);
      expect(encodeMuxDown(list, 5).subarray(5)).toEqual(mine);
    }
  });

  it("rejects malformed input", () => {
    const good = encodeMuxDown(events);
    expect(() => decodeMuxDown(good.subarray(0, good.length - 3))).toThrow(RangeError);
    expect(() => encodeMuxDown([{ rid: -1, texts: [], tokens: [], done: null, error: null }])).toThrow(/uint32/);
    expect(() => encodeMuxDown([{ rid: 1, texts: ["a"], tokens: [], done: null, error: null }])).toThrow(/1 texts but 0/);
  });
});

describe("MuxUp codec", () => {
  const ups: WireMuxUp[] = [
    { rid: 1, open: { id: "cmpl-1", model: "llama3.2-3b", kind: "completion", prompt_tokens: 7, max_tokens: 50, priority: 0, body_json: JSON.stringify({ prompt: "ünïcødé ✓", max_tokens: 50 }), batch: false }, cancel: false },
    { rid: 4_000_000_000, open: { id: "b-2", model: "m", kind: "chat", prompt_tokens: 300_000, max_tokens: 1, priority: 1, body_json: "{}", batch: true }, cancel: false },
    { rid: 9, open: null, cancel: true },
    { rid: 0, open: null, cancel: false },
  ];

  it("round-trips and matches protobufjs in both directions", () => {
    for (const up of ups) {
      const mine = encodeMuxUp(up);
      expect(decodeMuxUp(mine)).toEqual(up);
      expect(reference.requestDeserialize(mine)).toEqual(up);
      expect(decodeMuxUp(reference.requestSerialize(up))).toEqual(up);
      // With headroom (the frame header mux-socket.ts fills in): the same bytes after it.
      expect(encodeMuxUp(up, 5).subarray(5)).toEqual(mine);
    }
  });

  it("rejects malformed input", () => {
    const good = encodeMuxUp(ups[0]!);
    expect(() => decodeMuxUp(good.subarray(0, good.length - 3))).toThrow(RangeError);
    expect(() => encodeMuxUp({ rid: -1, open: null, cancel: true })).toThrow(/uint32/);
    expect(() => encodeMuxUp({ ...ups[0]!, open: { ...ups[0]!.open!, max_tokens: 1.5 } })).toThrow(/max_tokens/);
  });
});
