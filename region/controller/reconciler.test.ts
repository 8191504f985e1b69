import { describe, expect, it } from "vitest";
import { VirtualClock } from "../../core/clock.js";
import type { RegionTargets } from "../../core/ports.js";
import { SAGESERVE_DELAYS, SimActuator } from "../actuator/sim.js";
import { resolveStrategy } from "../strategies/strategy-registry.js";
import { RegionController, type ControllerAction, type ControllerError, type ManagedEndpoint } from "./reconciler.js";

function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32);
}

const EP: ManagedEndpoint = { model: "m1", gpu: "h100-80gb", gpusPerInstance: 4, minInstances: 1, maxInstances: 10 };
const plan = (decisionId: number, instances: number, madeAtMs = 0): RegionTargets => ({ decisionId, region: "r", madeAtMs, advisory: false, endpoints: [{ model: "m1", gpu: "h100-80gb", instances, forecastTokensPerS: 100 }] });

function world() {
  const clock = new VirtualClock();
  const actuator = new SimActuator({ region: "r", clock, delays: SAGESERVE_DELAYS, capacity: { "h100-80gb": 40 }, weightsInRegion: ["m1", "m2"], random: rng(3) });
  actuator.seed("m1", "h100-80gb", 4, "serving");
  actuator.seed("m1", "h100-80gb", 4, "serving");
  actuator.seed("m1", "h100-80gb", 4, "spot");
  actuator.seed("m2", "h100-80gb", 4, "spot");
  actuator.seed("m2", "h100-80gb", 4, "spot");
  return { clock, actuator };
}

function controller(w: ReturnType<typeof world>, actions: ControllerAction[], strategy = "lt-i") {
  return new RegionController({
    region: "r", clock: w.clock, actuator: w.actuator, strategy: resolveStrategy(strategy), endpoints: [EP],
    signals: () => ({ utilization: 0.5, observedTokensPerS: 100 }), inFlightTokens: () => 0, windowMs: 3_600_000,
    onAction: (a) => actions.push(a),
  });
}

const count = (w: ReturnType<typeof world>, states: string[]) => w.actuator.instances().filter((i) => i.model === "m1" && states.includes(i.state)).length;

