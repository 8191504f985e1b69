/**
 * Embedded QueueStore for `tidegate dev`: the in-memory state machine (memory.ts) plus an append-only journal
 * (`<dataDir>/queue.journal`, one JSON line per state change). Opening the store replays the journal, so batches
 * survive a restart or a crash (each line is written with a synchronous append before the call resolves; a torn
 * last line from a crash mid-write is ignored). When the journal holds more than `compactAfterOps` lines at open, it
 * is rewritten as one snapshot line (written to a temporary file, then renamed over the journal). Single-process
 * only: two processes must not share a data directory.
 */
import { appendFileSync, mkdirSync, readFileSync, existsSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { MemoryQueueState, type QueueSnapshot } from "./memory.js";
import type {
  BatchInit, BatchLineError, BatchRecord, CompleteItem, ClaimedRequest, QueueCode, QueueStats, QueueStore, RequestResult, RequeueResult,
} from "./types.js";

type Op =
  | ["snapshot", QueueSnapshot]
  | ["createBatch", BatchInit]
  | ["stage", string, { index: number; payload: string }[]]
  | ["activate", string, string, number, number]
  | ["failValidation", string, BatchLineError[], number]
  | ["claim", string, number, number, number]
  | ["complete", string, RequestResult, number]
  | ["completeMany", CompleteItem[], number]
  | ["requeueExpired", number, number]
  | ["release", string[], number]
  | ["expire", string, number]
  | ["cancel", string, number]
  | ["finalize", string, string | null, string | null, number, number];

function apply(state: MemoryQueueState, op: Op): unknown {
  switch (op[0]) {
    case "snapshot": return state.restore(op[1]);
    case "createBatch": return state.createBatch(op[1]);
    case "stage": return state.stage(op[1], op[2]);
    case "activate": return state.activate(op[1], op[2], op[3], op[4]);
    case "failValidation": return state.failValidation(op[1], op[2], op[3]);
    case "claim": return state.claim(op[1], op[2], op[3], op[4]);
    case "complete": return state.complete(op[1], op[2], op[3]);
    case "completeMany": return state.completeMany(op[1], op[2]);
    case "requeueExpired": return state.requeueExpired(op[1], op[2]);
    case "release": return state.release(op[1], op[2]);
    case "expire": return state.expire(op[1], op[2]);
    case "cancel": return state.cancel(op[1], op[2]);
    case "finalize": return state.finalize(op[1], op[2], op[3], op[4], op[5]);
  }
}

/** The embedded adapter. `dataDir` is created if missing; `null` keeps everything in memory (tests, replay). */
export class EmbeddedQueueStore implements QueueStore {
  private readonly state = new MemoryQueueState();
  private readonly journalPath: string | null;
  /** Operations replayed from the journal when the store opened. */
  readonly replayedOps: number = 0;

  constructor(dataDir: string | null, opts: { compactAfterOps?: number } = {}) {
    if (dataDir === null) {
      this.journalPath = null;
      return;
    }
    mkdirSync(dataDir, { recursive: true });
    this.journalPath = join(dataDir, "queue.journal");
    if (existsSync(this.journalPath)) {
      const lines = readFileSync(this.journalPath, "utf8").split("\n");
      let n = 0;
      for (const line of lines) {
        if (line.length === 0) continue;
        let op: Op;
        try {
          op = JSON.parse(line) as Op;
        } catch {
          break; // a torn final line from a crash mid-append; everything before it is intact
        }
        apply(this.state, op);
        n++;
      }
      this.replayedOps = n;
      if (n > (opts.compactAfterOps ?? 10_000)) {
        const tmp = this.journalPath + ".compact";
        writeFileSync(tmp, JSON.stringify(["snapshot", this.state.snapshot()] satisfies Op) + "\n");
        renameSync(tmp, this.journalPath);
      }
    }
  }

  private run<T>(op: Op): T {
    const out = apply(this.state, op) as T;
    if (this.journalPath !== null) appendFileSync(this.journalPath, JSON.stringify(op) + "\n");
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
  async claim(model: string, max: number, nowMs: number, leaseMs: number): Promise<ClaimedRequest[]> {
    return this.run(["claim", model, max, nowMs, leaseMs]);
  }
  async complete(rid: string, result: RequestResult, nowMs: number): Promise<QueueCode> { return this.run(["complete", rid, result, nowMs]); }
  async completeMany(items: readonly CompleteItem[], nowMs: number): Promise<QueueCode[]> {
    return this.run(["completeMany", [...items], nowMs]);
  }
  async requeueExpired(nowMs: number, max: number): Promise<RequeueResult> { return this.run(["requeueExpired", nowMs, max]); }
  async release(requestIds: readonly string[], nowMs: number): Promise<number> { return this.run(["release", [...requestIds], nowMs]); }
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
