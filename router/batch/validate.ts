/**
 * Validation of a batch input file (JSONL), pure. Every line is checked — JSON, `custom_id` (non-empty, unique),
 * `method` POST, `url` equal to the batch's endpoint, `body` a valid OpenAI request (core/openai.ts) for a known
 * model the batch's API key may use, one model per file (as OpenAI requires) — and every problem is reported with
 * its 1-based line number.
 * A file with any error yields no requests, so nothing is half-enqueued.
 */
import { findTidegateError } from "../../core/errors.js";
import { MODEL_SPECS } from "../../core/models.js";
import { MAX_TOKENS_LIMIT, parseOpenAIRequest } from "../../core/openai.js";
import { modelForbidden } from "../auth.js";
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

/**
 * Line-by-line validation state (so a caller can yield to the event loop between slices of a large file).
 * Feed every line with its 1-based number to `line`, then call `finish` once.
 */
export class BatchValidator {
  private readonly errors: BatchLineError[] = [];
  private errorCount = 0;
  private readonly requests: QueuedPayload[] = [];
  private readonly seen = new Set<string>();
  private model: string | undefined;
  private modelLine = 0;
  private readonly kind: "chat" | "completion";

  /**
   * `knownModels`: the models tidegate serves (others: `model_not_found`). `allowedModels`: the models the batch's
   * API key may use (BatchRecord.allowedModels; absent = every model); a served model outside them fails its line
   * with `forbidden` and the reason streaming gives (router/completions.ts), not as if it did not exist.
   */
  constructor(
    private readonly endpoint: BatchEndpoint,
    private readonly knownModels: ReadonlySet<string>,
    private readonly allowedModels?: ReadonlySet<string>,
  ) {
    this.kind = endpoint === "/v1/chat/completions" ? "chat" : "completion";
  }

  private fail(line: number | null, code: string, message: string, param: string | null = null): void {
    this.errorCount++;
    if (this.errors.length < MAX_REPORTED_ERRORS) this.errors.push({ code, message, param, line });
  }

  /** Checks one line (blank lines are skipped). */
  line(rawLine: string, lineNo: number): void {
    const raw = rawLine.replace(/\r$/, "");
    if (raw.trim().length === 0) return;
    let v: unknown;
    try {
      v = JSON.parse(raw);
    } catch (err) {
      this.fail(lineNo, "invalid_json_line", `line ${lineNo} is not valid JSON: ${err instanceof Error ? err.message : String(err)}`);
      return;
    }
    if (typeof v !== "object" || v === null || Array.isArray(v)) {
      this.fail(lineNo, "invalid_request", `line ${lineNo} must be a JSON object with custom_id, method, url and body`);
      return;
    }
    const o = v as Record<string, unknown>;
    const unknown = Object.keys(o).filter((k) => !["custom_id", "method", "url", "body"].includes(k));
    if (unknown.length > 0) this.fail(lineNo, "invalid_request", `line ${lineNo}: unknown field ${JSON.stringify(unknown[0])}`, unknown[0]!);
    const cid = o.custom_id;
    if (typeof cid !== "string" || cid.length === 0 || cid.length > 512) {
      this.fail(lineNo, "missing_required_parameter", `line ${lineNo}: custom_id must be a non-empty string of at most 512 characters`, "custom_id");
      return;
    }
    if (this.seen.has(cid)) this.fail(lineNo, "duplicate_custom_id", `line ${lineNo}: custom_id ${JSON.stringify(cid)} appears more than once`, "custom_id");
    this.seen.add(cid);
    if (o.method !== "POST") this.fail(lineNo, "invalid_method", `line ${lineNo}: method must be "POST"`, "method");
    if (o.url !== this.endpoint) {
      this.fail(lineNo, "mismatched_endpoint", `line ${lineNo}: url ${JSON.stringify(o.url)} does not match the batch endpoint ${this.endpoint}`, "url");
      return;
    }
    const body = o.body;
    const bodyModel = typeof body === "object" && body !== null && !Array.isArray(body) ? (body as Record<string, unknown>).model : undefined;
    if (typeof bodyModel === "string" && !this.knownModels.has(bodyModel)) {
      this.fail(lineNo, "model_not_found", `line ${lineNo}: model ${JSON.stringify(bodyModel)} does not exist or is not served`, "body.model");
      return;
    }
    if (typeof bodyModel === "string" && this.allowedModels !== undefined && !this.allowedModels.has(bodyModel)) {
      const why = modelForbidden(bodyModel);
      this.fail(lineNo, why.code, `line ${lineNo}: ${why.message}`, "body.model");
      return;
    }
    try {
      const p = parseOpenAIRequest(this.kind, body, MODEL_SPECS[String(bodyModel)]?.maxContextTokens ?? MAX_TOKENS_LIMIT);
      if (p.stream) {
        this.fail(lineNo, "invalid_request", `line ${lineNo}: body.stream must not be true in a batch`, "body.stream");
        return;
      }
      if (this.model === undefined) {
        this.model = p.model;
        this.modelLine = lineNo;
      } else if (p.model !== this.model) {
        this.fail(lineNo, "mismatched_model", `line ${lineNo}: model ${JSON.stringify(p.model)} differs from ${JSON.stringify(this.model)} on line ${this.modelLine}; a batch holds one model`, "body.model");
        return;
      }
      this.requests.push({ custom_id: cid, url: this.endpoint, body: p.body });
    } catch (err) {
      const te = findTidegateError(err);
      if (te === undefined) throw err;
      // A ValidationError's message starts with its path; OpenAI's context error is a sentence of its own.
      const detail = te.code === "context_length_exceeded" ? te.message : `body.${te.message}`;
      this.fail(lineNo, te.code === "context_length_exceeded" ? te.code : "invalid_request", `line ${lineNo}: ${detail}`, te.param === null ? "body" : `body.${te.param}`);
    }
  }

  /** The outcome: the requests of a valid file, or every error (first MAX_REPORTED_ERRORS listed). */
  finish(): ValidationOutcome {
    if (this.errorCount === 0 && this.requests.length === 0) this.fail(null, "empty_file", "the input file holds no requests");
    if (this.requests.length > MAX_BATCH_REQUESTS) this.fail(null, "too_many_requests", `a batch holds at most ${MAX_BATCH_REQUESTS} requests, the file has ${this.requests.length}`);
    if (this.errorCount > this.errors.length) this.errors.push({ code: "too_many_errors", message: `${this.errorCount} errors in all; the first ${MAX_REPORTED_ERRORS} are listed`, param: null, line: null });
    if (this.errorCount > 0) return { ok: false, errors: this.errors };
    return { ok: true, model: this.model!, requests: this.requests };
  }
}

/**
 * Validates `text` (the file's content) for a batch on `endpoint`; `knownModels` are the models tidegate serves,
 * `allowedModels` those the batch's API key may use (absent = all).
 */
export function validateBatchInput(text: string, endpoint: BatchEndpoint, knownModels: ReadonlySet<string>, allowedModels?: ReadonlySet<string>): ValidationOutcome {
  const v = new BatchValidator(endpoint, knownModels, allowedModels);
  text.split("\n").forEach((l, i) => v.line(l, i + 1));
  return v.finish();
}
