/**
 * Redis QueueStore and FileStore (ioredis). Every state change is one Lua script from lua/ (see scripts.ts);
 * reads are plain commands. Keys live under `prefix`:
 *   b:<batch> hash · batches zset (created_at) · active set · bst hash (batches per status)
 *   p:<batch> hash index→payload · r:<batch> hash index→"1"|"0"+line · q:<model> zset (enqueue ms) · leases zset (lease end ms)
 *   owners zset (owner token → heartbeat end ms) · owner-seq string (last token) · lo hash (request id → owner token)
 *   f:<file> hash · fd:<file> string (content) · files zset (created_at)
 * Per queued request Redis holds one payload-hash field and one zset entry (bench:queue measures the bytes).
 */
import type { Redis } from "ioredis";
import { ScriptRunner } from "./scripts.js";
import {
  BATCH_STATUSES, QueueCode, ownerOf, parseRequestId, toQueueCode, tokenCount,
  type BatchInit, type BatchLineError, type BatchRecord, type CompleteItem, type BatchStatus, type ClaimedRequest, type FileMeta, type FileStore,
  type FinalStatus, type QueueStats, type QueueStore, type ReclaimResult, type RequestResult, type RequeueResult,
} from "./types.js";

/** An optional owner token as a script argument ("" = none). */
function ownerArg(owner: number | undefined): string {
  return owner === undefined ? "" : String(owner);
}

function num(v: string | undefined): number | null {
  return v === undefined || v === "" ? null : Number(v);
}

/** Decodes a batch hash (HGETALL) into a BatchRecord. */
function toRecord(h: Record<string, string>): BatchRecord {
  return {
    id: h.id!,
    endpoint: h.endpoint!,
    inputFileId: h.input_file_id!,
    completionWindow: h.completion_window!,
    metadata: h.metadata ? (JSON.parse(h.metadata) as Record<string, string>) : null,
    createdAtMs: Number(h.created_at),
    expiresAtMs: Number(h.expires_at),
    owner: h.owner ?? "anonymous",
    ...(h.allowed_models ? { allowedModels: JSON.parse(h.allowed_models) as string[] } : {}),
    ...(h.allowed_regions ? { allowedRegions: JSON.parse(h.allowed_regions) as string[] } : {}),
    status: h.status as BatchStatus,
    model: h.model ?? null,
    total: Number(h.total ?? 0),
    completed: Number(h.completed ?? 0),
    failed: Number(h.failed ?? 0),
    leased: Number(h.leased ?? 0),
    spareTokens: Number(h.spare_tokens ?? 0),
    dedicatedTokens: Number(h.dedicated_tokens ?? 0),
    target: (h.target as FinalStatus | undefined) ?? null,
    enqueuedAtMs: num(h.enqueued_at),
    inProgressAtMs: num(h.in_progress_at),
    finalizingAtMs: num(h.finalizing_at),
    completedAtMs: num(h.completed_at),
    failedAtMs: num(h.failed_at),
    expiredAtMs: num(h.expired_at),
    cancellingAtMs: num(h.cancelling_at),
    cancelledAtMs: num(h.cancelled_at),
    outputFileId: h.output_file_id ?? null,
    errorFileId: h.error_file_id ?? null,
    errors: h.errors ? (JSON.parse(h.errors) as BatchLineError[]) : null,
  };
}

/** Redis QueueStore. The client is borrowed: close() does not disconnect it. */
export class RedisQueueStore implements QueueStore {
  private readonly scripts: ScriptRunner;

  constructor(private readonly client: Redis, readonly prefix: string) {
    this.scripts = new ScriptRunner(client);
  }

  private k(...parts: string[]): string {
    return this.prefix + parts.join("");
  }

  private async code(name: string, keys: string[], args: (string | number)[]): Promise<QueueCode> {
    return toQueueCode(await this.scripts.run(name, keys, args));
  }

  createBatch(i: BatchInit): Promise<QueueCode> {
    const owner = ownerOf(i);
    return this.code("create-batch", [this.k("b:", i.id), this.k("batches"), this.k("active"), this.k("bst"), this.k("batches:o:", owner)], [
      i.id, i.endpoint, i.inputFileId, i.completionWindow, i.metadata === null ? "" : JSON.stringify(i.metadata), i.createdAtMs, i.expiresAtMs, owner,
      i.allowedModels === undefined ? "" : JSON.stringify(i.allowedModels),
      i.allowedRegions === undefined ? "" : JSON.stringify(i.allowedRegions),
    ]);
  }

  async getBatch(id: string): Promise<BatchRecord | undefined> {
    const h = await this.client.hgetall(this.k("b:", id));
    return h.id === undefined ? undefined : toRecord(h);
  }

