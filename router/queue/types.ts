/**
 * The `QueueStore` and `FileStore` ports for batch (NIW) traffic (DESIGN "Ports": QueueStore; SageServe §6.3 queue
 * manager). Two adapters implement them with identical semantics — Redis (every state change one Lua script) and
 * embedded (memory + append-only journal) — and one conformance suite (test/helpers/queue-conformance.ts) runs against both.
 *
 * Vocabulary: a batch holds `total` requests with indices 0..total-1; a request's id is `${batchId}:${index padded to 6 digits}`.
 * Requests wait in a per-model queue ordered by their batch's creation time — earliest deadline first across batches,
 * as every deadline is creation + the one completion window (issue 37) — then by request id; `claim` leases them for `leaseMs`; `complete` writes
 * the result exactly once per index (first writer wins); an expired lease returns the request to the queue.
 * Lease owners (issue 32 item 4): a dispatcher incarnation opens an owner (`openOwner`, a fencing token) and keeps it
 * live with a short-TTL `heartbeat`; its claims are leased to it, and only it may complete, renew or release them
 * while it holds them. Once its heartbeat has run out, `reclaimDead` (any incarnation's maintenance) declares it dead
 * and returns its leases to the queue at once, instead of after `leaseMs`; from then on its results are dropped
 * (`Fenced`), its heartbeat answers false and it claims nothing.
 * All times are milliseconds on the caller's Clock; nothing here reads the wall clock.
 */

/** OpenAI's batch statuses. */
export type BatchStatus = "validating" | "failed" | "in_progress" | "finalizing" | "completed" | "expired" | "cancelling" | "cancelled";

export const BATCH_STATUSES: readonly BatchStatus[] = ["validating", "failed", "in_progress", "finalizing", "completed", "expired", "cancelling", "cancelled"];

/** The terminal status a `finalizing` batch moves to once its output files are written. */
export type FinalStatus = "completed" | "expired" | "cancelled";

/** One validation error of an input file (OpenAI `errors.data[]`); `line` is 1-based, null for file-level errors. */
export interface BatchLineError {
  code: string;
  message: string;
  param: string | null;
  line: number | null;
}

/** What `createBatch` stores; the batch starts in `validating`. */
export interface BatchInit {
  id: string;
  endpoint: string;
  inputFileId: string;
  completionWindow: string;
  metadata: Record<string, string> | null;
  createdAtMs: number;
  /** createdAtMs + the completion window. */
  expiresAtMs: number;
  /** The tenant that created it (API key tenant); absent means "anonymous". Other tenants do not see it. */
  owner?: string;
  /** Models the creating key may use; absent means every served model. Intake rejects lines for others. */
  allowedModels?: string[];
  /** Regions the creating key may be served in (API key `regions`); absent means any. The dispatcher holds to it. */
  allowedRegions?: string[];
}

/** A batch as stored: the init fields plus state. Optional `*AtMs` are set when the batch entered that status. */
export interface BatchRecord extends BatchInit {
  status: BatchStatus;
  /** The single model of every request (OpenAI: one model per batch); set at activation. */
  model: string | null;
  /** Requests in the batch (0 until activation). */
  total: number;
  /** Results written: success lines and error lines (expired/cancelled requests count as failed at finalization). */
  completed: number;
  failed: number;
  /** Requests currently under a lease. */
  leased: number;
  /** Set while `finalizing`: the status finalization leads to. */
  target: FinalStatus | null;
  /** When the requests entered the queue (their FIFO score and the base of their age). */
  enqueuedAtMs: number | null;
  inProgressAtMs: number | null;
  finalizingAtMs: number | null;
  completedAtMs: number | null;
  failedAtMs: number | null;
  expiredAtMs: number | null;
  cancellingAtMs: number | null;
  cancelledAtMs: number | null;
  outputFileId: string | null;
  errorFileId: string | null;
  errors: BatchLineError[] | null;
  /**
   * Output tokens of its results written so far, by the capacity they ran on (issue 37): spare (sent at priority 1,
   * preemptible) and dedicated (priority 0). Counted with each result, once (the first result of a request): durable
   * in the store across dispatcher restarts. 0 in stores written before these fields.
   */
  spareTokens: number;
  dedicatedTokens: number;
}

/** A leased request. `payload` is what `stage` stored for it (tidegate stores the input line's JSON). */
export interface ClaimedRequest {
  requestId: string;
  batchId: string;
  index: number;
  model: string;
  payload: string;
  enqueuedAtMs: number;
  leaseUntilMs: number;
  /** The owner the lease was claimed for (claim's `owner`); absent when claimed without one. */
  owner?: number;
}

/** A result: `ok` lines go to the output file, the others to the error file. `line` is one JSONL line (no newline). */
export interface RequestResult {
  ok: boolean;
  line: string;
  /** Output tokens it ran on spare (priority 1) and dedicated (priority 0) capacity; added to its batch's counts once. */
  spareTokens?: number;
  dedicatedTokens?: number;
}

