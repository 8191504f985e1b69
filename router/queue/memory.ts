/**
 * The queue state machine in memory: the reference semantics of every QueueStore operation, synchronous and
 * deterministic given its arguments (so the embedded adapter can rebuild it by replaying its journal). The Redis
 * Lua scripts in lua/ implement the same transitions; the conformance suite holds both to it.
 */
import {
  BATCH_STATUSES, QueueCode, isTerminal, ownerOf, parseRequestId, requestId, tokenCount,
  type BatchInit, type BatchLineError, type CompleteItem, type BatchRecord, type BatchStatus, type ClaimedRequest, type QueueStats,
  type ReclaimResult, type RequestResult, type RequeueResult,
} from "./types.js";
import { ReadyQueue, byteOrder } from "./ready-queue.js";

/** The whole state as JSON-able values (the embedded journal's compaction record). */
export interface QueueSnapshot {
  batches: BatchRecord[];
  ready: [model: string, entries: [score: number, member: string][]][];
  leases: [requestId: string, untilMs: number][];
  payloads: [batchId: string, entries: [index: number, payload: string][]][];
  results: [batchId: string, entries: [index: number, result: RequestResult][]][];
  /** Live lease owners (token → heartbeat end), the next token, and each owned lease's owner (absent in older snapshots). */
  owners?: [owner: number, untilMs: number][];
  nextOwner?: number;
  leaseOwners?: [requestId: string, owner: number][];
}

/** The whole queue state. Methods mirror QueueStore, synchronously. */
export class MemoryQueueState {
  private readonly batches = new Map<string, BatchRecord>();
  /** Ids of batches that may not be terminal yet (terminal ones are dropped as `activeBatchIds` meets them). */
  private readonly active = new Set<string>();
  private readonly ready = new Map<string, ReadyQueue>();
  private readonly leases = new Map<string, number>();
  /** Owner (fencing token) of each lease claimed by one; leases claimed without an owner are absent. */
  private readonly leaseOwner = new Map<string, number>();
  /** Live owners → the end of their heartbeat (ms). Tokens are never reused: `nextOwner` only grows. */
  private readonly owners = new Map<number, number>();
  private nextOwner = 1;
  private readonly payloadMap = new Map<string, Map<number, string>>();
  private readonly resultMap = new Map<string, Map<number, RequestResult>>();

  private queue(model: string): ReadyQueue {
    let q = this.ready.get(model);
    if (q === undefined) this.ready.set(model, (q = new ReadyQueue()));
    return q;
  }

  createBatch(init: BatchInit): QueueCode {
    if (this.batches.has(init.id)) return QueueCode.Exists;
    this.active.add(init.id);
    this.batches.set(init.id, {
      ...init, owner: ownerOf(init), status: "validating", model: null, total: 0, completed: 0, failed: 0, leased: 0, spareTokens: 0, dedicatedTokens: 0, target: null, enqueuedAtMs: null,
      inProgressAtMs: null, finalizingAtMs: null, completedAtMs: null, failedAtMs: null, expiredAtMs: null, cancellingAtMs: null,
      cancelledAtMs: null, outputFileId: null, errorFileId: null, errors: null,
    });
    return QueueCode.Ok;
  }

  getBatch(id: string): BatchRecord | undefined {
    const b = this.batches.get(id);
    return b === undefined ? undefined : { ...b };
  }

  listBatches(afterId: string | undefined, limit: number, owner?: string): { batches: BatchRecord[]; hasMore: boolean } {
    const all = [...this.batches.values()].filter((b) => owner === undefined || ownerOf(b) === owner).sort((a, b) => b.createdAtMs - a.createdAtMs || byteOrder(b.id, a.id));
    let start = 0;
    if (afterId !== undefined) {
      const at = all.findIndex((b) => b.id === afterId);
      start = at === -1 ? all.length : at + 1;
    }
    const page = all.slice(start, start + limit).map((b) => ({ ...b }));
    return { batches: page, hasMore: start + limit < all.length };
  }

  /** O(active batches), not O(every batch ever made): maintenance calls it every second. */
  activeBatchIds(): string[] {
    const out: string[] = [];
    for (const id of this.active) {
      const b = this.batches.get(id);
      if (b === undefined || isTerminal(b.status)) this.active.delete(id);
      else out.push(id);
    }
    return out;
  }

  stage(batchId: string, items: { index: number; payload: string }[]): QueueCode {
    const b = this.batches.get(batchId);
    if (b === undefined) return QueueCode.NoBatch;
    if (b.status !== "validating") return QueueCode.WrongState;
    let m = this.payloadMap.get(batchId);
    if (m === undefined) this.payloadMap.set(batchId, (m = new Map()));
    for (const it of items) if (!m.has(it.index)) m.set(it.index, it.payload);
    return QueueCode.Ok;
  }

