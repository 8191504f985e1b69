/**
 * Queue metrics (issue 3 §6): depth by model and priority, age of the oldest waiting request, dispatch rate (a
 * counter; take rate()), lease expiries, leases taken back from dead dispatchers and this dispatcher's fencings
 * (issue 32 item 4), results by outcome, batches by status, and (issue 37) batch output tokens by capacity (spare or
 * dedicated) and batches whose deadline spare capacity cannot meet. Every label combination known
 * at start is initialised to 0 (core/metrics.ts initLabels).
 */
import { Counter, Gauge, initLabels, type Registry } from "../../core/metrics.js";
import { BATCH_STATUSES, type QueueStats } from "../queue/types.js";

export class QueueMetrics {
  readonly depth: Gauge<"model" | "priority">;
  readonly oldestAgeSeconds: Gauge<"model">;
  readonly dispatched: Counter<"model" | "region" | "priority">;
  readonly leaseExpiries: Counter;
  readonly leasesReclaimed: Counter;
  readonly ownersFenced: Counter;
  readonly leased: Gauge;
  readonly results: Counter<"outcome">;
  readonly batches: Gauge<"status">;
  readonly batchTokens: Counter<"model" | "capacity">;
  readonly batchesAtRisk: Gauge<"model">;
  readonly batchesFlagged: Counter<"model">;

  /** Registers the metrics on `registry` for the given models and regions. */
  constructor(registry: Registry, readonly models: readonly string[], regions: readonly string[]) {
    const registers = [registry];
    this.depth = new Gauge({ name: "tidegate_queue_depth", help: "Batch requests waiting, by model and the priority they would be dispatched with", labelNames: ["model", "priority"], registers });
    this.oldestAgeSeconds = new Gauge({ name: "tidegate_queue_oldest_age_seconds", help: "Age of the oldest waiting batch request per model (0 when empty)", labelNames: ["model"], registers });
    this.dispatched = new Counter({ name: "tidegate_queue_dispatched_total", help: "Batch requests sent to a region", labelNames: ["model", "region", "priority"], registers });
    this.leaseExpiries = new Counter({ name: "tidegate_queue_lease_expiries_total", help: "Leases that ran out before a result was written", registers });
    this.leasesReclaimed = new Counter({ name: "tidegate_queue_leases_reclaimed_total", help: "Leases taken back from a dispatcher whose heartbeat ran out (crashed, or cut off), returned to the queue at once", registers });
    this.ownersFenced = new Counter({ name: "tidegate_queue_owner_fenced_total", help: "Times this dispatcher found its own leases taken back (its heartbeat had run out) and started again as a new owner", registers });
    this.leased = new Gauge({ name: "tidegate_queue_leased", help: "Batch requests under a lease (dispatched, no result yet)", registers });
    this.results = new Counter({ name: "tidegate_queue_results_total", help: "Results written (ok, error) or dropped (a result existed already, the batch had finished, or the lease was no longer this dispatcher's)", labelNames: ["outcome"], registers });
    this.batches = new Gauge({ name: "tidegate_batches", help: "Batches by status", labelNames: ["status"], registers });
    this.batchTokens = new Counter({ name: "tidegate_queue_batch_tokens_total", help: "Output tokens of batch requests served, by capacity: spare (sent at priority 1, preemptible) or dedicated (promoted to priority 0)", labelNames: ["model", "capacity"], registers });
    this.batchesAtRisk = new Gauge({ name: "tidegate_queue_batches_at_risk", help: "Batches in progress that cannot finish by their deadline on spare capacity alone (last review)", labelNames: ["model"], registers });
    this.batchesFlagged = new Counter({ name: "tidegate_queue_batches_flagged_total", help: "Batches flagged as unable to finish by their deadline on spare capacity alone", labelNames: ["model"], registers });
    initLabels(this.batchTokens, { model: models, capacity: ["spare", "dedicated"] });
    initLabels(this.batchesAtRisk, { model: models });
    initLabels(this.batchesFlagged, { model: models });
    initLabels(this.depth, { model: models, priority: ["0", "1"] });
    initLabels(this.oldestAgeSeconds, { model: models });
    initLabels(this.dispatched, { model: models, region: regions, priority: ["0", "1"] });
    initLabels(this.results, { outcome: ["ok", "error", "dropped"] });
    initLabels(this.batches, { status: BATCH_STATUSES });
    this.leaseExpiries.inc(0);
    this.leasesReclaimed.inc(0);
    this.ownersFenced.inc(0);
    this.leased.set(0);
  }

  /** Sets the gauges from a store snapshot taken at `nowMs`. */
  observe(stats: QueueStats, nowMs: number): void {
    for (const m of this.models) {
      const d = stats.depth[m] ?? { p0: 0, p1: 0 };
      this.depth.set({ model: m, priority: "0" }, d.p0);
      this.depth.set({ model: m, priority: "1" }, d.p1);
      const oldest = stats.oldestEnqueuedAtMs[m] ?? null;
      this.oldestAgeSeconds.set({ model: m }, oldest === null ? 0 : Math.max(0, nowMs - oldest) / 1000);
    }
    this.leased.set(stats.leased);
    for (const s of BATCH_STATUSES) this.batches.set({ status: s }, stats.batchesByStatus[s]);
  }
}
