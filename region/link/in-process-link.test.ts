import { describe, expect, it } from "vitest";
import { VirtualClock } from "../../core/clock.js";
import { findTidegateError } from "../../core/errors.js";
import type { EngineEvent, RegionTelemetry } from "../../core/ports.js";
import { FakeEngine } from "../../test/helpers/fake-engine.js";
import { Gateway } from "../gateway/gateway.js";
import { InProcessRegionLink } from "./in-process-link.js";
import { gatewayService } from "../../test/helpers/gateway-service.js";

function setup() {
  const clock = new VirtualClock(0);
  const gw = new Gateway({ region: "us-central", clock });
  gw.addInstance("h100-80gb", new FakeEngine({ instanceId: "i1", model: "llama3.2-3b", stats: { kvBytesUsed: 25, kvBytesCapacity: 100 } }));
  const link = new InProcessRegionLink(gatewayService(gw, clock), { clock, telemetryIntervalMs: 500 });
  return { clock, gw, link };
}

describe("InProcessRegionLink", () => {
  it("delivers one telemetry snapshot at subscription and then every interval, shared by subscribers", () => {
    const { clock, link } = setup();
    const a: RegionTelemetry[] = [];
    const b: RegionTelemetry[] = [];
    const unsubA = link.subscribe((t) => a.push(t));
    expect(a).toHaveLength(0); // never synchronously inside subscribe
    clock.advanceToSync(0);
    link.subscribe((t) => b.push(t));
    clock.advanceToSync(1000);
    expect(a.map((t) => t.atMs)).toEqual([0, 500, 1000]);
    expect(b.map((t) => t.atMs)).toEqual([0, 500, 1000]);
    // Ticks share one snapshot: same object, same seq.
    expect(a[1]).toBe(b[1]);
    expect(a[0]!.models[0]).toMatchObject({ model: "llama3.2-3b", effectiveMemoryUtilization: 0.25 });
    unsubA();
    clock.advanceToSync(1500);
    expect(a).toHaveLength(3);
    expect(b).toHaveLength(4);
  });

  it("publishNow delivers a fresh snapshot at once, between ticks; nothing after close", async () => {
    const { clock, gw, link } = setup();
    const got: RegionTelemetry[] = [];
    link.subscribe((t) => got.push(t));
    clock.advanceToSync(100);
    gw.setInstanceState("i1", "draining"); // the region changed since its last report
    link.publishNow();
    expect(got.map((t) => t.atMs)).toEqual([0, 100]);
    expect(got[1]!.models[0]!.instances.serving).toBe(0);
    await link.close();
    link.publishNow();
    expect(got).toHaveLength(2);
  });

  it("dispatches through the gateway and acks targets; a closed link fails with upstream_error", async () => {
    const { link } = setup();
    const events: EngineEvent[] = [];
    for await (const ev of link.dispatch({ id: "r1", model: "llama3.2-3b", kind: "completion", promptTokens: 4, maxTokens: 2, priority: 0, body: {} })) events.push(ev);
    expect(events.map((e) => e.type)).toEqual(["token", "token", "done"]);
    expect(await link.sendTargets({ decisionId: 3, region: "us-central", madeAtMs: 0, advisory: false, endpoints: [] })).toEqual({ region: "us-central", decisionId: 3, accepted: true });
    expect((await link.sendTargets({ decisionId: 2, region: "us-central", madeAtMs: 0, advisory: false, endpoints: [] })).accepted).toBe(false);
    await link.close();
    const err = await (async () => {
      for await (const _ of link.dispatch({ id: "r2", model: "llama3.2-3b", kind: "completion", promptTokens: 4, maxTokens: 2, priority: 0, body: {} })) void _;
    })().catch((e: unknown) => e);
    expect(findTidegateError(err)?.code).toBe("upstream_error");
    await expect(link.sendTargets({ decisionId: 9, region: "us-central", madeAtMs: 0, advisory: false, endpoints: [] })).rejects.toThrow(/closed/);
  });
});