  activate(batchId: string, model: string, total: number, nowMs: number): QueueCode {
    const b = this.batches.get(batchId);
    if (b === undefined) return QueueCode.NoBatch;
    if (b.status !== "validating") return isTerminal(b.status) || b.status === "finalizing" ? QueueCode.BatchClosed : QueueCode.WrongState;
    const staged = this.payloadMap.get(batchId);
    for (let i = 0; i < total; i++) if (!staged?.has(i)) return QueueCode.WrongState;
    // Earliest deadline first across batches (issue 37): every batch's deadline is its creation + the one completion
    // window, so its creation time orders the model's queue by deadline (a batch created earlier but validated later
    // still goes first); never later than now. Also the age that promotion to priority 0 counts.
    const score = Math.min(nowMs, b.createdAtMs);
    Object.assign(b, { status: "in_progress", model, total, enqueuedAtMs: score, inProgressAtMs: nowMs });
    const members: string[] = [];
    for (let i = 0; i < total; i++) members.push(requestId(batchId, i));
    members.sort(byteOrder);
    const q = this.queue(model);
    for (const m of members) q.add(score, m);
    if (total === 0) this.toFinalizing(b, "completed", nowMs);
    return QueueCode.Ok;
  }

  failValidation(batchId: string, errors: BatchLineError[], nowMs: number): QueueCode {
    const b = this.batches.get(batchId);
    if (b === undefined) return QueueCode.NoBatch;
    if (b.status !== "validating") return QueueCode.WrongState;
    Object.assign(b, { status: "failed", failedAtMs: nowMs, errors });
    this.payloadMap.delete(batchId);
    return QueueCode.Ok;
  }

  claim(model: string, max: number, nowMs: number, leaseMs: number, owner?: number): ClaimedRequest[] {
    const q = this.ready.get(model);
    if (q === undefined || max <= 0) return [];
    if (owner !== undefined && !this.owners.has(owner)) return [];
    const out: ClaimedRequest[] = [];
    for (const it of q.pop(max)) {
      const { batchId, index } = parseRequestId(it.member);
      const b = this.batches.get(batchId)!;
      b.leased++;
      this.leases.set(it.member, nowMs + leaseMs);
      if (owner !== undefined) this.leaseOwner.set(it.member, owner);
      out.push({ requestId: it.member, batchId, index, model, payload: this.payloadMap.get(batchId)?.get(index) ?? "", enqueuedAtMs: it.score, leaseUntilMs: nowMs + leaseMs, ...(owner === undefined ? {} : { owner }) });
    }
    return out;
  }

  complete(rid: string, result: RequestResult, nowMs: number, owner?: number): QueueCode {
    const { batchId, index } = parseRequestId(rid);
    const b = this.batches.get(batchId);
    if (b === undefined) return QueueCode.NoBatch;
    if (b.status !== "in_progress" && b.status !== "cancelling") return QueueCode.BatchClosed;
    if (owner !== undefined && !this.holds(owner, rid)) return QueueCode.Fenced;
    let res = this.resultMap.get(batchId);
    if (res === undefined) this.resultMap.set(batchId, (res = new Map()));
    if (this.dropLease(rid)) b.leased--;
    if (res.has(index)) return QueueCode.Duplicate;
    res.set(index, { ok: result.ok, line: result.line });
    this.queue(b.model!).remove(rid);
    if (result.ok) b.completed++;
    else b.failed++;
    b.spareTokens += tokenCount(result.spareTokens);
    b.dedicatedTokens += tokenCount(result.dedicatedTokens);
    return this.maybeFinalizing(b, nowMs) ? QueueCode.Finalizing : QueueCode.Ok;
  }

  completeMany(items: readonly CompleteItem[], nowMs: number): QueueCode[] {
    return items.map((it) => this.complete(it.requestId, it.result, nowMs, it.owner));
  }

  /** Whether `owner` holds the lease of `rid` now. */
  private holds(owner: number, rid: string): boolean {
    return this.leases.has(rid) && this.leaseOwner.get(rid) === owner;
  }

  /** Removes `rid`'s lease and its owner; true when it was leased. */
  private dropLease(rid: string): boolean {
    this.leaseOwner.delete(rid);
    return this.leases.delete(rid);
  }

  renew(rids: readonly string[], untilMs: number, owner?: number): number {
    let n = 0;
    for (const rid of rids) {
      const until = this.leases.get(rid);
      if (owner !== undefined && this.leaseOwner.get(rid) !== owner) continue;
      if (until !== undefined && until < untilMs) {
        this.leases.set(rid, untilMs);
        n++;
      }
    }
    return n;
  }