/**
 * Return codes shared by both adapters (the Redis scripts return the same integers). Positive: done; negative:
 * refused, state unchanged.
 */
export enum QueueCode {
  Ok = 1,
  /** Done, and the batch moved to `finalizing` as a consequence. */
  Finalizing = 2,
  NoBatch = -1,
  /** The batch no longer accepts this change (already finalizing or terminal). */
  BatchClosed = -2,
  /** A result for this request was already written; this one was dropped (exactly-once results). */
  Duplicate = -3,
  /** A batch or file with this id exists already. */
  Exists = -4,
  /** The batch is not in the status this operation needs. */
  WrongState = -5,
  /** Nothing to do yet (e.g. expiry before the deadline). */
  NotDue = -6,
  /**
   * The caller's owner does not hold this request's lease (any more): it was declared dead and its leases taken back,
   * or the lease expired, or another owner holds it now. The result was dropped; state unchanged.
   */
  Fenced = -7,
}

/** Maps a script's integer reply to QueueCode; an unknown integer is a bug in the script, so it throws. */
export function toQueueCode(n: unknown): QueueCode {
  if (typeof n === "number" && QueueCode[n] !== undefined) return n as QueueCode;
  throw new Error(`unexpected queue script reply ${String(n)}`);
}

/** One result for `completeMany`. */
export interface CompleteItem {
  requestId: string;
  result: RequestResult;
  /** The lease owner writing it (its fencing token): the result is dropped (`Fenced`) unless that owner holds the lease. */
  owner?: number;
}

/** Outcome of `reclaimDead`: owners declared dead, the leases they held, and how many of those went back to the queue. */
export interface ReclaimResult {
  owners: number;
  leases: number;
  requeued: number;
}

/** Queue statistics for metrics. `depth[model]` splits waiting requests by the priority they would go out with. */
export interface QueueStats {
  depth: Record<string, { p0: number; p1: number }>;
  /** Enqueue time of the oldest waiting request per model (null when empty). */
  oldestEnqueuedAtMs: Record<string, number | null>;
  leased: number;
  batchesByStatus: Record<BatchStatus, number>;
}

/** Outcome of `requeueExpired`: leases that ran out, and how many of those went back to the queue. */
export interface RequeueResult {
  expiredLeases: number;
  requeued: number;
}

/**
 * The NIW queue. Every method is atomic with respect to the others (one Lua script / one synchronous step), so
 * several global-router replicas may share one store.
 */
