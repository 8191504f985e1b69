/**
 * Issue 15 item 2, gRPC side: malformed and fuzzed messages (fast-check) on every method of a real `tidegate region`
 * (static, simulated engines) and a real `tidegate agent`, sent as raw bytes through grpc-js.
 *
 * Inputs per method: bytes that cannot decode (invalid wire types, truncated fields, varints that overflow), random
 * bytes, and messages built from the method's own descriptor with every field fuzzed (strings, boundary numbers,
 * repeated and nested fields), several per call on streaming methods. The agent's StartEngine gets no random bytes
 * and no command template (it runs programs by design; it is the region's to call), and its memory is capped.
 *
 * Properties: neither process exits; every call ends with OK or an error status that carries a message (details);
 * no call runs past its deadline without the server answering; after every round a good call is served
 * (region: a dispatch through GrpcRegionLink streams to `done`; agent: Info).
 */
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WallClock } from "../../core/clock.js";
import { AgentClient } from "../../nodes/agent/client.js";
import { agentProtoPath } from "../../nodes/agent/agent-proto.js";
import { GrpcRegionLink } from "../../region/link/grpc-client.js";
import { regionProtoPath } from "../../region/link/region-proto.js";
import { spawnTidegate, stopAll, type Proc } from "../e2e/procs.js";

const SEED = Number(process.env.TIDEGATE_FUZZ_SEED ?? Date.now() % 2 ** 31);
const ROUNDS = 120;
const PER_ROUND = 25;
const CALL_DEADLINE_MS = 3000;
const MODEL = "llama3.2-3b";

let dir: string;
let region: Proc;
let agent: Proc;
let regionAddress: string;
let agentAddress: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "tidegate-fuzz-grpc-"));
  const file = join(dir, "config.json");
  writeFileSync(
    file,
    JSON.stringify({
      models: [{ name: MODEL, gpusPerInstance: { "h100-80gb": 2 } }],
      regions: [{ name: "r1", grpcAddress: "127.0.0.1:0", gpus: [{ type: "h100-80gb", count: 4 }], endpoints: [{ model: MODEL, gpu: "h100-80gb", instances: 2 }] }],
      controller: { actuator: "static" },
      engines: { kind: "sim", timeScale: 0.02 },
    }),
  );
  [region, agent] = await Promise.all([
    spawnTidegate("region", ["region", "--config", file, "--region", "r1", "--log-level", "error"], /grpc (\S+) metrics/),
    spawnTidegate("agent", ["agent", "--node-id", "fuzz-node", "--transport", "tcp", "--memory-bytes", String(64 * 1024 * 1024), "--gpu-slots", "1", "--log-level", "error"], /grpc (\S+) data/),
  ]);
  regionAddress = region.match[1]!;
  agentAddress = agent.match[1]!;
  console.log(`[fuzz-grpc] seed ${SEED} (TIDEGATE_FUZZ_SEED=${SEED} replays it)`);
}, 90_000);

afterAll(async () => {
  await stopAll();
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
});

// ---- messages from descriptors -------------------------------------------------------------------------------

type Defs = protoLoader.PackageDefinition;
interface FieldDescriptor {
  name: string;
  label: string;
  type: string;
  typeName: string;
}

function messageArb(defs: Defs, typeName: string, depth: number): fc.Arbitrary<Record<string, unknown>> {
  const t = (defs[typeName] as unknown as { type: { field: FieldDescriptor[] } }).type;
  const fields: Record<string, fc.Arbitrary<unknown>> = {};
  for (const f of t.field) {
    const one = scalarArb(defs, f, depth);
    if (one === undefined) continue;
    fields[f.name] = f.label === "LABEL_REPEATED" ? fc.array(one, { maxLength: depth > 1 ? 1 : 4 }) : one;
  }
  return fc.record(fields, { requiredKeys: [] });
}

