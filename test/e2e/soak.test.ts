/**
 * The 60-second soak (issue 15 item 3; `npm run bench:soak` is the 10-minute one): mixed streaming and batch through
 * `tidegate global` and three `tidegate region` processes, sampled every 10 s. Limits, scaled to a minute on a
 * shared 2-core machine: the first 20 s are warm-up; RSS growth from 20 s to the end < 10% in every process; open
 * descriptors (median of the last 20 s) at most 8 above the median of 20–40 s (sockets in flight vary with the
 * moment sampled); TTFT p99 of streams started in the last 20 s ≤ 1.5× that of 20–40 s + 25 ms (a p99 of ~150
 * streams moves with one GC pause; the bench holds the 1.2× over whole minutes); and every stream and batch
 * complete.
 */
import { describe, expect, it } from "vitest";
import { runSoak, soakChecks } from "./soak.js";

describe("soak (60 s, real processes)", () => {
  it("RSS, descriptors and TTFT hold steady under mixed streaming and batch load", async () => {
    const durationMs = 60_000;
    const r = await runSoak({ durationMs, sampleMs: 10_000, streams: 4, paceMs: 100, batchSize: 200, batchPauseMs: 1000, progress: (l) => console.log(l) });
    const { checks, figures } = soakChecks(r, durationMs, { warmupMs: 20_000, windowMs: 20_000, maxRssGrowth: 0.1, fdSlack: 8, maxTtftRatio: 1.5, ttftSlackMs: 25 });
    console.log(`soak: ${JSON.stringify({ checks, ...figures })}`);
    expect(r.samples).toHaveLength(6);
    expect(r.streamsOk).toBeGreaterThan(300);
    expect(r.batchesCompleted).toBeGreaterThanOrEqual(10);
    expect(checks).toEqual({ rss: true, fds: true, ttft: true, traffic: true });
  }, 150_000);
});
