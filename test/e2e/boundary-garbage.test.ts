/**
 * Issue 32 item 5: what the tier boundaries refuse is logged and counted. A real `tidegate region` (static,
 * simulated engines) and a real `tidegate agent`, both at the default log level; garbage goes to the region's gRPC
 * port, the agent's gRPC port and the agent's data port (127.0.0.1 only, bounded):
 * - gRPC ports: random bytes and a wrong HTTP/2 preface (`bad_preface`), a call whose message does not decode
 *   (`undecodable_message`), a message over grpc-js's 4 MiB receive limit (`message_too_large`), 2,000 streams opened
 *   and reset on one connection (`rapid_reset`), and an HTTP/2 frame over SETTINGS_MAX_FRAME_SIZE on a connection
 *   the peer holds open (nghttp2 sends GOAWAY and no JS event fires: the session's unanswered ping shows it,
 *   `unanswered_ping`, and the server closes it);
 * - the data port: random bytes (`bad_magic`), a Hello carrying a 1 TiB payload length (`frame_too_large`), a header
 *   cut short by a close (`bad_handshake`); a well-formed Hello is not refused.
 * Each produces its `"boundary refused"` warning line in the process's output and its count in
 * `tidegate_boundary_refused_total{port,reason}` on /metrics; legitimate calls produce none; both processes keep
 * serving afterwards.
 */
import * as grpc from "@grpc/grpc-js";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import http2 from "node:http2";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { spawnTidegate, stopAll, type Proc } from "./procs.js";

const MODEL = "llama3.2-3b";
let dir: string;
let region: Proc;
let agent: Proc;
const addr = { regionGrpc: "", regionMetrics: "", agentGrpc: "", agentData: "", agentMetrics: "" };

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "tidegate-boundary-"));
  const file = join(dir, "config.json");
  writeFileSync(
    file,
    JSON.stringify({
      models: [{ name: MODEL, gpusPerInstance: { "h100-80gb": 2 } }],
      regions: [{ name: "r1", grpcAddress: "127.0.0.1:0", gpus: [{ type: "h100-80gb", count: 2 }], endpoints: [{ model: MODEL, gpu: "h100-80gb", instances: 1 }] }],
      controller: { actuator: "static" },
      engines: { kind: "sim", timeScale: 0.02 },
    }),
  );
  // Default log levels: the refusals must be visible without --log-level.
  [region, agent] = await Promise.all([
    spawnTidegate("region", ["region", "--config", file, "--region", "r1"], /grpc (\S+) metrics (http:\/\/\S+)/, 60_000, 8 << 20),
    spawnTidegate("agent", ["agent", "--node-id", "b1", "--transport", "tcp", "--memory-bytes", String(32 << 20), "--gpu-slots", "1"], /grpc (\S+) data (\S+) .*metrics (http:\/\/\S+)/, 60_000, 8 << 20),
  ]);
  addr.regionGrpc = region.match[1]!;
  addr.regionMetrics = region.match[2]!;
  addr.agentGrpc = agent.match[1]!;
  addr.agentData = agent.match[2]!;
  addr.agentMetrics = agent.match[3]!;
}, 90_000);

afterAll(async () => {
  await stopAll();
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
});

const hostPort = (a: string) => ({ host: a.slice(0, a.lastIndexOf(":")), port: Number(a.slice(a.lastIndexOf(":") + 1)) });

/** Connects, writes `buf`, and closes after the server closes or `holdMs` passes (reset with `reset`). */
function rawSend(address: string, buf: Buffer, holdMs = 500): Promise<void> {
  const { host, port } = hostPort(address);
  return new Promise((resolve) => {
    const s = net.connect(port, host, () => s.write(buf));
    const timer = setTimeout(() => s.destroy(), holdMs);
    s.on("error", () => undefined);
    s.on("data", () => undefined);
    s.on("close", () => {
      clearTimeout(timer);
      resolve();
    });
  });
}

