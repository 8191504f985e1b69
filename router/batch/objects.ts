/**
 * The OpenAI wire objects of the Files and Batch APIs, built from stored records. Timestamps are Unix seconds;
 * unset ones are null, as OpenAI returns them.
 */
import type { BatchRecord, FileMeta } from "../queue/types.js";

const sec = (ms: number | null): number | null => (ms === null ? null : Math.floor(ms / 1000));

/** The `file` object. */
export function fileObject(f: FileMeta): Record<string, unknown> {
  return { id: f.id, object: "file", bytes: f.bytes, created_at: sec(f.createdAtMs), filename: f.filename, purpose: f.purpose, status: "processed", expires_at: null, status_details: null };
}

/**
 * The `batch` object, field for field, plus `tidegate` (issue 37, router/dispatch/deadlines.ts): its output tokens
 * served on spare vs dedicated capacity (from the store, so durable), and, when the dispatcher has reviewed the batch,
 * whether it cannot finish by its deadline on spare capacity alone. Clients that know only OpenAI's fields ignore it.
 */
export function batchObject(b: BatchRecord, capacity?: object): Record<string, unknown> {
  return {
    id: b.id,
    object: "batch",
    endpoint: b.endpoint,
    model: b.model,
    errors: b.errors === null ? null : { object: "list", data: b.errors },
    input_file_id: b.inputFileId,
    completion_window: b.completionWindow,
    status: b.status,
    output_file_id: b.outputFileId,
    error_file_id: b.errorFileId,
    created_at: sec(b.createdAtMs),
    in_progress_at: sec(b.inProgressAtMs),
    expires_at: sec(b.expiresAtMs),
    finalizing_at: sec(b.finalizingAtMs),
    completed_at: sec(b.completedAtMs),
    failed_at: sec(b.failedAtMs),
    expired_at: sec(b.expiredAtMs),
    cancelling_at: sec(b.cancellingAtMs),
    cancelled_at: sec(b.cancelledAtMs),
    request_counts: { total: b.total, completed: b.completed, failed: b.failed },
    metadata: b.metadata,
    // tidegate's own: output tokens by the capacity they ran on (durable in the store), and the dispatcher's deadline view.
    tidegate: { spare_tokens: b.spareTokens, dedicated_tokens: b.dedicatedTokens, ...capacity },
  };
}

/** An OpenAI list page. */
export function listObject(data: Record<string, unknown>[], hasMore: boolean): Record<string, unknown> {
  return { object: "list", data, first_id: (data[0]?.id as string | undefined) ?? null, last_id: (data[data.length - 1]?.id as string | undefined) ?? null, has_more: hasMore };
}
