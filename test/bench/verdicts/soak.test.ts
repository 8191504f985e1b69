import { describe, expect, it } from "vitest";
import { soakChecks, type SoakResult, type SoakSample } from "../../e2e/soak.js";

// Issue 45 for bench:soak's checks (test/e2e/soak.ts soakChecks): judged on unrounded figures, and a NaN, an
// Infinity and a figure just past each limit fail.

const LIMITS = { warmupMs: 60_000, windowMs: 60_000, maxRssGrowth: 0.1, fdSlack: 0, maxTtftRatio: 1.2, ttftSlackMs: 0 };
const DURATION_MS = 600_000;
/** A soak whose global process goes from 100 MiB (after warm-up) to `endRssMiB`, with 20 fds and TTFT p99 `lastTtftMs` at the end. */
function soak(endRssMiB: number, lastTtftMs = 50, over: Partial<SoakResult> = {}): SoakResult {
  const samples: SoakSample[] = [];
  for (let atMs = 30_000; atMs <= DURATION_MS; atMs += 30_000) samples.push({ atMs, processes: { global: { rssMiB: atMs === DURATION_MS ? endRssMiB : 100, fds: 20, eventLoopP99Ms: 5 } }, streams: 10, ttftP99Ms: 50, batchesCompleted: 1 });
  const ttfts = [...[61_000, 90_000, 119_000].map((atMs) => ({ atMs, ttftMs: 50 })), ...[541_000, 570_000, 599_000].map((atMs) => ({ atMs, ttftMs: lastTtftMs }))];
  return { samples, streamsOk: 100, streamsFailed: 0, batchesCompleted: 5, batchRequests: 50, ttfts, errors: [], ...over };
}
const JUST = 1e-6;

describe("bench:soak checks, issue 45", () => {
  it("meets when nothing grows", () => {
    expect(soakChecks(soak(100), DURATION_MS, LIMITS).checks).toEqual({ rss: true, fds: true, ttft: true, traffic: true });
  });

  it("RSS growth is judged unrounded: 9.99996% is under 10% (it printed, and was judged, as 0.1)", () => {
    const r = soakChecks(soak(100 * (1 + LIMITS.maxRssGrowth - 4e-7)), DURATION_MS, LIMITS);
    expect(r.checks.rss).toBe(true);
    expect(r.figures.rssGrowth).toEqual({ global: 0.1 });
    expect(soakChecks(soak(100 * (1 + LIMITS.maxRssGrowth)), DURATION_MS, LIMITS).checks.rss).toBe(false);
  });

  it("NaN, +Infinity and just past each limit fail; a failed stream fails", () => {
    for (const x of [Number.NaN, Number.POSITIVE_INFINITY]) {
      expect(soakChecks(soak(x), DURATION_MS, LIMITS).checks.rss, `rss ${x}`).toBe(false);
      expect(soakChecks(soak(100, x), DURATION_MS, LIMITS).checks.ttft, `ttft ${x}`).toBe(false);
    }
    expect(soakChecks(soak(100, 50 * LIMITS.maxTtftRatio * (1 + JUST)), DURATION_MS, LIMITS).checks.ttft).toBe(false);
    expect(soakChecks(soak(100, 50 * LIMITS.maxTtftRatio * (1 - JUST)), DURATION_MS, LIMITS).checks.ttft).toBe(true);
    expect(soakChecks(soak(100, 50, { streamsFailed: 1 }), DURATION_MS, LIMITS).checks.traffic).toBe(false);
  });
});