describe("RegionController", () => {
  it("takes one step per pass in spot order and converges to the target", () => {
    const w = world();
    const actions: ControllerAction[] = [];
    const c = controller(w, actions);
    c.setTargets(plan(1, 6));
    for (let t = 1; t <= 10; t++) {
      w.clock.advanceToSync(t * 1000);
      c.reconcile();
    }
    expect(actions.map((a) => a.kind)).toEqual(["reclaim", "redeploy", "redeploy", "provision"]);
    expect(count(w, ["serving", "provisioning", "loading"])).toBe(6);
    w.clock.advanceToSync(3 * 3600_000);
    expect(count(w, ["serving"])).toBe(6);
  });

  it("killed mid-scale-out and restarted on the same world, converges without double actions", () => {
    const w = world();
    const before: ControllerAction[] = [];
    const first = controller(w, before);
    first.setTargets(plan(7, 5));
    w.clock.advanceToSync(1000);
    first.reconcile();
    w.clock.advanceToSync(2000);
    first.reconcile();
    expect(before).toHaveLength(2);
    // Kill: the first controller is gone (no stop, no hand-over). A new one starts, gets the same plan again.
    const after: ControllerAction[] = [];
    const second = controller(w, after);
    second.setTargets(plan(7, 5));
    for (let t = 3; t <= 60; t++) {
      w.clock.advanceToSync(t * 1000);
      second.reconcile();
    }
    expect(before.length + after.length).toBe(3);
    expect(w.actuator.operations).toBe(3);
    expect(count(w, ["serving", "provisioning", "loading"])).toBe(5);
    w.clock.advanceToSync(3 * 3600_000);
    for (let t = 0; t < 30; t++) second.reconcile();
    expect(w.actuator.operations).toBe(3);
    expect(count(w, ["serving"])).toBe(5);
  });

  it("restart respects the reactive cooldown from the observed world", () => {
    const w = world();
    const a1: ControllerAction[] = [];
    const c1 = new RegionController({ region: "r", clock: w.clock, actuator: w.actuator, strategy: resolveStrategy("reactive"), endpoints: [EP], signals: () => ({ utilization: 0.95, observedTokensPerS: 0 }), inFlightTokens: () => 0, windowMs: 3_600_000, onAction: (a) => a1.push(a) });
    w.clock.advanceToSync(1000);
    c1.reconcile();
    const c2 = new RegionController({ region: "r", clock: w.clock, actuator: w.actuator, strategy: resolveStrategy("reactive"), endpoints: [EP], signals: () => ({ utilization: 0.95, observedTokensPerS: 0 }), inFlightTokens: () => 0, windowMs: 3_600_000, onAction: (a) => a1.push(a) });
    w.clock.advanceToSync(10_000);
    expect(c2.reconcile()).toHaveLength(0);
    w.clock.advanceToSync(16_000);
    expect(c2.reconcile()).toHaveLength(1);
  });

  it("with maxStepsPerPass takes every step a jump asks for in one pass", () => {
    const w = world();
    const actions: ControllerAction[] = [];
    const c = new RegionController({
      region: "r", clock: w.clock, actuator: w.actuator, strategy: resolveStrategy("lt-i"), endpoints: [EP],
      signals: () => ({ utilization: 0.5, observedTokensPerS: 100 }), inFlightTokens: () => 0, windowMs: 3_600_000,
      maxStepsPerPass: 8, onAction: (a) => actions.push(a),
    });
    c.setTargets(plan(1, 6));
    w.clock.advanceToSync(1000);
    expect(c.reconcile().map((a) => a.kind)).toEqual(["reclaim", "redeploy", "redeploy", "provision"]);
    expect(c.reconcile()).toHaveLength(0);
    expect(count(w, ["serving", "provisioning", "loading"])).toBe(6);
  });

  it("backs off a failing scale-out exponentially and never touches serving instances", () => {
    const w = world();
    const actions: ControllerAction[] = [];
    const errors: ControllerError[] = [];
    const failing = Object.create(w.actuator) as SimActuator;
    let calls = 0;
    const boom = () => {
      calls++;
      throw new Error("no node has 4 free h100-80gb GPUs");
    };
    failing.reclaimSpot = boom;
    failing.redeploy = boom;
    failing.provision = boom;
    const c = new RegionController({
      region: "r", clock: w.clock, actuator: failing, strategy: resolveStrategy("lt-i"), endpoints: [EP],
      signals: () => ({ utilization: 0.5, observedTokensPerS: 100 }), inFlightTokens: () => 0, windowMs: 3_600_000,
      retryInitialMs: 1000, retryMaxMs: 8000, onAction: (a) => actions.push(a), onError: (e) => errors.push(e),
    });
    c.setTargets(plan(1, 6));
    for (let t = 0; t <= 20_000; t += 250) {
      w.clock.advanceToSync(t);
      c.reconcile();
    }
    // tries at 0, 1 s, 3 s, 7 s, 15 s (delays 1, 2, 4, 8, 8 s)
    expect(errors.map((e) => e.atMs)).toEqual([0, 1000, 3000, 7000, 15_000]);
    expect(errors.at(-1)!.message).toMatch(/free h100-80gb/);
    expect(calls).toBe(5);
    expect(actions).toHaveLength(0);
    expect(count(w, ["serving"])).toBe(2);
    c.noteSuccess("m1", "h100-80gb");
    expect(c.backoffOf("m1", "h100-80gb")).toBeUndefined();
  });

  it("scales in by donating to spot of the same model and never below min", () => {
    const w = world();
    const actions: ControllerAction[] = [];
    const c = controller(w, actions);
    c.setTargets(plan(1, 0));
    for (let t = 1; t <= 5; t++) {
      w.clock.advanceToSync(t * 1000);
      c.reconcile();
    }
    expect(actions.map((a) => a.kind)).toEqual(["drain"]);
    expect(w.actuator.instances().filter((i) => i.model === "m1" && i.state === "spot")).toHaveLength(2);
    expect(count(w, ["serving"])).toBe(1);
  });

  it("feeds LT strategies a smoothed utilization: a one-pass spike does not scale out, a sustained rise does", () => {
    const w = world();
    const actions: ControllerAction[] = [];
    let u = 0.5;
    const c = new RegionController({
      region: "r", clock: w.clock, actuator: w.actuator, strategy: resolveStrategy("lt-u"), endpoints: [EP],
      signals: () => ({ utilization: u, observedTokensPerS: 100 }), inFlightTokens: () => 0, windowMs: 3_600_000,
      utilizationSmoothingMs: 60_000, onAction: (a) => actions.push(a),
    });
    c.setTargets(plan(1, 6));
    for (let t = 1; t <= 120; t++) {
      u = t === 60 ? 0.99 : 0.5; // one spike at 60 s
      w.clock.advanceToSync(t * 1000);
      c.reconcile();
    }
    expect(actions).toHaveLength(0);
    u = 0.95; // sustained: the 60 s average crosses 0.70 after ~35 s (0.5 + 0.45 (1 − e^(−t/60)) > 0.7)
    let firstAt: number | undefined;
    for (let t = 121; t <= 200 && firstAt === undefined; t++) {
      w.clock.advanceToSync(t * 1000);
      if (c.reconcile().length > 0) firstAt = t;
    }
    expect(firstAt).toBeGreaterThanOrEqual(121 + 30);
    expect(firstAt).toBeLessThanOrEqual(121 + 40);
  });

  it("keeps one strategy state per endpoint and steps toward reactive-hpa's held recommendation across passes", () => {
    const clock = new VirtualClock();
    const actuator = new SimActuator({ region: "r", clock, delays: SAGESERVE_DELAYS, capacity: { "h100-80gb": 80 }, weightsInRegion: ["m1", "m2"], random: rng(5) });
    for (let i = 0; i < 4; i++) {
      actuator.seed("m1", "h100-80gb", 4, "serving");
      actuator.seed("m2", "h100-80gb", 4, "serving");
    }
    const EP2: ManagedEndpoint = { ...EP, model: "m2" };
    const actions: ControllerAction[] = [];
    const c = new RegionController({
      region: "r", clock, actuator, strategy: resolveStrategy("reactive-hpa"), endpoints: [EP, EP2],
      // m1 at 0.91 (ratio 1.3 on 4 ready: 6), m2 at 0.7 (on target: hold).
      signals: (model) => ({ utilization: model === "m1" ? 0.91 : 0.7, observedTokensPerS: 0 }), inFlightTokens: () => 0,
      windowMs: 3_600_000, onAction: (a) => actions.push(a),
    });
    const live = (model: string) => actuator.instances().filter((i) => i.model === model && ["serving", "provisioning", "loading"].includes(i.state)).length;
    for (let t = 1; t <= 20; t++) {
      clock.advanceToSync(t * 1000);
      c.reconcile();
    }
    // m1: the sync at 1 s asks for 6; one step per pass, the second one on the held answer. At the 16 s sync the two
    // new instances are still unready (counted at 0: newRatio 1.3 × 4 / 6 < 1), so it holds 6.
    expect(actions.map((a) => [a.model, a.atMs, a.reason, a.desired])).toEqual([["m1", 1000, "hpa-up", 6], ["m1", 2000, "hpa-hold", 6]]);
    expect(live("m1")).toBe(6);
    // m2 shares none of m1's history: its own syncs see its own samples and hold at 4.
    expect(live("m2")).toBe(4);
  });

  it("passes the plan's floor: LT-U scales in to it while utilization is low, not below", () => {
    const w = world();
    for (let i = 0; i < 4; i++) w.actuator.seed("m1", "h100-80gb", 4, "serving");
    const actions: ControllerAction[] = [];
    const c = new RegionController({
      region: "r", clock: w.clock, actuator: w.actuator, strategy: resolveStrategy("lt-u", { cooldownMs: 0 }), endpoints: [EP],
      signals: () => ({ utilization: 0.1, observedTokensPerS: 10 }), inFlightTokens: () => 0, windowMs: 3_600_000,
      onAction: (a) => actions.push(a),
    });
    const p = plan(1, 8);
    p.endpoints[0]!.floorInstances = 3;
    c.setTargets(p);
    for (let t = 1; t <= 30; t++) {
      w.clock.advanceToSync(t * 1000);
      c.reconcile();
    }
    expect(actions.map((a) => [a.kind, a.reason])).toEqual([["drain", "toward-floor-in"], ["drain", "toward-floor-in"], ["drain", "toward-floor-in"]]);
    expect(count(w, ["serving"])).toBe(3);
  });

  /** A controller running lt-hpa that records the `floorAhead` each decision is given. */
  function floorSpy(scaleOutMs?: number) {
    const w = world();
    const seen: (number | undefined)[] = [];
    const spy = resolveStrategy("lt-hpa");
    const c = new RegionController({
      region: "r", clock: w.clock, actuator: w.actuator, endpoints: [EP], inFlightTokens: () => 0, windowMs: 3_600_000,
      strategy: { ...spy, decide: (input, state) => (seen.push(input.floorAhead), spy.decide(input, state)) },
      signals: () => ({ utilization: 0.5, observedTokensPerS: 10 }),
      ...(scaleOutMs === undefined ? {} : { scaleOutMs: () => scaleOutMs }),
    });
    return { w, seen, c };
  }

  it("gives the strategy the forecast-step floor over [now, now + scale-out time] (floorAhead)", () => {
    const { w, seen, c } = floorSpy(90_000);
    const p = plan(1, 8, 0);
    p.endpoints[0]!.floorInstances = 7;
    p.endpoints[0]!.floorSteps = [2, 3, 7, 5, 4, 4];
    p.endpoints[0]!.floorStepMs = 600_000;
    c.setTargets(p);
    // At 0: steps 0 only (0 + 90 s is still step 0). At 9 min: steps 0–1 → 3. At 19 min: steps 1–2 → 7.
    // At 55 min: step 5 (and past the end the last step holds) → 4.
    for (const t of [0, 9 * 60_000, 19 * 60_000, 55 * 60_000]) {
      w.clock.advanceToSync(t);
      c.reconcile();
    }
    expect(seen).toEqual([2, 3, 7, 4]);
  });

  it("gives a forecast strategy the plan's demand band from the step-aligned start and the endpoint's scale-out time", () => {
    const w = world();
    const seen: { band: unknown; scaleOutMs: number | undefined }[] = [];
    const spy = resolveStrategy("predictive-hpa");
    const c = new RegionController({
      region: "r", clock: w.clock, actuator: w.actuator, endpoints: [EP], inFlightTokens: () => 0, windowMs: 3_600_000,
      strategy: { ...spy, decide: (input, state) => (seen.push({ band: input.forecastBand, scaleOutMs: input.scaleOutMs }), spy.decide(input, state)) },
      signals: () => ({ utilization: 0.5, observedTokensPerS: 10 }),
      scaleOutMs: () => 12 * 60_000,
    });
    c.reconcile();
    const p = plan(1, 8, 9 * 60_000);
    p.endpoints[0]!.floorSteps = [2, 6, 4];
    const steps = [100, 300, 200].map((mean) => ({ mean, lower: mean / 2, upper: mean * 2 }));
    p.endpoints[0]!.demandSteps = steps;
    p.endpoints[0]!.floorStepMs = 600_000;
    c.setTargets(p);
    w.clock.advanceToSync(9 * 60_000);
    c.reconcile();
    // Before a plan: none; with it, the band from 0 (the 10-minute window holding the plan's 9 min).
    expect(seen).toEqual([{ band: undefined, scaleOutMs: 12 * 60_000 }, { band: { startMs: 0, stepMs: 600_000, steps }, scaleOutMs: 12 * 60_000 }]);
  });

  it("counts forecast steps from the step-aligned window that holds the plan, as the planner forecasts", () => {
    const { w, seen, c } = floorSpy();
    // Made at 9 min: step 0 is [0, 10) min, step 1 starts at 10 min (not 19).
    const p = plan(1, 8, 9 * 60_000);
    p.endpoints[0]!.floorSteps = [2, 6, 4];
    p.endpoints[0]!.floorStepMs = 600_000;
    c.setTargets(p);
    for (const t of [9 * 60_000, 10 * 60_000 + 1]) {
      w.clock.advanceToSync(t);
      c.reconcile();
    }
    expect(seen).toEqual([2, 6]);
  });

  it("scales a disaggregated model's prefill and decode pools apart, each on its own signals (issue 48)", () => {
    const clock = new VirtualClock();
    const actuator = new SimActuator({ region: "r", clock, delays: SAGESERVE_DELAYS, capacity: { "h100-80gb": 40 }, weightsInRegion: ["m1"], random: rng(5) });
    actuator.seed("m1", "h100-80gb", 4, "serving", "prefill");
    actuator.seed("m1", "h100-80gb", 4, "serving", "decode");
    actuator.seed("m1", "h100-80gb", 4, "serving", "decode");
    actuator.seed("m1", "h100-80gb", 4, "spot", "decode");
    const prefill: ManagedEndpoint = { ...EP, role: "prefill", minInstances: 1 };
    const decode: ManagedEndpoint = { ...EP, role: "decode", minInstances: 1 };
    const asked: string[] = [];
    const actions: ControllerAction[] = [];
    // reactive (SageServe §7.2): out above 0.7, in below 0.3. The prefill pool is hot, the decode pool idle.
    const c = new RegionController({
      region: "r", clock, actuator, strategy: resolveStrategy("reactive", { outAbove: 0.7, inBelow: 0.3 }), endpoints: [prefill, decode],
      signals: (_m, _g, role) => (asked.push(String(role)), { utilization: role === "prefill" ? 0.95 : 0.1, observedTokensPerS: 100 }),
      inFlightTokens: () => 0, windowMs: 3_600_000, onAction: (a) => actions.push(a),
    });
    c.reconcile();
    expect(asked).toEqual(["prefill", "decode"]);
    // The prefill pool reclaims the spot instance (a decode engine before) into its own pool; the decode pool drains one.
    expect(actions.map((a) => [a.role, a.kind])).toEqual([["prefill", "reclaim"], ["decode", "drain"]]);
    const pool = (role: string) => actuator.instances().filter((i) => i.role === role && i.state !== "spot" && i.state !== "draining").length;
    expect(pool("prefill")).toBe(2);
    expect(pool("decode")).toBe(1);
    expect(c.lastDecision("m1", "h100-80gb", "prefill")?.desired).toBe(2);
    expect(c.lastDecision("m1", "h100-80gb", "decode")?.desired).toBe(1);
    expect(c.lastDecision("m1", "h100-80gb")).toBeUndefined();
    // Each pool has its own plan target and backoff.
    c.setTargets({ decisionId: 1, region: "r", madeAtMs: 0, advisory: false, endpoints: [{ model: "m1", gpu: "h100-80gb", role: "prefill", instances: 3, forecastTokensPerS: 1 }, { model: "m1", gpu: "h100-80gb", role: "decode", instances: 1, forecastTokensPerS: 1 }] });
    c.noteFailure("m1", "h100-80gb", "no node", "refused", "decode");
    expect(c.backoffOf("m1", "h100-80gb", "decode")?.failures).toBe(1);
    expect(c.backoffOf("m1", "h100-80gb", "prefill")).toBeUndefined();
  });

  it("a decode pool short of instances switches a serving prefill instance first (BlitzScale §5.2); the prefill pool then scales out to make up", () => {
    const clock = new VirtualClock();
    const actuator = new SimActuator({ region: "r", clock, delays: SAGESERVE_DELAYS, capacity: { "h100-80gb": 40 }, weightsInRegion: ["m1"], random: rng(7) });
    const p1 = actuator.seed("m1", "h100-80gb", 4, "serving", "prefill");
    const p2 = actuator.seed("m1", "h100-80gb", 4, "serving", "prefill");
    actuator.seed("m1", "h100-80gb", 4, "serving", "decode");
    actuator.seed("m1", "h100-80gb", 4, "spot", "decode");
    const actions: ControllerAction[] = [];
    // lt-i on the plan: decode 2, prefill 2 — the decode pool is one short, the prefill pool full.
    const c = new RegionController({
      region: "r", clock, actuator, strategy: resolveStrategy("lt-i"), endpoints: [{ ...EP, role: "prefill" }, { ...EP, role: "decode" }],
      signals: () => ({ utilization: 0.5, observedTokensPerS: 100 }), inFlightTokens: (id) => (id === p1.id ? 50 : 10), windowMs: 3_600_000, onAction: (a) => actions.push(a),
    });
    c.setTargets({ decisionId: 1, region: "r", madeAtMs: 0, advisory: false, endpoints: [{ model: "m1", gpu: "h100-80gb", role: "prefill", instances: 2, forecastTokensPerS: 1 }, { model: "m1", gpu: "h100-80gb", role: "decode", instances: 2, forecastTokensPerS: 1 }] });
    c.reconcile();
    // The less loaded prefill instance switches at once: serving, now in the decode pool.
    expect(actions.map((a) => [a.role, a.kind, a.instanceId])).toEqual([["decode", "switch", p2.id]]);
    expect(actuator.instances().find((i) => i.id === p2.id)).toMatchObject({ state: "serving", role: "decode" });
    // Next pass: the prefill pool, one short of its target, scales out (the spot instance, reclaimed as prefill).
    clock.advanceToSync(1000);
    c.reconcile();
    expect(actions.slice(1).map((a) => [a.role, a.kind])).toEqual([["prefill", "reclaim"]]);
    // With one serving prefill instance left, the decode pool does not take it.
    c.setTargets({ decisionId: 2, region: "r", madeAtMs: 0, advisory: false, endpoints: [{ model: "m1", gpu: "h100-80gb", role: "prefill", instances: 1, forecastTokensPerS: 1 }, { model: "m1", gpu: "h100-80gb", role: "decode", instances: 3, forecastTokensPerS: 1 }] });
    clock.advanceToSync(2000);
    actions.length = 0;
    c.reconcile();
    expect(actions.some((a) => a.kind === "switch")).toBe(false);
  });
});
