/**
 * The stream watchdog's rules on virtual time (issue 32 item 3): a running stream whose region stopped reporting ends
 * after 4 expected inter-token times of silence, not after router.streamStallMs; one on a region that still reports
 * ends after its per-model stall limit; before the first event the region's availability decides; a link failure
 * after a long silence reads as a stall. And the token pace the limits come from (pace.ts).
 */
import { describe, expect, it } from "vitest";
import { VirtualClock } from "../core/clock.js";
import { DEFAULT_CONFIG_JSON, parseConfig } from "../core/config.js";
import { TidegateError } from "../core/errors.js";
import { getProfile } from "../core/perf/model.js";
import { tokenPaceFrom, type TokenPace } from "./pace.js";
import { StreamWatchdog, type Watched } from "./watchdog.js";

const STALE_MS = 1500;
const STALL_MS = 10_000;
const PACE: TokenPace = { tbtMs: 100, prefillMs: () => 0, stepMs: 10 };

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

  it("explain: a link failure after a silence longer than the region-stall bound says the peer stalled; a prompt one is left as it is", async () => {
    const { clock, wd, reportUntil } = setup();
    reportUntil(60_000);
    const w = wd.watch("east", "m");
    w.started();
    const dropped = new TidegateError("upstream_error", "region east failed request r1 mid-stream: Connection dropped");
    await clock.advanceTo(100);
    w.touch();
    expect(w.explain(dropped)).toBe(dropped);
    await clock.advanceTo(800);
    const e = w.explain(dropped) as TidegateError;
    expect(e.message).toBe("region east stalled: nothing on this stream for 700 ms, then its link failed (region east failed request r1 mid-stream: Connection dropped)");
    expect(e.cause).toBe(dropped);
    w.close();
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
