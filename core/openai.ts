/**
 * OpenAI wire format shared by every tier that speaks it (global router, region gateway, engine-sim): request
 * validation for `/v1/chat/completions` and `/v1/completions`, the prompt-token estimate, and the SSE chunk /
 * response bodies. One implementation so every hop emits byte-identical chunks.
 */
import type { FinishReason, Usage } from "./ports.js";
import { TidegateError } from "./errors.js";
import { ObjectReader, ValidationError, describe } from "./validate.js";

export type ApiKind = "chat" | "completion";

/** The validated fields tidegate acts on; `body` keeps the client's request as sent. */
export interface ParsedRequest {
  kind: ApiKind;
  model: string;
  stream: boolean;
  includeUsage: boolean;
  /** Requested output limit (max_completion_tokens, then max_tokens); default DEFAULT_MAX_TOKENS[kind]. */
  maxTokens: number;
  /** Estimated prompt tokens (≥ 1), see estimateTokens. */
  promptTokens: number;
  body: Record<string, unknown>;
}

/** Defaults when the client gives no limit (OpenAI's legacy completions default is 16). */
export const DEFAULT_MAX_TOKENS: Record<ApiKind, number> = { chat: 256, completion: 16 };
/** Hard upper bound on max_tokens accepted at the API, before the model's own context limit. */
export const MAX_TOKENS_LIMIT = 131072;
const ROLES = ["system", "developer", "user", "assistant", "tool", "function"];

/** Deterministic token estimate: ⌈characters / 4⌉, at least 1 for non-empty text (OpenAI's rule of thumb). */
export function estimateTokens(text: string): number {
  return text.length === 0 ? 0 : Math.max(1, Math.ceil(text.length / 4));
}

function messageText(content: unknown, path: string): string {
  if (typeof content === "string") return content;
  if (content === null) return "";
  if (Array.isArray(content)) {
    return content
      .map((part, i) => {
        const p = new ObjectReader(part, `${path}[${i}]`, "invalid_request");
        const type = p.string("type");
        if (type === "text") return p.string("text", undefined, { nonEmpty: false });
        return ""; // images/audio parts carry no text tokens in the estimate
      })
      .join("");
  }
  throw new ValidationError(path, `expected a string or an array of content parts, got ${describe(content)}`, "invalid_request");
}

/**
 * OpenAI's answer to a request that does not fit the model's context: 400, code `context_length_exceeded`, param
 * `messages` (chat) or `prompt` (completions), and OpenAI's message — "This model's maximum context length is 8192
 * tokens. However, you requested 9000 tokens (8744 in the messages, 256 in the completion). Please reduce the length
 * of the messages or completion." (or "your messages resulted in N tokens" when the prompt alone is too long).
 * `promptTokens` and `maxTokens` are tidegate's estimate and the requested output limit.
 */
export function contextLengthExceeded(kind: ApiKind, maxContextTokens: number, promptTokens: number, maxTokens: number): TidegateError {
  const what = kind === "chat" ? "messages" : "prompt";
  const message =
    promptTokens >= maxContextTokens
      ? `This model's maximum context length is ${maxContextTokens} tokens. However, your ${what} resulted in ${promptTokens} tokens. Please reduce the length of the ${what}.`
      : `This model's maximum context length is ${maxContextTokens} tokens. However, you requested ${promptTokens + maxTokens} tokens (${promptTokens} in the ${what}, ${maxTokens} in the completion). Please reduce the length of the ${what} or completion.`;
  return new TidegateError("context_length_exceeded", message, { param: what });
}

/**
 * Validates an OpenAI request body for `kind`. Throws ValidationError (code invalid_request, `param` set) on the
 * first problem, or `contextLengthExceeded` when the prompt and the output limit do not fit `maxContextTokens`. `knownModel` returns false for models nobody serves (→ model_not_found is the caller's to raise).
 */
