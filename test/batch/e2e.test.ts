/**
 * End to end with the official `openai` client: files.create → batches.create → poll → read output; cancel; expiry;
 * and the embedded store keeping batches across a restart.
 */
import { afterEach, describe, expect, it } from "vitest";
import { toFile } from "openai";
import { chatJsonl, parseJsonl, pollBatch, startHarness, type Harness } from "./harness.js";

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

function countIds(lines: Record<string, unknown>[]): Map<string, number> {
  const m = new Map<string, number>();
  for (const l of lines) m.set(l.custom_id as string, (m.get(l.custom_id as string) ?? 0) + 1);
  return m;
}

describe("Batch API end to end (openai client)", () => {
  it("runs a batch to completed; the output file has every custom_id exactly once", async () => {
    h = await startHarness();
    const n = 200;
    const file = await h.client.files.create({ file: await toFile(Buffer.from(chatJsonl(n)), "in.jsonl"), purpose: "batch" });
    expect(file).toMatchObject({ object: "file", purpose: "batch", filename: "in.jsonl", bytes: Buffer.byteLength(chatJsonl(n)) });
    const created = await h.client.batches.create({ input_file_id: file.id, endpoint: "/v1/chat/completions", completion_window: "24h", metadata: { job: "e2e" } });
    expect(created).toMatchObject({ object: "batch", status: "validating", endpoint: "/v1/chat/completions", input_file_id: file.id, completion_window: "24h", metadata: { job: "e2e" } });
    expect(created.expires_at! - created.created_at).toBe(24 * 3600);
    const done = await pollBatch(h.client, created.id, (s) => s === "completed");
    expect(done.request_counts).toEqual({ total: n, completed: n, failed: 0 });
    expect(done).toMatchObject({ model: "llama3.2-3b", error_file_id: null });
    for (const k of ["in_progress_at", "finalizing_at", "completed_at"] as const) expect(done[k]).toBeGreaterThanOrEqual(done.created_at);
    const text = await (await h.client.files.content(done.output_file_id!)).text();
    const lines = parseJsonl(text);
    expect(lines).toHaveLength(n);
    const ids = countIds(lines);
    expect(ids.size).toBe(n);
    for (let i = 0; i < n; i++) expect(ids.get(`req-${i}`)).toBe(1);
    const first = lines[0] as { response: { status_code: number; body: { object: string; choices: { message: { content: string } }[]; usage: { completion_tokens: number } } }; error: null };
    expect(first.response.status_code).toBe(200);
    expect(first.response.body.object).toBe("chat.completion");
    expect(first.response.body.usage.completion_tokens).toBe(3);
    expect(first.response.body.choices[0]!.message.content.length).toBeGreaterThan(0);
    expect(first.error).toBeNull();
    // Batch requests went out with priority 1 (young), through every region under the threshold.
    const sent = h.links.flatMap((l) => l.dispatches);
    expect(sent.length).toBeGreaterThanOrEqual(n);
    expect(sent.every((d) => d.req.priority === 1)).toBe(true);
    expect(h.links.every((l) => l.dispatches.length > 0)).toBe(true);
    const out = await h.client.files.retrieve(done.output_file_id!);
    expect(out.purpose).toBe("batch_output");
    const list = await h.client.batches.list({ limit: 10 });
    expect(list.data.map((b) => b.id)).toContain(created.id);
    const inputs = await h.client.files.list({ purpose: "batch" });
    expect(inputs.data.map((f) => f.id)).toEqual([file.id]);
    const all = await h.client.files.list({ order: "asc", limit: 1 });
    expect(all.data.map((f) => f.id)).toEqual([file.id]);
    expect(all.has_more).toBe(true);
    const deleted = await h.client.files.delete(file.id);
    expect(deleted).toMatchObject({ id: file.id, object: "file", deleted: true });
    await expect(h.client.files.content(file.id)).rejects.toMatchObject({ status: 404 });
    const metrics = await h.registry.metrics();
    expect(metrics).toMatch(/tidegate_batches\{status="completed"\} 1/);
    expect(metrics).toMatch(/tidegate_queue_depth\{model="llama3\.2-3b",priority="1"\} 0/);
    expect(metrics).toMatch(/tidegate_queue_results_total\{outcome="ok"\} 200/);
  });

  it("cancels a running batch: cancelling, then cancelled; each custom_id once across output and error files", async () => {
    // §6.3's 1-or-2 rule (fillIdle false): the batch must still be running when it is cancelled.
    h = await startHarness({ telemetryMs: 20, queue: { fillIdle: false } });
    for (const l of h.links) l.behavior = { delayMs: 5 };
    const n = 300;
    const file = await h.client.files.create({ file: await toFile(Buffer.from(chatJsonl(n, "llama3.2-3b", 4)), "in.jsonl"), purpose: "batch" });
    const b = await h.client.batches.create({ input_file_id: file.id, endpoint: "/v1/chat/completions", completion_window: "24h" });
    await pollBatch(h.client, b.id, (s) => s === "in_progress");
    const deadline = Date.now() + 10_000;
    while ((await h.client.batches.retrieve(b.id)).request_counts!.completed < 5 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    const cancelling = await h.client.batches.cancel(b.id);
    expect(cancelling.status).toBe("cancelling");
    expect(cancelling.cancelling_at).not.toBeNull();
    const done = await pollBatch(h.client, b.id, (s) => s === "cancelled");
    expect(done.cancelled_at).not.toBeNull();
    const c = done.request_counts!;
    expect(c.completed).toBeGreaterThanOrEqual(5);
    expect(c.completed).toBeLessThan(n);
    expect(c.completed + c.failed).toBe(n);
    const out = parseJsonl(await (await h.client.files.content(done.output_file_id!)).text());
    const err = parseJsonl(await (await h.client.files.content(done.error_file_id!)).text());
    expect(out).toHaveLength(c.completed);
    expect(err.every((l) => (l.error as { code: string }).code === "batch_cancelled")).toBe(true);
    const ids = countIds([...out, ...err]);
    expect(ids.size).toBe(n);
    expect([...ids.values()].every((v) => v === 1)).toBe(true);
    await expect(h.client.batches.cancel(b.id)).rejects.toMatchObject({ status: 409 });
  });

  it("expires a batch past its window: finished requests in the output, the rest batch_expired in the error file", async () => {
    // Dispatch paced by reports only: the fake regions serve a request at once, so refill (a served request replaced
    // at once) would run the whole batch in the 100 ms before capacity goes.
    h = await startHarness({ queue: { completionWindowMs: 1500, refillIdle: false }, initialUtilization: 0.55 });
    const n = 400;
    const file = await h.client.files.create({ file: await toFile(Buffer.from(chatJsonl(n)), "in.jsonl"), purpose: "batch" });
    const b = await h.client.batches.create({ input_file_id: file.id, endpoint: "/v1/chat/completions", completion_window: "24h" });
    await pollBatch(h.client, b.id, (s) => s === "in_progress");
    // Enough capacity for some requests, then none: the rest must expire.
    await new Promise((r) => setTimeout(r, 100));
    for (const r of h.utilization.keys()) h.utilization.set(r, 0.95);
    const done = await pollBatch(h.client, b.id, (s) => s === "expired");
    expect(done.expired_at).not.toBeNull();
    expect(done.expired_at! - done.created_at).toBeGreaterThanOrEqual(1);
    const c = done.request_counts!;
    expect(c.completed).toBeGreaterThan(0);
    expect(c.completed).toBeLessThan(n);
    expect(c.completed + c.failed).toBe(n);
    const out = parseJsonl(await (await h.client.files.content(done.output_file_id!)).text());
    const err = parseJsonl(await (await h.client.files.content(done.error_file_id!)).text());
    expect(out).toHaveLength(c.completed);
    expect(err).toHaveLength(c.failed);
    expect(err[0]).toMatchObject({ response: null, error: { code: "batch_expired" } });
    const ids = countIds([...out, ...err]);
    expect(ids.size).toBe(n);
    expect([...ids.values()].every((v) => v === 1)).toBe(true);
  });

  it("keeps batches and files across a restart of the embedded store and finishes them", async () => {
    h = await startHarness({ initialUtilization: 0.95 });
    const dataDir = h.dataDir;
    const n = 50;
    const file = await h.client.files.create({ file: await toFile(Buffer.from(chatJsonl(n)), "in.jsonl"), purpose: "batch" });
    const b = await h.client.batches.create({ input_file_id: file.id, endpoint: "/v1/chat/completions", completion_window: "24h" });
    await pollBatch(h.client, b.id, (s) => s === "in_progress");
    await h.close(true);
    h = await startHarness({ dataDir, initialUtilization: 0.3 });
    try {
      expect((await h.client.files.retrieve(file.id)).bytes).toBe(Buffer.byteLength(chatJsonl(n)));
      const done = await pollBatch(h.client, b.id, (s) => s === "completed");
      expect(done.request_counts).toEqual({ total: n, completed: n, failed: 0 });
    } finally {
      await h.close();
      h = undefined;
      const { rmSync } = await import("node:fs");
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
