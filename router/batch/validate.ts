/**
 * Validation of a batch input file (JSONL), pure. Every line is checked — JSON, `custom_id` (non-empty, unique),
 * `method` POST, `url` equal to the batch's endpoint, `body` a valid OpenAI request (core/openai.ts) for a known
 * model, one model per file (as OpenAI requires) — and every problem is reported with its 1-based line number.
 * A file with any error yields no requests, so nothing is half-enqueued.
 */
import { findTidegateError } from "../../core/errors.js";
import { MODEL_SPECS } from "../../core/models.js";
import { MAX_TOKENS_LIMIT, parseOpenAIRequest } from "../../core/openai.js";
import type { BatchLineError } from "../queue/types.js";
import type { QueuedPayload } from "../dispatch/lines.js";

/** The endpoints a batch may target. */
export const BATCH_ENDPOINTS = ["/v1/chat/completions", "/v1/completions"] as const;
export type BatchEndpoint = (typeof BATCH_ENDPOINTS)[number];

/** OpenAI's per-batch request limit. */
export const MAX_BATCH_REQUESTS = 50_000;
/** At most this many line errors are reported (the count says how many there were). */
export const MAX_REPORTED_ERRORS = 100;

export type ValidationOutcome =
  | { ok: true; model: string; requests: QueuedPayload[] }
  | { ok: false; errors: BatchLineError[] };

/** Validates `text` (the file's content) for a batch on `endpoint`; `knownModels` are the models tidegate serves. */
export function validateBatchInput(text: string, endpoint: BatchEndpoint, knownModels: ReadonlySet<string>): ValidationOutcome {
  const errors: BatchLineError[] = [];
  let errorCount = 0;
  const fail = (line: number | null, code: string, message: string, param: string | null = null) => {
    errorCount++;
    if (errors.length < MAX_REPORTED_ERRORS) errors.push({ code, message, param, line });
  };
  const requests: QueuedPayload[] = [];
  const seen = new Set<string>();
  let model: string | undefined;
  let modelLine = 0;
  const kind = endpoint === "/v1/chat/completions" ? "chat" : "completion";
  const lines = text.split("\n");
  for (let i = 0; i < lines.length; i++) {
    const lineNo = i + 1;
    const raw = lines[i]!.replace(/\r$/, "");
    if (raw.trim().length === 0) continue;
    let v: unknown;
    try {
      v = JSON.parse(raw);
    } catch (err) {
      fail(lineNo, "invalid_json_line", `line ${lineNo} is not valid JSON: ${err instanceof Error ? err.message : String(err)}`);
      continue;
    }
    if (typeof v !== "object" || v === null || Array.isArray(v)) {
      fail(lineNo, "invalid_request", `line ${lineNo} must be a JSON object with custom_id, method, url and body`);
      continue;
    }
    const o = v as Record<string, unknown>;
    const unknown = Object.keys(o).filter((k) => !["custom_id", "method", "url", "body"].includes(k));
    if (unknown.length > 0) fail(lineNo, "invalid_request", `line ${lineNo}: unknown field ${JSON.stringify(unknown[0])}`, unknown[0]!);
    const cid = o.custom_id;
    if (typeof cid !== "string" || cid.length === 0 || cid.length > 512) {
      fail(lineNo, "missing_required_parameter", `line ${lineNo}: custom_id must be a non-empty string of at most 512 characters`, "custom_id");
      continue;
    }
    if (seen.has(cid)) fail(lineNo, "duplicate_custom_id", `line ${lineNo}: custom_id ${JSON.stringify(cid)} appears more than once`, "custom_id");
    seen.add(cid);
    if (o.method !== "POST") fail(lineNo, "invalid_method", `line ${lineNo}: method must be "POST"`, "method");
    if (o.url !== endpoint) {
      fail(lineNo, "mismatched_endpoint", `line ${lineNo}: url ${JSON.stringify(o.url)} does not match the batch endpoint ${endpoint}`, "url");
      continue;
    }
    const body = o.body;
    const bodyModel = typeof body === "object" && body !== null && !Array.isArray(body) ? (body as Record<string, unknown>).model : undefined;
    if (typeof bodyModel === "string" && !knownModels.has(bodyModel)) {
      fail(lineNo, "model_not_found", `line ${lineNo}: model ${JSON.stringify(bodyModel)} does not exist or is not served`, "body.model");
      continue;
    }
    try {
      const p = parseOpenAIRequest(kind, body, MODEL_SPECS[String(bodyModel)]?.maxContextTokens ?? MAX_TOKENS_LIMIT);
      if (p.stream) {
        fail(lineNo, "invalid_request", `line ${lineNo}: body.stream must not be true in a batch`, "body.stream");
        continue;
      }
      if (model === undefined) {
        model = p.model;
        modelLine = lineNo;
      } else if (p.model !== model) {
        fail(lineNo, "mismatched_model", `line ${lineNo}: model ${JSON.stringify(p.model)} differs from ${JSON.stringify(model)} on line ${modelLine}; a batch holds one model`, "body.model");
        continue;
      }
      requests.push({ custom_id: cid, url: endpoint, body: p.body });
    } catch (err) {
      const te = findTidegateError(err);
      if (te === undefined) throw err;
      fail(lineNo, "invalid_request", `line ${lineNo}: body.${te.message}`, te.param === null ? "body" : `body.${te.param}`);
    }
  }
  if (errorCount === 0 && requests.length === 0) fail(null, "empty_file", "the input file holds no requests");
  if (requests.length > MAX_BATCH_REQUESTS) fail(null, "too_many_requests", `a batch holds at most ${MAX_BATCH_REQUESTS} requests, the file has ${requests.length}`);
  if (errorCount > errors.length) errors.push({ code: "too_many_errors", message: `${errorCount} errors in all; the first ${MAX_REPORTED_ERRORS} are listed`, param: null, line: null });
  if (errorCount > 0) return { ok: false, errors };
  return { ok: true, model: model!, requests };
}