function scalarArb(defs: Defs, f: FieldDescriptor, depth: number): fc.Arbitrary<unknown> | undefined {
  switch (f.type) {
    case "TYPE_STRING":
      return fc.oneof(fc.string({ maxLength: 40 }), fc.constantFrom("", MODEL, "r1", "fuzz-node", "llama2-70b", "h100-80gb", "{}", "../../etc/passwd", "\u0000"), fc.string({ minLength: 2000, maxLength: 5000 }));
    case "TYPE_BYTES":
      return fc.uint8Array({ maxLength: 64 }).map((u) => Buffer.from(u));
    case "TYPE_BOOL":
      return fc.boolean();
    case "TYPE_DOUBLE":
    case "TYPE_FLOAT":
      return fc.oneof(fc.double(), fc.constantFrom(0, -1, 1e308, Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY));
    case "TYPE_UINT32":
    case "TYPE_FIXED32":
      return fc.oneof(fc.nat(64), fc.constantFrom(0, 1, 2 ** 31, 2 ** 32 - 1));
    case "TYPE_INT32":
    case "TYPE_SINT32":
    case "TYPE_SFIXED32":
      return fc.oneof(fc.integer({ min: -64, max: 64 }), fc.constantFrom(-(2 ** 31), 2 ** 31 - 1));
    case "TYPE_UINT64":
    case "TYPE_FIXED64":
      return fc.oneof(fc.nat(4096), fc.constantFrom("0", "18446744073709551615", "9007199254740993", "4294967296"));
    case "TYPE_INT64":
    case "TYPE_SINT64":
    case "TYPE_SFIXED64":
      return fc.oneof(fc.integer({ min: -4096, max: 4096 }), fc.constantFrom("-9223372036854775808", "9223372036854775807"));
    case "TYPE_ENUM":
      return fc.nat(8);
    case "TYPE_MESSAGE":
      if (depth >= 3) return undefined;
      // proto-loader gives nested type names relative to the package ("DispatchRequest") or fully qualified.
      return messageArb(defs, defs[f.typeName.replace(/^\./, "")] !== undefined ? f.typeName.replace(/^\./, "") : `${pkgOf(defs, f.typeName)}`, depth + 1);
    default:
      return undefined;
  }
}

/** The fully qualified name of a type named relative to its package. */
function pkgOf(defs: Defs, relative: string): string {
  const name = relative.split(".").at(-1)!;
  const found = Object.keys(defs).find((k) => k.endsWith(`.${name}`) && "type" in (defs[k] as object));
  if (found === undefined) throw new Error(`no message type ${relative} in the descriptors`);
  return found;
}

/** Bytes that never decode as a protobuf message. */
const undecodable = fc.oneof(
  fc.constantFrom(Buffer.from([0x0f]), Buffer.from([0x0a, 0x05, 0x61]), Buffer.from(Array(11).fill(0xff)), Buffer.from([0x08]), Buffer.from([0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f]), Buffer.from([0x00])),
  fc.uint8Array({ maxLength: 64 }).map((u) => Buffer.concat([Buffer.from([0x0a, 0x10]), Buffer.from(u), Buffer.from([0x0a, 0x7f, 0x01])])),
);

interface Method {
  name: string;
  path: string;
  requestStream: boolean;
  responseStream: boolean;
  /** One request message's bytes. */
  input: fc.Arbitrary<Buffer>;
}

