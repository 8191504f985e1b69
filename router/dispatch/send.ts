/**
 * The Dispatcher's transport: a claimed request turned into a GenerateRequest (priority 1, or 0 once older than
 * promoteAfterMs: SageServe §6.3), sent over its region's link in the link's callback shape (RegionLink.submit: one
 * path for every link — streaming links report the text and finish, the replays' links counts only), and the
 * region's answer turned into the batch result line.
 */
import { ChunkFormatter, makeUsage, parseOpenAIRequest, type ApiKind } from "../../core/openai.js";
import { findTidegateError } from "../../core/errors.js";
import type { FinishReason, GenerateRequest, LinkCallbacks, RegionLink, Usage } from "../../core/ports.js";
import type { ClaimedRequest } from "../queue/types.js";
import { decodePayload, responseLine } from "./lines.js";
import { requestPriority } from "./policy.js";

/** A request the region finished: its text (empty from links that report counts only), finish reason and usage. */
export interface Finished {
  text: string;
  reason: FinishReason;
  usage: Usage;
}

/** Error codes that mean the request itself is bad (its result is an error line), not that the region failed. */
const REQUEST_FAULTS = new Set(["invalid_request", "invalid_json", "model_not_found", "payload_too_large", "context_length_exceeded"]);

/** True when `err` is a fault of the request itself (its result is an error line), not of the region. */
export function isRequestFault(err: unknown): boolean {
  const te = findTidegateError(err);
  return te !== undefined && REQUEST_FAULTS.has(te.code);
}

/** A claimed request ready to send, or its error line when its body does not parse. */
export type Prepared = { req: GenerateRequest; kind: ApiKind; customId: string } | { errorLine: string };

/** Builds the GenerateRequest of claimed request `c` at `nowMs`. */
export function prepare(c: ClaimedRequest, nowMs: number, promoteAfterMs: number): Prepared {
  const payload = decodePayload(c.payload);
  const kind: ApiKind = payload.url === "/v1/chat/completions" ? "chat" : "completion";
  const priority = requestPriority(c.enqueuedAtMs, nowMs, promoteAfterMs);
  let parsed;
  try {
    parsed = parseOpenAIRequest(kind, payload.body);
  } catch (err) {
    const te = findTidegateError(err)!;
    return { errorLine: responseLine(payload.custom_id, c.requestId, te.status, te.toOpenAI()) };
  }
  return { req: { id: c.requestId, model: c.model, kind, promptTokens: parsed.promptTokens, maxTokens: parsed.maxTokens, priority, batch: true, body: payload.body }, kind, customId: payload.custom_id };
}

/** The result line of an error the region answered for the request itself (isRequestFault). */
export function faultLine(customId: string, requestId: string, err: unknown): string {
  const te = findTidegateError(err)!;
  return responseLine(customId, requestId, te.status, te.toOpenAI());
}

/** The result line of a finished request, with `createdS` (seconds) as the response's creation time. */
export function okLine(customId: string, c: ClaimedRequest, kind: ApiKind, out: Finished, createdS: number): string {
  const fmt = new ChunkFormatter(kind, (kind === "chat" ? "chatcmpl-" : "cmpl-") + c.requestId.replace(/[^A-Za-z0-9]/g, ""), c.model, createdS);
  return responseLine(customId, c.requestId, 200, fmt.fullResponse(out.text, out.reason, out.usage));
}

/** One request in flight on a link, as the callbacks the link reports to. */
class Sending implements LinkCallbacks {
  private text = "";
  private finish: { reason: FinishReason; usage: Usage } | undefined;

  constructor(
    private readonly req: GenerateRequest,
    private readonly end: (r: Finished | { err: unknown }) => void,
  ) {}

  onToken(text: string): void {
    this.text += text;
  }

  onFinish(reason: FinishReason, usage: Usage): void {
    this.finish = { reason, usage };
  }

  /** Without the region's finish (a link that reports counts): "length" when the output ran to max_tokens, else "stop". */
  onDone(_atMs: number, generated: number): void {
    const f = this.finish ?? { reason: generated >= this.req.maxTokens ? "length" : "stop", usage: makeUsage(this.req.promptTokens, generated) };
    this.end({ text: this.text, reason: f.reason, usage: f.usage });
  }

  onError(_atMs: number, err: unknown): void {
    this.end({ err });
  }
}

/**
 * Sends `req` over `link` (RegionLink.submit) and resolves with what the region answered, never rejecting: the
 * finished request, or `{ err }` when the region refused or failed it. Aborting `signal` cancels the request through
 * the link (which reports it to onError: every adapter does).
 */
export function send(link: RegionLink, req: GenerateRequest, signal: AbortSignal): Promise<Finished | { err: unknown }> {
  return new Promise((resolve) => {
    try {
      link.submit(req, new Sending(req, resolve), signal);
    } catch (err) {
      resolve({ err });
    }
  });
}
