/** The passive liveness rules (liveness.ts) on a virtual clock: tokens prove liveness, refusals and stalls do not. */
import { describe, expect, it } from "vitest";
import { VirtualClock } from "../../core/clock.js";
import { EngineLiveness, connectionFailureCode } from "./liveness.js";

describe("EngineLiveness", () => {
  it("knows nothing before the first answer, then is alive", () => {
    const clock = new VirtualClock(1_000);
    const l = new EngineLiveness(clock, 1000);
    expect(l.verdict().alive).toBeUndefined();
    l.begin();
    l.scrapeAnswered();
    l.end();
    expect(l.verdict()).toEqual({ alive: true });
    clock.advanceToSync(60_000); // idle and owing nothing: no stall however long
    expect(l.verdict().alive).toBe(true);
  });

  it("a scrape that times out while tokens flow is not a failure; a stream silent for stallMs is", () => {
    const clock = new VirtualClock(0);
    const l = new EngineLiveness(clock, 1000);
    l.begin(); // a stream
    l.begin(); // a scrape
    for (let t = 100; t <= 1000; t += 100) {
      clock.advanceToSync(t);
      l.bytes(); // a token every 100 ms
    }
    l.scrapeTimeout();
    l.end();
    for (let t = 1100; t <= 5000; t += 100) {
      clock.advanceToSync(t);
      l.bytes();
      expect(l.verdict().alive).toBe(true);
    }
    // The stream goes silent: alive until stallMs without a byte, then stalled.
    clock.advanceToSync(5999);
    expect(l.verdict().alive).toBe(true);
    clock.advanceToSync(6000);
    expect(l.verdict()).toEqual({ alive: false, reason: "stalled: no byte for 1000 ms while 1 request(s) or scrape(s) in flight" });
    // A byte brings it back.
    l.bytes();
    expect(l.verdict().alive).toBe(true);
  });

  it("an idle engine whose scrape times out is stalled once stallMs passed since the scrape began, and later scrapes do not restart the count", () => {
    const clock = new VirtualClock(0);
    const l = new EngineLiveness(clock, 1000);
    l.begin();
    l.scrapeAnswered();
    l.end();
    clock.advanceToSync(10_000); // long idle: the quiet before the scrape does not count
    l.begin();
    clock.advanceToSync(10_999);
    expect(l.verdict().alive).toBe(true);
    clock.advanceToSync(11_000);
    l.scrapeTimeout();
    l.end();
    expect(l.verdict().alive).toBe(false);
    l.begin(); // the next scrape: still owing since 10 000
    expect(l.verdict().alive).toBe(false);
    l.scrapeAnswered();
    l.end();
    expect(l.verdict().alive).toBe(true);
  });

  it("the region's own pause is not the engine's silence (issue 49 item 3); a stall after it still is", () => {
    // A virtual clock that says the process stood still over [2000, 22000) (a 20 s SIGSTOP of the region).
    const clock = Object.assign(new VirtualClock(0), {
      pausedMs(this: VirtualClock, sinceMs: number) {
        return Math.max(0, Math.min(22_000, this.now()) - Math.max(2000, sinceMs));
      },
    });
    const l = new EngineLiveness(clock, 1000);
    l.begin(); // a stream
    for (let t = 100; t <= 2000; t += 100) {
      clock.advanceToSync(t);
      l.bytes();
    }
    // Resumed at 22 000: the health check runs before the tokens that arrived meanwhile are read.
    clock.advanceToSync(22_000);
    expect(l.verdict()).toEqual({ alive: true });
    // No byte after the pause either: 1000 ms of silence the region was awake for is a stall.
    clock.advanceToSync(22_999);
    expect(l.verdict().alive).toBe(true);
    clock.advanceToSync(23_000);
    expect(l.verdict()).toEqual({ alive: false, reason: "stalled: no byte for 1000 ms while 1 request(s) or scrape(s) in flight" });
  });

  it("a refused or reset connection is down at once, until the engine sends a byte", () => {
    const clock = new VirtualClock(0);
    const l = new EngineLiveness(clock, 1000);
    l.connectionFailed("ECONNREFUSED");
    expect(l.verdict()).toEqual({ alive: false, reason: "connection refused (ECONNREFUSED)" });
    l.connectionFailed("ECONNRESET");
    expect(l.verdict()).toEqual({ alive: false, reason: "connection failed (ECONNRESET)" });
    l.bytes();
    expect(l.verdict().alive).toBe(true);
    expect(() => new EngineLiveness(clock, 0)).toThrow(RangeError);
  });

  it("classifies socket errors, through causes, and nothing else", () => {
    expect(connectionFailureCode(Object.assign(new Error("connect"), { code: "ECONNREFUSED" }))).toBe("ECONNREFUSED");
    expect(connectionFailureCode(new Error("wrapped", { cause: Object.assign(new Error("socket hang up"), { code: "ECONNRESET" }) }))).toBe("ECONNRESET");
    expect(connectionFailureCode(new DOMException("The operation was aborted due to timeout", "TimeoutError"))).toBeUndefined();
    expect(connectionFailureCode(new Error("status 500"))).toBeUndefined();
    expect(connectionFailureCode(undefined)).toBeUndefined();
  });
});
