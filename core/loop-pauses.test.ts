/**
 * The pause ledger (issue 49 item 3): late probe ticks become spans; `pausedMs` counts their overlap with a window and
 * the pause under way before the probe's next tick; old spans are forgotten. And the process probe sees a real block.
 */
import { describe, expect, it } from "vitest";
import { WallClock, awakeMsSince } from "./clock.js";
import { LoopPauseLedger, processLoopPauses } from "./loop-pauses.js";

const OPTS = { probeMs: 50, minPauseMs: 20, horizonMs: 10_000, maxSpans: 4 };

describe("LoopPauseLedger", () => {
  it("records a late tick as a span from when it was due, and counts spans' overlap with a window", () => {
    const l = new LoopPauseLedger(OPTS, 0);
    l.tick(50);
    l.tick(100);
    l.tick(160); // 10 ms late: noise, not a pause
    l.tick(710); // due at 210: stood still 500 ms
    expect(l.recorded()).toEqual([{ startMs: 210, endMs: 710 }]);
    expect(l.pausedMs(0, 760)).toBe(500);
    expect(l.pausedMs(500, 760)).toBe(210);
    expect(l.pausedMs(710, 760)).toBe(0);
    expect(l.totalPausedMs).toBe(500);
    expect(l.longestMs).toBe(500);
  });

  it("counts the pause under way: a caller that runs before the probe's overdue tick still sees it", () => {
    const l = new LoopPauseLedger(OPTS, 0);
    l.tick(50);
    // Nothing ticked since 50: at 2050 the tick due at 100 is 1950 ms late.
    expect(l.pausedMs(0, 2050)).toBe(1950);
    expect(l.pausedMs(1000, 2050)).toBe(1050);
    // Within a tick's period and noise: nothing.
    expect(l.pausedMs(0, 115)).toBe(0);
    l.tick(2050);
    expect(l.pausedMs(0, 2060)).toBe(1950);
  });

  it("never counts more than the window, and forgets spans past the horizon or the span cap", () => {
    const l = new LoopPauseLedger(OPTS, 0);
    expect(l.pausedMs(100, 100)).toBe(0);
    let t = 0;
    for (let i = 0; i < 6; i++) {
      t += 150; // each tick 100 ms late
      l.tick(t);
    }
    expect(l.recorded().length).toBe(4);
    expect(l.pausedMs(0, t)).toBe(400);
    l.tick(t + 20_000);
    expect(l.recorded()).toEqual([{ startMs: t + 50, endMs: t + 20_000 }]);
    expect(l.pausedMs(t + 19_990, t + 20_000)).toBe(10);
  });

  it("refuses options that cannot work", () => {
    expect(() => new LoopPauseLedger({ ...OPTS, probeMs: 0 }, 0)).toThrow(RangeError);
  });
});

describe("the process's probe (WallClock.pausedMs)", () => {
  it("sees a 300 ms synchronous block of this event loop, and awakeMsSince takes it off", async () => {
    const clock = new WallClock();
    processLoopPauses();
    await new Promise((r) => setTimeout(r, 120)); // a few ticks first
    const since = clock.now();
    const until = Date.now() + 300;
    while (Date.now() < until) {
      // busy: the loop stands still
    }
    // Asked before the probe's overdue tick has run (the same turn): the pause under way counts.
    expect(clock.pausedMs(since)).toBeGreaterThanOrEqual(200);
    expect(awakeMsSince(clock, since)).toBeLessThan(100);
    await new Promise((r) => setTimeout(r, 120));
    expect(clock.pausedMs(since)).toBeGreaterThanOrEqual(200);
  });
});
