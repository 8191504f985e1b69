import { describe, expect, it } from "vitest";
import { ScaledClock } from "./scaled-clock.js";

describe("ScaledClock", () => {
  const block = (ms: number) => {
    const end = performance.now() + ms;
    while (performance.now() < end);
  };

  it("runs wall time × speed, and a callback reads the time it was due", async () => {
    const clock = new ScaledClock(20, 0);
    const t0 = performance.now();
    const seen: number[] = [];
    await new Promise<void>((resolve) => clock.at(1000, () => {
      seen.push(clock.now());
      resolve();
    }));
    const wall = performance.now() - t0;
    expect(seen).toEqual([1000]);
    // 1000 virtual ms at ×20 ≈ 50 wall ms (timers are never early).
    expect(wall).toBeGreaterThanOrEqual(49);
    expect(wall).toBeLessThan(1000);
    clock.close();
  });

  it("periodic ticks stay on their grid however late their timers fire", async () => {
    const clock = new ScaledClock(50, 0);
    const ticks: number[] = [];
    await new Promise<void>((resolve) => {
      const t = clock.every(100, () => {
        ticks.push(clock.now());
        block(5); // 250 virtual ms late for the next tick
        if (ticks.length === 6) {
          t.cancel();
          resolve();
        }
      });
    });
    // The grid starts where the clock stood at `every` (a fraction of a ms of wall time after the origin).
    expect(ticks.slice(1).map((t, i) => Math.round((t - ticks[i]!) * 1e6) / 1e6)).toEqual([100, 100, 100, 100, 100]);
    expect(ticks[0]!).toBeLessThan(100 + 50);
    clock.close();
  });

  it("outside callbacks time is the scaled wall, monotone, and stands at the last event while one is overdue", async () => {
    const clock = new ScaledClock(10, 5_000);
    const a = clock.now();
    await new Promise((r) => setTimeout(r, 20));
    const w0 = performance.now();
    const b = clock.now();
    expect(a).toBeGreaterThanOrEqual(5_000);
    expect(b - a).toBeGreaterThanOrEqual(150); // ≥ 20 ms wall × 10, less timer slack
    // An event due now that has not fired yet: time does not pass it.
    clock.after(0, () => undefined);
    const dueByWall = (performance.now() - w0) * 10; // virtual ms from b until it was scheduled (more if preempted)
    block(10);
    const stuck = clock.now();
    block(10);
    expect(clock.now()).toBe(stuck);
    // Not the 200 virtual ms of wall time that passed: the virtual time at b, plus what passed until the event was
    // scheduled (≈ 0, but a busy machine can preempt this process between the two reads), plus timer slack.
    expect(stuck - b).toBeLessThan(50 + dueByWall);
    await new Promise((r) => setImmediate(r));
    await new Promise((r) => setTimeout(r, 5));
    expect(clock.now()).toBeGreaterThan(stuck);
    clock.close();
  });

  it("fires same-instant events one per macrotask, microtasks in between (as Node's timers do)", async () => {
    const clock = new ScaledClock(100, 0);
    const order: string[] = [];
    await new Promise<void>((resolve) => {
      clock.at(50, () => {
        order.push("a");
        void Promise.resolve().then(() => order.push("a-then"));
      });
      clock.at(50, () => {
        order.push("b");
        resolve();
      });
    });
    expect(order).toEqual(["a", "a-then", "b"]);
    expect(() => new ScaledClock(0)).toThrow(RangeError);
    clock.close();
  });
});

describe("ScaledClock held at its origin", () => {
  it("stands at the origin until start(); what was scheduled then keeps its grid", async () => {
    const clock = new ScaledClock(20, 0, { held: true });
    const ticks: number[] = [];
    const t = clock.every(100, () => ticks.push(clock.now()));
    await new Promise((r) => setTimeout(r, 20));
    expect(clock.now()).toBe(0);
    expect(ticks).toEqual([]);
    clock.start();
    await new Promise((r) => setTimeout(r, 40));
    t.cancel();
    clock.close();
    expect(ticks.slice(0, 3)).toEqual([100, 200, 300]);
  });
});
