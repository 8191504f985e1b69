/**
 * POST /v1/chat/completions and /v1/completions on the raw node:http request/response (the streaming hot path:
 * SSE strings go straight to the socket, no web-stream layer). Validation → region selection with retry →
 * relay of the region's events as OpenAI chunks (core/openai ChunkFormatter, byte-identical on every hop).
 *
 * Errors before the first token get an OpenAI-style error body and status; after it, an in-stream error chunk
 * and the stream ends. A client disconnect aborts the upstream dispatch and is counted.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import type { TidegateConfig } from "../core/config.js";
import { COLD_START_CODES, TidegateError, toTidegateError } from "../core/errors.js";
import type { Clock } from "../core/clock.js";
import { newId } from "../core/ids.js";
import type { Logger } from "../core/log.js";
import { MODEL_SPECS, type RegionName } from "../core/models.js";
import { ChunkFormatter, MAX_TOKENS_LIMIT, parseOpenAIRequest, type ApiKind } from "../core/openai.js";
import type { EngineEvent, GenerateRequest, RegionLink } from "../core/ports.js";
import { NO_FLOW, type Flow } from "../core/push.js";
import { ValidationError } from "../core/validate.js";
import { histogramChild } from "../core/metrics.js";
import { authenticate, mayUseModel, modelForbidden } from "./auth.js";
import { readJsonBody } from "./body.js";
import { NO_REGION, UNKNOWN_MODEL, type RouterMetrics } from "./metrics.js";
import { ChunkWriter } from "./chunk-writer.js";
import { dispatchWithRetry, type OpenedStream } from "./relay.js";
import { requestKvBytes, type RegionSelector } from "./selector.js";
import type { StreamWatchdog } from "./watchdog.js";
import { ShedError, type Admission } from "./admission.js";
import type { ConcurrencyLimiter } from "./concurrency.js";
import { BurstLog } from "../core/burst-log.js";

/** Header a client sets to name its own region (first in preference order); overrides the API key's region. */
export const REGION_HEADER = "x-tidegate-region";
/** Response header saying why the request went to its region (relay.ts REGION_CHOICE_REASONS). */
export const REGION_REASON_HEADER = "x-tidegate-region-reason";

/** Everything the completion handler needs; built once by the router. */
export interface CompletionDeps {
  config: TidegateConfig;
  selector: RegionSelector;
  links: ReadonlyMap<RegionName, RegionLink>;
  metrics: RouterMetrics;
  clock: Clock;
  logger: Logger;
  /** Bounds every upstream wait (router.streamStallMs; region gone dark before the first token). */
  watchdog?: StreamWatchdog;
  /** In-flight limits (router.maxInflight, tenant limits): beyond them, 429 with Retry-After. */
  admission?: Admission;
  /** Adaptive concurrency per (region, model) and tenants' fair shares (concurrency.ts); absent: none. */
  limiter?: ConcurrencyLimiter;
  /** One warning per burst of failures rather than one per stream (routerBursts); each failure is a debug line too. */
  bursts: RouterBursts;
}

/** The router's summary lines (core/burst-log.ts): a region that fails fails many streams at once. */
export interface RouterBursts {
  /** Streams that ended with an in-stream error after their 200, keyed by region and error code. */
  streamFailed: BurstLog;
  /** Requests retried in another region after one failed before their first token, keyed by the failed region. */
  retried: BurstLog;
  /** Upstream waits the watchdog gave up, keyed by region and rule. */
  watchdog: BurstLog;
}

/** The router's burst logs on `clock` and `logger` (quiet for 1 s ends a burst; a storm reports every 10 s). */
export function routerBursts(clock: Clock, logger: Logger): RouterBursts {
  return {
    streamFailed: new BurstLog({ clock, log: logger, msg: "router: streams failed after their first token (in-stream errors)" }),
    retried: new BurstLog({ clock, log: logger, msg: "router: requests retried in another region (a region failed before their first token)" }),
    watchdog: new BurstLog({ clock, log: logger, msg: "router: the watchdog gave up upstream waits" }),
  };
}

/** Per-request bookkeeping for metrics and the final status. */
interface Outcome {
  model: string;
  region: string;
  status: number;
}

