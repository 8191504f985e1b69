/**
 * Bad input against the Files/Batch API: each is a clear OpenAI-style error, and what was accepted before stays.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { request } from "node:http";
import { toFile } from "openai";
import OpenAI from "openai";
import { chatJsonl, pollBatch, startHarness, type Harness } from "./harness.js";

let h: Harness;
let goodFileId: string;
beforeAll(async () => {
  h = await startHarness({ initialUtilization: 0.95 });
  goodFileId = (await h.client.files.create({ file: await toFile(Buffer.from(chatJsonl(20)), "good.jsonl"), purpose: "batch" })).id;
});
afterAll(async () => {
  await h.close();
});

async function post(path: string, headers: Record<string, string>, body: string | Buffer) {
  const res = await fetch(h.baseUrl + path, { method: "POST", headers, body });
  return { status: res.status, body: (await res.json()) as { error: { message: string; type: string; param: string | null; code: string | null } } };
}

/** Streams `totalBytes` of upload to /files, stopping when the server answers; returns its status and bytes sent. */
function streamUpload(totalBytes: number, declareLength: boolean): Promise<{ status: number; sentBytes: number; body: string }> {
  const url = new URL(h.baseUrl + "/files");
  const boundary = "----tidegatebound";
  const head = Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nbatch\r\n--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="big.jsonl"\r\nContent-Type: application/octet-stream\r\n\r\n`);
  const chunk = Buffer.alloc(1024 * 1024, 0x61);
  return new Promise((resolve, reject) => {
    let sent = 0;
    let answered = false;
    const headers: Record<string, string> = { "content-type": `multipart/form-data; boundary=${boundary}` };
    if (declareLength) headers["content-length"] = String(totalBytes);
    const req = request({ host: url.hostname, port: url.port, path: url.pathname, method: "POST", headers }, (res) => {
      answered = true;
      let text = "";
      res.on("data", (d: Buffer) => (text += d.toString()));
      res.on("end", () => {
        req.destroy();
        resolve({ status: res.statusCode ?? 0, sentBytes: sent, body: text });
      });
    });
    req.on("error", (err) => {
      if (!answered) reject(err);
    });
    const pump = () => {
      while (!answered && sent < totalBytes) {
        const piece = sent === 0 ? head : chunk;
        sent += piece.length;
        if (!req.write(piece)) return void req.once("drain", pump);
      }
      if (!answered) req.end();
    };
    pump();
  });
}

describe("Files/Batch API bad input", () => {
  it("malformed multipart, wrong content type, missing parts → 400 invalid_request_error", async () => {
    const r1 = await post("/files", { "content-type": "multipart/form-data; boundary=abc" }, "--abc\r\nnot a part at all");
    expect(r1.status).toBe(400);
    expect(r1.body.error).toMatchObject({ type: "invalid_request_error", code: "invalid_request", message: expect.stringContaining("multipart") });
    const r2 = await post("/files", { "content-type": "application/json" }, "{}");
    expect(r2.status).toBe(400);
    expect(r2.body.error.message).toContain("multipart/form-data");
    const form = new FormData();
    form.set("purpose", "batch");
    const r3 = await fetch(h.baseUrl + "/files", { method: "POST", body: form });
    expect(r3.status).toBe(400);
    expect(((await r3.json()) as { error: { param: string } }).error.param).toBe("file");
  });

  it("wrong purpose → 400 naming purpose (through the openai client)", async () => {
    const err = await h.client.files.create({ file: await toFile(Buffer.from(chatJsonl(1)), "x.jsonl"), purpose: "fine-tune" }).catch((e: unknown) => e);
    expect(err).toMatchObject({ status: 400, param: "purpose", type: "invalid_request_error" });
  });

  it("a 300 MB upload with Content-Length is refused before it is read", async () => {
    const r = await streamUpload(300 * 1024 * 1024, true);
    expect(r.status).toBe(413);
    expect(JSON.parse(r.body).error).toMatchObject({ code: "payload_too_large", type: "invalid_request_error" });
    expect(r.sentBytes).toBeLessThan(300 * 1024 * 1024);
  });

  it("a 300 MB chunked upload is cut off at the limit while streaming", async () => {
    const before = process.memoryUsage().rss;
    const r = await streamUpload(300 * 1024 * 1024, false);
    expect(r.status).toBe(413);
    expect(JSON.parse(r.body).error.code).toBe("payload_too_large");
    expect(r.sentBytes).toBeLessThan(300 * 1024 * 1024);
    // The limit is 200 MB: the server held at most that much, never the whole 300 MB.
    expect(process.memoryUsage().rss - before).toBeLessThan(280 * 1024 * 1024);
  });

  it("JSONL with broken lines fails the batch with line-numbered errors and enqueues nothing", async () => {
    const text = chatJsonl(3) + "{broken\n" + JSON.stringify({ custom_id: "req-0", method: "POST", url: "/v1/chat/completions", body: { model: "llama3.2-3b", messages: [{ role: "user", content: "x" }] } }) + "\n";
    const f = await h.client.files.create({ file: await toFile(Buffer.from(text), "bad.jsonl"), purpose: "batch" });
    const b = await h.client.batches.create({ input_file_id: f.id, endpoint: "/v1/chat/completions", completion_window: "24h" });
    const failed = await pollBatch(h.client, b.id, (s) => s === "failed");
    expect(failed.failed_at).not.toBeNull();
    expect(failed.request_counts).toEqual({ total: 0, completed: 0, failed: 0 });
    expect(failed.errors!.data).toEqual([
      expect.objectContaining({ line: 4, code: "invalid_json_line" }),
      expect.objectContaining({ line: 5, code: "duplicate_custom_id", param: "custom_id" }),
    ]);
    const stats = await h.service.store.stats(["llama3.2-3b"], Date.now(), 1e9);
    expect(stats.depth["llama3.2-3b"]).toEqual({ p0: 0, p1: 0 });
  });

  it("bad batch creation: unknown file (404), wrong endpoint, wrong window, unknown field (400)", async () => {
    await expect(h.client.batches.create({ input_file_id: "file-nope", endpoint: "/v1/chat/completions", completion_window: "24h" })).rejects.toMatchObject({ status: 404, param: "input_file_id" });
    await expect(h.client.batches.create({ input_file_id: goodFileId, endpoint: "/v1/embeddings", completion_window: "24h" })).rejects.toMatchObject({ status: 400, param: "endpoint" });
    await expect(h.client.batches.create({ input_file_id: goodFileId, endpoint: "/v1/chat/completions", completion_window: "48h" as "24h" })).rejects.toMatchObject({ status: 400, param: "completion_window" });
    const r = await post("/batches", { "content-type": "application/json" }, JSON.stringify({ input_file_id: goodFileId, endpoint: "/v1/completions", completion_window: "24h", colour: 1 }));
    expect(r.status).toBe(400);
    expect(r.body.error.param).toBe("colour");
    const r2 = await post("/batches", { "content-type": "application/json" }, "{nope");
    expect(r2).toMatchObject({ status: 400, body: { error: { code: "invalid_json" } } });
  });

  it("unknown batch or file id → 404; cancel of a finished batch → 409; pagination with after/limit", async () => {
    await expect(h.client.batches.retrieve("batch_doesnotexist")).rejects.toMatchObject({ status: 404 });
    await expect(h.client.batches.cancel("batch_doesnotexist")).rejects.toMatchObject({ status: 404 });
    await expect(h.client.files.retrieve("file-nope")).rejects.toMatchObject({ status: 404 });
    await expect(h.client.files.delete("file-nope")).rejects.toMatchObject({ status: 404 });
    // What was accepted before all of the above is intact: the first file still runs to completion.
    for (const r of h.utilization.keys()) h.utilization.set(r, 0.3);
    const b = await h.client.batches.create({ input_file_id: goodFileId, endpoint: "/v1/chat/completions", completion_window: "24h" });
    const done = await pollBatch(h.client, b.id, (s) => s === "completed");
    expect(done.request_counts).toEqual({ total: 20, completed: 20, failed: 0 });
    const err = await h.client.batches.cancel(b.id).catch((e: unknown) => e);
    expect(err).toMatchObject({ status: 409, message: expect.stringContaining("completed") });
    const page1 = await h.client.batches.list({ limit: 1 });
    expect(page1.data).toHaveLength(1);
    expect(page1.data[0]!.id).toBe(b.id);
    expect(page1.has_more).toBe(true);
    const page2 = await h.client.batches.list({ limit: 10, after: b.id });
    expect(page2.data.map((x) => x.id)).not.toContain(b.id);
    expect(page2.data.length).toBeGreaterThanOrEqual(1);
    expect(await h.client.files.retrieve(goodFileId)).toMatchObject({ id: goodFileId, purpose: "batch" });
  });

  it("with API keys configured, a missing or wrong key is 401; each tenant sees only its own files and batches", async () => {
    const keyed = await startHarness({ router: { apiKeys: [{ key: "sk-tenant-a-123", tenant: "a" }, { key: "sk-tenant-b-456", tenant: "b" }, { key: "sk-tenant-c-789", tenant: "c", models: ["llama2-70b"] }] }, initialUtilization: 0.3 });
    try {
      const anon = new OpenAI({ apiKey: "wrong", baseURL: keyed.baseUrl, maxRetries: 0 });
      await expect(anon.files.list()).rejects.toMatchObject({ status: 401 });
      await expect(anon.batches.list()).rejects.toMatchObject({ status: 401 });
      const none = await fetch(keyed.baseUrl + "/batches");
      expect(none.status).toBe(401);
      const ok = new OpenAI({ apiKey: "sk-tenant-a-123", baseURL: keyed.baseUrl, maxRetries: 0 });
      expect((await ok.batches.list()).data).toEqual([]);
      // Tenants see only their own files and batches.
      const other = new OpenAI({ apiKey: "sk-tenant-b-456", baseURL: keyed.baseUrl, maxRetries: 0 });
      const f = await ok.files.create({ file: await toFile(Buffer.from(chatJsonl(3)), "a.jsonl"), purpose: "batch" });
      const b = await ok.batches.create({ input_file_id: f.id, endpoint: "/v1/chat/completions", completion_window: "24h" });
      await expect(other.files.retrieve(f.id)).rejects.toMatchObject({ status: 404 });
      await expect(other.files.content(f.id)).rejects.toMatchObject({ status: 404 });
      await expect(other.files.delete(f.id)).rejects.toMatchObject({ status: 404 });
      await expect(other.batches.create({ input_file_id: f.id, endpoint: "/v1/chat/completions", completion_window: "24h" })).rejects.toMatchObject({ status: 404 });
      await expect(other.batches.retrieve(b.id)).rejects.toMatchObject({ status: 404 });
      await expect(other.batches.cancel(b.id)).rejects.toMatchObject({ status: 404 });
      expect((await other.batches.list()).data).toEqual([]);
      expect((await other.files.list()).data).toEqual([]);
      expect((await ok.batches.list()).data.map((x) => x.id)).toEqual([b.id]);
      const done = await pollBatch(ok, b.id, (s) => s === "completed");
      expect((await ok.files.retrieve(done.output_file_id!)).purpose).toBe("batch_output");
      await expect(other.files.content(done.output_file_id!)).rejects.toMatchObject({ status: 404 });
      // A key scoped to other models cannot batch this one: the batch fails naming the model on each line, with the
      // reason a streamed request gets (403 "this API key may not use model …"), not as if the model did not exist.
      const scoped = new OpenAI({ apiKey: "sk-tenant-c-789", baseURL: keyed.baseUrl, maxRetries: 0 });
      const fc = await scoped.files.create({ file: await toFile(Buffer.from(chatJsonl(2)), "c.jsonl"), purpose: "batch" });
      const bc = await scoped.batches.create({ input_file_id: fc.id, endpoint: "/v1/chat/completions", completion_window: "24h" });
      const failed = await pollBatch(scoped, bc.id, (s) => s === "failed");
      expect(failed.errors!.data!.map((e) => [e.line, e.code, e.param, e.message])).toEqual([
        [1, "forbidden", "body.model", 'line 1: this API key may not use model "llama3.2-3b"'],
        [2, "forbidden", "body.model", 'line 2: this API key may not use model "llama3.2-3b"'],
      ]);
    } finally {
      await keyed.close();
    }
  });
});
