import { describe, expect, it } from "vitest";
import { BATCH_TARGET, batchChecks, type FillRound, type TtftRound } from "./batch.js";
import { verdictOf } from "./common.js";

// Issue 45: both checks of bench:batch fail on a failed baseline, a NaN, an Infinity and a figure just past its limit.

const fill = (ratio: number, over: Partial<FillRound> = {}): FillRound => ({ directTokensPerS: 10_000, batchTokensPerS: 10_000 * ratio, batchComplete: true, directRequests: 10_000, directFailed: 0, ...over });
const ttft = (ratio: number, over: Partial<TtftRound> = {}): TtftRound => ({ aloneMs: [14, 16], besideMs: [15 * ratio], batchComplete: true, aloneFailed: 0, besideFailed: 0, ...over });
const run = (f: FillRound[], t: TtftRound[]) => batchChecks(f, t).checks;
const FILL = "fill ratio";
const TTFT = "interactive TTFT";
const find = (checks: ReturnType<typeof run>, prefix: string) => checks.find((c) => c.check.startsWith(prefix))!;
const JUST = 1e-6;

describe("bench:batch verdict, issue 45", () => {
  it("meets with both figures in bounds", () => {
    expect(verdictOf(run([fill(0.95), fill(0.95), fill(0.95)], [ttft(1.02), ttft(1.02), ttft(1.02)]))).toEqual({ met: true, missed: [] });
  });

  it("a direct arm (the fill baseline) that failed requests fails the fill check, naming it", () => {
    const checks = run([fill(0.95), fill(0.95, { directFailed: 2 }), fill(0.95)], [ttft(1.02)]);
    expect(find(checks, FILL)).toMatchObject({ ok: false, check: expect.stringContaining("(direct: 2 of 30000 requests failed)") });
    expect(find(checks, TTFT).ok).toBe(true);
  });

  it("an interactive stream that failed alone (the TTFT baseline) or beside fails the TTFT check, naming the arm", () => {
    expect(find(run([fill(0.95)], [ttft(1.02), ttft(1.02, { aloneFailed: 1 })]), TTFT)).toMatchObject({ ok: false, check: expect.stringContaining("(alone: 1 of 5 streams failed)") });
    expect(find(run([fill(0.95)], [ttft(1.02, { besideFailed: 3 })]), TTFT)).toMatchObject({ ok: false, check: expect.stringContaining("(beside: 3 of 4 streams failed)") });
    expect(find(run([fill(0.95)], [ttft(1.02, { batchComplete: false })]), TTFT)).toMatchObject({ ok: false, check: expect.stringContaining("(batch beside: 1 of 1 batches not completed in full)") });
    expect(find(run([fill(0.95, { batchComplete: false })], [ttft(1.02)]), FILL)).toMatchObject({ ok: false, check: expect.stringContaining("(batch: 1 of 1 batches not completed in full)") });
  });

  it("NaN or +Infinity in any figure fails (an alone mean of +Infinity used to make the ratio 0, a pass)", () => {
    for (const x of [Number.NaN, Number.POSITIVE_INFINITY]) {
      expect(find(run([fill(0.95, { directTokensPerS: x })], [ttft(1.02)]), FILL).ok, `direct ${x}`).toBe(false);
      expect(find(run([fill(0.95, { batchTokensPerS: x })], [ttft(1.02)]), FILL).ok, `batch ${x}`).toBe(false);
      expect(find(run([fill(0.95)], [ttft(1.02, { aloneMs: [14, x] })]), TTFT).ok, `alone ${x}`).toBe(false);
      expect(find(run([fill(0.95)], [ttft(1.02, { besideMs: [x] })]), TTFT).ok, `beside ${x}`).toBe(false);
    }
  });

  it("a figure just past each limit fails, one just inside passes", () => {
    expect(find(run([fill(BATCH_TARGET.fillRatio * (1 - JUST))], [ttft(1.02)]), FILL).ok).toBe(false);
    expect(find(run([fill(BATCH_TARGET.fillRatio * (1 + JUST))], [ttft(1.02)]), FILL).ok).toBe(true);
    expect(find(run([fill(0.95)], [ttft(BATCH_TARGET.ttftRatio * (1 + JUST))]), TTFT).ok).toBe(false);
    expect(find(run([fill(0.95)], [ttft(BATCH_TARGET.ttftRatio * (1 - JUST))]), TTFT).ok).toBe(true);
  });
});
