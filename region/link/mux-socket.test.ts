import * as net from "node:net";
import * as grpc from "@grpc/grpc-js";
import { describe, expect, it } from "vitest";
import { BoundaryReporter } from "../../core/boundary.js";
import type { Gateway } from "../gateway/gateway.js";
import { WallClock } from "../../core/clock.js";
import { silentLogger } from "../../core/log.js";
import { FakeEngine } from "../../test/helpers/fake-engine.js";
import { gatewayService } from "../../test/helpers/gateway-service.js";
import { MODEL, clock, collect, until, useGrpcFixture } from "../../test/helpers/grpc-fixture.js";
import { encodeMuxUp } from "./mux-codec.js";
import { FRAME_MESSAGE, MUX_MAGIC, frame } from "./mux-frame.js";
import { serveMux } from "./mux-server.js";
import { regionService } from "./region-proto.js";
import { startRegionGrpcServer, type RegionGrpcServer } from "./grpc-server.js";
import { FRAMED_RETRY_MS } from "./grpc-client.js";

const { cleanup, request, region, serve, link } = useGrpcFixture("ms");

/** Connects to `port`, sends `bytes`, and resolves with what came back once the region closed the connection. */
function exchange(port: number, bytes: Buffer[]): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const s = net.connect(port, "127.0.0.1", () => {
      for (const b of bytes) s.write(b);
    });
    const got: Buffer[] = [];
    s.on("data", (c) => got.push(c));
    s.on("close", () => resolve(Buffer.concat(got)));
    s.on("error", reject);
  });
}

/**
 * A region of an earlier version serving `gw`: grpc-js bound on its own (DispatchMux only), so the framed
 * connection's magic reaches HTTP/2 and the session closes.
 */
async function earlierRegion(gw: Gateway): Promise<{ server: grpc.Server; address: string }> {
  const server = new grpc.Server();
  server.addService(regionService().service, {
    DispatchMux: ((call: grpc.ServerDuplexStream<never, never>) => serveMux(gatewayService(gw, clock), call as never, silentLogger)) as grpc.UntypedHandleCall,
  });
  const port = await new Promise<number>((res, rej) => server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (e, p) => (e ? rej(e) : res(p))));
  return { server, address: `127.0.0.1:${port}` };
}

