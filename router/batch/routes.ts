/**
 * The Files API and Batch API as a hono sub-app, mounted by the router at /v1 (`batchRoutes(deps)`):
 *   POST /files (multipart, purpose "batch") · GET /files · GET /files/:id · GET /files/:id/content · DELETE /files/:id
 *   POST /batches · GET /batches (after, limit) · GET /batches/:id · POST /batches/:id/cancel
 * Shapes follow OpenAI's API reference; every error is an OpenAI-style error body (core/errors.ts).
 */
import { Hono } from "hono";
import type { Clock } from "../../core/clock.js";
import type { RouterConfig } from "../../core/config.js";
import { TidegateError, errorResponse } from "../../core/errors.js";
import { newId } from "../../core/ids.js";
import { ObjectReader, ValidationError, parseJson } from "../../core/validate.js";
import { authenticate } from "../auth.js";
import { QueueCode, ownerOf, type BatchRecord, type FileStore, type QueueStore } from "../queue/types.js";
import { batchObject, fileObject, listObject } from "./objects.js";
import { MULTIPART_OVERHEAD_BYTES, parseUpload, readLimited } from "./upload.js";
import { BATCH_ENDPOINTS } from "./validate.js";

export interface BatchRoutesDeps {
  store: QueueStore;
  files: FileStore;
  clock: Clock;
  /** Largest file accepted (config queue.maxFileBytes). */
  maxFileBytes: number;
  /** A batch's window ("24h"); config queue.completionWindowMs. */
  completionWindowMs: number;
  /** Bearer keys (config router.apiKeys); empty = open. */
  apiKeys: RouterConfig["apiKeys"];
  /** Starts intake of a new batch (Dispatcher.startIntake). */
  onBatchCreated?: (batch: BatchRecord) => void;
  /** Seconds a 503 for an unavailable queue (Redis down) tells clients to wait (config router.retryAfterS); default 1. */
  retryAfterS?: number;
  /** Called after a cancel so finalization need not wait for the next maintenance pass. */
  onBatchCancelled?: (batch: BatchRecord) => void;
  /** The dispatcher's capacity and deadline view of a batch (Dispatcher.capacityView), shown as `tidegate`. */
  capacityView?: (batchId: string) => object | undefined;
}

const JSON_LIMIT_BYTES = 1024 * 1024;

function intParam(raw: string | undefined, name: string, min: number, max: number, fallback: number): number {
  if (raw === undefined) return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min || n > max) throw new TidegateError("invalid_request", `${name} must be an integer from ${min} to ${max}`, { param: name });
  return n;
}