/** Handles one completion request to the end; never rejects (every failure becomes a response or is logged). */
export async function handleCompletion(deps: CompletionDeps, kind: ApiKind, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const startNs = process.hrtime.bigint();
  const outcome: Outcome = { model: UNKNOWN_MODEL, region: NO_REGION, status: 200 };
  const client = new AbortController();
  let clientGone = false;
  res.on("close", () => {
    if (!res.writableFinished) {
      clientGone = true;
      client.abort(new TidegateError("cancelled", "client disconnected"));
    }
  });
  res.on("error", (err) => {
    deps.metrics.writeErrors.inc();
    deps.logger.warn("router: write to client failed", { err, model: outcome.model, region: outcome.region });
    client.abort(new TidegateError("cancelled", "write to client failed", { cause: err }));
  });
  let opened: OpenedStream | undefined;
  let releaseSlot: (() => void) | undefined;
  /** The region the request was last sent to: a client that leaves before its first token is counted there. */
  let dispatchedTo: string | undefined;
  try {
    const caller = authenticate(deps.config.router.apiKeys, req.headers.authorization);
    const body = await readJsonBody(req, deps.config.router.bodyLimitBytes);
    const rawModel = typeof body === "object" && body !== null && !Array.isArray(body) ? (body as Record<string, unknown>).model : undefined;
    const spec = typeof rawModel === "string" && deps.selector.hostingRegions(rawModel).length > 0 ? MODEL_SPECS[rawModel] : undefined;
    // A known model is the label from here on, so a bad parameter for it is counted under its name, not "unknown".
    if (spec !== undefined) outcome.model = rawModel as string;
    const parsed = parseOpenAIRequest(kind, body, spec?.maxContextTokens ?? MAX_TOKENS_LIMIT);
    if (spec === undefined) throw new TidegateError("model_not_found", `The model ${JSON.stringify(parsed.model)} does not exist or is not served here`, { param: "model" });
    outcome.model = parsed.model;
    if (!mayUseModel(caller, parsed.model)) throw modelForbidden(parsed.model);
    const named = requestedRegion(deps, req);
    if (named !== undefined && caller.regions !== undefined && !caller.regions.includes(named)) {
      throw new TidegateError("forbidden", `this API key may be served only in ${caller.regions.join(", ")}; header ${REGION_HEADER} names ${JSON.stringify(named)}`);
    }
    const clientRegion = named ?? caller.region;
    releaseSlot = deps.admission?.admit(caller.tenant, caller.maxInflight);

    const genReq: GenerateRequest = {
      id: newId(kind === "chat" ? "chatcmpl-" : "cmpl-"),
      model: parsed.model,
      kind,
      promptTokens: parsed.promptTokens,
      maxTokens: parsed.maxTokens,
      priority: 0,
      body: parsed.body,
    };
    deps.metrics.inflight.inc({ model: parsed.model });
    try {
      opened = await dispatchWithRetry({
        selector: deps.selector,
        links: deps.links,
        req: genReq,
        ...(clientRegion === undefined ? {} : { clientRegion }),
        ...(caller.regions === undefined ? {} : { allowedRegions: new Set(caller.regions) }),
        kvBytes: requestKvBytes(parsed.model, parsed.promptTokens, parsed.maxTokens),
        signal: client.signal,
        ...(deps.watchdog === undefined ? {} : { watchdog: deps.watchdog }),
        ...(deps.limiter === undefined ? {} : { concurrency: { limiter: deps.limiter, tenant: caller.tenant, retryAfterS: deps.config.router.retryAfterS, queueMs: deps.config.router.concurrency.queueMs } }),
        sloRetryAfterS: deps.config.router.retryAfterS,
        onDispatch: (region) => (dispatchedTo = region),
        onRetry: (failed, err) => {
          deps.metrics.retries.inc({ model: parsed.model, region: failed });
          deps.bursts.retried.note(failed, { model: parsed.model, region: failed, err });
          deps.logger.debug("router: region failed before the first token; trying the next", { model: parsed.model, region: failed, err });
        },
      });
      outcome.region = opened.region;
      deps.metrics.regionChoices.inc({ region: opened.region, reason: opened.reason });
      deps.metrics.ttftSeconds.observe({ model: parsed.model, region: opened.region }, Number(process.hrtime.bigint() - startNs) / 1e9);
      const fmt = new ChunkFormatter(kind, genReq.id, parsed.model, Math.floor(deps.clock.now() / 1000));
      if (parsed.stream) await relayStream(deps, res, fmt, opened, parsed.includeUsage, outcome, client.signal);
      else await relayFull(deps, res, fmt, opened, outcome, client.signal);
    } finally {
      deps.metrics.inflight.dec({ model: parsed.model });
    }
  } catch (err) {
    const te = toTidegateError(err);
    if (clientGone || te.code === "cancelled") {
      outcome.status = 499;
      if (outcome.region === NO_REGION && dispatchedTo !== undefined) outcome.region = dispatchedTo;
      deps.logger.debug("router: client aborted", { model: outcome.model, region: outcome.region, reason: clientGone ? "client disconnected" : te.message });
      if (outcome.model !== UNKNOWN_MODEL && outcome.region !== NO_REGION) deps.metrics.aborts.inc({ model: outcome.model, region: outcome.region });
      else if (outcome.model !== UNKNOWN_MODEL) deps.metrics.aborts.inc({ model: outcome.model, region: NO_REGION });
      if (!res.headersSent && !res.destroyed) sendError(res, te);
    } else if (!res.headersSent) {
      outcome.status = te.status;
      if (te instanceof ShedError) {
        deps.metrics.shed.inc({ model: outcome.model, limit: te.limit });
        sendError(res, te, { "retry-after": String(te.retryAfterS) });
        return;
      }
      if (te.code === "internal") deps.logger.error("router: internal error", { err, model: outcome.model });
      else deps.logger.debug("router: request refused", { model: outcome.model, region: outcome.region, status: te.status, code: te.code, message: te.message });
      // A model at zero that did not come up (held too long, or no region could start it): ask again later.
      sendError(res, te, COLD_START_CODES.has(te.code) ? { "retry-after": String(deps.config.controller.scaleToZero.retryAfterS) } : {});
    } else {
      outcome.status = 502;
      deps.logger.error("router: failure after the response started", { err, model: outcome.model, region: outcome.region });
      res.destroy();
    }
  } finally {
    releaseSlot?.();
    opened?.release();
    deps.metrics.requests.inc({ model: outcome.model, region: outcome.region, status: String(outcome.status) });
  }
}

