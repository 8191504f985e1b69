import { describe, expect, it } from "vitest";
import { ValidationError } from "../../core/validate.js";
import { resolveStrategy, type BoundStrategy } from "./strategy-registry.js";
import type { StrategyInput } from "./types.js";

const HOUR = 3_600_000;
const MIN = 60_000;

/**
 * A hand-made endpoint: offered load in tokens/s per minute; each instance absorbs `perInstanceTps` at 100%
 * utilization; a new instance serves `deployMs` after the decision. Runs the strategy every 5 s for the window.
 */
function run(strategy: BoundStrategy, opts: { loadTps: (minute: number) => number; target: number; forecastTps: number; start: number; perInstanceTps?: number; deployMs?: number; max?: number }) {
  const per = opts.perInstanceTps ?? 100;
  const deployMs = opts.deployMs ?? 60_000;
  let ready: number[] = Array.from({ length: opts.start }, () => 0);
  let last: number | undefined;
  const counts: number[] = [];
  let tailMax = 0;
  for (let t = 0; t < HOUR; t += 5000) {
    const serving = ready.filter((r) => r <= t).length;
    const load = opts.loadTps(Math.floor(t / MIN));
    const input: StrategyInput = {
      nowMs: t, windowStartMs: 0, windowMs: HOUR, current: ready.length, serving,
      target: opts.target, utilization: serving === 0 ? 2 : load / (serving * per),
      observedTokensPerS: load, forecastTokensPerS: opts.forecastTps,
      minInstances: 1, maxInstances: opts.max ?? 100, lastActionMs: last,
    };
    const d = strategy.decide(input);
    if (d.desired > ready.length) { ready.push(t + deployMs); last = t; }
    else if (d.desired < ready.length) { ready = ready.slice(0, d.desired); last = t; }
    counts.push(ready.length);
    if (t >= 40 * MIN) tailMax = Math.max(tailMax, ready.length);
  }
  return { final: ready.length, counts, tailMax, max: Math.max(...counts) };
}

const s = (n: string) => resolveStrategy(n);