/** Builds the sub-app. */
export function batchRoutes(deps: BatchRoutesDeps): Hono {
  const app = new Hono();
  const { store, files, clock } = deps;
  const batchObj = (b: BatchRecord) => batchObject(b, deps.capacityView?.(b.id));

  const auth = async (c: { req: { header(name: string): string | undefined } }, next: () => Promise<void>) => {
    authenticate(deps.apiKeys, c.req.header("authorization"));
    await next();
  };
  for (const path of ["/files", "/files/*", "/batches", "/batches/*"]) app.use(path, auth);
  /** The caller's tenant: batches and files are visible only to the tenant that created them. */
  const callerOf = (c: { req: { header(name: string): string | undefined } }) => authenticate(deps.apiKeys, c.req.header("authorization"));
  const tenantOf = (c: { req: { header(name: string): string | undefined } }) => callerOf(c).tenant;

  app.post("/files", async (c) => {
    const body = await readLimited(c.req.raw, deps.maxFileBytes + MULTIPART_OVERHEAD_BYTES);
    const up = await parseUpload(c.req.header("content-type") ?? null, body);
    if (up.purpose !== "batch") throw new TidegateError("invalid_request", `purpose must be "batch" (the only purpose tidegate accepts), got ${JSON.stringify(up.purpose.slice(0, 40))}`, { param: "purpose" });
    if (up.content.length > deps.maxFileBytes) throw new TidegateError("payload_too_large", `file is ${up.content.length} bytes; the limit is ${deps.maxFileBytes}`, { param: "file" });
    if (up.content.length === 0) throw new TidegateError("invalid_request", "file is empty", { param: "file" });
    const meta = { id: newId("file-"), bytes: up.content.length, createdAtMs: clock.now(), filename: up.filename.slice(0, 256), purpose: up.purpose, owner: tenantOf(c) };
    await files.put(meta, up.content);
    return c.json(fileObject(meta));
  });

  app.get("/files", async (c) => {
    const limit = intParam(c.req.query("limit"), "limit", 1, 10_000, 10_000);
    const order = c.req.query("order") ?? "desc";
    if (order !== "asc" && order !== "desc") throw new TidegateError("invalid_request", "order must be asc or desc", { param: "order" });
    const purpose = c.req.query("purpose");
    const tenant = tenantOf(c);
    let all = (await files.list()).filter((f) => ownerOf(f) === tenant && (purpose === undefined || f.purpose === purpose));
    if (order === "asc") all = all.reverse();
    const after = c.req.query("after");
    const start = after === undefined ? 0 : all.findIndex((f) => f.id === after) + 1;
    if (after !== undefined && start === 0) return c.json(listObject([], false));
    const page = all.slice(start, start + limit);
    return c.json(listObject(page.map(fileObject), start + limit < all.length));
  });

  const mustFile = async (id: string, tenant: string) => {
    const f = await files.get(id);
    if (f === undefined || ownerOf(f) !== tenant) throw new TidegateError("not_found", `No such File object: ${id}`, { param: "id" });
    return f;
  };

  app.get("/files/:id", async (c) => c.json(fileObject(await mustFile(c.req.param("id"), tenantOf(c)))));

  app.get("/files/:id/content", async (c) => {
    const id = c.req.param("id");
    await mustFile(id, tenantOf(c));
    const content = await files.content(id);
    if (content === undefined) throw new TidegateError("not_found", `No such File object: ${id}`, { param: "id" });
    return new Response(new Uint8Array(content), { headers: { "content-type": "application/octet-stream", "content-length": String(content.length) } });
  });

  app.delete("/files/:id", async (c) => {
    const id = c.req.param("id");
    await mustFile(id, tenantOf(c));
    if (!(await files.delete(id))) throw new TidegateError("not_found", `No such File object: ${id}`, { param: "id" });
    return c.json({ id, object: "file", deleted: true });
  });

  app.post("/batches", async (c) => {
    const type = c.req.header("content-type");
    if (type !== undefined && !/^application\/json\b/i.test(type)) throw new TidegateError("invalid_request", "Content-Type must be application/json");
    const raw = parseJson((await readLimited(c.req.raw, JSON_LIMIT_BYTES)).toString("utf8"), "request body");
    const r = new ObjectReader(raw, "", "invalid_request");
    const inputFileId = r.string("input_file_id", undefined, { maxLength: 256 });
    const endpoint = r.string("endpoint", undefined, { oneOf: BATCH_ENDPOINTS });
    const completionWindow = r.string("completion_window", undefined, { oneOf: ["24h"] });
    let metadata: Record<string, string> | null = null;
    if (r.has("metadata") && r.value.metadata !== null) {
      const m = r.object("metadata");
      const keys = Object.keys(m.value);
      if (keys.length > 16) m.fail(keys[16]!, "metadata holds at most 16 pairs");
      metadata = {};
      for (const k of keys) {
        if (k.length > 64) m.fail(k, "metadata keys are at most 64 characters");
        metadata[k] = m.string(k, undefined, { maxLength: 512, nonEmpty: false });
      }
    } else r.allow("metadata");
    r.done();
    const caller = callerOf(c);
    const tenant = caller.tenant;
    const file = await files.get(inputFileId);
    if (file === undefined || ownerOf(file) !== tenant) throw new TidegateError("not_found", `No such File object: ${inputFileId}`, { param: "input_file_id" });
    if (file.purpose !== "batch") throw new ValidationError("input_file_id", `file ${inputFileId} has purpose ${file.purpose}, not batch`, "invalid_request");
    const nowMs = clock.now();
    const init = { id: newId("batch_"), endpoint, inputFileId, completionWindow, metadata, createdAtMs: nowMs, expiresAtMs: nowMs + deps.completionWindowMs, owner: tenant, ...(caller.models === undefined ? {} : { allowedModels: [...caller.models] }), ...(caller.regions === undefined ? {} : { allowedRegions: [...caller.regions] }) };
    const code = await store.createBatch(init);
    if (code !== QueueCode.Ok) throw new TidegateError("internal", `creating batch failed with ${QueueCode[code]}`);
    const batch = (await store.getBatch(init.id))!;
    deps.onBatchCreated?.(batch);
    return c.json(batchObj(batch));
  });

  app.get("/batches", async (c) => {
    const limit = intParam(c.req.query("limit"), "limit", 1, 100, 20);
    const page = await store.listBatches(c.req.query("after"), limit, tenantOf(c));
    return c.json(listObject(page.batches.map(batchObj), page.hasMore));
  });

  const mustBatch = async (id: string, tenant: string) => {
    const b = await store.getBatch(id);
    if (b === undefined || ownerOf(b) !== tenant) throw new TidegateError("not_found", `No such Batch object: ${id}`, { param: "batch_id" });
    return b;
  };

  app.get("/batches/:id", async (c) => c.json(batchObj(await mustBatch(c.req.param("id"), tenantOf(c)))));

  app.post("/batches/:id/cancel", async (c) => {
    const id = c.req.param("id");
    const tenant = tenantOf(c);
    const before = await mustBatch(id, tenant);
    const code = await store.cancel(id, clock.now());
    if (code === QueueCode.WrongState) {
      throw new TidegateError("conflict", `Cannot cancel a batch with status ${before.status === "in_progress" || before.status === "validating" ? "finalizing" : before.status}`, { param: "batch_id" });
    }
    if (code === QueueCode.NoBatch) throw new TidegateError("not_found", `No such Batch object: ${id}`, { param: "batch_id" });
    const after = await mustBatch(id, tenant);
    deps.onBatchCancelled?.(after);
    // OpenAI reports "cancelling" right after a cancel even when nothing was in flight.
    return c.json(batchObj(after.status === "finalizing" ? { ...after, status: "cancelling" } : after));
  });

  app.onError((err) => errorResponse(err, deps.retryAfterS));
  app.notFound((c) => new TidegateError("not_found", `no route for ${c.req.method} ${c.req.path}`).toResponse());
  return app;
}
