/**
 * The Dispatcher's maintenance pass (on the Clock, every `maintenanceIntervalMs`): its own heartbeat first, then the
 * leases of owners whose heartbeat ran out taken back (`QueueStore.reclaimDead`: a crashed router's requests return
 * `ownerTtlMs` after its last heartbeat), parked requests past half their lease released, running requests' leases
 * renewed, expired leases requeued, batches past their window expired, intake started for batches left in
 * `validating` (e.g. after a crash), finished batches finalized, batches in progress reviewed against their deadlines
 * (deadlines.ts), the metrics refreshed, and what it saw handed to `observed` (cold-wake.ts: batch work for a model
 * at zero).
 */
import type { Clock } from "../../core/clock.js";
import type { Logger } from "../../core/log.js";
import type { BatchRecord, FileStore, QueueStats, QueueStore } from "../queue/types.js";
import type { QueueMetrics } from "./dispatch-metrics.js";
import { finalizeBatch } from "./finalize.js";
import type { LeaseBook } from "./leases.js";

/** What one pass reads and calls. */
export interface MaintenanceContext {
  store: QueueStore;
  files: FileStore;
  clock: Clock;
  log: Logger;
  metrics?: QueueMetrics | undefined;
  models: readonly string[];
  promoteAfterMs: number;
  intakeGraceMs: number;
  leases: LeaseBook;
  /** Clock time of each region's last telemetry report (only requests in a region that reports are renewed). */
  lastReportMs: ReadonlyMap<string, number>;
  /** Releases parked requests past half their lease. */
  releaseParked(): Promise<void>;
  /** Forgets the allowed regions of batches no longer active. */
  forgetBatchesBut(active: readonly string[]): void;
  startIntake(batch: BatchRecord): void;
  stopped(): boolean;
  states: BatchStates;
  /** What the pass saw: the active batches and the queue's stats (cold-wake.ts reads them); absent: not read. */
  observed?(batches: readonly BatchRecord[], stats: QueueStats): void;
  /** Reviews the batches in progress seen by the pass (deadlines.ts BatchBooks.review). */
  review?(batches: readonly BatchRecord[]): void;
}

/** The last status logged per batch (debug logs of state changes); terminal ones are dropped after a pass. */
export class BatchStates {
  private readonly states = new Map<string, { status: string; terminal: boolean }>();

  constructor(private readonly log: Logger) {}

  /** Logs (debug) a batch whose status changed since this replica last saw it. */
  note(b: { id: string; status: string; model?: string | null; total?: number; completed?: number; failed?: number }): void {
    const prev = this.states.get(b.id)?.status;
    if (prev === b.status) return;
    this.states.set(b.id, { status: b.status, terminal: b.status === "completed" || b.status === "failed" || b.status === "expired" || b.status === "cancelled" });
    this.log.debug("batch state", { batch: b.id, from: prev ?? null, to: b.status, model: b.model ?? null, total: b.total, completed: b.completed, failed: b.failed });
  }

  /** Forgets batches that reached a terminal status. */
  dropTerminal(): void {
    for (const [id, st] of this.states) if (st.terminal) this.states.delete(id);
  }
}

/** One maintenance pass (see the file comment); store failures reject. */
export async function maintainOnce(x: MaintenanceContext): Promise<void> {
  const { store, clock } = x;
  // Its own heartbeat first, so that a pass running late never finds this incarnation's own owner dead.
  await x.leases.beat();
  const rc = await store.reclaimDead(clock.now());
  if (rc.leases > 0) {
    x.metrics?.leasesReclaimed.inc(rc.leases);
    x.log.warn("took back the leases of a dispatcher whose heartbeat ran out (crashed or cut off); its requests are queued again", { owners: rc.owners, leases: rc.leases, requeued: rc.requeued });
  } else if (rc.owners > 0) x.log.debug("lease owners expired with no lease left", { owners: rc.owners });
  await x.releaseParked();
  await x.leases.renewRunning(x.lastReportMs);
  const rq = await store.requeueExpired(clock.now(), 10_000);
  x.metrics?.leaseExpiries.inc(rq.expiredLeases);
  const active = await store.activeBatchIds();
  x.forgetBatchesBut(active);
  const seen: BatchRecord[] = [];
  for (const id of active) {
    if (x.stopped()) return;
    let b = await store.getBatch(id);
    if (b === undefined) continue;
    const nowMs = clock.now();
    if ((b.status === "in_progress" || b.status === "validating") && nowMs >= b.expiresAtMs) {
      await store.expire(id, nowMs);
      b = (await store.getBatch(id))!;
    }
    x.states.note(b);
    seen.push(b);
    if (b.status === "validating" && nowMs - b.createdAtMs >= x.intakeGraceMs) x.startIntake(b);
    if (b.status === "finalizing") {
      await finalizeBatch(store, x.files, b, nowMs);
      const after = await store.getBatch(id);
      if (after !== undefined) x.states.note(after);
    }
  }
  x.states.dropTerminal();
  x.review?.(seen);
  const nowMs = clock.now();
  // The stats scan the queue: only for a reader (an embedded queue of millions in the week replay has none).
  if (x.metrics === undefined && x.observed === undefined) return;
  const stats = await store.stats(x.models, nowMs, x.promoteAfterMs);
  x.metrics?.observe(stats, nowMs);
  x.observed?.(seen, stats);
}
