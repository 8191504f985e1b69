import { describe, expect, it } from "vitest";
import { getProfile } from "./model.js";
import { poolCapacity, poolUtilization, poolsFor } from "./pd-capacity.js";

describe("Dynamo's pool sizing (pd-capacity.ts)", () => {
  it("num_p = ceil(rate × ISL / prefill per engine), num_d = ceil(rate × OSL / decode per engine)", () => {
    const cap = { prefillTokensPerS: 10_000, decodeTokensPerS: 1_000, decodeBatch: 40 };
    // 12 req/s × 2,000 prompt tokens = 24,000 tokens/s over 10,000 → 3; 12 × 100 = 1,200 over 1,000 → 2.
    expect(poolsFor(12, cap, { promptTokens: 2000, outputTokens: 100 })).toEqual({ prefill: 3, decode: 2 });
    // Exactly at capacity: 5 × 2,000 = 10,000 → 1, 10 × 100 = 1,000 → 1.
    expect(poolsFor(5, cap, { promptTokens: 2000, outputTokens: 100 }).prefill).toBe(1);
    expect(poolsFor(10, cap, { promptTokens: 2000, outputTokens: 100 }).decode).toBe(1);
    expect(poolsFor(0, cap)).toEqual({ prefill: 0, decode: 0 });
    expect(poolsFor(1, { prefillTokensPerS: 0, decodeTokensPerS: 0, decodeBatch: 0 }).prefill).toBe(Infinity);
  });

  it("a pool's utilization is its demand over its serving engines' capacity; none serving reads as full", () => {
    expect(poolUtilization(3000, 2, 2000)).toBe(0.75);
    expect(poolUtilization(5000, 2, 2000)).toBe(1.25);
    expect(poolUtilization(100, 0, 2000)).toBe(1);
    expect(poolUtilization(-1, 1, 2000)).toBe(0);
  });

  it("prefill per engine is ISL / prefill(ISL) within the TTFT target, decode the largest batch within the TPOT target", () => {
    const p = getProfile("llama2-70b", "h100-80gb", 4);
    const slo = { ttftMs: 1000, tpotMs: 50 };
    const cap = poolCapacity("llama2-70b", "h100-80gb", 4, slo, { promptTokens: 2000, outputTokens: 200 });
    expect(cap.prefillTokensPerS).toBeCloseTo((2000 * 1000) / p.prefillMs(2000), 6);
    const b = cap.decodeBatch;
    expect(b).toBeGreaterThan(0);
    expect(p.decodeIterMs(b, b * 2100)).toBeLessThanOrEqual(50);
    // The next batch misses the target or does not fit the KV cache.
    expect(p.decodeIterMs(b + 1, (b + 1) * 2100) > 50 || (b + 1) * 2200 > p.kvCapacityTokens || b === 1024).toBe(true);
    expect(cap.decodeTokensPerS).toBeCloseTo((b * 1000) / p.decodeIterMs(b, b * 2100), 6);
    // The engine's own limits: a max batch of 2, a time scale of 2 (each step twice as long).
    expect(poolCapacity("llama2-70b", "h100-80gb", 4, slo, { promptTokens: 2000, outputTokens: 200 }, { maxBatch: 2 }).decodeBatch).toBe(Math.min(2, b));
    expect(poolCapacity("llama2-70b", "h100-80gb", 4, slo, { promptTokens: 2000, outputTokens: 200 }, { timeScale: 2 }).prefillTokensPerS).toBeCloseTo((2000 * 1000) / (2 * p.prefillMs(2000)), 6);
    // A TTFT target one prompt's prefill cannot meet: no prefill capacity; a TPOT below one request's iteration: no decode.
    expect(poolCapacity("llama2-70b", "h100-80gb", 4, { ttftMs: p.prefillMs(2000) / 2, tpotMs: 50 }, { promptTokens: 2000, outputTokens: 200 }).prefillTokensPerS).toBe(0);
    expect(poolCapacity("llama2-70b", "h100-80gb", 4, { ttftMs: 1000, tpotMs: p.decodeIterMs(1, 2100) / 2 }, { promptTokens: 2000, outputTokens: 200 }).decodeTokensPerS).toBe(0);
  });
});
