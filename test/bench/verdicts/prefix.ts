/**
 * bench:prefix's verdict (test/bench/prefix.ts; issue 34 "What it must show"), per trace: the prefix-aware arm's hit
 * rate against the bound (the hit rate of one instance with an unbounded cache), its mean and p99 TTFT against JSQ's,
 * and its busiest instance's share of tokens against the mean share. An arm's TTFTs are over the requests it served,
 * so every check of the prefix-aware arm fails when it left requests unserved, and each TTFT ratio fails when JSQ
 * (the baseline) did too (issue 45): a ratio over a part of either arm's requests is no comparison. The check names
 * the arm and how many it left.
 */
import { atLeast, atMost, failuresNote, ratio, type Check } from "./common.js";

export const PREFIX_TARGET = { hitRateOfBound: 0.8, meanTtftOfJsq: 0.6, p99TtftOfJsq: 1.0, busiestOfMeanShare: 1.2 };

/** One arm's figures on one trace. */
export interface PrefixArm {
  hitRate: number;
  meanTtftMs: number;
  p99TtftMs: number;
  /** The busiest instance's share of the tokens (prompt + output) over the mean share (1 / instances). */
  busiestOfMean: number;
  requests: number;
  served: number;
}

/** The checks of one trace: `aware` (prefix-aware) against `jsq` and the bound. */
export function prefixChecks(trace: string, bound: number, jsq: PrefixArm, aware: PrefixArm): Check[] {
  const t = PREFIX_TARGET;
  const ofBound = ratio(aware.hitRate, bound);
  const mean = ratio(aware.meanTtftMs, jsq.meanTtftMs);
  const p99 = ratio(aware.p99TtftMs, jsq.p99TtftMs);
  const unserved = (arm: string, a: PrefixArm) => ({ arm, failed: a.requests - a.served, requests: a.requests, what: "requests unserved" });
  const own = failuresNote([unserved("prefix-aware", aware)]);
  const both = failuresNote([unserved("prefix-aware", aware), unserved("JSQ", jsq)]);
  return [
    { check: `${trace}: prefix-aware hit rate / bound${own}`, value: ofBound, limit: t.hitRateOfBound, ok: own === "" && atLeast(ofBound, t.hitRateOfBound) },
    { check: `${trace}: prefix-aware mean TTFT / JSQ's${both}`, value: mean, limit: t.meanTtftOfJsq, ok: both === "" && atMost(mean, t.meanTtftOfJsq) },
    { check: `${trace}: prefix-aware p99 TTFT / JSQ's${both}`, value: p99, limit: t.p99TtftOfJsq, ok: both === "" && atMost(p99, t.p99TtftOfJsq) },
    { check: `${trace}: prefix-aware busiest instance / mean share${own}`, value: aware.busiestOfMean, limit: t.busiestOfMeanShare, ok: own === "" && atMost(aware.busiestOfMean, t.busiestOfMeanShare) },
    { check: `${trace}: every request served (both arms)`, value: jsq.requests + aware.requests - jsq.served - aware.served, limit: 0, ok: aware.requests > 0 && aware.served === aware.requests && jsq.served === jsq.requests },
  ];
}