function methodsOf(protoPath: string, service: string, safe: (name: string) => boolean, tweak: (name: string, msg: Record<string, unknown>) => Record<string, unknown> = (_, m) => m): Method[] {
  const defs = protoLoader.loadSync(protoPath, { keepCase: true, longs: Number, enums: String, defaults: true, arrays: true });
  const svc = defs[service] as unknown as Record<string, { path: string; requestStream: boolean; responseStream: boolean; requestSerialize: (o: unknown) => Buffer; requestType: { type: { name: string } } }>;
  return Object.entries(svc).map(([name, m]) => {
    const typeName = `${service.slice(0, service.lastIndexOf("."))}.${m.requestType.type.name}`;
    const fuzzed = messageArb(defs, typeName, 0).map((o) => {
      try {
        return m.requestSerialize(tweak(name, o));
      } catch {
        return Buffer.from([0x0f]);
      }
    });
    const random = fc.uint8Array({ maxLength: 256 }).map((u) => Buffer.from(u));
    const input = safe(name) ? fc.oneof({ weight: 4, arbitrary: fuzzed }, { weight: 1, arbitrary: random }, { weight: 1, arbitrary: undecodable }) : fc.oneof({ weight: 4, arbitrary: fuzzed }, { weight: 1, arbitrary: undecodable });
    return { name, path: m.path, requestStream: m.requestStream, responseStream: m.responseStream, input };
  });
}

interface CallOutcome {
  method: string;
  code: number;
  details: string;
  messages: number;
  timedOut: boolean;
}

/** One raw call: identity (de)serializers, a deadline; a server stream is cancelled after its first message. */
function rawCall(client: grpc.Client, m: Method, inputs: Buffer[]): Promise<CallOutcome> {
  const id = (b: Buffer) => b;
  const deadline = Date.now() + CALL_DEADLINE_MS;
  return new Promise((resolve) => {
    let messages = 0;
    let cancelledByUs = false;
    const finish = (s: { code: number; details: string }) => resolve({ method: m.name, code: s.code, details: s.details, messages, timedOut: s.code === grpc.status.DEADLINE_EXCEEDED });
    if (!m.requestStream && !m.responseStream) {
      client.makeUnaryRequest(m.path, id, id, inputs[0]!, { deadline }, (err) => finish(err === null ? { code: 0, details: "" } : { code: err.code, details: err.details }));
      return;
    }
    const call = m.requestStream
      ? m.responseStream
        ? client.makeBidiStreamRequest(m.path, id, id, { deadline })
        : client.makeClientStreamRequest(m.path, id, id, { deadline }, () => undefined)
      : client.makeServerStreamRequest(m.path, id, id, inputs[0]!, { deadline });
    const readable = call as grpc.ClientReadableStream<Buffer>;
    readable.on?.("data", () => {
      messages++;
      // A long-lived stream (Telemetry, a generation) answered: that is all this call needed to show.
      if (messages === 1 && m.name !== "DispatchMux") {
        cancelledByUs = true;
        call.cancel();
      }
    });
    call.on("error", () => undefined);
    call.on("status", (s: grpc.StatusObject) => finish(cancelledByUs && s.code === grpc.status.CANCELLED ? { code: 0, details: "" } : { code: s.code, details: s.details }));
    if (m.requestStream) {
      const w = call as grpc.ClientWritableStream<Buffer>;
      for (const b of inputs) w.write(b);
      w.end();
    }
  });
}

function badOutcome(o: CallOutcome): string | undefined {
  if (o.code === 0) return undefined;
  // A deadline with no answer at all from a server stream that legitimately waits (DispatchMux kept open by a
  // generation) is allowed only when something came back; silence until the deadline is a failure.
  if (o.timedOut) return o.messages > 0 ? undefined : `${o.method}: no answer before the ${CALL_DEADLINE_MS} ms deadline`;
  if (o.code === grpc.status.UNAVAILABLE && /Connection dropped|ECONNRESET|No connection/i.test(o.details)) return `${o.method}: connection lost (${o.details})`;
  if (o.details.trim().length === 0) return `${o.method}: status ${grpc.status[o.code]} without a message`;
  // INTERNAL is what grpc-js answers for a request it cannot deserialize; from a handler it would be a bug.
  if (o.code === grpc.status.INTERNAL && !/deserializ|parse|decode|invalid wire|index out of range/i.test(o.details)) return `${o.method}: INTERNAL (${o.details})`;
  return undefined;
}

