import { describe, expect, it } from "vitest";
import { verdictOf } from "./common.js";
import { PREFIX_TARGET, prefixChecks, type PrefixArm } from "./prefix.js";

// Issue 45: every check of bench:prefix fails on an unserving baseline, a NaN, an Infinity and a figure just past its limit.

const arm = (over: Partial<PrefixArm> = {}): PrefixArm => ({ hitRate: 0.4, meanTtftMs: 300, p99TtftMs: 2000, busiestOfMean: 1.05, requests: 1000, served: 1000, ...over });
const BOUND = 0.45;
const JSQ = arm({ hitRate: 0.1, meanTtftMs: 600, p99TtftMs: 2500, busiestOfMean: 1.01 });
const run = (aware: PrefixArm, jsq = JSQ, bound = BOUND) => prefixChecks("t", bound, jsq, aware);
const find = (checks: ReturnType<typeof run>, prefix: string) => checks.find((c) => c.check.startsWith(`t: ${prefix}`))!;
const JUST = 1e-6;

describe("bench:prefix verdict, issue 45", () => {
  it("meets with every figure in bounds", () => {
    expect(verdictOf(run(arm()))).toEqual({ met: true, missed: [] });
  });

  it("a JSQ arm that left requests unserved fails each TTFT ratio against it, naming it (its TTFTs are over the rest)", () => {
    const checks = run(arm(), arm({ ...JSQ, served: 990, meanTtftMs: 700 }));
    for (const name of ["prefix-aware mean TTFT / JSQ's", "prefix-aware p99 TTFT / JSQ's"]) expect(find(checks, name)).toMatchObject({ ok: false, check: expect.stringContaining("(JSQ: 10 of 1000 requests unserved)") });
    expect(find(checks, "every request served").ok).toBe(false);
    expect(find(checks, "prefix-aware hit rate").ok).toBe(true); // not read against JSQ
  });

  it("a prefix-aware arm that left requests unserved fails every check, naming it", () => {
    const checks = run(arm({ served: 999 }));
    expect(checks.every((c) => !c.ok)).toBe(true);
    expect(checks.slice(0, 4).every((c) => c.check.includes("(prefix-aware: 1 of 1000 requests unserved)"))).toBe(true);
  });

  it("NaN or +Infinity in any figure fails", () => {
    for (const x of [Number.NaN, Number.POSITIVE_INFINITY]) {
      for (const [label, checks] of [
        ["aware hit rate", run(arm({ hitRate: x }))],
        ["bound", run(arm(), JSQ, x)],
        ["aware mean", run(arm({ meanTtftMs: x }))],
        ["JSQ mean", run(arm(), arm({ ...JSQ, meanTtftMs: x }))],
        ["aware p99", run(arm({ p99TtftMs: x }))],
        ["JSQ p99", run(arm(), arm({ ...JSQ, p99TtftMs: x }))],
        ["busiest", run(arm({ busiestOfMean: x }))],
      ] as const) expect(verdictOf(checks).met, `${label} ${x}`).toBe(false);
    }
  });

  it("a figure just past each limit fails, one just inside passes", () => {
    const T = PREFIX_TARGET;
    const met = (aware: PrefixArm) => verdictOf(run(aware)).met;
    for (const [f, ok] of [[1 + JUST, false], [1 - JUST, true]] as const) {
      expect(met(arm({ meanTtftMs: 600 * T.meanTtftOfJsq * f })), `mean ${f}`).toBe(ok);
      expect(met(arm({ p99TtftMs: 2500 * T.p99TtftOfJsq * f })), `p99 ${f}`).toBe(ok);
      expect(met(arm({ busiestOfMean: T.busiestOfMeanShare * f })), `busiest ${f}`).toBe(ok);
    }
    expect(met(arm({ hitRate: BOUND * T.hitRateOfBound * (1 - JUST) }))).toBe(false);
    expect(met(arm({ hitRate: BOUND * T.hitRateOfBound * (1 + JUST) }))).toBe(true);
  });
});
