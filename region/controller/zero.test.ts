import { describe, expect, it } from "vitest";
import { VirtualClock } from "../../core/clock.js";
import { SAGESERVE_DELAYS, SimActuator } from "../actuator/sim.js";
import { resolveStrategy } from "../strategies/strategy-registry.js";
import { RegionController, type ControllerAction } from "./reconciler.js";
import { applyZeroRule, type ZeroInput } from "./zero.js";

const IDLE_MS = 5000;
const input = (over: Partial<ZeroInput>): ZeroInput => ({ current: 1, desired: 1, reason: "hold", minInstances: 0, held: 0, idleForMs: 0, ...over });

describe("applyZeroRule", () => {
  it("leaves endpoints with a floor, or with the rule off, to the strategy", () => {
    expect(applyZeroRule(input({ minInstances: 1, desired: 3, idleForMs: 1e9 }), IDLE_MS)).toEqual({ desired: 3, reason: "hold" });
    expect(applyZeroRule(input({ current: 0, desired: 2, held: 0 }), 0)).toEqual({ desired: 2, reason: "hold" });
  });

  it("at zero: one instance when requests are held, zero otherwise whatever the strategy wants", () => {
    expect(applyZeroRule(input({ current: 0, desired: 0, held: 3 }), IDLE_MS)).toEqual({ desired: 1, reason: "cold-start" });
    expect(applyZeroRule(input({ current: 0, desired: 4, reason: "util-above", held: 3 }), IDLE_MS)).toEqual({ desired: 4, reason: "util-above" });
    // A model with no serving instance reads as fully utilized to the strategies: no request, no instance.
    expect(applyZeroRule(input({ current: 0, desired: 1, reason: "util-above", held: 0 }), IDLE_MS)).toEqual({ desired: 0, reason: "at-zero" });
  });

  it("without the idle drain (idleMs 0, the default): held requests still start the model from zero, and nothing takes it back to zero", () => {
    expect(applyZeroRule(input({ current: 0, desired: 0, held: 1 }), 0)).toEqual({ desired: 1, reason: "cold-start" });
    expect(applyZeroRule(input({ current: 0, desired: 3, reason: "target", held: 1 }), 0)).toEqual({ desired: 3, reason: "target" });
    // At zero with nothing held the strategy decides (a plan may bring the model up before any request).
    expect(applyZeroRule(input({ current: 0, desired: 0, reason: "target", held: 0 }), 0)).toEqual({ desired: 0, reason: "target" });
    // Above zero the last instance stays, however long the model has been idle; above one the strategy decides.
    expect(applyZeroRule(input({ current: 1, desired: 0, idleForMs: 1e9 }), 0)).toEqual({ desired: 1, reason: "warm" });
    expect(applyZeroRule(input({ current: 3, desired: 1, reason: "util-below", idleForMs: 1e9 }), 0)).toEqual({ desired: 1, reason: "util-below" });
  });

  it("above zero: keeps one until the idle window has passed, then zero", () => {
    expect(applyZeroRule(input({ current: 1, desired: 0, idleForMs: 4999 }), IDLE_MS)).toEqual({ desired: 1, reason: "idle-window" });
    expect(applyZeroRule(input({ current: 1, desired: 0, idleForMs: 5000 }), IDLE_MS)).toEqual({ desired: 0, reason: "idle" });
    expect(applyZeroRule(input({ current: 3, desired: 1, idleForMs: 5000 }), IDLE_MS)).toEqual({ desired: 0, reason: "idle" });
    // Held requests are activity, whatever the clock says.
    expect(applyZeroRule(input({ current: 1, desired: 1, held: 1, idleForMs: 9999 }), IDLE_MS)).toEqual({ desired: 1, reason: "hold" });
    expect(applyZeroRule(input({ current: 2, desired: 2, idleForMs: 100 }), IDLE_MS)).toEqual({ desired: 2, reason: "hold" });
  });
});

describe("RegionController with scale to zero", () => {
  it("drains the last instance to spot after the idle window and brings the model back from that spot when a request is held", () => {
    const clock = new VirtualClock();
    const actuator = new SimActuator({ region: "r", clock, delays: SAGESERVE_DELAYS, capacity: { "h100-80gb": 8 }, weightsInRegion: ["m1"], random: () => 0.5 });
    actuator.seed("m1", "h100-80gb", 4, "serving");
    let held = 0;
    let lastActiveMs = 0;
    const actions: ControllerAction[] = [];
    const c = new RegionController({
      region: "r",
      clock,
      actuator,
      strategy: resolveStrategy("reactive"),
      endpoints: [{ model: "m1", gpu: "h100-80gb", gpusPerInstance: 4, minInstances: 0, maxInstances: 2 }],
      // Idle: utilization 0 (the reactive strategy would step in at once without the rule); at zero it reads 1.
      signals: () => ({ utilization: actuator.instances().some((i) => i.state === "serving") ? 0 : 1, observedTokensPerS: 0 }),
      inFlightTokens: () => 0,
      windowMs: 3_600_000,
      scaleToZero: { idleMs: IDLE_MS, held: () => held, idleForMs: () => (held > 0 ? 0 : clock.now() - lastActiveMs) },
      onAction: (a) => actions.push(a),
    });
    const active = () => actuator.instances().filter((i) => i.state !== "spot" && i.state !== "draining").length;
    for (let t = 1000; t <= 4000; t += 1000) {
      clock.advanceToSync(t);
      c.reconcile();
    }
    expect(actions).toEqual([]);
    expect(active()).toBe(1);
    clock.advanceToSync(5000);
    c.reconcile();
    expect(actions.map((a) => [a.kind, a.reason])).toEqual([["drain", "idle"]]);
    clock.advanceToSync(600_000);
    // At zero with nothing held: nothing happens, though the strategy reads the model as full.
    for (let k = 0; k < 5; k++) c.reconcile();
    expect(actions).toHaveLength(1);
    expect(actuator.instances().map((i) => i.state)).toEqual(["spot"]);
    held = 1;
    c.reconcile();
    expect(actions.map((a) => [a.kind, a.reason])).toEqual([["drain", "idle"], ["reclaim", "util-above"]]); // the strategy already wants one: its reason stands
    expect(active()).toBe(1);
  });
});
