/** capacityAtSlo and its queueing pieces: hand-checked Erlang C values, M/M/1, monotonicity, the zero cases. */
import { describe, expect, it } from "vitest";
import { getProfile } from "./model.js";
import { capacityAtSlo, erlangC, maxArrivalRate, waitExceeds } from "./slo-capacity.js";

const SLO = { ttftMs: 1000, tpotMs: 100, percentile: 0.95 };
const MIX = { promptTokens: 1155, outputTokens: 211 };

describe("Erlang C", () => {
  it("matches hand-computed values", () => {
    expect(erlangC(1, 0.5)).toBeCloseTo(0.5, 12); // M/M/1: C = ρ
    // C(2, 1): (a²/2!·c/(c−a)) / (1 + a + a²/2!·c/(c−a)) = 1 / 3.
    expect(erlangC(2, 1)).toBeCloseTo(1 / 3, 12);
    // C(3, 2): a³/3!·3/(3−2) = 4; Σ_{k<3} a^k/k! = 1 + 2 + 2 = 5 → 4 / 9.
    expect(erlangC(3, 2)).toBeCloseTo(4 / 9, 12);
    expect(erlangC(4, 0)).toBe(0);
    expect(erlangC(4, 4)).toBe(1);
    expect(erlangC(1000, 900)).toBeGreaterThan(0);
    expect(erlangC(1000, 900)).toBeLessThan(1);
  });

  it("reduces to M/M/1 for one server: P(W > t) = ρ·e^{−(μ−λ)t}", () => {
    expect(waitExceeds(1, 0.6, 1, 2)).toBeCloseTo(0.6 * Math.exp(-0.4 * 2), 12);
    expect(waitExceeds(1, 1, 1, 5)).toBe(1);
    // t = 0: P(W > 0) = ρ ≤ q gives λ = q·μ.
    expect(maxArrivalRate(1, 2, 0, 0.05)).toBeCloseTo(0.1, 7);
    // t > 0: the largest λ solves λ·e^{−(1−λ)·3} = 0.05 (μ = 1).
    const l = maxArrivalRate(1, 1, 3, 0.05);
    expect(l * Math.exp(-(1 - l) * 3)).toBeCloseTo(0.05, 7);
  });

  it("more servers at the same total rate wait less", () => {
    const one = maxArrivalRate(1, 8, 0.1, 0.05);
    const eight = maxArrivalRate(8, 1, 0.1, 0.05);
    expect(eight).toBeGreaterThan(one);
    expect(eight).toBeLessThan(8);
  });
});

describe("capacityAtSlo", () => {
  it("finds the largest batch within TPOT, and tokens/s = requests/s × request size", () => {
    const c = capacityAtSlo("llama2-70b", "h100-80gb", 4, SLO, MIX);
    expect(c.batch).toBeGreaterThan(1);
    expect(c.tokensPerS).toBeCloseTo(c.requestsPerS * 1366, 6);
    // The batch meets TPOT and one more would not (it is bound by TPOT here).
    const p = getProfile("llama2-70b", "h100-80gb", 4);
    const tpot = (b: number) => p.decodeIterMs(b, b * (1155 + 211 / 2)) + (b * p.prefillMs(1155)) / 211;
    expect(tpot(c.batch)).toBeLessThanOrEqual(100);
    expect(tpot(c.batch + 1)).toBeGreaterThan(100);
    expect(c.derivation).toContain("bound by TPOT");
    // At the rate found, the SLO percentile of waits is within TTFT − prefill.
    const lifetimeS = (211 * p.decodeIterMs(c.batch, c.batch * (1155 + 211 / 2)) + c.batch * p.prefillMs(1155)) / 1000;
    expect(waitExceeds(c.batch, c.requestsPerS, 1 / lifetimeS, (1000 - p.prefillMs(1155)) / 1000)).toBeCloseTo(0.05, 6);
    // Below what the batch could serve with no SLO on waiting.
    expect(c.requestsPerS).toBeLessThan(c.batch / lifetimeS);
  });

  it("grows as the SLO loosens (TTFT, TPOT or percentile)", () => {
    const base = capacityAtSlo("llama2-70b", "a100-80gb", 4, SLO, MIX).tokensPerS;
    expect(capacityAtSlo("llama2-70b", "a100-80gb", 4, { ...SLO, ttftMs: 2000 }, MIX).tokensPerS).toBeGreaterThan(base);
    expect(capacityAtSlo("llama2-70b", "a100-80gb", 4, { ...SLO, tpotMs: 150 }, MIX).tokensPerS).toBeGreaterThan(base);
    expect(capacityAtSlo("llama2-70b", "a100-80gb", 4, { ...SLO, percentile: 0.5 }, MIX).tokensPerS).toBeGreaterThan(base);
    expect(capacityAtSlo("llama2-70b", "a100-80gb", 4, { ...SLO, tpotMs: 60 }, MIX).tokensPerS).toBeLessThan(base);
  });

  it("caps the batch by maxBatch and by the KV the engine holds", () => {
    const capped = capacityAtSlo("llama3.1-8b", "h100-80gb", 2, SLO, MIX, { maxBatch: 16 });
    expect(capped.batch).toBe(16);
    expect(capped.derivation).toContain("bound by maxBatch 16");
    // KV: 32 slots × 128 tokens = 4,096 tokens hold 2 sequences of 1,366 tokens.
    const kv = capacityAtSlo("llama3.1-8b", "h100-80gb", 2, SLO, MIX, { maxBatch: 32, kvTokensPerSeq: 128 });
    expect(kv.batch).toBe(2);
    expect(kv.derivation).toContain("bound by KV (2 sequences)");
    expect(capacityAtSlo("llama3.1-8b", "h100-80gb", 2, SLO, MIX, { kvCapacityTokens: 5000 }).batch).toBe(3);
  });

  it("is 0, with why, when prefill alone misses TTFT, one request misses TPOT, or no sequence fits", () => {
    const ttft = capacityAtSlo("llama2-70b", "a100-80gb", 4, { ...SLO, ttftMs: 10 }, MIX);
    expect(ttft).toMatchObject({ requestsPerS: 0, tokensPerS: 0, batch: 0 });
    expect(ttft.derivation).toMatch(/prefill takes [\d.]+ ms, over the TTFT target/);
    const tpot = capacityAtSlo("llama2-70b", "a100-80gb", 4, { ...SLO, tpotMs: 1 }, MIX);
    expect(tpot.tokensPerS).toBe(0);
    expect(tpot.derivation).toContain("over the TPOT target");
    expect(capacityAtSlo("llama2-70b", "a100-80gb", 4, SLO, MIX, { kvCapacityTokens: 1000 }).derivation).toContain("holds no 1366-token sequence");
  });
});
