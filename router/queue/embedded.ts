/**
 * Embedded QueueStore for `tidegate dev`: the in-memory state machine (memory.ts) plus an append-only journal
 * (`<dataDir>/queue.journal`, one JSON line per state change). Opening the store replays the journal, so batches
 * survive a restart or a crash (each line is written with a synchronous append before the call resolves). A line
 * that cannot be read — corrupt, unknown or rejected — stops the open with `JournalCorruptError` naming the file and
 * line, unless `recover` keeps the valid prefix and moves the rest aside; a last line cut short by a crash is a call
 * that never returned, and is moved aside with a warning (journal.ts). An append that fails (a full disk) refuses
 * every later change with `queue_unavailable` until a restart. When a journal
 * read in full holds more than `compactAfterOps` lines, it is rewritten as one snapshot line (temporary file, fsync,
 * read back, rename). Single-process only: two processes must not share a data directory.
 *
 * Lease owners: `openOwner` and `reclaim` decisions are journaled (tokens are never reused across restarts, and a
 * replay takes back exactly the leases the live store took back); heartbeats are not — they only move an owner's
 * deadline in memory, so an idle fleet's journal stays still. After a restart every earlier owner's deadline is the
 * one journaled when it opened (its heartbeats are gone), which is past by the time anyone asks unless it opened less
 * than its TTL ago: the new incarnation's first maintenance pass takes back a crashed one's leases within the TTL.
 */
import { appendFileSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { TidegateError } from "../../core/errors.js";
import { silentLogger, type Logger } from "../../core/log.js";
import { compactJournal, replayJournal, type JournalReplay } from "./journal.js";
import { MemoryQueueState, type QueueSnapshot } from "./memory.js";
import type {
  BatchInit, BatchLineError, BatchRecord, CompleteItem, ClaimedRequest, QueueCode, QueueStats, QueueStore, ReclaimResult, RequestResult, RequeueResult,
} from "./types.js";

type Op =
  | ["snapshot", QueueSnapshot]
  | ["createBatch", BatchInit]
  | ["stage", string, { index: number; payload: string }[]]
  | ["activate", string, string, number, number]
  | ["failValidation", string, BatchLineError[], number]
  | ["claim", string, number, number, number, number?]
  | ["complete", string, RequestResult, number, number?]
  | ["completeMany", CompleteItem[], number]
  | ["requeueExpired", number, number]
  | ["release", string[], number, number?]
  | ["renew", string[], number, number?]
  | ["openOwner", number, number]
  | ["reclaim", number[], number]
  | ["expire", string, number]
  | ["cancel", string, number]
  | ["finalize", string, string | null, string | null, number, number];

const OP_NAMES = new Set(["snapshot", "createBatch", "stage", "activate", "failValidation", "claim", "complete", "completeMany", "requeueExpired", "release", "renew", "openOwner", "reclaim", "expire", "cancel", "finalize"]);

/** An optional owner as journaled: absent, or null (JSON of an undefined array element), is no owner. */
const own = (o: number | null | undefined): number | undefined => o ?? undefined;

/** Applies one journal line's operation; throws on a value that is not a known operation. */
function applyJournalLine(state: MemoryQueueState, op: unknown): void {
  if (!Array.isArray(op) || typeof op[0] !== "string" || !OP_NAMES.has(op[0])) {
    throw new Error(`not a queue operation (expected ["<op>", …] with op one of ${[...OP_NAMES].join(", ")})`);
  }
  apply(state, op as Op);
}

function apply(state: MemoryQueueState, op: Op): unknown {
  switch (op[0]) {
    case "snapshot": return state.restore(op[1]);
    case "createBatch": return state.createBatch(op[1]);
    case "stage": return state.stage(op[1], op[2]);
    case "activate": return state.activate(op[1], op[2], op[3], op[4]);
    case "failValidation": return state.failValidation(op[1], op[2], op[3]);
    case "claim": return state.claim(op[1], op[2], op[3], op[4], own(op[5]));
    case "complete": return state.complete(op[1], op[2], op[3], own(op[4]));
    case "completeMany": return state.completeMany(op[1], op[2]);
    case "requeueExpired": return state.requeueExpired(op[1], op[2]);
    case "release": return state.release(op[1], op[2], own(op[3]));
    case "renew": return state.renew(op[1], op[2], own(op[3]));
    case "openOwner": return state.openOwner(op[1], op[2]);
    case "reclaim": return state.reclaim(op[1], op[2]);
    case "expire": return state.expire(op[1], op[2]);
    case "cancel": return state.cancel(op[1], op[2]);
    case "finalize": return state.finalize(op[1], op[2], op[3], op[4], op[5]);
  }
}

/** The embedded adapter. `dataDir` is created if missing; `null` keeps everything in memory (tests, replay). */
export class EmbeddedQueueStore implements QueueStore {
  private state = new MemoryQueueState();
  private readonly journalPath: string | null;
  /** Operations replayed from the journal when the store opened. */
  readonly replayedOps: number = 0;
  /** What the replay found (recovery details when `recover` moved lines aside). */
  readonly replay: JournalReplay = { applied: 0 };
  /** Set once an append failed: every change after it is refused with this error (see `run`). */
  private journalFailed: TidegateError | undefined;

  /**
   * `recover`: a journal with a bad line keeps its valid prefix and the rest is moved to `queue.journal.corrupt-N`
   * (logged as an error on `log`); without it, such a journal throws JournalCorruptError and nothing changes.
   */
  constructor(dataDir: string | null, opts: { compactAfterOps?: number; recover?: boolean; log?: Logger } = {}) {
    if (dataDir === null) {
      this.journalPath = null;
      return;
    }
    mkdirSync(dataDir, { recursive: true });
    this.journalPath = join(dataDir, "queue.journal");
    this.replay = replayJournal(this.journalPath, (op) => applyJournalLine(this.state, op), {
      recover: opts.recover ?? false,
      reset: () => (this.state = new MemoryQueueState()),
    });
    this.replayedOps = this.replay.applied;
    const torn = this.replay.torn;
    if (torn !== undefined) {
      (opts.log ?? silentLogger).warn("queue journal: dropped a last line cut short by a crash (its write never returned to its caller)", { file: this.journalPath, line: torn.line, bytes: torn.bytes, movedTo: torn.movedTo });
    }
    const r = this.replay.recovered;
    if (r !== undefined) {
      (opts.log ?? silentLogger).error("queue journal recovered: kept the valid prefix, moved the rest aside", { file: this.journalPath, keptLines: this.replay.applied, fromLine: r.fromLine, movedLines: r.movedLines, movedTo: r.movedTo, reason: r.reason });
    }
    // Compaction only ever runs over a journal read in full (after a recovery, the journal is the valid prefix).
    if (this.replayedOps > (opts.compactAfterOps ?? 10_000)) {
      compactJournal(this.journalPath, JSON.stringify(["snapshot", this.state.snapshot()] satisfies Op));
    }
  }

  /**
   * Applies `op` and journals it. `changed` says whether this outcome changed the state: a claim that found nothing
   * or a requeue with no lease due changes nothing, and the dispatcher asks that on every region report, so those
   * are not written (the journal of an idle fleet stayed still instead of growing by a line per report).
   */
  private run<T>(op: Op, changed: (out: T) => boolean = () => true): T {
    if (this.journalFailed !== undefined) throw this.journalFailed;
    const out = apply(this.state, op) as T;
    if (this.journalPath !== null && changed(out)) {
      try {
        appendFileSync(this.journalPath, JSON.stringify(op) + "\n");
      } catch (err) {
        // The state in memory took an operation the journal does not hold (a full disk, an I/O error), and the
        // file may end in part of its line: no later change may be acknowledged or appended after it. Reads still
        // answer; a restart replays the journal (dropping a part line, journal.ts) and the caller's retry lands.
        this.journalFailed = new TidegateError("queue_unavailable", `the queue journal ${this.journalPath} could not be written (${(err as Error).message}); the embedded queue takes no changes until tidegate restarts`);
        throw this.journalFailed;
      }
    }
    return out;
  }

  async createBatch(init: BatchInit): Promise<QueueCode> { return this.run(["createBatch", init]); }
  async getBatch(id: string): Promise<BatchRecord | undefined> { return this.state.getBatch(id); }
  async listBatches(afterId: string | undefined, limit: number, owner?: string): Promise<{ batches: BatchRecord[]; hasMore: boolean }> {
    return this.state.listBatches(afterId, limit, owner);
  }
  async activeBatchIds(): Promise<string[]> { return this.state.activeBatchIds(); }
  async stage(batchId: string, items: { index: number; payload: string }[]): Promise<QueueCode> { return this.run(["stage", batchId, items]); }
  async activate(batchId: string, model: string, total: number, nowMs: number): Promise<QueueCode> {
    return this.run(["activate", batchId, model, total, nowMs]);
  }
  async failValidation(batchId: string, errors: BatchLineError[], nowMs: number): Promise<QueueCode> {
    return this.run(["failValidation", batchId, errors, nowMs]);
  }
  async claim(model: string, max: number, nowMs: number, leaseMs: number, owner?: number): Promise<ClaimedRequest[]> {
    return this.run(owner === undefined ? ["claim", model, max, nowMs, leaseMs] : ["claim", model, max, nowMs, leaseMs, owner], (out: ClaimedRequest[]) => out.length > 0);
  }
  async complete(rid: string, result: RequestResult, nowMs: number, owner?: number): Promise<QueueCode> {
    return this.run(owner === undefined ? ["complete", rid, result, nowMs] : ["complete", rid, result, nowMs, owner]);
  }
  async completeMany(items: readonly CompleteItem[], nowMs: number): Promise<QueueCode[]> {
    return this.run(["completeMany", [...items], nowMs]);
  }
  async requeueExpired(nowMs: number, max: number): Promise<RequeueResult> {
    return this.run(["requeueExpired", nowMs, max], (out: RequeueResult) => out.expiredLeases > 0);
  }
  async release(requestIds: readonly string[], nowMs: number, owner?: number): Promise<number> {
    return this.run(owner === undefined ? ["release", [...requestIds], nowMs] : ["release", [...requestIds], nowMs, owner]);
  }
  async renew(requestIds: readonly string[], untilMs: number, owner?: number): Promise<number> {
    if (requestIds.length === 0) return 0;
    return this.run(owner === undefined ? ["renew", [...requestIds], untilMs] : ["renew", [...requestIds], untilMs, owner]);
  }
  async openOwner(nowMs: number, ttlMs: number): Promise<number> { return this.run(["openOwner", nowMs, ttlMs]); }
  /** In memory only (see the file's header). */
  async heartbeat(owner: number, nowMs: number, ttlMs: number): Promise<boolean> { return this.state.heartbeat(owner, nowMs, ttlMs); }
  async reclaimDead(nowMs: number): Promise<ReclaimResult> {
    // The decision (which owners are dead) is made here from the in-memory deadlines and journaled as such, so a
    // replay, which has no heartbeats, takes back exactly these owners' leases.
    const dead = this.state.deadOwners(nowMs);
    if (dead.length === 0) return { owners: 0, leases: 0, requeued: 0 };
    return this.run(["reclaim", dead, nowMs]);
  }
  async expire(batchId: string, nowMs: number): Promise<QueueCode> { return this.run(["expire", batchId, nowMs]); }
  async cancel(batchId: string, nowMs: number): Promise<QueueCode> { return this.run(["cancel", batchId, nowMs]); }
  async results(batchId: string): Promise<Map<number, RequestResult>> { return this.state.results(batchId); }
  async payloads(batchId: string, indices: number[]): Promise<Map<number, string>> { return this.state.payloads(batchId, indices); }
  async finalize(batchId: string, outputFileId: string | null, errorFileId: string | null, extraFailed: number, nowMs: number): Promise<QueueCode> {
    return this.run(["finalize", batchId, outputFileId, errorFileId, extraFailed, nowMs]);
  }
  async stats(models: readonly string[], nowMs: number, promoteAfterMs: number): Promise<QueueStats> {
    return this.state.stats(models, nowMs, promoteAfterMs);
  }
  async close(): Promise<void> {}
}
