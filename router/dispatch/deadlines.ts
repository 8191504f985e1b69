/**
 * Deadline-aware dispatch and capacity accounting for batches (issue 37), the pure parts and their books:
 *
 * - **Can a batch finish on spare capacity alone?** The model's queue runs earliest deadline first (a batch's requests
 *   are scored by its creation, router/queue/types.ts), so by its deadline a batch needs its own remaining tokens and
 *   those of every batch of its model ahead of it served. Spare capacity is what interactive traffic leaves: over the
 *   regions' last reports, Σ serving instances × one instance's tokens/s × (1 − routing utilization), the routing
 *   utilization being interactive + what cannot be preempted (core/utilization.ts). A batch whose need exceeds it is
 *   flagged (`deadlineRisk`) on the first maintenance pass that sees it in progress — within seconds of creation, well
 *   inside a minute — logged once, counted in /metrics and shown on its Batch API object.
 * - **Spare vs dedicated.** A batch request sent at priority 1 runs on spare capacity (the engine preempts it for
 *   interactive work); one promoted to priority 0 runs on dedicated capacity, beside interactive requests. Each
 *   result carries its output tokens by capacity into the queue store, which adds them to its batch's counts with
 *   the result, once (BatchRecord.spareTokens / dedicatedTokens): durable across restarts and shared by replicas.
 *   These books only count them in /metrics.
 *
 * The flags are this dispatcher's memory: after a router restart a batch's flag is found again on the next pass.
 */
import type { Clock } from "../../core/clock.js";
import type { Logger } from "../../core/log.js";
import type { Priority, RegionTelemetry } from "../../core/ports.js";
import { routingUtilization } from "../../core/utilization.js";
import type { BatchRecord } from "../queue/types.js";
import type { QueueMetrics } from "./dispatch-metrics.js";

/**
 * Whether a batch can finish by `deadlineMs` on spare capacity: it needs (aheadTokens + ownTokens) / seconds left
 * tokens/s; at risk when that exceeds `spareTokensPerS` (or no time is left with work to do). Example: 2,000,000
 * tokens of its own, none ahead, 1,000 s left → 2,000 tokens/s needed; spare 1,500 → at risk.
 */
export function deadlineRisk(x: { nowMs: number; deadlineMs: number; aheadTokens: number; ownTokens: number; spareTokensPerS: number }): { atRisk: boolean; needTokensPerS: number } {
  const work = x.aheadTokens + x.ownTokens;
  const leftS = (x.deadlineMs - x.nowMs) / 1000;
  if (work <= 0) return { atRisk: false, needTokensPerS: 0 };
  if (!(leftS > 0)) return { atRisk: true, needTokensPerS: Number.POSITIVE_INFINITY };
  const needTokensPerS = work / leftS;
  return { atRisk: !(needTokensPerS <= x.spareTokensPerS), needTokensPerS };
}

/**
 * The spare tokens/s of `model` over the regions' last reports: Σ endpoints' serving instances × `instanceTokensPerS`
 * × (1 − routing utilization, clamped to [0, 1]). Example: 2 instances of 3,000 tokens/s at 0.25 → 4,500.
 */
export function spareTokensPerS(reports: Iterable<RegionTelemetry>, model: string, instanceTokensPerS: (model: string, gpu: string) => number): number {
  let spare = 0;
  for (const r of reports) {
    const m = r.models.find((x) => x.model === model);
    if (m === undefined) continue;
    for (const e of m.endpoints) {
      const u = routingUtilization(e);
      if (e.servingInstances <= 0 || !Number.isFinite(u)) continue;
      spare += e.servingInstances * instanceTokensPerS(model, e.gpu) * Math.min(1, Math.max(0, 1 - u));
    }
  }
  return spare;
}

/**
 * What the Batch API object shows of a batch's deadline (batchObject's `tidegate` field, beside its output tokens by
 * capacity from the store).
 */
export interface BatchCapacityView {
  /** Set once a pass found it cannot finish by its deadline on spare capacity alone. */
  deadline_at_risk: boolean;
  deadline_flagged_at: number | null;
  need_tokens_per_s: number | null;
  spare_tokens_per_s: number | null;
}

/** The dispatcher's books of deadlines and capacity per batch (file comment). */
export class BatchBooks {
  private readonly reports = new Map<string, RegionTelemetry>();
  /** Per model: mean prompt + max output tokens of a request sent (EWMA), 1024 until one is seen. */
  private readonly requestTokens = new Map<string, number>();
  private readonly views = new Map<string, BatchCapacityView>();