function requestedRegion(deps: CompletionDeps, req: IncomingMessage): RegionName | undefined {
  const h = req.headers[REGION_HEADER];
  if (h === undefined) return undefined;
  const value = Array.isArray(h) ? h[0] : h;
  if (value === undefined || !deps.config.regions.some((r) => r.name === value)) {
    throw new ValidationError(`header ${REGION_HEADER}`, `unknown region ${JSON.stringify(value)}; known: ${deps.config.regions.map((r) => r.name).join(", ")}`, "invalid_request");
  }
  return value;
}

/** Writes an OpenAI-style error body (after a 413 the rest of the body is dropped by router/body.ts). */
export function sendError(res: ServerResponse, err: TidegateError, extraHeaders: Record<string, string> = {}): void {
  const body = JSON.stringify(err.toOpenAI());
  const headers: Record<string, string | number> = { ...extraHeaders, "content-type": "application/json", "content-length": Buffer.byteLength(body) };
  res.writeHead(err.status, headers);
  res.end(body);
}

/**
 * Relays the region's events as SSE chunks, pushed (OpenedStream.pipe, core/push.ts): each event is formatted and
 * written to the client's socket in the call that delivers it from the region, no promise per token. A connection
 * over its high-water mark pauses the region's stream until it drains. Resolves when the stream ended (`done`, or an
 * in-stream error after the 200); rejects with the client's abort reason when the client went away.
 */