describe("strategies on hand-made scenarios", () => {
  it("a ramp: LT-U and LT-UA follow the load up to the target; LT-I jumps at once; reactive follows without forecast", () => {
    // Load ramps 100 → 600 tokens/s over the hour; the plan says 8 instances (peak 600 / 100 at 75%).
    const ramp = { loadTps: (m: number) => 100 + (500 * m) / 60, target: 8, forecastTps: 600, start: 2 };
    const i = run(s("lt-i"), ramp);
    const u = run(s("lt-u"), ramp);
    const ua = run(s("lt-ua"), ramp);
    const r = run(s("reactive"), ramp);
    expect(i.counts[0]).toBe(3); // one step per pass toward 8 from the first pass on
    expect(i.counts[10]).toBe(8);
    expect(u.counts[10]).toBeLessThan(8); // held back while utilization is low
    expect(u.final).toBeLessThanOrEqual(8);
    expect(u.final).toBeGreaterThanOrEqual(7);
    expect(ua.final).toBeLessThanOrEqual(8);
    expect(r.final).toBeGreaterThanOrEqual(7);
    // Area under the curve: LT-U uses fewer instance-minutes than LT-I on a ramp.
    const area = (c: number[]) => c.reduce((a, b) => a + b, 0);
    expect(area(u.counts)).toBeLessThan(area(i.counts));
  });

  it("an 8× burst in the last 20 minutes: LT-UA scales past the target and LT-U does not", () => {
    const burst = { loadTps: (m: number) => (m >= 42 ? 8 * 300 : 300), target: 5, forecastTps: 300, start: 5 };
    const u = run(s("lt-u"), burst);
    const ua = run(s("lt-ua"), burst);
    const i = run(s("lt-i"), burst);
    expect(u.tailMax).toBe(5);
    expect(i.tailMax).toBe(5);
    expect(ua.tailMax).toBeGreaterThan(5);
    expect(ua.final).toBeGreaterThanOrEqual(20);
    // The same burst before the tail does not move LT-UA past the target.
    const early = run(s("lt-ua"), { ...burst, loadTps: (m: number) => (m >= 10 && m < 30 ? 2400 : 300) });
    expect(Math.max(...early.counts.slice(0, 8 * 12 * 4))).toBe(5);
  });

  it("a too-high forecast: LT-U and LT-UA hold back while LT-I over-provisions", () => {
    const high = { loadTps: () => 200, target: 20, forecastTps: 2000, start: 3 };
    const i = run(s("lt-i"), high);
    const u = run(s("lt-u"), high);
    const ua = run(s("lt-ua"), high);
    expect(i.final).toBe(20);
    expect(u.max).toBe(3);
    expect(ua.max).toBe(3);
  });

  it("a too-low observed load in the tail: LT-UA scales in below the target, LT-U stays", () => {
    const low = { loadTps: () => 20, target: 4, forecastTps: 400, start: 4 };
    expect(run(s("lt-u"), low).final).toBe(4);
    expect(run(s("lt-ua"), low).final).toBeLessThan(4);
  });

  it("a plan that covers the forecast's upper bound: LT-U climbs only as far as load asks and steps back to the floor when it falls", () => {
    // Target 12 (upper bound), floor 8 (point forecast). Load needs ~9 instances for 20 minutes, then drops to ~2.
    const lt = s("lt-u");
    const input = (current: number, u: number, nowMs: number): StrategyInput => ({ nowMs, windowStartMs: 0, windowMs: HOUR, current, serving: current, target: 12, floor: 8, utilization: u, utilizationSmoothed: u, observedTokensPerS: 0, forecastTokensPerS: 0, minInstances: 1, maxInstances: 30, lastActionMs: undefined });
    expect(lt.decide(input(7, 0.8, 60_000))).toEqual({ desired: 8, reason: "toward-target-out" });
    expect(lt.decide(input(9, 0.5, 60_000))).toEqual({ desired: 9, reason: "waiting-for-utilization" });
    expect(lt.decide(input(9, 0.2, 60_000))).toEqual({ desired: 8, reason: "toward-floor-in" });
    expect(lt.decide(input(8, 0.1, 60_000)).desired).toBe(8); // never below the floor inside the window
    // Without a floor (older planners), the target is the floor: LT-U holds as before.
    expect(lt.decide({ ...input(9, 0.2, 60_000), floor: undefined }).desired).toBe(9);
  });

  it("LT-U and LT-UA act on smoothed utilization: a one-second spike does not step out, a sustained rise does", () => {
    for (const name of ["lt-u", "lt-ua"]) {
      const lt = s(name);
      const base: StrategyInput = { nowMs: 60_000, windowStartMs: 0, windowMs: HOUR, current: 4, serving: 4, target: 8, utilization: 0.95, utilizationSmoothed: 0.45, observedTokensPerS: 0, forecastTokensPerS: 100, minInstances: 1, maxInstances: 30, lastActionMs: undefined };
      expect(lt.decide(base).desired).toBe(4);
      expect(lt.decide({ ...base, utilizationSmoothed: 0.75 }).desired).toBe(5);
      // Reactive stays on the instantaneous signal (SageServe §7.2 measures it at each request).
      expect(s("reactive").decide(base).desired).toBe(5);
    }
  });

  it("reactive respects its cooldown and bounds", () => {
    const r = s("reactive");
    const base: StrategyInput = { nowMs: 10_000, windowStartMs: 0, windowMs: HOUR, current: 3, serving: 3, target: undefined, utilization: 0.9, observedTokensPerS: 0, forecastTokensPerS: 0, minInstances: 1, maxInstances: 4, lastActionMs: 0 };
    expect(r.decide(base)).toEqual({ desired: 3, reason: "cooldown" });
    expect(r.decide({ ...base, nowMs: 15_000 }).desired).toBe(4);
    expect(r.decide({ ...base, nowMs: 15_000, current: 4 }).desired).toBe(4);
    expect(r.decide({ ...base, nowMs: 15_000, utilization: 0.1, current: 1 }).desired).toBe(1);
    expect(r.decide({ ...base, current: 6 }).desired).toBe(4);
  });

  it("the registry validates parameters against the schema and names the field", () => {
    expect(resolveStrategy("lt-ua", { aboveForecastFactor: 3 }).params.aboveForecastFactor).toBe(3);
    expect(() => resolveStrategy("lt-x")).toThrow(/unknown strategy "lt-x"/);
    expect(() => resolveStrategy("reactive", { outAbove: -1 })).toThrow(ValidationError);
    expect(() => resolveStrategy("reactive", { outAbove: -1 })).toThrow(/strategy\.params\.outAbove/);
    expect(() => resolveStrategy("lt-u", { tailMs: 5 })).toThrow(/strategy\.params\.tailMs: is not a known field/);
  });
});
