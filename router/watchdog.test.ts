/**
 * The stream watchdog's rules on virtual time (issue 32 item 3): a running stream whose region stopped reporting ends
 * after 4 expected inter-token times of silence, not after router.streamStallMs; one on a region that still reports
 * ends after its per-model stall limit; before the first event the region's availability decides; a link failure
 * after a long silence reads as a stall. And the token pace the limits come from (pace.ts).
 */
import { describe, expect, it } from "vitest";
import { VirtualClock, type Clock } from "../core/clock.js";
import { LoopPauseLedger } from "../core/loop-pauses.js";
import { DEFAULT_CONFIG_JSON, parseConfig } from "../core/config.js";
import { TidegateError } from "../core/errors.js";
import { getProfile } from "../core/perf/model.js";
import { tokenPaceFrom, type TokenPace } from "./pace.js";
import { StreamWatchdog, type Watched } from "./watchdog.js";

const STALE_MS = 1500;
const STALL_MS = 10_000;
const PACE: TokenPace = { tbtMs: 100, prefillMs: () => 0, stepMs: 10, decodeIterMs: () => 10, maxBatch: 256 };

function setup(pace: TokenPace | null = PACE) {
  const clock = new VirtualClock(0);
  const lastTelemetry = new Map<string, number | undefined>([["east", 0]]);
  const age = (r: string) => {
    const at = lastTelemetry.get(r);
    return at === undefined ? undefined : clock.now() - at;
  };
  const wd = new StreamWatchdog({
    clock,
    stallMs: STALL_MS,
    available: (r) => (age(r) ?? Infinity) <= STALE_MS,
    telemetryAgeMs: age,
    telemetryStaleMs: STALE_MS,
    pace: () => pace ?? undefined,
  });
  /** Telemetry from east every 500 ms until `untilMs`. */
  const reportUntil = (untilMs: number) => {
    const t = clock.every(500, () => {
      if (clock.now() <= untilMs) lastTelemetry.set("east", clock.now());
      else t.cancel();
    });
  };
  return { clock, wd, lastTelemetry, reportUntil };
}

/** When `w.stalled` rejected (virtual ms) and with what, or undefined. */
function outcome(clock: VirtualClock, w: Watched): { atMs: number | undefined; err: TidegateError | undefined } {
  const o: { atMs: number | undefined; err: TidegateError | undefined } = { atMs: undefined, err: undefined };
  w.stalled.catch((err: TidegateError) => {
    o.atMs = clock.now();
    o.err = err;
  });
  return o;
}