async function until<T>(what: string, read: () => Promise<T | undefined> | T | undefined, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await read();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}\n--- region\n${region.output().slice(-3000)}\n--- agent\n${agent.output().slice(-3000)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** The `"boundary refused"` lines a process logged for `port` and `reason`. */
function lines(p: Proc, port: string, reason: string): Record<string, unknown>[] {
  return p
    .output()
    .split("\n")
    .filter((l) => l.startsWith("{") && l.includes('"boundary refused"'))
    .map((l) => JSON.parse(l) as Record<string, unknown>)
    .filter((l) => l.port === port && l.reason === reason);
}

async function counter(metricsUrl: string, port: string, reason: string): Promise<number> {
  const text = await (await fetch(`${metricsUrl}/metrics`)).text();
  const m = new RegExp(`^tidegate_boundary_refused_total\\{port="${port}",reason="${reason}"\\} (\\S+)$`, "m").exec(text);
  if (m === null) throw new Error(`no tidegate_boundary_refused_total{port="${port}",reason="${reason}"} on ${metricsUrl}/metrics`);
  return Number(m[1]);
}

/** Waits until the process logged the refusal and /metrics counts at least `atLeast` of it. */
async function refused(p: Proc, metricsUrl: string, port: string, reason: string, atLeast = 1, timeoutMs?: number): Promise<Record<string, unknown>> {
  const line = await until(`a "${reason}" line on ${port}`, () => lines(p, port, reason)[0], timeoutMs);
  expect(line).toMatchObject({ level: "warn", peer: "127.0.0.1" });
  await until(`${reason} counted on ${port}`, async () => ((await counter(metricsUrl, port, reason)) >= atLeast ? true : undefined));
  return line;
}

/** A unary call with bytes as they are on the wire; resolves with its status code. */
function rawUnary(address: string, path: string, body: Buffer): Promise<grpc.status> {
  const client = new grpc.Client(address, grpc.credentials.createInsecure());
  return unaryOn(client, path, body).finally(() => client.close());
}

/** `rawUnary` on a client the caller keeps (its connection stays open between calls). */
function unaryOn(client: grpc.Client, path: string, body: Buffer): Promise<grpc.status> {
  return new Promise((resolve) => {
    client.makeUnaryRequest(path, (b: Buffer) => b, (b: Buffer) => b, body, { deadline: Date.now() + 5000 }, (err) => {
      resolve(err === null ? grpc.status.OK : (err.code ?? grpc.status.UNKNOWN));
    });
  });
}

const PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
/** Bytes protobuf cannot decode: field 1 as a string whose length runs past the message, then an invalid wire type. */
const UNDECODABLE = Buffer.from([0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x0f]);

/** An HTTP/2 DATA frame of 20,000 bytes (over the default SETTINGS_MAX_FRAME_SIZE of 16,384) after a valid preface. */
function oversizedFrame(): Buffer {
  const settings = Buffer.from([0, 0, 0, 4, 0, 0, 0, 0, 0]);
  const big = Buffer.alloc(9 + 20_000);
  big.writeUIntBE(20_000, 0, 3);
  big[3] = 0; // DATA
  big.writeUInt32BE(1, 5);
  return Buffer.concat([PREFACE, settings, big]);
}

/** Opens `n` gRPC streams on one HTTP/2 connection and resets each at once (CVE-2023-44487's pattern). */
async function rapidReset(address: string, path: string, n: number): Promise<void> {
  const session = http2.connect(`http://${address}`);
  session.on("error", () => undefined);
  await new Promise<void>((resolve, reject) => {
    session.once("connect", () => resolve());
    session.once("error", reject);
  });
  for (let i = 0; i < n && !session.destroyed && !session.closed; i++) {
    try {
      const st = session.request({ ":method": "POST", ":path": path, "content-type": "application/grpc", te: "trailers" });
      st.on("error", () => undefined);
      st.close(http2.constants.NGHTTP2_CANCEL);
    } catch {
      break; // the server ended the session (GOAWAY): what the protection is for
    }
  }
  await new Promise((r) => setTimeout(r, 500));
  session.destroy();
}

/** A data-plane frame header (native/src/tcp_internal.h Frame: little-endian, 32 bytes). */
function dataHeader(o: { magic?: number; version?: number; type: number; block?: number; length?: bigint; runId?: bigint }): Buffer {
  const b = Buffer.alloc(32);
  b.writeUInt32LE(o.magic ?? 0x50444754, 0);
  b.writeUInt16LE(o.version ?? 1, 4);
  b.writeUInt16LE(o.type, 6);
  b.writeUInt32LE(o.block ?? 0, 8);
  b.writeUInt32LE(0, 12);
  b.writeBigUInt64LE(o.length ?? 0n, 16);
  b.writeBigUInt64LE(o.runId ?? 7n, 24);
  return b;
}

const GRPC_PORTS = [
  { name: "region", port: "region_grpc", proc: () => region, grpc: () => addr.regionGrpc, metrics: () => addr.regionMetrics, good: "/tidegate.region.v1.Region/Instances", target: "/tidegate.region.v1.Region/SendTargets" },
  { name: "agent", port: "agent_grpc", proc: () => agent, grpc: () => addr.agentGrpc, metrics: () => addr.agentMetrics, good: "/tidegate.agent.v1.NodeAgent/Info", target: "/tidegate.agent.v1.NodeAgent/Info" },
];

describe.each(GRPC_PORTS)("the $name's gRPC port", (t) => {
  it("serves good calls without counting them as refusals", async () => {
    for (let i = 0; i < 3; i++) expect(await rawUnary(t.grpc(), t.good, Buffer.alloc(0))).toBe(grpc.status.OK);
    for (const reason of ["bad_preface", "protocol_error", "rapid_reset", "undecodable_message", "message_too_large"]) expect(await counter(t.metrics(), t.port, reason)).toBe(0);
  });

  it("logs and counts random bytes and a bad HTTP/2 preface as bad_preface", async () => {
    await rawSend(t.grpc(), randomBytes(256));
    await rawSend(t.grpc(), Buffer.from("PRI * HTTP/2.0\r\n\r\nXX\r\n\r\n"));
    const line = await refused(t.proc(), t.metrics(), t.port, "bad_preface", 2);
    expect(String(line.detail)).toMatch(/magic/);
    // Rate-limited: two refusals from one address, one line.
    expect(lines(t.proc(), t.port, "bad_preface")).toHaveLength(1);
  });

  it("logs and counts a call whose message does not decode", async () => {
    expect(await rawUnary(t.grpc(), t.target, UNDECODABLE)).toBe(grpc.status.INTERNAL);
    const line = await refused(t.proc(), t.metrics(), t.port, "undecodable_message");
    expect(line.detail).toBe(t.target);
  });

  it("logs and counts a message over the receive limit", async () => {
    expect(await rawUnary(t.grpc(), t.target, Buffer.alloc(5 << 20))).toBe(grpc.status.RESOURCE_EXHAUSTED);
    await refused(t.proc(), t.metrics(), t.port, "message_too_large");
  });

  it("logs and counts a burst of 2,000 stream resets as rapid_reset", async () => {
    await rapidReset(t.grpc(), t.good, 2000);
    const line = await refused(t.proc(), t.metrics(), t.port, "rapid_reset");
    expect(String(line.detail)).toMatch(/reset/);
  }, 30_000);

  it("closes, logs and counts a session ended by an oversized HTTP/2 frame, and keeps serving", async () => {
    // The peer holds its connection open; nghttp2 sent GOAWAY and answers nothing more, the ping included.
    // A legitimate client keeps its connection open throughout: its session is pinged too, and answers.
    const keeper = new grpc.Client(t.grpc(), grpc.credentials.createInsecure());
    try {
      expect(await unaryOn(keeper, t.good, Buffer.alloc(0))).toBe(grpc.status.OK);
      const ch = keeper.getChannel();
      expect(ch.getConnectivityState(false)).toBe(grpc.connectivityState.READY);
      let keeperLeftReady = false;
      ch.watchConnectivityState(grpc.connectivityState.READY, Date.now() + 300_000, (err) => {
        if (err === undefined) keeperLeftReady = true;
      });
      const sentAt = Date.now();
      const closed = rawSend(t.grpc(), oversizedFrame(), 120_000).then(() => Date.now() - sentAt);
      for (let i = 0; i < 3; i++) expect(await rawUnary(t.grpc(), t.good, Buffer.alloc(0))).toBe(grpc.status.OK);
      const line = await refused(t.proc(), t.metrics(), t.port, "unanswered_ping", 1, 60_000);
      expect(String(line.detail)).toMatch(/SETTINGS_MAX_FRAME_SIZE/);
      // Closed by the server: first ping 2 s after the session started, 10 s for its ack; the peer would hold 120 s.
      expect(await closed).toBeLessThan(60_000);
      expect(t.proc().child.exitCode).toBeNull();
      expect(await counter(t.metrics(), t.port, "protocol_error")).toBe(0);
      // By now (≥ 12 s) the keeper's session had its first ping: answered, so its connection never left READY (a
      // reaped session would have made grpc-js reconnect). The count may be above 1: a session Node ended for rapid
      // resets above lingers the same way (nghttp2 stops reading it, so not even the peer's close is seen) and is
      // reaped too.
      expect(await unaryOn(keeper, t.good, Buffer.alloc(0))).toBe(grpc.status.OK);
      expect(ch.getConnectivityState(false)).toBe(grpc.connectivityState.READY);
      expect(keeperLeftReady).toBe(false);
    } finally {
      keeper.close();
    }
  }, 90_000);
});

describe("the agent's data port", () => {
  it("does not refuse a well-formed Hello", async () => {
    await rawSend(addr.agentData, dataHeader({ type: 1 }), 300);
    // The agent drains the addon's refusals every second: two drains pass with nothing counted.
    await new Promise((r) => setTimeout(r, 2200));
    for (const reason of ["bad_magic", "bad_handshake", "frame_too_large", "handshake_timeout"]) expect(await counter(addr.agentMetrics, "agent_data", reason)).toBe(0);
  });

  it("logs and counts random bytes as bad_magic", async () => {
    await rawSend(addr.agentData, randomBytes(512));
    await refused(agent, addr.agentMetrics, "agent_data", "bad_magic");
  });

  it("logs and counts a Hello with a payload length as frame_too_large", async () => {
    await rawSend(addr.agentData, dataHeader({ type: 1, length: 1n << 40n }));
    await refused(agent, addr.agentMetrics, "agent_data", "frame_too_large");
  });

  it("logs and counts a header cut short by a close as bad_handshake", async () => {
    await rawSend(addr.agentData, dataHeader({ type: 1 }).subarray(0, 10), 50);
    await refused(agent, addr.agentMetrics, "agent_data", "bad_handshake");
  });

  it("keeps serving: Info answers and the data port still accepts", async () => {
    expect(await rawUnary(addr.agentGrpc, "/tidegate.agent.v1.NodeAgent/Info", Buffer.alloc(0))).toBe(grpc.status.OK);
    const { host, port } = hostPort(addr.agentData);
    await new Promise<void>((resolve, reject) => {
      const s = net.connect(port, host, () => {
        s.destroy();
        resolve();
      });
      s.on("error", reject);
    });
    expect(agent.child.exitCode).toBeNull();
  });
});