async function fuzzService(label: string, address: string, methods: Method[], good: () => Promise<void>, proc: () => Proc): Promise<void> {
  const client = new grpc.Client(address, grpc.credentials.createInsecure(), { "grpc.enable_retries": 0 });
  const codes = new Map<string, number>();
  const t0 = Date.now();
  try {
    const callArb = fc.constantFrom(...methods).chain((m) => fc.array(m.input, { minLength: 1, maxLength: m.requestStream ? 5 : 1 }).map((inputs) => ({ m, inputs })));
    const out = await fc.check(
      fc.asyncProperty(fc.array(callArb, { minLength: PER_ROUND, maxLength: PER_ROUND }), async (calls) => {
        const outcomes = await Promise.all(calls.map(({ m, inputs }) => rawCall(client, m, inputs)));
        outcomes.forEach((o, i) => {
          const key = `${o.method}:${grpc.status[o.code]}`;
          codes.set(key, (codes.get(key) ?? 0) + 1);
          const bad = badOutcome(o);
          if (bad !== undefined) throw new Error(`${bad}; inputs ${calls[i]!.inputs.map((b) => b.toString("hex").slice(0, 200)).join(" | ")}`);
        });
        expect(proc().child.exitCode).toBeNull();
        await good();
      }),
      { numRuns: ROUNDS, seed: SEED, endOnFailure: true },
    );
    if (out.failed) {
      const err = out.errorInstance instanceof Error ? out.errorInstance.message : String(out.errorInstance);
      throw new Error(`${label}: property failed (seed ${out.seed}, path ${String(out.counterexamplePath)}): ${err.slice(0, 1500)}`);
    }
  } finally {
    client.close();
  }
  console.log(`[fuzz-grpc] ${label}: ${ROUNDS * PER_ROUND} calls in ${((Date.now() - t0) / 1000).toFixed(1)} s; ${JSON.stringify(Object.fromEntries([...codes].sort()))}`);
  expect(proc().child.exitCode).toBeNull();
}

describe("fuzzing the gRPC services (fast-check)", () => {
  it("region service: malformed and fuzzed messages on every method", async () => {
    const methods = methodsOf(regionProtoPath(), "tidegate.region.v1.Region", () => true, (name, msg) =>
      // Keep generations short when a fuzzed request happens to be valid.
      name === "Dispatch" ? { ...msg, max_tokens: Math.min(Number(msg.max_tokens ?? 0) || 0, 64) } : msg,
    );
    expect(methods.map((m) => m.name).sort()).toEqual(["Dispatch", "DispatchMux", "Instances", "SendTargets", "Telemetry"]);
    const link = new GrpcRegionLink({ region: "r1", address: regionAddress, clock: new WallClock() });
    try {
      let n = 0;
      await fuzzService("region", regionAddress, methods, async () => {
        const events = [];
        for await (const ev of link.dispatch({ id: `good-${n++}`, model: MODEL, kind: "completion", promptTokens: 4, maxTokens: 3, priority: 0, body: { model: MODEL, prompt: "hi", max_tokens: 3 } })) events.push(ev);
        expect(events.at(-1)?.type).toBe("done");
      }, () => region);
    } finally {
      await link.close();
    }
  }, 300_000);

  it("agent service: malformed and fuzzed messages on every method", async () => {
    const methods = methodsOf(
      agentProtoPath(),
      "tidegate.agent.v1.NodeAgent",
      (name) => name !== "StartEngine",
      (name, msg) => (name === "StartEngine" ? { ...msg, command_template: "", await_blocks: false } : msg),
    );
    expect(methods.map((m) => m.name).sort()).toEqual(["Drop", "Info", "Load", "Run", "StartEngine", "StopEngine", "Verify"]);
    const client = new AgentClient(agentAddress, "fuzz-node");
    try {
      await fuzzService("agent", agentAddress, methods, async () => {
        const info = await client.info();
        expect(info.nodeId).toBe("fuzz-node");
      }, () => agent);
    } finally {
      client.close();
    }
  }, 300_000);
});