describe("the framed dispatch connection", () => {
  it("carries the link's requests on the gRPC port, beside gRPC itself (telemetry), on one connection", async () => {
    const gw = region([new FakeEngine({ instanceId: "a", model: MODEL, clock, tokenDelayMs: 1 })]);
    const server = await serve(gw);
    const l = link(server.address);
    const seen: number[] = [];
    const unsub = l.subscribe((t) => seen.push(t.seq));
    const runs = await Promise.all(Array.from({ length: 8 }, () => collect(l.dispatch(request({ maxTokens: 30 })))));
    for (const evs of runs) expect(evs).toHaveLength(31);
    await until(() => seen.length >= 2);
    unsub();
    expect(l.framedRefused).toBeUndefined();
    expect(l.muxConnects).toBe(1);
  });

  it("falls back to the gRPC DispatchMux call with a region that does not take it, the held requests included", async () => {
    const gw = region([new FakeEngine({ instanceId: "a", model: MODEL, clock, tokenDelayMs: 1 })]);
    const old = await earlierRegion(gw);
    cleanup(() => old.server.forceShutdown());
    const l = link(old.address);
    const runs = await Promise.all(Array.from({ length: 4 }, () => collect(l.dispatch(request({ maxTokens: 10 })))));
    for (const evs of runs) expect(evs.at(-1)).toMatchObject({ type: "done" });
    expect(l.framedRefused).toBeDefined();
    // Later requests go straight to the gRPC call.
    expect((await collect(l.dispatch(request({ maxTokens: 5 })))).at(-1)).toMatchObject({ type: "done" });
  });

  it("after a refusal, keeps to the gRPC call for FRAMED_RETRY_MS, then offers the framed connection again (a region upgraded since takes it)", async () => {
    const gw = region([new FakeEngine({ instanceId: "a", model: MODEL, clock, tokenDelayMs: 1 })]);
    const old = await earlierRegion(gw);
    const address = old.address;
    // The link's time, moved on by hand past the retry window (its timers stay on the wall clock).
    const linkClock = new (class extends WallClock {
      shiftMs = 0;
      override now(): number {
        return super.now() + this.shiftMs;
      }
    })();
    const l = link(address, { clock: linkClock });
    expect((await collect(l.dispatch(request({ maxTokens: 3 })))).at(-1)).toMatchObject({ type: "done" });
    expect(l.framedRefused).toBeDefined();
    expect(l.dispatchTransport).toBe("grpc");
    let current: RegionGrpcServer | undefined;
    /** Starts the region on the same address once the link's stream has ended, and serves a request through the link. */
    const restartAndServe = async () => {
      await until(() => l.dispatchTransport === undefined);
      current = await serve(gw, address);
      // A request may still meet the connection going down; a later one is served.
      for (let i = 0; ; i++) {
        const evs = await collect(l.dispatch(request({ maxTokens: 3 }))).catch((err: unknown) => (i < 20 ? undefined : Promise.reject(err)));
        if (evs?.at(-1)?.type === "done") return;
        await clock.sleep(50);
      }
    };
    // The region is upgraded within the window: it serves the gRPC call, and the link does not offer the framed
    // connection to it yet.
    old.server.forceShutdown();
    await restartAndServe();
    expect(l.dispatchTransport).toBe("grpc");
    const connects = l.muxConnects;
    // Past the window, the next stream offers it, and the upgraded region takes it.
    linkClock.shiftMs = FRAMED_RETRY_MS;
    await current!.close();
    await restartAndServe();
    expect(l.dispatchTransport).toBe("framed");
    expect(l.muxConnects).toBeGreaterThan(connects);
  });

  it("a region that cannot be reached fails the requests without giving up the framed connection; once up, it takes it", async () => {
    const gw = region([new FakeEngine({ instanceId: "a", model: MODEL, clock, tokenDelayMs: 1 })]);
    const probe = await serve(gw);
    const address = probe.address;
    await probe.close();
    const l = link(address);
    const err = await collect(l.dispatch(request())).then(
      () => undefined,
      (e: unknown) => e as { code?: string },
    );
    expect(err?.code).toBe("upstream_error");
    expect(l.framedRefused).toBeUndefined();
    await serve(gw, address);
    expect((await collect(l.dispatch(request({ maxTokens: 3 })))).at(-1)).toMatchObject({ type: "done" });
    expect(l.framedRefused).toBeUndefined();
  });

  it("refuses an oversized frame, an undecodable MuxUp and a connection that says nothing, counted under region_grpc", async () => {
    const refusals: string[] = [];
    const boundary = new BoundaryReporter({ clock, log: silentLogger });
    const refuse = boundary.refuse.bind(boundary);
    boundary.refuse = (port, reason, peer, detail, count) => {
      refusals.push(`${port} ${reason}`);
      refuse(port, reason, peer, detail, count);
    };
    const gw = region([new FakeEngine({ instanceId: "a", model: MODEL, clock, tokenDelayMs: 1 })]);
    const server = await startRegionGrpcServer(gatewayService(gw, clock), { boundary });
    cleanup(() => server.close());
    // A header announcing 5 MiB (over MAX_UP_BYTES), no payload.
    const header = Buffer.alloc(5);
    header[0] = FRAME_MESSAGE;
    header.writeUInt32BE(5 * 1024 * 1024, 1);
    const big = await exchange(server.port, [MUX_MAGIC, header]);
    expect(big.equals(MUX_MAGIC)).toBe(true); // answered the magic, then closed
    await exchange(server.port, [MUX_MAGIC, frame(FRAME_MESSAGE, Buffer.from([0x12, 0x7f, 0x01]))]);
    await exchange(server.port, [MUX_MAGIC, frame(7)]);
    await until(() => refusals.length >= 3);
    expect(refusals).toEqual(["region_grpc message_too_large", "region_grpc undecodable_message", "region_grpc undecodable_message"]);
    // A well-formed open on a raw connection is served: its events come back framed.
    const open = encodeMuxUp({ rid: 5, open: { id: "raw-1", model: MODEL, kind: "chat", prompt_tokens: 3, max_tokens: 2, priority: 0, body_json: JSON.stringify({ model: MODEL, messages: [{ role: "user", content: "hi" }] }), batch: false }, cancel: false });
    const got = await new Promise<Buffer>((resolve) => {
      const s = net.connect(server.port, "127.0.0.1", () => s.write(Buffer.concat([MUX_MAGIC, frame(FRAME_MESSAGE, open)])));
      let all = Buffer.alloc(0);
      s.on("data", (c) => {
        all = Buffer.concat([all, c]);
        if (all.includes(Buffer.from("stop")) || all.includes(Buffer.from("length"))) {
          s.destroy();
          resolve(all);
        }
      });
    });
    expect(got.subarray(0, MUX_MAGIC.length).equals(MUX_MAGIC)).toBe(true);
    expect(got[MUX_MAGIC.length]).toBe(FRAME_MESSAGE);
  });
});