  release(rids: readonly string[], nowMs: number, owner?: number): number {
    let requeued = 0;
    for (const rid of rids) {
      if (owner !== undefined && !this.holds(owner, rid)) continue;
      if (this.dropLease(rid) && this.returnLease(rid, nowMs)) requeued++;
    }
    return requeued;
  }

  /** A new owner, live until nowMs + ttlMs; returns its token (never reused). */
  openOwner(nowMs: number, ttlMs: number): number {
    const owner = this.nextOwner++;
    this.owners.set(owner, nowMs + ttlMs);
    return owner;
  }

  /** Extends a live owner to nowMs + ttlMs (never shortening); false when it is not live. */
  heartbeat(owner: number, nowMs: number, ttlMs: number): boolean {
    const until = this.owners.get(owner);
    if (until === undefined) return false;
    if (until < nowMs + ttlMs) this.owners.set(owner, nowMs + ttlMs);
    return true;
  }

  /** Owners whose heartbeat ended before nowMs, in token order. */
  deadOwners(nowMs: number): number[] {
    return [...this.owners.entries()].filter(([, until]) => until < nowMs).map(([owner]) => owner).sort((a, b) => a - b);
  }

  /** Declares `owners` dead (whatever their heartbeat says) and returns their leases to the queue. */
  reclaim(owners: readonly number[], nowMs: number): ReclaimResult {
    const dead = new Set(owners.filter((o) => this.owners.delete(o)));
    if (dead.size === 0) return { owners: 0, leases: 0, requeued: 0 };
    const rids = [...this.leaseOwner.entries()].filter(([, o]) => dead.has(o)).map(([rid]) => rid).sort(byteOrder);
    let leases = 0;
    let requeued = 0;
    for (const rid of rids) {
      if (!this.dropLease(rid)) continue;
      leases++;
      if (this.returnLease(rid, nowMs)) requeued++;
    }
    return { owners: dead.size, leases, requeued };
  }

  /** `reclaim` of every owner whose heartbeat ended before nowMs. */
  reclaimDead(nowMs: number): ReclaimResult {
    return this.reclaim(this.deadOwners(nowMs), nowMs);
  }

  /**
   * A lease given back or expired (already removed from `leases`): the request goes back on its model's queue
   * unless its batch stopped running or its result is in (then the batch may be ready to finalize). The same rule
   * as returnLease in lua/_common.lua. Returns true when requeued.
   */
  private returnLease(rid: string, nowMs: number): boolean {
    const { batchId, index } = parseRequestId(rid);
    const b = this.batches.get(batchId);
    if (b === undefined) return false;
    b.leased--;
    if (b.status === "in_progress" && !this.resultMap.get(batchId)?.has(index)) {
      this.queue(b.model!).add(b.enqueuedAtMs!, rid);
      return true;
    }
    this.maybeFinalizing(b, nowMs);
    return false;
  }

  requeueExpired(nowMs: number, max: number): RequeueResult {
    const due = [...this.leases.entries()].filter(([, until]) => until < nowMs).sort((a, b) => a[1] - b[1] || byteOrder(a[0], b[0])).slice(0, max);
    let requeued = 0;
    for (const [rid] of due) {
      this.dropLease(rid);
      if (this.returnLease(rid, nowMs)) requeued++;
    }
    return { expiredLeases: due.length, requeued };
  }

  expire(batchId: string, nowMs: number): QueueCode {
    const b = this.batches.get(batchId);
    if (b === undefined) return QueueCode.NoBatch;
    if (b.status !== "in_progress" && b.status !== "validating") return QueueCode.WrongState;
    if (nowMs < b.expiresAtMs) return QueueCode.NotDue;
    this.dropUnresolved(b);
    this.toFinalizing(b, "expired", nowMs);
    return QueueCode.Finalizing;
  }

  cancel(batchId: string, nowMs: number): QueueCode {
    const b = this.batches.get(batchId);
    if (b === undefined) return QueueCode.NoBatch;
    if (b.status !== "in_progress" && b.status !== "validating") return QueueCode.WrongState;
    if (b.model !== null) {
      const res = this.resultMap.get(batchId);
      const q = this.queue(b.model);
      for (let i = 0; i < b.total; i++) if (!res?.has(i)) q.remove(requestId(batchId, i));
    }
    Object.assign(b, { status: "cancelling", cancellingAtMs: nowMs });
    return this.maybeFinalizing(b, nowMs) ? QueueCode.Finalizing : QueueCode.Ok;
  }

  results(batchId: string): Map<number, RequestResult> {
    return new Map(this.resultMap.get(batchId) ?? []);
  }

  payloads(batchId: string, indices: number[]): Map<number, string> {
    const m = this.payloadMap.get(batchId);
    const out = new Map<number, string>();
    for (const i of indices) {
      const p = m?.get(i);
      if (p !== undefined) out.set(i, p);
    }
    return out;
  }