describe("StreamWatchdog", () => {
  it("a running stream on a region that stops reporting ends once its telemetry is stale, far before streamStallMs", async () => {
    const { clock, wd, reportUntil } = setup();
    reportUntil(2000);
    const w = wd.watch("east", "m");
    w.started();
    const o = outcome(clock, w);
    // Tokens every 50 ms until the region freezes at 2000 (its last report): nothing is given up meanwhile.
    const tokens = clock.every(50, () => (clock.now() <= 2000 ? w.touch() : tokens.cancel()));
    await clock.advanceTo(2000);
    expect(o.atMs).toBeUndefined();
    await clock.advanceTo(6000);
    // Stale once the last report (2000) is older than 1500 ms, found by the next 250 ms sweep.
    expect(o.atMs).toBeGreaterThan(2000 + STALE_MS);
    expect(o.atMs).toBeLessThanOrEqual(2000 + STALE_MS + 250);
    expect(o.err!.code).toBe("upstream_error");
    expect(o.err!.message).toMatch(/^region east stalled: no token for \d+ ms \(expected one every ~100 ms\) and no telemetry for \d+ ms$/);
    expect(wd.fired).toEqual({ stalled: 0, regionStalled: 1, regionDown: 0 });
  });

  it("a region that stops reporting while its stream still flows keeps the stream (the stream itself is the evidence)", async () => {
    const { clock, wd, reportUntil } = setup();
    reportUntil(1000);
    const w = wd.watch("east", "m");
    w.started();
    const o = outcome(clock, w);
    const tokens = clock.every(50, () => w.touch());
    await clock.advanceTo(8000);
    tokens.cancel();
    expect(o.atMs).toBeUndefined();
    w.close();
  });

  it("a stream silent on a region that still reports ends after streamStallMs, not sooner (a preempted request is silent on a healthy engine)", async () => {
    const { clock, wd, reportUntil } = setup();
    reportUntil(60_000);
    expect(wd.limitsFor("m")).toEqual({ regionQuietMs: 400, limitMs: STALL_MS });
    const w = wd.watch("east", "m");
    w.started();
    const o = outcome(clock, w);
    await clock.advanceTo(1000);
    w.touch(); // its last token at 1000; silent after it while the region reports
    await clock.advanceTo(1000 + STALL_MS - 250);
    expect(o.atMs).toBeUndefined();
    await clock.advanceTo(1000 + STALL_MS + 1000);
    expect(o.atMs).toBeGreaterThan(1000 + STALL_MS);
    expect(o.atMs).toBeLessThanOrEqual(1000 + STALL_MS + 250);
    expect(o.err!.message).toMatch(new RegExp(`^region east stalled: no token for \\d+ ms while it still reports \\(stall limit ${STALL_MS} ms\\)$`));
    expect(wd.fired.stalled).toBe(1);
  });

  it("without a token pace for the model: the region-stall bound is telemetryStaleMs and the limit streamStallMs", () => {
    const { wd } = setup(null);
    expect(wd.limitsFor("m")).toEqual({ regionQuietMs: STALE_MS, limitMs: STALL_MS });
  });

  it("before the first event, a region that stops being available is given up (the request is retried elsewhere)", async () => {
    const { clock, wd, reportUntil } = setup();
    reportUntil(500);
    const w = wd.watch("east", "m");
    const o = outcome(clock, w);
    await clock.advanceTo(5000);
    expect(o.atMs).toBeGreaterThan(500 + STALE_MS);
    expect(o.atMs).toBeLessThanOrEqual(500 + STALE_MS + 250);
    expect(o.err!.message).toMatch(/^region east stalled or went dark before the first token \(telemetry \d+ ms old/);
    expect(wd.fired.regionDown).toBe(1);
  });

  it("a link whose telemetry stream broke (no telemetry at all) counts as not reporting", async () => {
    const { clock, wd, lastTelemetry } = setup();
    const w = wd.watch("east", "m");
    w.started();
    const o = outcome(clock, w);
    await clock.advanceTo(300);
    lastTelemetry.set("east", undefined); // markDown: its telemetry stream broke at 300, nothing came since 0
    await clock.advanceTo(2000);
    expect(o.err!.message).toMatch(/and its link is down$/);
    // Found by the first sweep after 4 × 100 ms of silence.
    expect(o.atMs).toBeLessThanOrEqual(400 + 250);
  });

  it("explain: a link failure after a silence longer than the region-stall bound, from a region that stopped reporting, says the peer stalled; a prompt one, or a live region's, is left as it is", async () => {
    const { clock, wd, reportUntil } = setup();
    reportUntil(100);
    const w = wd.watch("east", "m");
    w.started();
    const dropped = new TidegateError("upstream_error", "region east failed request r1 mid-stream: Connection dropped");
    await clock.advanceTo(100);
    w.touch();
    expect(w.explain(dropped)).toBe(dropped);
    // Silent for 700 ms, but the region reported 700 ms ago: alive, and its word stands (e.g. its engine stopped).
    await clock.advanceTo(800);
    expect(w.explain(dropped)).toBe(dropped);
    await clock.advanceTo(1700);
    const e = w.explain(dropped) as TidegateError;
    expect(e.message).toBe("region east stalled: nothing on this stream for 1600 ms, then its link failed (region east failed request r1 mid-stream: Connection dropped)");
    expect(e.cause).toBe(dropped);
    w.close();
  });
});

/**
 * A clock stepped by hand, with a pause ledger (core/loop-pauses.ts) whose probe ticks only while the process "runs":
 * `run(toMs)` moves time in 50 ms steps (ticks, then `each(now)`), `pause(toMs)` jumps with no tick, as a SIGSTOP or a
 * long task would. Timers are never fired: the test calls `sweep()` itself, so it picks what runs first after a pause.
 */
function handClock() {
  let now = 0;
  const ledger = new LoopPauseLedger({ probeMs: 50, minPauseMs: 20, horizonMs: 60_000, maxSpans: 1000 }, 0);
  const clock: Clock = {
    now: () => now,
    sleep: () => Promise.resolve(),
    after: () => ({ cancel: () => {} }),
    every: () => ({ cancel: () => {} }),
    pausedMs: (since) => ledger.pausedMs(since, now),
  };
  return {
    clock,
    run(toMs: number, each: (nowMs: number) => void) {
      while (now + 50 <= toMs) {
        now += 50;
        ledger.tick(now);
        each(now);
      }
    },
    pause(toMs: number) {
      now = toMs;
    },
  };
}

describe("StreamWatchdog and the router's own pauses (issue 49 item 3)", () => {
  function pausedSetup() {
    const h = handClock();
    let lastTelemetry = 0;
    const age = () => h.clock.now() - lastTelemetry;
    const wd = new StreamWatchdog({ clock: h.clock, stallMs: STALL_MS, available: () => age() <= STALE_MS, telemetryAgeMs: age, telemetryStaleMs: STALE_MS, pace: () => PACE });
    /** The region alive: telemetry every 500 ms, and `flowing` touched every 50 ms; the watchdog sweeps every 250 ms. */
    const live = (toMs: number, flowing: Watched[]) =>
      h.run(toMs, (t) => {
        if (t % 500 === 0) lastTelemetry = t;
        for (const w of flowing) w.touch();
        if (t % 250 === 0) wd.sweep();
      });
    return { h, wd, live, silenceRegion: (toMs: number) => h.run(toMs, (t) => t % 250 === 0 && wd.sweep()) };
  }

  it("a pause of the router itself (2 s, then a sweep before any byte is read) ends no stream and gives up no first-event wait", () => {
    const { h, wd, live } = pausedSetup();
    const running = wd.watch("east", "m");
    running.started();
    const waiting = wd.watch("east", "m");
    const o = [outcome(new VirtualClock(), running), outcome(new VirtualClock(), waiting)];
    live(2000, [running]);
    for (const pauseMs of [500, 2000, 20_000]) {
      h.pause(h.clock.now() + pauseMs);
      // Node runs due timers before it polls sockets: the sweep sees the silence before the tokens and the telemetry
      // that arrived meanwhile are read. Without the ledger: no token for 2000 ms and no telemetry for 2000 ms.
      wd.sweep();
      live(h.clock.now() + 1000, [running]);
    }
    expect(o.map((x) => x.err)).toEqual([undefined, undefined]);
    expect(wd.fired).toEqual({ stalled: 0, regionStalled: 0, regionDown: 0 });
    running.close();
    waiting.close();
  });

  it("a region that really stops is still caught, its silence counted from when it stopped (a pause of the router meanwhile is taken off)", () => {
    const { h, wd, live, silenceRegion } = pausedSetup();
    const running = wd.watch("east", "m");
    running.started();
    const errs: TidegateError[] = [];
    running.stalled.catch((e: TidegateError) => errs.push(e));
    live(2000, [running]);
    silenceRegion(2600);
    h.pause(3600); // the router stood still for 1 s of the region's silence
    silenceRegion(4500);
    expect(wd.fired.regionStalled).toBe(0); // 1500 ms awake since the last report: not yet stale
    silenceRegion(5000);
    expect(wd.fired.regionStalled).toBe(1);
    return Promise.resolve().then(() => {
      // Stale after 1500 ms of awake time from the last report (2000): 2000 + 1500 + the 1000 ms pause, then a sweep.
      expect(errs[0]!.message).toMatch(/^region east stalled: no token for \d+ ms \(expected one every ~100 ms\) and no telemetry for 1[5-7]\d\d ms$/);
    });
  });

  it("a region whose telemetry is late while another of its streams flows is alive: a silent stream there is not cut as region_stalled", () => {
    const { h, wd } = pausedSetup();
    const slow = wd.watch("east", "m");
    const flowing = wd.watch("east", "m");
    slow.started();
    flowing.started();
    // No telemetry at all after 0, and `slow` silent; `flowing` gets a token every 50 ms.
    h.run(5000, (t) => {
      flowing.touch();
      if (t % 250 === 0) wd.sweep();
    });
    expect(wd.fired).toEqual({ stalled: 0, regionStalled: 0, regionDown: 0 });
    // Once `flowing` goes silent too, the region is: both end.
    h.run(6000, (t) => t % 250 === 0 && wd.sweep());
    expect(wd.fired.regionStalled).toBe(2);
  });
});

describe("tokenPaceFrom", () => {
  it("is the perf model's slowest decode step, over the GPU types the model is served on, scaled by timeScale", () => {
    const config = parseConfig(DEFAULT_CONFIG_JSON);
    const pace = tokenPaceFrom(config);
    const small = pace("llama3.2-3b")!;
    // The default regions serve it on 2 × h100 only: a decode step at 256 requests holding the whole KV cache
    // (142 ms), from core/perf.
    const h100 = getProfile("llama3.2-3b", "h100-80gb", 2);
    expect(small.tbtMs).toBeCloseTo(h100.decodeIterMs(256, h100.kvCapacityTokens), 6);
    expect(small.tbtMs).toBeGreaterThan(100);
    expect(pace("llama2-70b")!.tbtMs).toBeGreaterThan(0);
    expect(pace("no-such-model")).toBeUndefined();
    const fast = tokenPaceFrom(parseConfig({ ...(DEFAULT_CONFIG_JSON as Record<string, unknown>), engines: { timeScale: 0.5 } }))("llama3.2-3b")!;
    expect(fast.tbtMs).toBeCloseTo(small.tbtMs / 2, 6);
  });
});
