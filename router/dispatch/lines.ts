/**
 * The JSONL lines of OpenAI batch output and error files, keyed by `custom_id`:
 *   output: {"id":"batch_req_…","custom_id":…,"response":{"status_code":200,"request_id":…,"body":{…}},"error":null}
 *   error (request failed with a status):  same shape with the error body and its status_code
 *   error (never ran: expired/cancelled):  {"id":…,"custom_id":…,"response":null,"error":{"code":…,"message":…}}
 */
import { newId } from "../../core/ids.js";
import type { OpenAIErrorBody } from "../../core/errors.js";

/** The stored payload of one queued request: the input line's fields tidegate needs. */
export interface QueuedPayload {
  custom_id: string;
  url: "/v1/chat/completions" | "/v1/completions";
  body: Record<string, unknown>;
}

/** Serialises a payload for QueueStore.stage. */
export function encodePayload(p: QueuedPayload): string {
  return JSON.stringify(p);
}

/** Parses a payload written by encodePayload; throws on anything else (a store holding foreign data is a bug). */
export function decodePayload(s: string): QueuedPayload {
  const v = JSON.parse(s) as QueuedPayload;
  if (typeof v?.custom_id !== "string" || typeof v.body !== "object" || v.body === null) throw new Error(`not a queued payload: ${s.slice(0, 80)}`);
  return v;
}

/** A line for a response the engine produced (status 200) or an error response with a status. */
export function responseLine(customId: string, requestId: string, statusCode: number, body: Record<string, unknown> | OpenAIErrorBody): string {
  return JSON.stringify({ id: newId("batch_req_"), custom_id: customId, response: { status_code: statusCode, request_id: requestId, body }, error: null });
}

/** A line for a request that never ran: `batch_expired` past the window, `batch_cancelled` after a cancel. */
export function notRunLine(customId: string, code: "batch_expired" | "batch_cancelled"): string {
  const message = code === "batch_expired"
    ? "This request could not be executed before the completion window expired."
    : "This request was not executed because the batch was cancelled.";
  return JSON.stringify({ id: newId("batch_req_"), custom_id: customId, response: null, error: { code, message } });
}
