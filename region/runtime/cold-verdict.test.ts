import { describe, expect, it } from "vitest";
import { VirtualClock } from "../../core/clock.js";
import { findTidegateError } from "../../core/errors.js";
import type { InstanceState } from "../../core/ports.js";
import { ColdHold } from "../gateway/cold-hold.js";
import { ColdVerdicts, endpointReason, modelReason, type EndpointAtZero } from "./cold-verdict.js";

const M = "llama2-70b";
const at = (over: Partial<EndpointAtZero>): EndpointAtZero => ({ model: M, gpu: "h100-80gb", ...over });

describe("endpointReason / modelReason", () => {
  it("names each reason: blocked for GPUs → no_capacity, at its maximum → not_placed, refused → not_placed, failed → cold_start_failed", () => {
    expect(endpointReason(at({ blocked: { reason: "no-capacity", freeGpus: 2, gpusPerInstance: 4, maxInstances: 2 } }))).toEqual({
      code: "no_capacity",
      detail: "llama2-70b/h100-80gb: no free GPU for an instance (needs 4 h100-80gb, 2 free; no spot instance to reclaim or redeploy)",
    });
    expect(endpointReason(at({ blocked: { reason: "at-max", freeGpus: 8, gpusPerInstance: 4, maxInstances: 0 } }))?.code).toBe("not_placed");
    expect(endpointReason(at({ backoff: { kind: "refused", message: "r: no node has 4 free h100-80gb slots", retryInMs: 1500 } }))).toEqual({
      code: "not_placed",
      detail: "llama2-70b/h100-80gb: no place for an instance (r: no node has 4 free h100-80gb slots; next try in 2 s)",
    });
    expect(endpointReason(at({ backoff: { kind: "failed", message: "engine exited", retryInMs: 1000 } }))?.code).toBe("cold_start_failed");
    expect(endpointReason(at({}))).toBeUndefined();
  });

  it("a model's reason needs every endpoint's; no capacity waits for GPUs only while the idle drain may free some", () => {
    const full = at({ blocked: { reason: "no-capacity", freeGpus: 0, gpusPerInstance: 4, maxInstances: 2 } });
    const failed = at({ gpu: "a100-80gb", backoff: { kind: "failed", message: "transfer stalled", retryInMs: 1000 } });
    expect(modelReason([full], false)).toMatchObject({ code: "no_capacity", refuseNow: true });
    expect(modelReason([full], true)).toMatchObject({ code: "no_capacity", refuseNow: false });
    expect(modelReason([failed], true)).toMatchObject({ code: "cold_start_failed", refuseNow: true });
    const both = modelReason([full, failed], false)!;
    expect(both.code).toBe("no_capacity");
    expect(both.detail).toMatch(/^llama2-70b\/h100-80gb: no free GPU .*; llama2-70b\/a100-80gb: its cold start failed \(transfer stalled/);
    expect(modelReason([full, failed], true)?.refuseNow).toBe(false);
    // One endpoint still trying (or not tried this pass): keep holding.
    expect(modelReason([full, at({ gpu: "a100-80gb" })], false)).toBeUndefined();
    expect(modelReason([], false)).toBeUndefined();
  });
});

describe("ColdVerdicts.judge", () => {
  function world() {
    const clock = new VirtualClock();
    const refused: string[] = [];
    const hold = new ColdHold({ region: "r", clock, holdMs: 60_000, maxHeld: 8, onRefused: (_m, why) => refused.push(why) });
    let backoff: { retryAtMs: number } | undefined;
    const v = new ColdVerdicts({ endpoints: [{ model: M, gpu: "h100-80gb", gpusPerInstance: 4, maxInstances: 2 }], backoffOf: () => backoff });
    const errors: unknown[] = [];
    const holdOne = () => hold.hold(M, () => errors.push("resumed"), (e) => errors.push(e));
    return { clock, hold, v, refused, errors, holdOne, setBackoff: (b: typeof backoff) => (backoff = b) };
  }
  const models = new Set([M]);
  const none: { model: string; state: InstanceState }[] = [];

  it("refuses the held requests of a model blocked this pass, and not once the next pass is not blocked", () => {
    const w = world();
    w.holdOne();
    w.holdOne();
    w.v.beginPass();
    w.v.blocked(M, "h100-80gb", "no-capacity", 2);
    const out = w.v.judge(w.hold, models, none, 0, false);
    expect(out).toEqual([{ model: M, reason: expect.objectContaining({ code: "no_capacity" }), refused: 2 }]);
    expect(w.errors.map((e) => findTidegateError(e)?.code)).toEqual(["no_capacity", "no_capacity"]);
    expect(w.refused).toEqual(["no_capacity", "no_capacity"]);
    // Next pass: its step was taken (nothing blocked, no backoff): held.
    w.holdOne();
    w.v.beginPass();
    expect(w.v.judge(w.hold, models, none, 1000, false)).toEqual([]);
    expect(w.hold.held(M)).toBe(1);
  });

  it("holds while an instance of the model is coming up, and while the idle drain may free GPUs", () => {
    const w = world();
    w.holdOne();
    w.v.beginPass();
    w.v.blocked(M, "h100-80gb", "no-capacity", 0);
    expect(w.v.judge(w.hold, models, [{ model: M, state: "loading" }], 0, false)).toEqual([]);
    expect(w.v.judge(w.hold, models, none, 0, true)).toEqual([]);
    expect(w.hold.held(M)).toBe(1);
  });

  it("a failure refuses only while the endpoint is backed off, and a landed instance clears it", () => {
    const w = world();
    w.v.failed(M, "h100-80gb", "failed", "engine exited before it became healthy");
    w.holdOne();
    w.v.beginPass();
    expect(w.v.judge(w.hold, models, none, 5000, false)).toEqual([]); // no backoff: the step is being retried
    w.setBackoff({ retryAtMs: 7000 });
    const out = w.v.judge(w.hold, models, none, 5000, false);
    expect(out[0]?.reason).toEqual({ code: "cold_start_failed", detail: "llama2-70b/h100-80gb: its cold start failed (engine exited before it became healthy; next try in 2 s)" });
    w.v.landed(M, "h100-80gb");
    w.holdOne();
    expect(w.v.judge(w.hold, models, none, 5000, false)).toEqual([]);
  });
});
