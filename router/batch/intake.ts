/**
 * Intake: a `validating` batch's input file is read and validated as a whole; a valid file is staged in chunks and
 * activated in one step (QueueStore.activate), an invalid one fails the batch with line-numbered errors. Staging is
 * idempotent and activation atomic, so intake may be re-run after a crash or by two replicas at once.
 */
import type { Clock } from "../../core/clock.js";
import { QueueCode, type BatchRecord, type FileStore, type QueueStore } from "../queue/types.js";
import { encodePayload } from "../dispatch/lines.js";
import { BATCH_ENDPOINTS, BatchValidator, type BatchEndpoint } from "./validate.js";

/** Payloads per stage call. */
export const STAGE_CHUNK = 500;
/** Lines validated between yields to the event loop. */
export const VALIDATE_SLICE_LINES = 2000;

export interface IntakeDeps {
  store: QueueStore;
  files: FileStore;
  clock: Clock;
  knownModels: ReadonlySet<string>;
}

/** Validates and enqueues one batch; returns the store's final code (Ok when activated or failed as it should). */
export async function intakeBatch(deps: IntakeDeps, batch: BatchRecord): Promise<QueueCode> {
  const { store, files, clock } = deps;
  const content = await files.content(batch.inputFileId);
  if (content === undefined) {
    return store.failValidation(batch.id, [{ code: "file_not_found", message: `input file ${batch.inputFileId} no longer exists`, param: "input_file_id", line: null }], clock.now());
  }
  if (!(BATCH_ENDPOINTS as readonly string[]).includes(batch.endpoint)) {
    return store.failValidation(batch.id, [{ code: "invalid_endpoint", message: `unsupported endpoint ${batch.endpoint}`, param: "endpoint", line: null }], clock.now());
  }
  // Validate in slices, yielding to the event loop between them, so a large file never stalls interactive traffic.
  const validator = new BatchValidator(batch.endpoint as BatchEndpoint, deps.knownModels, batch.allowedModels === undefined ? undefined : new Set(batch.allowedModels));
  const lines = content.toString("utf8").split("\n");
  for (let i = 0; i < lines.length; i++) {
    validator.line(lines[i]!, i + 1);
    if (i % VALIDATE_SLICE_LINES === VALIDATE_SLICE_LINES - 1) await new Promise<void>((resolve) => setImmediate(resolve));
  }
  const outcome = validator.finish();
  if (!outcome.ok) return store.failValidation(batch.id, outcome.errors, clock.now());
  for (let i = 0; i < outcome.requests.length; i += STAGE_CHUNK) {
    const items = outcome.requests.slice(i, i + STAGE_CHUNK).map((p, j) => ({ index: i + j, payload: encodePayload(p) }));
    const code = await store.stage(batch.id, items);
    if (code !== QueueCode.Ok) return code; // cancelled or expired meanwhile: nothing becomes claimable
  }
  return store.activate(batch.id, outcome.model, outcome.requests.length, clock.now());
}
