/**
 * Typed errors. Every error tidegate raises on purpose is a `TidegateError` with a stable `code`; it renders as an
 * OpenAI-style error body (`{"error":{"message","type","param","code"}}`) with the right HTTP status, or as a gRPC
 * status. Check with `isTidegateError(err, "code")`, which also looks through `cause` chains.
 */

/** Stable codes. The HTTP status and OpenAI `type` follow from the code. */
export const ERROR_CODES = {
  invalid_request: { status: 400, type: "invalid_request_error", grpc: 3 },
  invalid_json: { status: 400, type: "invalid_request_error", grpc: 3 },
  invalid_config: { status: 400, type: "invalid_request_error", grpc: 3 },
  /** The prompt and the output limit do not fit the model's context (OpenAI's code, param `messages` or `prompt`). */
  context_length_exceeded: { status: 400, type: "invalid_request_error", grpc: 3 },
  unauthorized: { status: 401, type: "authentication_error", grpc: 16 },
  forbidden: { status: 403, type: "permission_error", grpc: 7 },
  not_found: { status: 404, type: "invalid_request_error", grpc: 5 },
  /** The path exists with other methods (the response's Allow header names them). */
  method_not_allowed: { status: 405, type: "invalid_request_error", grpc: 12 },
  model_not_found: { status: 404, type: "invalid_request_error", grpc: 5 },
  conflict: { status: 409, type: "invalid_request_error", grpc: 9 },
  payload_too_large: { status: 413, type: "invalid_request_error", grpc: 8 },
  rate_limited: { status: 429, type: "rate_limit_error", grpc: 8 },
  /** A node has too few free resources (GPU slots) for the request; gRPC RESOURCE_EXHAUSTED. */
  resource_exhausted: { status: 503, type: "server_error", grpc: 8 },
  no_region_available: { status: 503, type: "server_error", grpc: 14 },
  upstream_error: { status: 502, type: "server_error", grpc: 14 },
  timeout: { status: 504, type: "server_error", grpc: 4 },
  cancelled: { status: 499, type: "server_error", grpc: 1 },
  /**
   * A request for a model with no serving instance was held while the region brought one up, beyond the hold's
   * bounds (controller.scaleToZero holdMs / maxHeld); the router adds Retry-After. Not retried in another region.
   */
  model_cold: { status: 503, type: "server_error", grpc: 14 },
  /**
   * A model at zero could not be started: no free GPU for an instance (no spot instance to reclaim or redeploy, too
   * few free GPUs; region/runtime/cold-verdict.ts). The router tries the next region, then adds Retry-After.
   */
  no_capacity: { status: 503, type: "server_error", grpc: 14 },
  /** A model at zero could not be placed: no node can take an instance of it, or its endpoints allow none (maxInstances 0). */
  not_placed: { status: 503, type: "server_error", grpc: 14 },
  /** A model at zero was placed but its cold start failed (a transfer, an engine that exited or never became healthy). */
  cold_start_failed: { status: 503, type: "server_error", grpc: 14 },
  /** The batch queue's Redis cannot be reached now (core/redis.ts guardRedis); the router adds Retry-After. */
  queue_unavailable: { status: 503, type: "server_error", grpc: 14 },
  internal: { status: 500, type: "server_error", grpc: 13 },
  /** The embedded queue's journal has a line it cannot read (router/queue/journal.ts); gRPC DATA_LOSS. */
  journal_corrupt: { status: 500, type: "server_error", grpc: 15 },
} as const;

export type ErrorCode = keyof typeof ERROR_CODES;

/**
 * The codes of a model at zero that did not come up (issue 50): the hold ran out or was full (`model_cold`), or the
 * region could not start it (`no_capacity`, `not_placed`, `cold_start_failed`). Each is 503; the router answers it
 * with `Retry-After: controller.scaleToZero.retryAfterS`.
 */
export const COLD_START_CODES: ReadonlySet<ErrorCode> = new Set<ErrorCode>(["model_cold", "no_capacity", "not_placed", "cold_start_failed"]);

/** The JSON body OpenAI's API returns on error. */
export interface OpenAIErrorBody {
  error: { message: string; type: string; param: string | null; code: string | null };
}

export interface TidegateErrorOptions {
  /** The request parameter at fault, e.g. `messages[0].content` (OpenAI's `param`). */
  param?: string;
  cause?: unknown;
}

export class TidegateError extends Error {
  readonly code: ErrorCode;
  readonly param: string | null;

  constructor(code: ErrorCode, message: string, options: TidegateErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = "TidegateError";
    this.code = code;
    this.param = options.param ?? null;
  }

  get status(): number {
    return ERROR_CODES[this.code].status;
  }

  /** gRPC status code (numeric, per grpc/status.h). */
  get grpcCode(): number {
    return ERROR_CODES[this.code].grpc;
  }

  toOpenAI(): OpenAIErrorBody {
    return { error: { message: this.message, type: ERROR_CODES[this.code].type, param: this.param, code: this.code } };
  }

  /** A fetch-API Response with the OpenAI-style body and the right status. */
  toResponse(): Response {
    return new Response(JSON.stringify(this.toOpenAI()), {
      status: this.status,
      headers: { "content-type": "application/json" },
    });
  }
}

/** Finds the first TidegateError in `err` or its `cause` chain (optionally with a given code). */
export function findTidegateError(err: unknown, code?: ErrorCode): TidegateError | undefined {
  let cur: unknown = err;
  for (let depth = 0; depth < 16 && cur != null; depth++) {
    if (cur instanceof TidegateError && (code === undefined || cur.code === code)) return cur;
    cur = cur instanceof Error ? cur.cause : undefined;
  }
  return undefined;
}

export function isTidegateError(err: unknown, code?: ErrorCode): boolean {
  return findTidegateError(err, code) !== undefined;
}

/** Wraps anything into a TidegateError (internal unless it already is one, or carries one in its causes). */
export function toTidegateError(err: unknown): TidegateError {
  const found = findTidegateError(err);
  if (found) return found;
  if (err instanceof Error && err.name === "AbortError") return new TidegateError("cancelled", "request cancelled", { cause: err });
  return new TidegateError("internal", "internal error", { cause: err });
}

/**
 * The HTTP response for `err` (toTidegateError): the OpenAI-style body, plus `Retry-After: retryAfterS` when the
 * error is one that passes by itself (the batch queue's Redis is down).
 */
export function errorResponse(err: unknown, retryAfterS = 1): Response {
  const te = toTidegateError(err);
  const res = te.toResponse();
  if (te.code === "queue_unavailable") res.headers.set("retry-after", String(retryAfterS));
  return res;
}