  async listBatches(afterId: string | undefined, limit: number, owner?: string): Promise<{ batches: BatchRecord[]; hasMore: boolean }> {
    const index = owner === undefined ? this.k("batches") : this.k("batches:o:", owner);
    let start = 0;
    if (afterId !== undefined) {
      const rank = await this.client.zrevrank(index, afterId);
      start = rank === null ? Number.MAX_SAFE_INTEGER : rank + 1;
      if (rank === null) return { batches: [], hasMore: false };
    }
    const ids = await this.client.zrevrange(index, start, start + limit);
    const page = ids.slice(0, limit);
    const pipe = this.client.pipeline();
    for (const id of page) pipe.hgetall(this.k("b:", id));
    const rows = (await pipe.exec()) ?? [];
    const batches = rows.map(([err, h]) => {
      if (err) throw err;
      return toRecord(h as Record<string, string>);
    });
    return { batches, hasMore: ids.length > limit };
  }

  activeBatchIds(): Promise<string[]> {
    return this.client.smembers(this.k("active"));
  }

  async stage(batchId: string, items: { index: number; payload: string }[]): Promise<QueueCode> {
    const args: (string | number)[] = [];
    for (const it of items) args.push(it.index, it.payload);
    return this.code("stage", [this.k("b:", batchId), this.k("p:", batchId)], args);
  }

  activate(batchId: string, model: string, total: number, nowMs: number): Promise<QueueCode> {
    return this.code("activate", [this.k("b:", batchId), this.k("p:", batchId), this.k("q:", model), this.k("bst")], [batchId, model, total, nowMs]);
  }

  failValidation(batchId: string, errors: BatchLineError[], nowMs: number): Promise<QueueCode> {
    return this.code("fail-validation", [this.k("b:", batchId), this.k("p:", batchId), this.k("bst"), this.k("active")], [JSON.stringify(errors), nowMs]);
  }

  async claim(model: string, max: number, nowMs: number, leaseMs: number, owner?: number): Promise<ClaimedRequest[]> {
    if (max <= 0) return [];
    const flat = (await this.scripts.run("claim", [this.k("q:", model), this.k("leases"), this.k("lo"), this.k("owners")], [this.prefix, max, nowMs, leaseMs, ownerArg(owner)])) as string[];
    const out: ClaimedRequest[] = [];
    for (let i = 0; i < flat.length; i += 3) {
      const rid = flat[i]!;
      const { batchId, index } = parseRequestId(rid);
      out.push({ requestId: rid, batchId, index, model, payload: flat[i + 2]!, enqueuedAtMs: Number(flat[i + 1]), leaseUntilMs: nowMs + leaseMs, ...(owner === undefined ? {} : { owner }) });
    }
    return out;
  }

  async complete(rid: string, result: RequestResult, nowMs: number, owner?: number): Promise<QueueCode> {
    return (await this.completeMany([{ requestId: rid, result, ...(owner === undefined ? {} : { owner }) }], nowMs))[0]!;
  }

  async completeMany(items: readonly CompleteItem[], nowMs: number): Promise<QueueCode[]> {
    if (items.length === 0) return [];
    const args: (string | number)[] = [this.prefix, nowMs];
    for (const it of items) args.push(it.requestId, parseRequestId(it.requestId).index, it.result.ok ? "1" : "0", it.result.line, ownerArg(it.owner), tokenCount(it.result.spareTokens), tokenCount(it.result.dedicatedTokens));
    const codes = (await this.scripts.run("complete", [this.k("leases"), this.k("bst"), this.k("lo")], args)) as number[];
    return codes.map(toQueueCode);
  }

  async requeueExpired(nowMs: number, max: number): Promise<RequeueResult> {
    const [expiredLeases, requeued] = (await this.scripts.run("requeue", [this.k("leases"), this.k("bst"), this.k("lo")], [this.prefix, nowMs, max])) as [number, number];
    return { expiredLeases, requeued };
  }

  async renew(requestIds: readonly string[], untilMs: number, owner?: number): Promise<number> {
    if (requestIds.length === 0) return 0;
    return (await this.scripts.run("renew", [this.k("leases"), this.k("lo")], [untilMs, ownerArg(owner), ...requestIds])) as number;
  }

  async release(requestIds: readonly string[], nowMs: number, owner?: number): Promise<number> {
    if (requestIds.length === 0) return 0;
    return (await this.scripts.run("release", [this.k("leases"), this.k("bst"), this.k("lo")], [this.prefix, nowMs, ownerArg(owner), ...requestIds])) as number;
  }

  async openOwner(nowMs: number, ttlMs: number): Promise<number> {
    return Number(await this.scripts.run("open-owner", [this.k("owners"), this.k("owner-seq")], [nowMs, ttlMs]));
  }

  async heartbeat(owner: number, nowMs: number, ttlMs: number): Promise<boolean> {
    return (await this.scripts.run("heartbeat", [this.k("owners")], [owner, nowMs, ttlMs])) === 1;
  }

  async reclaimDead(nowMs: number): Promise<ReclaimResult> {
    const [owners, leases, requeued] = (await this.scripts.run("reclaim", [this.k("owners"), this.k("leases"), this.k("lo"), this.k("bst")], [this.prefix, nowMs])) as [number, number, number];
    return { owners, leases, requeued };
  }