export interface QueueStore {
  /** Creates a batch in `validating`. Exists if the id is taken. */
  createBatch(init: BatchInit): Promise<QueueCode>;
  getBatch(id: string): Promise<BatchRecord | undefined>;
  /**
   * Batches newest first; `afterId` continues after that id (OpenAI `after`); hasMore when more follow. With
   * `owner`, only that tenant's batches.
   */
  listBatches(afterId: string | undefined, limit: number, owner?: string): Promise<{ batches: BatchRecord[]; hasMore: boolean }>;
  /** Ids of batches not yet terminal (validating, in_progress, finalizing, cancelling). */
  activeBatchIds(): Promise<string[]>;
  /** Stores request payloads of a `validating` batch, invisible to claims until `activate`. Idempotent per index. */
  stage(batchId: string, items: { index: number; payload: string }[]): Promise<QueueCode>;
  /** validating → in_progress: requests 0..total-1 (all staged) become claimable, scored min(nowMs, the batch's createdAtMs) (EDF). */
  activate(batchId: string, model: string, total: number, nowMs: number): Promise<QueueCode>;
  /** validating → failed with the validation errors; staged payloads are dropped. */
  failValidation(batchId: string, errors: BatchLineError[], nowMs: number): Promise<QueueCode>;
  /**
   * Leases up to `max` of `model`'s oldest waiting requests until nowMs + leaseMs. With `owner` the leases are that
   * owner's; an owner that is not live (declared dead, or never opened) claims nothing.
   */
  claim(model: string, max: number, nowMs: number, leaseMs: number, owner?: number): Promise<ClaimedRequest[]>;
  /**
   * Writes the request's result once; Duplicate if one exists, BatchClosed if finalizing/terminal; with `owner`,
   * Fenced (dropped) unless that owner holds the request's lease.
   */
  complete(requestId: string, result: RequestResult, nowMs: number, owner?: number): Promise<QueueCode>;
  /** `complete` for several requests in one atomic step (any batches); one code per item, in order. */
  completeMany(items: readonly CompleteItem[], nowMs: number): Promise<QueueCode[]>;
  /** Returns requests whose lease ended before nowMs to the queue (or drops them if their batch is cancelling). */
  requeueExpired(nowMs: number, max: number): Promise<RequeueResult>;
  /**
   * Extends the leases of `requestIds` that are still leased to `untilMs` (a lease is never shortened; a request
   * with no lease, finished or requeued, is left alone): the dispatcher keeps requests it is still running leased.
   * With `owner`, only the leases that owner holds. Returns how many leases were extended.
   */
  renew(requestIds: readonly string[], untilMs: number, owner?: number): Promise<number>;
  /**
   * Gives the leases of `requestIds` back now (a clean stop); with `owner`, only those it holds. Returns how many went
   * back to the queue.
   */
  release(requestIds: readonly string[], nowMs: number, owner?: number): Promise<number>;
  /**
   * Opens a lease owner (a dispatcher incarnation), live until nowMs + ttlMs unless `heartbeat` extends it, and
   * returns its fencing token: a positive integer this store never handed out before (kept across restarts).
   */
  openOwner(nowMs: number, ttlMs: number): Promise<number>;
  /**
   * Keeps `owner` live until nowMs + ttlMs (never shortening). False when it is not live any more (declared dead by
   * `reclaimDead`, or never opened): the caller must stop using the token — abort what it runs; its results would be
   * dropped — and open a new owner.
   */
  heartbeat(owner: number, nowMs: number, ttlMs: number): Promise<boolean>;
  /**
   * Declares dead every owner whose heartbeat ran out before nowMs: each is removed (fenced from then on) and every
   * lease it held goes back to the queue at once, as `release` would (kept age and order; dropped if its batch no
   * longer runs or its result is in).
   */
  reclaimDead(nowMs: number): Promise<ReclaimResult>;
  /** in_progress/validating → finalizing (target expired) once nowMs ≥ expiresAtMs; NotDue before. */
  expire(batchId: string, nowMs: number): Promise<QueueCode>;
  /** validating/in_progress → cancelling (→ finalizing when nothing is leased); WrongState when finished. */
  cancel(batchId: string, nowMs: number): Promise<QueueCode>;
  /** Results written so far, by index. */
  results(batchId: string): Promise<Map<number, RequestResult>>;
  /** Staged payloads for the given indices (missing ones are absent from the map). */
  payloads(batchId: string, indices: number[]): Promise<Map<number, string>>;
  /**
   * finalizing → target: records the output/error file ids, adds `extraFailed` (requests without a result that
   * the error file reports as expired/cancelled) to `failed`, and drops the batch's payloads and results.
   */
  finalize(batchId: string, outputFileId: string | null, errorFileId: string | null, extraFailed: number, nowMs: number): Promise<QueueCode>;
  stats(models: readonly string[], nowMs: number, promoteAfterMs: number): Promise<QueueStats>;
  close(): Promise<void>;
}

/** OpenAI file metadata (the `file` object without `object`). */
export interface FileMeta {
  id: string;
  bytes: number;
  createdAtMs: number;
  filename: string;
  purpose: string;
  /** The tenant that uploaded it (or whose batch produced it); absent means "anonymous". */
  owner?: string;
}

/** File storage for batch input and output files, shared by every router replica. */
export interface FileStore {
  /** Stores a file; Exists if the id is taken. */
  put(meta: FileMeta, content: Buffer): Promise<QueueCode>;
  get(id: string): Promise<FileMeta | undefined>;
  content(id: string): Promise<Buffer | undefined>;
  /** True when it existed. */
  delete(id: string): Promise<boolean>;
  /** Newest first. */
  list(): Promise<FileMeta[]>;
  close(): Promise<void>;
}

/**
 * The request id of index `index` in batch `batchId` (`batch_x:000012`), and back. The index is zero-padded to 6
 * digits so that byte order (how Redis orders equal scores) is index order: FCFS within a batch.
 */
export function requestId(batchId: string, index: number): string {
  return `${batchId}:${String(index).padStart(6, "0")}`;
}

export function parseRequestId(id: string): { batchId: string; index: number } {
  const at = id.lastIndexOf(":");
  const index = Number(id.slice(at + 1));
  if (at <= 0 || !Number.isInteger(index) || index < 0) throw new RangeError(`not a batch request id: ${JSON.stringify(id)}`);
  return { batchId: id.slice(0, at), index };
}

/** The tenant owning a batch or file ("anonymous" when none was recorded). */
export function ownerOf(x: { owner?: string }): string {
  return x.owner ?? "anonymous";
}

/** Statuses in which a batch is done and immutable. */
export function isTerminal(status: BatchStatus): boolean {
  return status === "completed" || status === "failed" || status === "expired" || status === "cancelled";
}

/** A result's token count as stored: a non-negative integer (absent or invalid → 0). */
export function tokenCount(n: number | undefined): number {
  return n !== undefined && Number.isFinite(n) && n > 0 ? Math.floor(n) : 0;
}
