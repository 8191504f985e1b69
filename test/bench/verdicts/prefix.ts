/**
 * bench:prefix's verdict (test/bench/prefix.ts; issue 34 "What it must show"), per trace: the prefix-aware arm's hit
 * rate against the bound (the hit rate of one instance with an unbounded cache), its mean and p99 TTFT against JSQ's,
 * and its busiest instance's share of tokens against the mean share.
 */
import { atLeast, atMost, ratio, type Check } from "./common.js";

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
  const ofBound = bound > 0 ? aware.hitRate / bound : Number.NaN;
  const mean = ratio(aware.meanTtftMs, jsq.meanTtftMs);
  const p99 = ratio(aware.p99TtftMs, jsq.p99TtftMs);
  return [
    { check: `${trace}: prefix-aware hit rate / bound`, value: ofBound, limit: t.hitRateOfBound, ok: atLeast(ofBound, t.hitRateOfBound) },
    { check: `${trace}: prefix-aware mean TTFT / JSQ's`, value: mean, limit: t.meanTtftOfJsq, ok: atMost(mean, t.meanTtftOfJsq) },
    { check: `${trace}: prefix-aware p99 TTFT / JSQ's`, value: p99, limit: t.p99TtftOfJsq, ok: atMost(p99, t.p99TtftOfJsq) },
    { check: `${trace}: prefix-aware busiest instance / mean share`, value: aware.busiestOfMean, limit: t.busiestOfMeanShare, ok: atMost(aware.busiestOfMean, t.busiestOfMeanShare) },
    { check: `${trace}: every request served (both arms)`, value: jsq.requests + aware.requests - jsq.served - aware.served, limit: 0, ok: aware.requests > 0 && aware.served === aware.requests && jsq.served === jsq.requests },
  ];
}