  expire(batchId: string, nowMs: number): Promise<QueueCode> {
    return this.code("expire", [this.k("b:", batchId), this.k("r:", batchId), this.k("leases"), this.k("bst"), this.k("lo")], [this.prefix, batchId, nowMs]);
  }

  cancel(batchId: string, nowMs: number): Promise<QueueCode> {
    return this.code("cancel", [this.k("b:", batchId), this.k("r:", batchId), this.k("bst")], [this.prefix, batchId, nowMs]);
  }

  async results(batchId: string): Promise<Map<number, RequestResult>> {
    const h = await this.client.hgetall(this.k("r:", batchId));
    const out = new Map<number, RequestResult>();
    for (const [idx, v] of Object.entries(h)) out.set(Number(idx), { ok: v.startsWith("1"), line: v.slice(1) });
    return out;
  }

  async payloads(batchId: string, indices: number[]): Promise<Map<number, string>> {
    const out = new Map<number, string>();
    for (let i = 0; i < indices.length; i += 1000) {
      const chunk = indices.slice(i, i + 1000);
      if (chunk.length === 0) continue;
      const vals = await this.client.hmget(this.k("p:", batchId), ...chunk.map(String));
      chunk.forEach((idx, j) => {
        const v = vals[j];
        if (v !== null && v !== undefined) out.set(idx, v);
      });
    }
    return out;
  }

  finalize(batchId: string, outputFileId: string | null, errorFileId: string | null, extraFailed: number, nowMs: number): Promise<QueueCode> {
    return this.code("finalize", [this.k("b:", batchId), this.k("p:", batchId), this.k("r:", batchId), this.k("active"), this.k("bst")], [
      batchId, outputFileId ?? "", errorFileId ?? "", extraFailed, nowMs,
    ]);
  }

  async stats(models: readonly string[], nowMs: number, promoteAfterMs: number): Promise<QueueStats> {
    const pipe = this.client.pipeline();
    for (const m of models) {
      pipe.zcount(this.k("q:", m), "-inf", nowMs - promoteAfterMs);
      pipe.zcard(this.k("q:", m));
      pipe.zrange(this.k("q:", m), "0", "0", "WITHSCORES");
    }
    pipe.zcard(this.k("leases"));
    pipe.hgetall(this.k("bst"));
    const rows = (await pipe.exec()) ?? [];
    const val = (i: number): unknown => {
      const [err, v] = rows[i]!;
      if (err) throw err;
      return v;
    };
    const depth: QueueStats["depth"] = {};
    const oldest: QueueStats["oldestEnqueuedAtMs"] = {};
    models.forEach((m, i) => {
      const p0 = Number(val(3 * i));
      depth[m] = { p0, p1: Number(val(3 * i + 1)) - p0 };
      const first = val(3 * i + 2) as string[];
      oldest[m] = first.length >= 2 ? Number(first[1]) : null;
    });
    const bst = val(3 * models.length + 1) as Record<string, string>;
    const batchesByStatus = Object.fromEntries(BATCH_STATUSES.map((s) => [s, Number(bst[s] ?? 0)])) as Record<BatchStatus, number>;
    return { depth, oldestEnqueuedAtMs: oldest, leased: Number(val(3 * models.length)), batchesByStatus };
  }

  async close(): Promise<void> {}
}

/** Redis FileStore: content in one string key per file, so every router replica reads the same files. */
export class RedisFileStore implements FileStore {
  private readonly scripts: ScriptRunner;

  constructor(private readonly client: Redis, readonly prefix: string) {
    this.scripts = new ScriptRunner(client);
  }

  async put(meta: FileMeta, content: Buffer): Promise<QueueCode> {
    return toQueueCode(await this.scripts.run("put-file", [this.prefix + "f:" + meta.id, this.prefix + "fd:" + meta.id, this.prefix + "files"], [
      meta.id, meta.bytes, meta.createdAtMs, meta.filename, meta.purpose, content, ownerOf(meta),
    ]));
  }

  async get(id: string): Promise<FileMeta | undefined> {
    const h = await this.client.hgetall(this.prefix + "f:" + id);
    if (h.id === undefined) return undefined;
    return { id: h.id, bytes: Number(h.bytes), createdAtMs: Number(h.created_at), filename: h.filename ?? "", purpose: h.purpose ?? "", owner: h.owner ?? "anonymous" };
  }

  async content(id: string): Promise<Buffer | undefined> {
    if ((await this.client.exists(this.prefix + "f:" + id)) === 0) return undefined;
    return (await this.client.getBuffer(this.prefix + "fd:" + id)) ?? undefined;
  }

  async delete(id: string): Promise<boolean> {
    const code = toQueueCode(await this.scripts.run("delete-file", [this.prefix + "f:" + id, this.prefix + "fd:" + id, this.prefix + "files"], [id]));
    return code === QueueCode.Ok;
  }

  async list(): Promise<FileMeta[]> {
    const ids = await this.client.zrevrange(this.prefix + "files", 0, -1);
    const metas = await Promise.all(ids.map((id) => this.get(id)));
    return metas.filter((m): m is FileMeta => m !== undefined);
  }

  async close(): Promise<void> {}
}
