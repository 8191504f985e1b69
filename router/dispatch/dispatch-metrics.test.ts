import { describe, expect, it } from "vitest";
import { createRegistry } from "../../core/metrics.js";
import { QueueMetrics } from "./dispatch-metrics.js";

describe("QueueMetrics", () => {
  it("starts every label combination at 0 and reflects a store snapshot", async () => {
    const registry = createRegistry(false);
    const m = new QueueMetrics(registry, ["a", "b"], ["r1", "r2"]);
    const text = await registry.metrics();
    for (const model of ["a", "b"]) {
      for (const p of ["0", "1"]) expect(text).toContain(`tidegate_queue_depth{model="${model}",priority="${p}"} 0`);
      for (const r of ["r1", "r2"]) for (const p of ["0", "1"]) expect(text).toContain(`tidegate_queue_dispatched_total{model="${model}",region="${r}",priority="${p}"} 0`);
      expect(text).toContain(`tidegate_queue_oldest_age_seconds{model="${model}"} 0`);
    }
    for (const s of ["validating", "failed", "in_progress", "finalizing", "completed", "expired", "cancelling", "cancelled"]) expect(text).toContain(`tidegate_batches{status="${s}"} 0`);
    expect(text).toContain("tidegate_queue_lease_expiries_total 0");
    expect(text).toContain("tidegate_queue_leases_reclaimed_total 0");
    expect(text).toContain("tidegate_queue_owner_fenced_total 0");
    for (const o of ["ok", "error", "dropped"]) expect(text).toContain(`tidegate_queue_results_total{outcome="${o}"} 0`);
    m.observe({
      depth: { a: { p0: 3, p1: 7 } },
      oldestEnqueuedAtMs: { a: 1000, b: null },
      leased: 4,
      batchesByStatus: { validating: 0, failed: 1, in_progress: 2, finalizing: 0, completed: 5, expired: 0, cancelling: 0, cancelled: 0 },
    }, 61_000);
    const after = await registry.metrics();
    expect(after).toContain('tidegate_queue_depth{model="a",priority="0"} 3');
    expect(after).toContain('tidegate_queue_depth{model="a",priority="1"} 7');
    expect(after).toContain('tidegate_queue_depth{model="b",priority="1"} 0');
    expect(after).toContain('tidegate_queue_oldest_age_seconds{model="a"} 60');
    expect(after).toContain("tidegate_queue_leased 4");
    expect(after).toContain('tidegate_batches{status="completed"} 5');
  });
});