function relayStream(deps: CompletionDeps, res: ServerResponse, fmt: ChunkFormatter, s: OpenedStream, includeUsage: boolean, outcome: Outcome, signal: AbortSignal): Promise<void> {
  res.writeHead(200, { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache", "x-tidegate-region": s.region, [REGION_REASON_HEADER]: s.reason, "x-request-id": fmt.id });
  let head = fmt.roleChunk();
  let tokens = 0;
  // performance.now(): a double, where hrtime.bigint() allocates a BigInt per token.
  let lastMs = performance.now();
  // Bound once per stream: prom-client's observe hashes the labels on every call (core/metrics.ts histogramChild).
  const tbt = histogramChild(deps.metrics.tbtSeconds, { model: outcome.model, region: s.region });
  const out = new ChunkWriter(res);
  return new Promise<void>((resolve, reject) => {
    let over = false;
    let flow: Flow = NO_FLOW;
    let draining = false;
    const end = (err?: unknown) => {
      over = true;
      signal.removeEventListener("abort", onAbort);
      deps.metrics.tokens.inc({ model: outcome.model, region: s.region }, tokens);
      if (err === undefined) resolve();
      else reject(err);
    };
    const fail = (err: unknown) => {
      if (over) return;
      s.abort();
      if (signal.aborted) return end(signal.reason);
      const te = toTidegateError(err);
      deps.bursts.streamFailed.note(`${s.region} ${te.code}`, { model: outcome.model, region: s.region, err });
      deps.logger.debug("router: stream failed after the first token", { model: outcome.model, region: s.region, err });
      // The client got 200 and its stream ends with an in-stream error: the status stays 200 and the failure is
      // counted on its own (tidegate_router_stream_errors_total).
      deps.metrics.streamErrors.inc({ model: outcome.model, region: s.region });
      res.end(fmt.errorChunk(te.message, te.code));
      end();
    };
    const onAbort = () => fail(signal.reason);
    const write = (event: EngineEvent): boolean => {
      if (over) return false;
      let chunk: string;
      if (event.type === "token") {
        if (tokens > 0) {
          const nowMs = performance.now();
          // Time between tokens: the gap since the previous chunk, spread over the tokens this chunk carries.
          tbt.observe((nowMs - lastMs) / 1e3 / Math.max(1, event.tokens));
          lastMs = nowMs;
        } else lastMs = performance.now();
        tokens += event.tokens;
        chunk = head + fmt.textChunk(event.text);
      } else {
        chunk = head + fmt.finishChunk(event.finishReason) + (includeUsage ? fmt.usageChunk(event.usage) : "") + ChunkFormatter.DONE;
      }
      head = "";
      if (event.type === "done") {
        // The last chunk and the body's end in one write.
        out.end(chunk);
        end();
        return true;
      }
      const room = out.write(chunk);
      if (room) return true;
      if (!draining) {
        draining = true;
        void out.drained().then(() => {
          draining = false;
          if (!over) flow.resume();
        });
      }
      return false;
    };
    if (signal.aborted) return fail(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    write(s.first);
    if (over) return;
    flow = s.pipe({ event: write, fail });
  });
}

async function relayFull(deps: CompletionDeps, res: ServerResponse, fmt: ChunkFormatter, s: OpenedStream, outcome: Outcome, signal: AbortSignal): Promise<void> {
  let text = "";
  let tokens = 0;
  let event: EngineEvent | undefined = s.first;
  try {
    while (event !== undefined && event.type === "token") {
      text += event.text;
      tokens += event.tokens;
      const next: IteratorResult<EngineEvent> = await s.next();
      event = next.done ? undefined : next.value;
    }
  } catch (err) {
    s.abort();
    if (signal.aborted) throw signal.reason;
    throw new TidegateError("upstream_error", `region ${s.region} failed mid-response: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
  } finally {
    deps.metrics.tokens.inc({ model: outcome.model, region: s.region }, tokens);
  }
  if (event === undefined) throw new TidegateError("upstream_error", `region ${s.region} ended the response without finishing`);
  const body = JSON.stringify(fmt.fullResponse(text, event.finishReason, event.usage));
  res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(body), "x-tidegate-region": s.region, [REGION_REASON_HEADER]: s.reason, "x-request-id": fmt.id });
  res.end(body);
}