  constructor(
    private readonly clock: Clock,
    private readonly log: Logger,
    private readonly metrics: QueueMetrics | undefined,
    /** One instance's tokens/s (prompt + output) for (model, GPU); undefined: no deadline review. */
    private readonly instanceTokensPerS: ((model: string, gpu: string) => number) | undefined,
  ) {}

  /** A region's report (the last one per region is kept). */
  noteReport(report: RegionTelemetry): void {
    this.reports.set(report.region, report);
  }

  /** A request of `model` sent with prompt + max output `tokens`. */
  noteSent(model: string, tokens: number): void {
    const seen = this.requestTokens.get(model);
    this.requestTokens.set(model, seen === undefined ? tokens : 0.9 * seen + 0.1 * tokens);
  }

  /** A request of `model` served with `outputTokens`, sent at `priority` (1: spare capacity, 0: dedicated). */
  noteServed(model: string, outputTokens: number, priority: Priority): void {
    this.metrics?.batchTokens.inc({ model, capacity: priority === 1 ? "spare" : "dedicated" }, outputTokens);
  }

  /** Whether the last review found `batchId` unable to finish by its deadline on spare capacity alone. */
  atRisk(batchId: string): boolean {
    return this.views.get(batchId)?.deadline_at_risk === true;
  }

  /** What the Batch API object shows of `batchId`; undefined when this dispatcher has nothing on it. */
  capacityView(batchId: string): BatchCapacityView | undefined {
    return this.views.get(batchId);
  }

  /**
   * Reviews the batches in progress (one maintenance pass; `batches` in any order): per model in deadline order,
   * each against the spare capacity with the work ahead of it; flags (and logs once) the ones at risk, sets the
   * at-risk gauge per model, and forgets batches no longer in progress.
   */
  review(batches: readonly BatchRecord[]): void {
    const live = new Set(batches.map((b) => b.id));
    for (const id of this.views.keys()) if (!live.has(id)) this.views.delete(id);
    if (this.instanceTokensPerS === undefined) return;
    const nowMs = this.clock.now();
    const byModel = new Map<string, BatchRecord[]>();
    for (const b of batches) if (b.status === "in_progress" && b.model !== null) (byModel.get(b.model) ?? byModel.set(b.model, []).get(b.model)!).push(b);
    for (const model of this.metrics?.models ?? []) if (!byModel.has(model)) this.metrics?.batchesAtRisk.set({ model }, 0);
    for (const [model, list] of byModel) {
      list.sort((a, b) => a.expiresAtMs - b.expiresAtMs || a.createdAtMs - b.createdAtMs);
      const spare = spareTokensPerS(this.reports.values(), model, this.instanceTokensPerS);
      const perRequest = this.requestTokens.get(model) ?? 1024;
      let ahead = 0;
      let atRisk = 0;
      for (const b of list) {
        const own = Math.max(0, b.total - b.completed - b.failed) * perRequest;
        const r = deadlineRisk({ nowMs, deadlineMs: b.expiresAtMs, aheadTokens: ahead, ownTokens: own, spareTokensPerS: spare });
        ahead += own;
        const v = this.view(b.id);
        if (r.atRisk) {
          atRisk++;
          if (!v.deadline_at_risk) {
            this.log.warn("batch cannot finish by its deadline on spare capacity alone", { batch: b.id, model, remaining: b.total - b.completed - b.failed, needTokensPerS: Math.round(r.needTokensPerS), spareTokensPerS: Math.round(spare), expiresAtMs: b.expiresAtMs });
            this.metrics?.batchesFlagged.inc({ model });
            v.deadline_flagged_at = Math.floor(nowMs / 1000);
          }
          v.deadline_at_risk = true;
        } else v.deadline_at_risk = false;
        v.need_tokens_per_s = Number.isFinite(r.needTokensPerS) ? Math.round(r.needTokensPerS) : null;
        v.spare_tokens_per_s = Math.round(spare);
      }
      this.metrics?.batchesAtRisk.set({ model }, atRisk);
    }
  }

  private view(batchId: string): BatchCapacityView {
    let v = this.views.get(batchId);
    if (v === undefined) this.views.set(batchId, (v = { deadline_at_risk: false, deadline_flagged_at: null, need_tokens_per_s: null, spare_tokens_per_s: null }));
    return v;
  }
}
