/**
 * Finalization: a `finalizing` batch gets its output file (successful responses) and error file (failed requests,
 * and requests that never ran because the batch expired or was cancelled), both JSONL in index order, then moves to
 * its target status. Safe to run on several router replicas at once: the store accepts one finalize; a loser
 * deletes the files it wrote.
 */
import { newId } from "../../core/ids.js";
import { QueueCode, ownerOf, type BatchRecord, type FileStore, type QueueStore } from "../queue/types.js";
import { decodePayload, notRunLine } from "./lines.js";

/** Writes the files and finalizes; returns the store's code (Ok, or WrongState when another replica won). */
export async function finalizeBatch(store: QueueStore, files: FileStore, batch: BatchRecord, nowMs: number): Promise<QueueCode> {
  if (batch.status !== "finalizing" || batch.target === null) return QueueCode.WrongState;
  const results = await store.results(batch.id);
  const missing: number[] = [];
  for (let i = 0; i < batch.total; i++) if (!results.has(i)) missing.push(i);
  const payloads = missing.length > 0 ? await store.payloads(batch.id, missing) : new Map<number, string>();
  const out: string[] = [];
  const err: string[] = [];
  const code = batch.target === "cancelled" ? "batch_cancelled" : "batch_expired";
  for (let i = 0; i < batch.total; i++) {
    const r = results.get(i);
    if (r !== undefined) (r.ok ? out : err).push(r.line);
    else {
      const p = payloads.get(i);
      if (p !== undefined) err.push(notRunLine(decodePayload(p).custom_id, code));
    }
  }
  const written: string[] = [];
  const put = async (lines: string[], kind: "output" | "error"): Promise<string | null> => {
    if (lines.length === 0) return null;
    const id = newId("file-");
    const content = Buffer.from(lines.join("\n") + "\n");
    await files.put({ id, bytes: content.length, createdAtMs: nowMs, filename: `${batch.id}_${kind}.jsonl`, purpose: "batch_output", owner: ownerOf(batch) }, content);
    written.push(id);
    return id;
  };
  const outputId = await put(out, "output");
  const errorId = await put(err, "error");
  const res = await store.finalize(batch.id, outputId, errorId, batch.target === "completed" ? 0 : missing.length, nowMs);
  if (res !== QueueCode.Ok) for (const id of written) await files.delete(id);
  return res;
}
