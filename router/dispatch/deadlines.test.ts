import { describe, expect, it } from "vitest";
import { VirtualClock } from "../../core/clock.js";
import { silentLogger } from "../../core/log.js";
import { createRegistry } from "../../core/metrics.js";
import type { RegionTelemetry } from "../../core/ports.js";
import { modelTelemetry } from "../../test/helpers/fake-link.js";
import type { BatchRecord } from "../queue/types.js";
import { QueueMetrics } from "./dispatch-metrics.js";
import { BatchBooks, deadlineRisk, spareTokensPerS } from "./deadlines.js";

const report = (region: string, u: number, instances: number, preemptible?: number): RegionTelemetry => {
  const m = modelTelemetry("m", u, instances);
  const p = preemptible === undefined ? {} : { preemptibleMemoryUtilization: preemptible };
  return { region, seq: 1, atMs: 0, models: [{ ...m, ...p, endpoints: m.endpoints.map((e) => ({ ...e, ...p })) }] };
};

function batch(id: string, createdAtMs: number, total: number, completed = 0): BatchRecord {
  return { id, status: "in_progress", model: "m", total, completed, failed: 0, createdAtMs, expiresAtMs: createdAtMs + 1_000_000 } as BatchRecord;
}

describe("deadline-aware dispatch (issue 37)", () => {
  it("deadlineRisk: need = (work ahead + own) / seconds left against spare tokens/s (the file's example)", () => {
    expect(deadlineRisk({ nowMs: 0, deadlineMs: 1_000_000, aheadTokens: 0, ownTokens: 2_000_000, spareTokensPerS: 1500 })).toEqual({ atRisk: true, needTokensPerS: 2000 });
    expect(deadlineRisk({ nowMs: 0, deadlineMs: 1_000_000, aheadTokens: 0, ownTokens: 2_000_000, spareTokensPerS: 2000 }).atRisk).toBe(false);
    expect(deadlineRisk({ nowMs: 0, deadlineMs: 1_000_000, aheadTokens: 1_000_000, ownTokens: 1_000_000, spareTokensPerS: 1500 }).atRisk).toBe(true);
    expect(deadlineRisk({ nowMs: 5, deadlineMs: 5, aheadTokens: 0, ownTokens: 1, spareTokensPerS: 1e9 }).atRisk).toBe(true);
    expect(deadlineRisk({ nowMs: 5, deadlineMs: 5, aheadTokens: 0, ownTokens: 0, spareTokensPerS: 0 }).atRisk).toBe(false);
    expect(deadlineRisk({ nowMs: 0, deadlineMs: 1000, aheadTokens: 0, ownTokens: 10, spareTokensPerS: Number.NaN }).atRisk).toBe(true);
  });

  it("spareTokensPerS: serving instances × an instance's tokens/s × (1 − interactive + non-preemptible utilization)", () => {
    const tps = () => 3000;
    expect(spareTokensPerS([report("a", 0.25, 2)], "m", tps)).toBeCloseTo(4500, 9); // the file's example
    // 0.85 in use, 0.60 of it preemptible batch: spare as at 0.25. Over 1: none, never negative.
    expect(spareTokensPerS([report("a", 0.85, 2, 0.6), report("b", 1.3, 1)], "m", tps)).toBeCloseTo(4500, 9);
    expect(spareTokensPerS([report("a", 0.25, 2)], "other", tps)).toBe(0);
  });

  it("BatchBooks: reviews in deadline order with the work ahead, flags and logs once, counts spare vs dedicated tokens in /metrics", async () => {
    const clock = new VirtualClock(0);
    const warned: unknown[] = [];
    const log = { ...silentLogger, warn: (_msg: string, fields?: unknown) => void warned.push(fields) };
    const registry = createRegistry(false);
    const metrics = new QueueMetrics(registry, ["m"], ["a"]);
    // One instance of 10 tokens/s at utilization 0: 10 tokens/s spare; 1,000 s to each deadline.
    const books = new BatchBooks(clock, log, metrics, () => 10);
    books.noteReport(report("a", 0, 1));
    books.noteSent("m", 10); // 10 tokens a request
    // early: 500 requests = 5,000 tokens → 5 tokens/s: fits. late (created 1 ms later): 600 more behind it → 11: at risk.
    books.review([batch("late", 1, 600), batch("early", 0, 500)]);
    expect(books.capacityView("early")).toMatchObject({ deadline_at_risk: false, need_tokens_per_s: 5, spare_tokens_per_s: 10 });
    expect(books.capacityView("late")).toMatchObject({ deadline_at_risk: true, deadline_flagged_at: 0, need_tokens_per_s: 11 });
    books.review([batch("late", 1, 600), batch("early", 0, 500)]);
    expect(warned).toHaveLength(1);
    expect(await registry.metrics()).toMatch(/^tidegate_queue_batches_at_risk\{model="m"\} 1$/m);
    expect(await registry.metrics()).toMatch(/^tidegate_queue_batches_flagged_total\{model="m"\} 1$/m);
    books.noteServed("m", 48, 1);
    books.noteServed("m", 16, 0);
    expect(await registry.metrics()).toMatch(/^tidegate_queue_batch_tokens_total\{model="m",capacity="spare"\} 48$/m);
    expect(await registry.metrics()).toMatch(/^tidegate_queue_batch_tokens_total\{model="m",capacity="dedicated"\} 16$/m);
    // A batch no longer in progress is forgotten.
    books.review([batch("early", 0, 500)]);
    expect(books.capacityView("late")).toBeUndefined();
  });
});
