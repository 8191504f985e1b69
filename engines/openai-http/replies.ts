/**
 * What an OpenAI-compatible server answers outside the SSE stream, read by the openai-http adapter: a whole body, an
 * unstreamed completion (`stream: false`, batch requests) and an error response mapped to a TidegateError.
 */
import type { IncomingMessage } from "node:http";
import { ERROR_CODES, TidegateError, type ErrorCode } from "../../core/errors.js";
import type { FinishReason } from "../../core/ports.js";

const UPSTREAM_CODES = new Set<ErrorCode>(["invalid_request", "invalid_json", "model_not_found", "payload_too_large", "rate_limited", "not_found", "context_length_exceeded"]);

/** The whole body of a response (rejects when it closes before its end). */
export function readAll(res: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = [];
    res.on("data", (c: Buffer) => parts.push(c));
    res.once("end", () => resolve(Buffer.concat(parts).toString("utf8")));
    res.once("error", reject);
    res.once("close", () => {
      if (!res.complete) reject(new Error("the response closed before its end"));
    });
  });
}

/** What an unstreamed completion (`stream: false`) says: its text, finish reason and usage. */
export function parseWhole(text: string, instanceId: string): { text: string; finish: FinishReason; promptTokens?: number; completionTokens?: number; kvTransferParams?: Record<string, unknown> } {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    throw new TidegateError("upstream_error", `upstream ${instanceId} sent a completion that is not JSON: ${text.slice(0, 120)}`);
  }
  const o = (typeof v === "object" && v !== null ? v : {}) as Record<string, unknown>;
  const c = (Array.isArray(o.choices) ? o.choices[0] : undefined) as Record<string, unknown> | undefined;
  if (c === undefined) throw new TidegateError("upstream_error", `upstream ${instanceId} sent a completion without choices: ${text.slice(0, 120)}`);
  const message = c.message as Record<string, unknown> | undefined;
  const out = typeof message?.content === "string" ? message.content : typeof c.text === "string" ? c.text : "";
  const usage = o.usage as Record<string, unknown> | null | undefined;
  return {
    text: out,
    finish: c.finish_reason === "stop" ? "stop" : "length",
    ...(typeof usage?.prompt_tokens === "number" ? { promptTokens: usage.prompt_tokens } : {}),
    ...(typeof usage?.completion_tokens === "number" ? { completionTokens: usage.completion_tokens } : {}),
    // A prefill for a remote decode (vLLM's kv_transfer_params contract) answers where its KV is held.
    ...(typeof o.kv_transfer_params === "object" && o.kv_transfer_params !== null ? { kvTransferParams: o.kv_transfer_params as Record<string, unknown> } : {}),
  };
}

/** Maps an upstream error response to a TidegateError: its 4xx codes pass through, the rest is upstream_error. */
export async function upstreamError(res: IncomingMessage, status: number): Promise<TidegateError> {
  return upstreamErrorOf(await readAll(res).catch(() => ""), status);
}

/** `upstreamError` of a body already read. */
export function upstreamErrorOf(text: string, status: number): TidegateError {
  let message = text.slice(0, 500);
  let code: string | undefined;
  try {
    const v = JSON.parse(text) as { error?: { message?: unknown; code?: unknown } };
    if (typeof v.error?.message === "string") message = v.error.message;
    if (typeof v.error?.code === "string") code = v.error.code;
  } catch {
    // not JSON: keep the text
  }
  if (code !== undefined && code in ERROR_CODES && UPSTREAM_CODES.has(code as ErrorCode)) return new TidegateError(code as ErrorCode, message);
  if (status === 400) return new TidegateError("invalid_request", message);
  if (status === 404) return new TidegateError("model_not_found", message);
  if (status === 413) return new TidegateError("payload_too_large", message);
  if (status === 429) return new TidegateError("rate_limited", message);
  return new TidegateError("upstream_error", `upstream status ${status}: ${message}`);
}