  finalize(batchId: string, outputFileId: string | null, errorFileId: string | null, extraFailed: number, nowMs: number): QueueCode {
    const b = this.batches.get(batchId);
    if (b === undefined) return QueueCode.NoBatch;
    if (b.status !== "finalizing" || b.target === null) return QueueCode.WrongState;
    const at = b.target === "completed" ? "completedAtMs" : b.target === "expired" ? "expiredAtMs" : "cancelledAtMs";
    Object.assign(b, { status: b.target, [at]: nowMs, outputFileId, errorFileId, failed: b.failed + extraFailed, target: null });
    this.payloadMap.delete(batchId);
    this.resultMap.delete(batchId);
    return QueueCode.Ok;
  }

  stats(models: readonly string[], nowMs: number, promoteAfterMs: number): QueueStats {
    const depth: QueueStats["depth"] = {};
    const oldest: QueueStats["oldestEnqueuedAtMs"] = {};
    for (const model of models) {
      let p0 = 0;
      let p1 = 0;
      let min: number | null = null;
      for (const score of this.ready.get(model)?.present.values() ?? []) {
        if (nowMs - score >= promoteAfterMs) p0++;
        else p1++;
        if (min === null || score < min) min = score;
      }
      depth[model] = { p0, p1 };
      oldest[model] = min;
    }
    const byStatus = Object.fromEntries(BATCH_STATUSES.map((s) => [s, 0])) as Record<BatchStatus, number>;
    for (const b of this.batches.values()) byStatus[b.status]++;
    return { depth, oldestEnqueuedAtMs: oldest, leased: this.leases.size, batchesByStatus: byStatus };
  }

  /** Every piece of state, for compaction; `restore` on an empty state gives back an equal one. */
  snapshot(): QueueSnapshot {
    const ready: QueueSnapshot["ready"] = [];
    for (const [model, q] of this.ready) {
      const entries = [...q.present.entries()].map(([member, score]): [number, string] => [score, member]);
      entries.sort((a, b) => a[0] - b[0] || byteOrder(a[1], b[1]));
      ready.push([model, entries]);
    }
    return {
      batches: [...this.batches.values()].map((b) => ({ ...b })),
      ready,
      leases: [...this.leases.entries()],
      payloads: [...this.payloadMap.entries()].map(([id, m]) => [id, [...m.entries()]]),
      results: [...this.resultMap.entries()].map(([id, m]) => [id, [...m.entries()]]),
      owners: [...this.owners.entries()],
      nextOwner: this.nextOwner,
      leaseOwners: [...this.leaseOwner.entries()],
    };
  }

  /** Loads a snapshot into this (empty) state. */
  restore(s: QueueSnapshot): void {
    for (const b of s.batches) {
      // Snapshots from before issue 37's capacity counts lack them.
      this.batches.set(b.id, { ...b, spareTokens: b.spareTokens ?? 0, dedicatedTokens: b.dedicatedTokens ?? 0 });
      if (!isTerminal(b.status)) this.active.add(b.id);
    }
    for (const [model, entries] of s.ready) {
      const q = this.queue(model);
      for (const [score, member] of entries) q.add(score, member);
    }
    for (const [rid, until] of s.leases) this.leases.set(rid, until);
    for (const [id, entries] of s.payloads) this.payloadMap.set(id, new Map(entries));
    for (const [id, entries] of s.results) this.resultMap.set(id, new Map(entries));
    for (const [owner, until] of s.owners ?? []) this.owners.set(owner, until);
    this.nextOwner = s.nextOwner ?? 1;
    for (const [rid, owner] of s.leaseOwners ?? []) this.leaseOwner.set(rid, owner);
  }

  private dropUnresolved(b: BatchRecord): void {
    const res = this.resultMap.get(b.id);
    for (let i = 0; i < b.total; i++) {
      if (res?.has(i)) continue;
      const rid = requestId(b.id, i);
      if (b.model !== null) this.queue(b.model).remove(rid);
      if (this.dropLease(rid)) b.leased--;
    }
  }

  private toFinalizing(b: BatchRecord, target: "completed" | "expired" | "cancelled", nowMs: number): void {
    Object.assign(b, { status: "finalizing", target, finalizingAtMs: nowMs });
  }

  /** in_progress with every result written → finalizing(completed); cancelling with no lease left → finalizing(cancelled). */
  private maybeFinalizing(b: BatchRecord, nowMs: number): boolean {
    if (b.status === "in_progress" && b.completed + b.failed >= b.total) {
      this.toFinalizing(b, "completed", nowMs);
      return true;
    }
    if (b.status === "cancelling" && b.leased <= 0) {
      this.toFinalizing(b, "cancelled", nowMs);
      return true;
    }
    return false;
  }
}

