import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import type { EngineEvent, RegionTelemetry } from "../../core/ports.js";
import { FakeEngine } from "../../test/helpers/fake-engine.js";
import { startRegionGrpcServer } from "./grpc-server.js";
import { MODEL, clock, collect, errorOf, until, useGrpcFixture } from "../../test/helpers/grpc-fixture.js";
import { makeTestCa } from "../../test/helpers/certs.js";
import { gatewayService } from "../../test/helpers/gateway-service.js";

const { cleanup, request, region, serve, link } = useGrpcFixture("g");

describe("gRPC RegionLink", () => {
  it("streams telemetry at the asked period with the gateway's figures", async () => {
    const gw = region([new FakeEngine({ instanceId: "i1", model: MODEL, stats: { kvBytesUsed: 30, kvBytesCapacity: 120, running: 2, waiting: 1 } })]);
    const server = await serve(gw);
    const seen: RegionTelemetry[] = [];
    link(server.address).subscribe((t) => seen.push(t));
    await until(() => seen.length >= 4);
    expect(seen.map((t) => t.seq)).toEqual([...seen.keys()].map((i) => i + 1));
    const gaps = seen.slice(1).map((t, i) => t.atMs - seen[i]!.atMs);
    for (const g of gaps) expect(g).toBeLessThan(500);
    expect(seen[0]).toMatchObject({ region: "us-east" });
    expect(seen[0]!.models[0]).toEqual({
      model: MODEL,
      effectiveMemoryUtilization: 0.25,
      tokensPerS: 0,
      running: 2,
      waiting: 1,
      instances: { provisioning: 0, loading: 0, serving: 1, draining: 0, spot: 0 },
      endpoints: [{ endpointId: "llama3.1-8b/h100-80gb", gpu: "h100-80gb", effectiveMemoryUtilization: 0.25, servingInstances: 1 }],
      // The region measures SLO attainment: an empty window before any request (region-proto.test.ts has full ones).
      slo: { requests: 0, met: 0, finished: 0, promptTokens: 0, outputTokens: 0 },
    });
  });

  it("sends a snapshot at once when what serves changes, not at the next tick", async () => {
    const gw = region([new FakeEngine({ instanceId: "i1", model: MODEL })]);
    const server = await serve(gw);
    const seen: RegionTelemetry[] = [];
    link(server.address, { telemetryIntervalMs: 1000 }).subscribe((t) => seen.push(t));
    await until(() => seen.length >= 1);
    const serving = () => seen.at(-1)!.models[0]!.instances.serving;
    expect(serving()).toBe(1);
    // Judged on the server's own stamps (a snapshot's atMs is when it was made), not on when this test saw it: load on
    // the machine delays delivery and polling, but cannot make a tick look like a push. Ticks come from setInterval,
    // so one comes at least the 1 s interval after the previous one; a snapshot made sooner than that after the last
    // tick is a push. `pushes`: snapshots known to be pushes, which the next tick is not timed from.
    const pushes = new Set<number>();
    const firstAfter = (t: number) => {
      const i = seen.findIndex((x) => x.atMs >= t);
      const lastTick = seen.slice(0, i).filter((x) => !pushes.has(x.seq)).at(-1)!;
      return { snapshot: seen[i]!, previous: seen[i - 1]!, lastTick };
    };
    const t0 = Date.now();
    gw.addInstance("h100-80gb", new FakeEngine({ instanceId: "i2", model: MODEL }));
    gw.setInstanceState("i1", "draining");
    await until(() => serving() === 1 && seen.at(-1)!.models[0]!.instances.draining === 1);
    // One push for both changes: the first snapshot made after them shows both, before the next tick was due.
    const a = firstAfter(t0);
    expect(a.snapshot.models[0]!.instances).toMatchObject({ serving: 1, draining: 1 });
    expect(a.snapshot.seq).toBe(a.previous.seq + 1);
    expect(a.snapshot.atMs - a.lastTick.atMs).toBeLessThan(1000);
    pushes.add(a.snapshot.seq);
    const t1 = Date.now();
    gw.removeInstance("i1");
    await until(() => seen.at(-1)!.atMs >= t1 && seen.at(-1)!.models[0]!.instances.draining === 0);
    const b = firstAfter(t1);
    expect(b.snapshot.models[0]!.instances).toMatchObject({ serving: 1, draining: 0 });
    expect(b.snapshot.atMs - b.lastTick.atMs).toBeLessThan(1000);
  });

  it("streams a generation token by token with the same events as the in-process path", async () => {
    const gw = region([new FakeEngine({ instanceId: "i1", model: MODEL })]);
    const server = await serve(gw);
    const req = request({ maxTokens: 60 });
    const direct = await collect(gw.generate(req));
    const remote = await collect(link(server.address).dispatch(req));
    expect(remote).toEqual(direct);
    expect(remote).toHaveLength(61);
    expect(remote.at(-1)).toEqual({ type: "done", finishReason: "length", usage: { prompt_tokens: 12, completion_tokens: 60, total_tokens: 72 } });
  });

  it("delivers a long burst in order to a slow reader (client pause/resume, server waits for drain)", async () => {
    // One token per macrotask: every token becomes its own message, so the reader falls behind by thousands.
    const engine = new FakeEngine({ instanceId: "i1", model: MODEL });
    const plain = engine.generate.bind(engine);
    engine.generate = async function* (r, signal) {
      for await (const ev of plain(r, signal)) {
        await new Promise<void>((resolve) => setImmediate(resolve));
        yield ev;
      }
    };
    const gw = region([engine]);
    const server = await serve(gw);
    const req = request({ maxTokens: 3000 });
    const direct = await collect(gw.generate(req));
    const remote: EngineEvent[] = [];
    for await (const ev of link(server.address).dispatch(req)) {
      remote.push(ev);
      if (remote.length % 500 === 0) await clock.sleep(30);
    }
    expect(remote).toEqual(direct);
  });

  it("cancels the region's generation when the caller aborts or stops reading", async () => {
    const engine = new FakeEngine({ instanceId: "i1", model: MODEL, clock, tokenDelayMs: 20 });
    const server = await serve(region([engine]));
    const l = link(server.address);
    const ctl = new AbortController();
    const r1 = request({ maxTokens: 10_000 });
    const got: EngineEvent[] = [];
    const err = await errorOf(
      (async () => {
        for await (const ev of l.dispatch(r1, ctl.signal)) {
          got.push(ev);
          if (got.length === 2) ctl.abort();
        }
      })(),
    );
    expect(err.code).toBe("cancelled");
    await until(() => engine.cancelled.includes(r1.id));
    const r2 = request({ maxTokens: 10_000 });
    for await (const ev of l.dispatch(r2)) if (ev.type === "token") break;
    await until(() => engine.cancelled.includes(r2.id));
    expect(engine.active).toBe(0);
  });

  it("lists the region's instances with when each entered its state (enteredAtMs) and for how long (forMs)", async () => {
    const gw = region([new FakeEngine({ instanceId: "i1", model: MODEL })]);
    const l = link((await serve(gw)).address);
    const entered = gw.instances()[0]!.enteredAtMs;
    await until(() => clock.now() - entered >= 20);
    const got = await l.instances();
    expect(got.instances).toHaveLength(1);
    const i = got.instances[0]!;
    expect(i).toMatchObject({ id: "i1", model: MODEL, state: "serving", enteredAtMs: entered });
    expect(i.forMs).toBeGreaterThanOrEqual(20);
    expect(i.enteredAtMs + i.forMs).toBeLessThanOrEqual(clock.now());
  });

  it("acks targets monotonically by decisionId and rejects another region's", async () => {
    const gw = region([new FakeEngine({ instanceId: "i1", model: MODEL })]);
    const l = link((await serve(gw)).address);
    const t = (decisionId: number, r = "us-east") => ({ decisionId, region: r, madeAtMs: 1, advisory: false, endpoints: [{ model: MODEL, gpu: "h100-80gb", instances: 3, forecastTokensPerS: 1234.5 }] });
    expect(await l.sendTargets(t(10))).toEqual({ region: "us-east", decisionId: 10, accepted: true });
    expect(await l.sendTargets(t(9))).toEqual({ region: "us-east", decisionId: 10, accepted: false });
    expect(await l.sendTargets(t(11))).toEqual({ region: "us-east", decisionId: 11, accepted: true });
    expect(gatewayService(gw).targets.latest()).toEqual(t(11));
    expect((await errorOf(l.sendTargets(t(12, "us-west")))).code).toBe("invalid_request");
  });

  it("surfaces failures before the first token as retryable errors and after it as upstream_error", async () => {
    const a = new FakeEngine({ instanceId: "a", model: MODEL });
    const b = new FakeEngine({ instanceId: "b", model: MODEL });
    const server = await serve(region([a, b]));
    const l = link(server.address);
    a.failNext = ["before"];
    b.failNext = ["before"];
    expect((await errorOf(collect(l.dispatch(request())))).code).toBe("upstream_error");
    expect((await errorOf(collect(l.dispatch(request({ model: "bloom-176b" }))))).code).toBe("model_not_found");
    expect((await errorOf(collect(l.dispatch(request({ promptTokens: 0 }))))).code).toBe("invalid_request");
    a.failNext = ["after"];
    const seen: EngineEvent[] = [];
    const mid = await errorOf(
      (async () => {
        for await (const ev of l.dispatch(request())) seen.push(ev);
      })(),
    );
    expect(mid.code).toBe("upstream_error");
    expect(mid.message).toContain("mid-stream");
    expect(seen).toHaveLength(1);
    await server.close();
    expect((await errorOf(collect(l.dispatch(request())))).code).toBe("upstream_error");
  });

  it("reconnects telemetry and dispatch after the region restarts on the same address", async () => {
    const first = await serve(region([new FakeEngine({ instanceId: "i1", model: MODEL, stats: { running: 1 } })]));
    const l = link(first.address);
    const seen: RegionTelemetry[] = [];
    l.subscribe((t) => seen.push(t));
    await until(() => seen.length >= 2);
    await first.close();
    const before = seen.length;
    expect((await errorOf(collect(l.dispatch(request())))).code).toBe("upstream_error");
    await serve(region([new FakeEngine({ instanceId: "i1", model: MODEL, stats: { running: 7 } })]), first.address);
    await until(() => seen.length > before && seen.at(-1)!.models[0]!.running === 7);
    expect(l.telemetryConnects).toBeGreaterThanOrEqual(2);
    const events = await collect(l.dispatch(request({ maxTokens: 3 })));
    expect(events.map((e) => e.type)).toEqual(["token", "token", "token", "done"]);
  });

  it("runs over TLS with client certificates and refuses a client without one", async () => {
    const dir = mkdtempSync(join(tmpdir(), "tidegate-tls-"));
    cleanup(() => rmSync(dir, { recursive: true, force: true }));
    const ca = makeTestCa(dir);
    const certs = { server: ca.issue("server"), client: ca.issue("client") };
    const files = (who: "server" | "client") => ({ caFile: ca.caFile, ...certs[who] });
    const gw = region([new FakeEngine({ instanceId: "i1", model: MODEL })]);
    const server = await startRegionGrpcServer(gatewayService(gw), { tls: files("server") });
    cleanup(() => server.close());
    const secure = link(server.address, { tls: files("client") });
    const events = await collect(secure.dispatch(request({ maxTokens: 2 })));
    expect(events.map((e) => e.type)).toEqual(["token", "token", "done"]);
    const plain = link(server.address);
    expect((await errorOf(collect(plain.dispatch(request())))).code).toBe("upstream_error");
  });
});