export function parseOpenAIRequest(kind: ApiKind, body: unknown, maxContextTokens = MAX_TOKENS_LIMIT): ParsedRequest {
  const r = new ObjectReader(body, "", "invalid_request");
  const model = r.string("model", undefined, { maxLength: 256 });
  let promptTokens = 0;
  if (kind === "chat") {
    const messages = r.array("messages", (m, path) => {
      const mr = new ObjectReader(m, path, "invalid_request");
      const role = mr.string("role");
      if (!ROLES.includes(role)) mr.fail("role", `must be one of ${ROLES.join(", ")}, got ${JSON.stringify(role)}`);
      const text = mr.has("content") ? messageText(mr.raw("content"), `${path}.content`) : "";
      if (role === "user" && text.length === 0 && !Array.isArray(mr.value.content)) mr.fail("content", "must not be empty");
      return estimateTokens(text) + 3;
    }, undefined, { minLength: 1, maxLength: 100_000 });
    promptTokens = messages.reduce((a, b) => a + b, 0) + 3;
  } else {
    const prompt = r.raw("prompt");
    if (typeof prompt === "string") {
      if (prompt.length === 0) throw new ValidationError("prompt", "must not be empty", "invalid_request");
      promptTokens = estimateTokens(prompt);
    } else if (Array.isArray(prompt) && prompt.length > 0 && prompt.every((p) => typeof p === "string")) {
      if (prompt.length > 1) throw new ValidationError("prompt", "only one prompt per request is supported (n/batched prompts are not)", "invalid_request");
      if ((prompt[0] as string).length === 0) throw new ValidationError("prompt", "must not be empty", "invalid_request");
      promptTokens = estimateTokens(prompt[0] as string);
    } else {
      throw new ValidationError("prompt", `expected a non-empty string, got ${describe(prompt)}`, "invalid_request");
    }
  }
  const stream = r.boolean("stream", false);
  let includeUsage = false;
  if (r.has("stream_options") && r.value.stream_options !== null) {
    const so = r.object("stream_options");
    includeUsage = so.boolean("include_usage", false);
    so.allow("continuous_usage_stats").done();
  } else r.allow("stream_options");
  const limitKey = r.has("max_completion_tokens") && r.value.max_completion_tokens !== null ? "max_completion_tokens" : "max_tokens";
  r.allow("max_completion_tokens", "max_tokens");
  let maxTokens = DEFAULT_MAX_TOKENS[kind];
  if (r.value[limitKey] !== undefined && r.value[limitKey] !== null) {
    maxTokens = r.number(limitKey, undefined, { integer: true, min: 1, max: MAX_TOKENS_LIMIT });
  }
  if (promptTokens + maxTokens > maxContextTokens) throw contextLengthExceeded(kind, maxContextTokens, promptTokens, maxTokens);
  if (r.has("n")) {
    const n = r.number("n", undefined, { integer: true, min: 1 });
    if (n !== 1) r.fail("n", "only n = 1 is supported");
  }
  if (r.has("temperature") && r.value.temperature !== null) r.number("temperature", undefined, { min: 0, max: 2 });
  if (r.has("top_p") && r.value.top_p !== null) r.number("top_p", undefined, { min: 0, max: 1 });
  if (r.has("stop") && r.value.stop !== null) {
    const stop = r.raw("stop");
    const ok = typeof stop === "string" || (Array.isArray(stop) && stop.length <= 4 && stop.every((s) => typeof s === "string"));
    if (!ok) throw new ValidationError("stop", "expected a string or up to 4 strings", "invalid_request");
  }
  return { kind, model, stream, includeUsage, maxTokens, promptTokens: Math.max(1, promptTokens), body: r.value };
}

/** Builds the SSE lines (`data: …\n\n`) of one streamed response. Stateless apart from the ids it was given. */
export class ChunkFormatter {
  private readonly head: string;

  constructor(
    readonly kind: ApiKind,
    readonly id: string,
    readonly model: string,
    /** Unix seconds. */
    readonly created: number,
  ) {
    const object = kind === "chat" ? "chat.completion.chunk" : "text_completion";
    // Shared prefix of every chunk; JSON.stringify of the dynamic parts keeps it valid.
    this.head = `{"id":${JSON.stringify(id)},"object":"${object}","created":${created},"model":${JSON.stringify(model)},"choices":[`;
  }

  /** The first chunk of a chat stream (role only); completions have none. */
  roleChunk(): string {
    return this.kind === "chat" ? `data: ${this.head}{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}\n\n` : "";
  }

  textChunk(text: string): string {
    const t = JSON.stringify(text);
    return this.kind === "chat"
      ? `data: ${this.head}{"index":0,"delta":{"content":${t}},"logprobs":null,"finish_reason":null}]}\n\n`
      : `data: ${this.head}{"index":0,"text":${t},"logprobs":null,"finish_reason":null}]}\n\n`;
  }

  finishChunk(reason: FinishReason): string {
    return this.kind === "chat"
      ? `data: ${this.head}{"index":0,"delta":{},"logprobs":null,"finish_reason":"${reason}"}]}\n\n`
      : `data: ${this.head}{"index":0,"text":"","logprobs":null,"finish_reason":"${reason}"}]}\n\n`;
  }

  /** The usage chunk sent when `stream_options.include_usage` is true: empty choices, usage set. */
  usageChunk(usage: Usage): string {
    return `data: ${this.head}],"usage":${JSON.stringify(usage)}}\n\n`;
  }

  /** An in-stream error after the first token (OpenAI-style error object as an SSE event). */
  errorChunk(message: string, code: string): string {
    return `data: ${JSON.stringify({ error: { message, type: "server_error", param: null, code } })}\n\n`;
  }

  static readonly DONE = "data: [DONE]\n\n";

  /** A non-streamed response body. */
  fullResponse(text: string, reason: FinishReason, usage: Usage): Record<string, unknown> {
    if (this.kind === "chat") {
      return {
        id: this.id,
        object: "chat.completion",
        created: this.created,
        model: this.model,
        choices: [{ index: 0, message: { role: "assistant", content: text, refusal: null }, logprobs: null, finish_reason: reason }],
        usage,
      };
    }
    return {
      id: this.id,
      object: "text_completion",
      created: this.created,
      model: this.model,
      choices: [{ index: 0, text, logprobs: null, finish_reason: reason }],
      usage,
    };
  }
}

export function makeUsage(promptTokens: number, completionTokens: number): Usage {
  return { prompt_tokens: promptTokens, completion_tokens: completionTokens, total_tokens: promptTokens + completionTokens };
}

/**
 * The deterministic synthetic text of output token `index` for request `seed` (engine-sim's output): short words
 * from a fixed list, so a stream's bytes are reproducible and every token is one SSE chunk.
 */
const WORDS = ["the", "tide", "gate", "opens", "at", "dawn", "and", "tokens", "flow", "out", "to", "sea", "in", "steady", "waves", "again"];
export function syntheticToken(seed: number, index: number): string {
  const h = Math.imul(seed ^ Math.imul(index + 1, 0x9e3779b1), 0x85ebca6b) >>> 0;
  return " " + WORDS[h % WORDS.length];
}
