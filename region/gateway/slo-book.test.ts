import { describe, expect, it } from "vitest";
import { VirtualClock } from "../../core/clock.js";
import { SloBook, tpotOf, type SloOutcome } from "./slo-book.js";

const SLO = { ttftMs: 1000, tpotMs: 100, percentile: 0.95 };
const MIN = 60_000;

describe("SloBook", () => {
  it("TPOT: (last token − first token) / (tokens − 1), none for one token", () => {
    expect(tpotOf(100, 300, 3)).toBe(100);
    expect(tpotOf(100, 100, 1)).toBeUndefined();
    expect(tpotOf(100, 100, 0)).toBeUndefined();
  });

  it("books a slow TTFT, a slow TPOT and an unserved request as 0 met of 3, into running totals", () => {
    const outcomes: SloOutcome[] = [];
    const book = new SloBook("m", SLO, new VirtualClock(0), (_m, o) => outcomes.push(o));
    expect(book.finished(1001, 50, 100, 10)).toBe("missed"); // TTFT 1001 > 1000
    expect(book.finished(500, 101, 200, 30)).toBe("missed"); // TPOT 101 > 100
    expect(book.refused()).toBe("unserved");
    expect(outcomes).toEqual(["missed", "missed", "unserved"]);
    // Token sums over the two that finished: prompts 100 + 200, outputs 10 + 30; reading changes nothing.
    expect(book.totals()).toEqual({ requests: 3, met: 0, finished: 2, promptTokens: 300, outputTokens: 40 });
    expect(book.totals()).toEqual({ requests: 3, met: 0, finished: 2, promptTokens: 300, outputTokens: 40 });
    // At the targets exactly, and with no TPOT: met. A broken request counts, outside the finished sums.
    expect(book.finished(1000, 100, 10, 5)).toBe("met");
    expect(book.finished(0, undefined, 10, 1)).toBe("met");
    expect(book.broken()).toBe("missed");
    expect(book.totals()).toEqual({ requests: 6, met: 2, finished: 4, promptTokens: 320, outputTokens: 46 });
    expect(book.summary()).toMatchObject({ met: 2, missed: 3, unserved: 1, lastHourRequests: 6, lastHourMet: 2, lastHourAttainment: 2 / 6 });
  });

  it("keeps a rolling hour of one-minute buckets and counts completed clock hours below the percentile", async () => {
    const clock = new VirtualClock(0);
    const book = new SloBook("m", SLO, clock);
    const met = (n: number) => {
      for (let i = 0; i < n; i++) book.finished(10, 10, 1, 1);
    };
    expect(book.summary()).toMatchObject({ lastHourRequests: 0, lastHourAttainment: null, judgedHours: 0, violatedHours: 0 });
    // Hour 0: minute 0 one met and one unserved, minute 30 two met → 3 of 4 = 0.75 < 0.95.
    met(1);
    book.refused();
    await clock.advanceTo(30 * MIN);
    met(2);
    expect(book.summary()).toMatchObject({ lastHourRequests: 4, lastHourMet: 3, lastHourAttainment: 0.75, judgedHours: 0 });
    // 59:59 still holds minute 0; at 60:00 minute 0 has left the rolling hour and hour 0 is complete (violated).
    await clock.advanceTo(60 * MIN - 1);
    expect(book.summary()).toMatchObject({ lastHourRequests: 4, judgedHours: 0, violatedHours: 0 });
    await clock.advanceTo(60 * MIN);
    expect(book.summary()).toMatchObject({ lastHourRequests: 2, lastHourMet: 2, lastHourAttainment: 1, judgedHours: 1, violatedHours: 1 });
    // Minute 60 reuses minute 0's bucket: its old counts are gone. Hour 1: 20 met, 1 unserved → 20/21 ≈ 0.952 ≥ 0.95.
    met(20);
    book.refused();
    expect(book.summary()).toMatchObject({ lastHourRequests: 23, lastHourMet: 22 });
    await clock.advanceTo(90 * MIN);
    expect(book.summary()).toMatchObject({ lastHourRequests: 21, lastHourMet: 20 });
    // Hour 2 judges nothing: neither judged nor violated.
    await clock.advanceTo(200 * MIN);
    expect(book.summary()).toMatchObject({ lastHourRequests: 0, lastHourAttainment: null, judgedHours: 2, violatedHours: 1, met: 23, missed: 0, unserved: 2 });
  });
});
