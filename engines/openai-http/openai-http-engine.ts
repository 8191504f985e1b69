/**
 * The `Engine` port over any OpenAI-compatible server (vLLM, SGLang, `tidegate engine-sim`): `open()` pushes the
 * SSE of POST /v1/chat/completions or /v1/completions to a sink as the socket delivers it (core/push.ts; a batch
 * request asks without streaming and gets one token event with all its text; a streamed request to a plain-http
 * server goes through h1-stream.ts's kept-alive connections, everything else through node:http with a keep-alive
 * agent; sse.ts parses chunks with a fast path), `generate()` is the same as a stream, and `stats()` combines the server's /metrics (vllm:kv_cache_usage_perc,
 * vllm:num_requests_running, vllm:num_requests_waiting, scraped every `metricsIntervalMs` on the Clock) with what
 * this adapter has in flight (remaining tokens for JSQ, generated tokens). Aborting a request's signal destroys the
 * upstream HTTP request, which is how vLLM (and engine-sim) learn to free its KV.
 */
import { Agent, request as httpRequest, type IncomingMessage, type RequestOptions } from "node:http";
import { urlToHttpOptions } from "node:url";
import { request as httpsRequest, Agent as HttpsAgent } from "node:https";
import type { Clock, Timer } from "../../core/clock.js";
import { TidegateError } from "../../core/errors.js";
import { makeUsage } from "../../core/openai.js";
import type { Engine, EngineEvent, EngineStats, FinishReason, GenerateRequest, LayerwiseControl, PairStatus } from "../../core/ports.js";
import { LAYERWISE_PATH, PRIORITY_HEADER, REQUEST_ID_HEADER } from "../sim/http.js";
import { VLLM_METRICS } from "../sim/engine-metrics.js";
import type { PipelineSummary } from "../pipeline-summary.js";
import type { Logger } from "../../core/log.js";
import { NO_FLOW, refused, streamOf, type EventSink, type Flow } from "../../core/push.js";
import { H1Pool, type H1Call } from "./h1-stream.js";
import { KvEventStream } from "./kv-events.js";
import { DEFAULT_BLOCK_TOKENS } from "../../core/prefix.js";
import { EngineLiveness, connectionFailureCode } from "./liveness.js";
import { pipelineFromMetrics } from "./pipeline-metrics.js";
import { parseWhole, readAll, upstreamError, upstreamErrorOf } from "./replies.js";
import { SseSplitter, parseChunk, promValue } from "./sse.js";

/** How long the engine must stay without a request of this adapter before the idle scrape (scrapeWhenIdle). */
export const IDLE_SCRAPE_DELAY_MS = 25;

export interface OpenAIHttpEngineOptions {
  instanceId: string;
  model: string;
  /** Base URL without the /v1 suffix, e.g. http://10.0.0.5:8000. */
  baseUrl: string;
  clock: Clock;
  /** Its role in prefill/decode disaggregation (config engines.roles; Engine.role); default "both". */
  role?: "prefill" | "decode" | "both";
  /** KV bytes of the instance, to turn the scraped usage fraction into bytes (default 1: bytes = fraction). */
  kvBytesCapacity?: number;
  /** /metrics scrape period (default 500 ms); 0 disables the timer (call scrape()). */
  metricsIntervalMs?: number;
  /**
   * Stats are stale (EngineStats.stale: routed around, counted as full) once the last scrape failed or no scrape
   * succeeded for this long (default max(1500, 3 × metricsIntervalMs) ms). A scrape waits at most
   * max(1000, 2 × metricsIntervalMs) ms for the whole /metrics body.
   */
  staleAfterMs?: number;
  /** Told when the stats turn stale and when they are readable again. */
  log?: Logger;
  /**
   * Block size (tokens) of the engine's prefix cache for its KV-event stream (kv-events.ts; default 16): events of
   * another size are dropped. The stream opens only when a router subscribes (Engine.kvEvents).
   */
  kvEventsBlockTokens?: number;
  /** Bearer key for the upstream server. */
  apiKey?: string;
  /** Time allowed for the response headers of a streamed request (default 30 s). */
  headersTimeoutMs?: number;
  /**
   * Time allowed for a batch request's whole response (default 10 min): batch requests (GenerateRequest.batch) are
   * sent with `stream: false`, so their headers come with the last token.
   */
  unstreamedTimeoutMs?: number;
  /**
   * Time one /metrics scrape may take before it is given up (default max(1000, 2 × metricsIntervalMs) ms): the stats
   * stay the last scraped ones, marked stale. The engine counts as down only as liveness.ts says (refused or reset, or
   * no byte at all for `stallMs`), so a scrape that is slow under load while tokens flow ejects nothing.
   */
  scrapeTimeoutMs?: number;
  /**
   * Send `priority` (GenerateRequest.priority: 0 interactive, 1 batch) in the request body as well as the
   * x-tidegate-priority header: vLLM's field for its priority scheduling (`--scheduling-policy priority`, lower first),
   * which a vLLM without that policy refuses for a non-zero priority. Default false.
   */
  priorityField?: boolean;
  /** How long an engine that owes bytes (a stream or scrape under way) may send none before it is down (default `scrapeTimeoutMs`). */
  stallMs?: number;
}

interface Scraped {
  kvUsage: number;
  running: number;
  waiting: number;
  /** The preemptible share of the KV cache (engine-sim's gauge); undefined when the engine does not export it. */
  kvPreemptible: number | undefined;
  preemptions: number | undefined;
  /** vLLM's prefix-cache counters (prompt tokens queried, found); undefined when the engine does not export them. */
  prefixQueries: number | undefined;
  prefixHits: number | undefined;
}

export class OpenAIHttpEngine implements Engine {
  readonly instanceId: string;
  readonly model: string;
  role: "prefill" | "decode" | "both";
  private readonly url: URL;
  /** Request options (protocol, host, port, path) of each path `send` was asked for, resolved against `url` once. */
  private readonly targets = new Map<string, RequestOptions>();
  private readonly opts: OpenAIHttpEngineOptions;
  private readonly agent: Agent;
  /** Streamed requests' client (h1-stream.ts), for a plain-http engine; https streams go through node:https. */
  private readonly h1: H1Pool | undefined;
  /** The request head's fixed part for each streamed path (request line, host, content type, auth). */
  private readonly h1Heads = new Map<string, string>();
  private readonly metricsTimer: Timer | undefined;
  private scraped: Scraped = { kvUsage: 0, running: 0, waiting: 0, kvPreemptible: undefined, preemptions: undefined, prefixQueries: undefined, prefixHits: undefined };
  /** A pipelined engine-sim's split over its stages, from the last scrape that carried PIPELINE_METRICS. */
  private pipeline: PipelineSummary | undefined;
  private scrapeOk = false;
  /** Clock ms of the last successful scrape (undefined before one). */
  private lastOkMs: number | undefined;
  private scrapeFailed = false;
  /** Passive liveness from every byte, refusal and timeout this adapter sees (liveness.ts). */
  private readonly liveness: EngineLiveness;
  private scraping: Promise<boolean> | undefined;
  private wasStale = false;
  private readonly staleAfterMs: number;
  private readonly scrapeTimeoutMs: number;
  private remaining = 0;
  private inFlight = 0;
  /** Clock time of the last scrape `scrapeWhenIdle` started. */
  private lastIdleScrapeMs = Number.NEGATIVE_INFINITY;
  /** Armed while the engine has just gone idle (scrapeWhenIdle). */
  private idleScrapeTimer: Timer | undefined;
  /** Clock time the adapter's last request in the engine ended. */
  private idleSinceMs = 0;
  private readonly metricsIntervalMs: number;
  private generated = 0;
  private closed = false;
  /** The engine's KV events (kv-events.ts), opened when the gateway's prefix index subscribes. */
  readonly kvEvents: KvEventStream;

  constructor(opts: OpenAIHttpEngineOptions) {
    this.opts = opts;
    this.instanceId = opts.instanceId;
    this.model = opts.model;
    this.role = opts.role ?? "both";
    this.url = new URL(opts.baseUrl.replace(/\/+$/, "").replace(/\/v1$/, "") + "/");
    const agentOpts = { keepAlive: true, maxSockets: Number.POSITIVE_INFINITY };
    this.agent = this.url.protocol === "https:" ? new HttpsAgent(agentOpts) : new Agent(agentOpts);
    this.h1 = this.url.protocol === "http:" ? new H1Pool(this.url.hostname.replace(/^\[|\]$/g, ""), Number(this.url.port || 80)) : undefined;
    this.kvEvents = new KvEventStream({ url: this.url, clock: opts.clock, blockTokens: opts.kvEventsBlockTokens ?? DEFAULT_BLOCK_TOKENS, ...(opts.log === undefined ? {} : { log: opts.log }) });
    const interval = opts.metricsIntervalMs ?? 500;
    this.metricsIntervalMs = interval;
    this.staleAfterMs = opts.staleAfterMs ?? Math.max(1500, 3 * interval);
    this.scrapeTimeoutMs = opts.scrapeTimeoutMs ?? Math.max(1000, 2 * interval);
    this.liveness = new EngineLiveness(opts.clock, opts.stallMs ?? this.scrapeTimeoutMs);
    this.metricsTimer = interval > 0 ? opts.clock.every(interval, () => void this.scrape()) : undefined;
    if (interval > 0) void this.scrape();
  }

  /** True once a /metrics scrape succeeded and the last one did. */
  get metricsHealthy(): boolean {
    return this.scrapeOk;
  }

  /**
   * Liveness for the region's engine-health check (static regions; liveness.ts): false when the last connection was
   * refused or reset, or when the engine owes bytes (a stream, a scrape) and sent none for `stallMs`; true once it
   * answered anything (a scrape with an error status, or one that timed out while tokens flowed, only makes its stats
   * stale: routed around while another instance serves, but in service); undefined before anything was seen.
   */
  healthy(): boolean | undefined {
    return this.liveness.verdict().alive;
  }

  /** Why `healthy()` is false (e.g. "connection refused (ECONNREFUSED)"); undefined while it is not. */
  unhealthyReason(): string | undefined {
    return this.liveness.verdict().reason;
  }

  /** True when the stats are stale: the last scrape failed, or none succeeded for `staleAfterMs`. */
  get stale(): boolean {
    if (this.scrapeFailed) return true;
    return this.lastOkMs !== undefined && this.opts.clock.now() - this.lastOkMs > this.staleAfterMs;
  }

  /**
   * Scrapes /metrics now (joining a scrape under way); resolves false when the server cannot be read. The last
   * values are kept, but the stats are marked stale (EngineStats.stale) rather than trusted.
   */
  scrape(): Promise<boolean> {
    if (this.closed) return Promise.resolve(false);
    this.scraping ??= this.scrapeOnce().finally(() => {
      this.scraping = undefined;
      const stale = this.stale;
      if (stale !== this.wasStale) {
        if (stale) this.opts.log?.warn("engine stats stale: /metrics cannot be read; routing around it", { instanceId: this.instanceId, url: this.url.href });
        else this.opts.log?.info("engine stats readable again", { instanceId: this.instanceId });
        this.wasStale = stale;
      }
    });
    return this.scraping;
  }

  private async scrapeOnce(): Promise<boolean> {
    this.liveness.begin();
    try {
      const res = await this.send("GET", "metrics", undefined, {}, AbortSignal.timeout(this.scrapeTimeoutMs));
      this.liveness.bytes();
      const text = await readAll(res);
      this.liveness.scrapeAnswered();
      if ((res.statusCode ?? 0) !== 200) throw new Error(`status ${res.statusCode}`);
      this.scraped = {
        kvUsage: promValue(text, VLLM_METRICS.kvUsage) ?? promValue(text, VLLM_METRICS.kvUsageLegacy) ?? this.scraped.kvUsage,
        running: promValue(text, VLLM_METRICS.running) ?? this.scraped.running,
        waiting: promValue(text, VLLM_METRICS.waiting) ?? this.scraped.waiting,
        kvPreemptible: promValue(text, VLLM_METRICS.kvPreemptible) ?? this.scraped.kvPreemptible,
        preemptions: promValue(text, VLLM_METRICS.preemptions) ?? this.scraped.preemptions,
        prefixQueries: promValue(text, VLLM_METRICS.prefixQueries) ?? this.scraped.prefixQueries,
        prefixHits: promValue(text, VLLM_METRICS.prefixHits) ?? this.scraped.prefixHits,
      };
      this.pipeline = pipelineFromMetrics(text) ?? this.pipeline;
      this.scrapeOk = true;
      this.scrapeFailed = false;
      this.lastOkMs = this.opts.clock.now();
    } catch (err) {
      // The last values stay, marked stale. Refused or reset: down now; no answer in time: down only if the engine
      // also sent no token for `stallMs` (liveness.ts); an error status: alive but unobservable.
      this.scrapeOk = false;
      this.scrapeFailed = true;
      const code = connectionFailureCode(err);
      if (code !== undefined) this.liveness.connectionFailed(code);
      else if (!(err instanceof Error && err.message.startsWith("status "))) this.liveness.scrapeTimeout();
    } finally {
      this.liveness.end();
    }
    return this.scrapeOk;
  }

  /** A pipelined engine-sim's split over its stages as its last /metrics scrape showed it (the region's listing). */
  pipelineSummary(): PipelineSummary | undefined {
    return this.pipeline;
  }

  /**
   * KV usage, running and waiting from the last scrape; remaining tokens (prompt + max output still to come, less
   * the prompt tokens the routing expected cached: GenerateRequest.expectedCachedTokens) and generated tokens from
   * the requests this adapter streamed. running/waiting are at least what is in flight here.
   */
  stats(): EngineStats {
    const cap = this.opts.kvBytesCapacity ?? 1;
    return {
      kvBytesUsed: this.scraped.kvUsage * cap,
      kvBytesCapacity: cap,
      running: Math.max(this.scraped.running, this.inFlight - this.scraped.waiting),
      waiting: this.scraped.waiting,
      remainingTokens: this.remaining,
      generatedTokensTotal: this.generated,
      // A stale engine's KV counts as full and none of it as preemptible (what cannot be read is not given away).
      ...(this.scraped.kvPreemptible === undefined || this.stale ? {} : { preemptibleKvBytes: Math.min(this.scraped.kvPreemptible, this.scraped.kvUsage) * cap }),
      ...(this.scraped.preemptions === undefined ? {} : { preemptionsTotal: this.scraped.preemptions }),
      ...(this.scraped.prefixQueries === undefined ? {} : { prefixQueriedTokensTotal: this.scraped.prefixQueries, prefixHitTokensTotal: this.scraped.prefixHits ?? 0 }),
      ...(this.stale ? { stale: true } : {}),
    };
  }

  /** The stream of `open` (core/push.ts streamOf): for callers that pull. */
  generate(req: GenerateRequest, signal?: AbortSignal): AsyncIterable<EngineEvent> {
    return streamOf((sink, s) => this.open(req, sink, s), signal);
  }

  /**
   * One request in push form (core/push.ts): the response's SSE chunks are parsed as they arrive on the socket and
   * each token goes to `sink` in the same turn, no promise per token; `sink.event` returning false pauses the
   * response (TCP back-pressures the engine) until the flow resumes. `done` goes out once the body has ended, with
   * this adapter's books (in-flight count, remaining tokens) already closed. Aborting `signal` destroys the upstream
   * request (how vLLM and engine-sim learn to free its KV) and fails the sink with the abort's reason.
   */
  open(req: GenerateRequest, sink: EventSink, signal?: AbortSignal): Flow {
    if (this.closed) return refused(sink, new TidegateError("upstream_error", `engine ${this.instanceId} is closed`));
    if (signal?.aborted) return refused(sink, signal.reason);
    // A batch request has nobody reading its tokens as they come (region/link/mux-server.ts sends its text once): it
    // is asked for without streaming, so neither the engine nor this process handles one SSE chunk per token. A
    // prefill for a remote decode is not streamed either (vLLM's contract: one token, answered with kv_transfer_params).
    const remoteDecode = req.kvTransfer !== undefined && "remoteDecode" in req.kvTransfer;
    const stream = req.batch !== true && !remoteDecode;
    const fields = {
      model: req.model,
      ...(this.opts.priorityField === true ? { priority: req.priority } : {}),
      ...(req.kvTransfer === undefined ? {} : remoteDecode ? { kv_transfer_params: { do_remote_decode: true }, max_tokens: 1, ...(req.body.max_completion_tokens == null ? {} : { max_completion_tokens: 1 }) } : { kv_transfer_params: (req.kvTransfer as { params: Readonly<Record<string, unknown>> }).params }),
    };
    const body = JSON.stringify(stream ? { ...req.body, ...fields, stream: true, stream_options: { include_usage: true } } : { ...req.body, ...fields, stream: false });
    const path = req.kind === "chat" ? "v1/chat/completions" : "v1/completions";
    // The work this request adds to remainingTokens: prompt + max output, less the prompt tokens the routing expects
    // the engine's prefix cache to hold (GenerateRequest.expectedCachedTokens; at most prompt − 1).
    const promptWork = req.promptTokens - Math.max(0, Math.min(req.promptTokens - 1, Math.floor(req.expectedCachedTokens ?? 0)));
    const budget = promptWork + (remoteDecode ? 1 : req.maxTokens);
    let counted = 0;
    this.remaining += budget;
    this.inFlight++;
    this.liveness.begin();
    const headers: Record<string, string> = { [REQUEST_ID_HEADER]: req.id, [PRIORITY_HEADER]: String(req.priority), accept: stream ? "text/event-stream" : "application/json" };
    let res: IncomingMessage | undefined;
    let h1: H1Call | undefined;
    let ended = false;
    /** Closes this adapter's books for the request (once), before its end goes to the sink. */
    const close = () => {
      ended = true;
      signal?.removeEventListener("abort", onAbort);
      // A consumer that stops early (or an error) must not leave the upstream generating: close the connection.
      if (res !== undefined && !res.complete) res.destroy();
      h1?.destroy();
      this.remaining -= budget - counted;
      this.inFlight--;
      this.liveness.end();
      if (this.inFlight === 0) this.scrapeWhenIdle();
    };
    const fail = (err: unknown) => {
      if (ended) return;
      close();
      sink.fail(this.failure(err, signal));
    };
    const finish = (ev: EngineEvent) => {
      if (ended) return;
      close();
      sink.event(ev);
    };
    const onAbort = () => fail(signal!.reason);
    signal?.addEventListener("abort", onAbort, { once: true });
    // The SSE of a streamed request, token by token into the sink (either client below).
    const split = new SseSplitter();
    let finishReason: FinishReason = "length";
    let usage: { promptTokens: number; completionTokens: number } | undefined;
    let tokens = 0;
    let sawDone = false;
    /** Feeds body bytes; false when the sink asked to pause. */
    const sse = (bytes: Buffer): boolean => {
      let room = true;
      this.liveness.bytes();
      try {
        for (const data of split.push(bytes)) {
          const c = parseChunk(data);
          if (c.kind === "text" || (c.kind === "finish" && c.text.length > 0)) {
            tokens++;
            this.generated++;
            if (counted === 0) {
              this.remaining -= promptWork;
              counted += promptWork;
            }
            if (counted < budget) {
              this.remaining--;
              counted++;
            }
            if (!sink.event({ type: "token", text: c.text, tokens: 1 })) room = false;
            if (ended) return true;
          }
          if (c.kind === "finish") finishReason = c.reason === "stop" ? "stop" : "length";
          else if (c.kind === "usage") usage = c;
          else if (c.kind === "error") throw new TidegateError("upstream_error", `upstream ${this.instanceId}: ${c.message}`);
          else if (c.kind === "done") sawDone = true;
        }
      } catch (err) {
        fail(err);
      }
      return room;
    };
    const sseEnd = () => {
      if (!sawDone) return fail(new TidegateError("upstream_error", `upstream ${this.instanceId} ended the stream without [DONE]`));
      finish({ type: "done", finishReason, usage: makeUsage(usage?.promptTokens ?? req.promptTokens, usage?.completionTokens ?? tokens) });
    };
    if (stream && this.h1 !== undefined) {
      // The hot path: h1-stream.ts, no node:http request or response objects.
      let status = 0;
      let errorBody: Buffer[] | undefined;
      const head = this.h1Head(path, body, headers);
      if (head instanceof Error) {
        fail(head);
        return NO_FLOW;
      }
      h1 = this.h1.request(head, body, {
        head: (st) => {
          this.liveness.bytes();
          status = st;
          if (status !== 200) errorBody = [];
        },
        body: (bytes) => {
          if (ended) return;
          if (errorBody !== undefined) errorBody.push(Buffer.from(bytes));
          else if (!sse(bytes)) h1?.pause();
        },
        end: () => {
          h1 = undefined;
          if (ended) return;
          if (errorBody !== undefined) fail(upstreamErrorOf(Buffer.concat(errorBody).toString("utf8"), status));
          else sseEnd();
        },
        fail: (err) => {
          h1 = undefined;
          fail(err);
        },
      }, this.opts.headersTimeoutMs ?? 30_000);
      return { resume: () => h1?.resume() };
    }
    this.send("POST", path, body, headers, signal, stream ? undefined : (this.opts.unstreamedTimeoutMs ?? 600_000)).then(
      (r) => {
        res = r;
        if (ended) return void r.destroy();
        this.liveness.bytes();
        const status = r.statusCode ?? 0;
        if (status !== 200) return void upstreamError(r, status).then(fail, fail);
        if (!stream) {
          readAll(r).then((whole) => {
            if (ended) return;
            const p = parseWhole(whole, this.instanceId);
            const completion = p.completionTokens ?? (p.text.length > 0 ? 1 : 0);
            this.generated += completion;
            this.remaining -= Math.min(budget, promptWork + completion);
            counted = Math.min(budget, promptWork + completion);
            if (remoteDecode && p.kvTransferParams === undefined) throw new TidegateError("upstream_error", `upstream ${this.instanceId} answered a prefill for a remote decode without kv_transfer_params (is it a prefill instance of vLLM's disaggregation contract?)`);
            if (p.text.length > 0) sink.event({ type: "token", text: p.text, tokens: completion });
            finish({ type: "done", finishReason: p.finish, usage: makeUsage(p.promptTokens ?? req.promptTokens, completion), ...(p.kvTransferParams === undefined ? {} : { kvTransferParams: p.kvTransferParams }) });
          }).catch(fail);
          return;
        }
        r.on("data", (bytes: Buffer) => {
          if (!ended && !sse(bytes)) r.pause();
        });
        r.once("end", () => {
          if (!ended) sseEnd();
        });
        r.once("error", fail);
        // A destroyed response (socket reset) may close without 'end' or 'error'; the code lets liveness count it.
        r.once("close", () => {
          if (!ended && !r.complete) fail(Object.assign(new Error("the upstream connection closed before the response ended"), { code: "ECONNRESET" }));
        });
      },
      fail,
    );
    return { resume: () => res?.resume() };
  }

  /**
   * What a request's failure reaches its sink as: the abort's reason when its signal aborted, a TidegateError as it
   * is, anything else an upstream_error naming the instance. A refused or reset connection marks the engine down now
   * rather than at the next scrape (the next byte clears it); a timeout is left to the stall rule (liveness.ts).
   */
  private failure(err: unknown, signal: AbortSignal | undefined): unknown {
    if (signal?.aborted) return signal.reason ?? err;
    if (err instanceof TidegateError) return err;
    const code = connectionFailureCode(err);
    if (code !== undefined) {
      this.liveness.connectionFailed(code);
      this.scrapeOk = false;
      this.scrapeFailed = true;
    }
    return new TidegateError("upstream_error", `upstream ${this.instanceId} (${this.url.host}): ${(err as Error).message}`, { cause: err });
  }

  /**
   * The last request this adapter had in the engine ended: once the engine has stayed without one for
   * IDLE_SCRAPE_DELAY_MS, scrape rather than wait for the next tick. Until then the stats still showed the engine as
   * busy as at the last scrape (up to `metricsIntervalMs` old), and the region's reports with it: the batch
   * dispatcher then granted little or nothing to an engine that had just emptied, and a fill whose requests all end
   * together ran in bursts with the engine idle between them (bench:batch's fill arm, 64 running then 0 for 0.5–2 s
   * at a time, in two of four runs). Not at the very end: a client that sends its next request as the last one ends
   * (one stream at a time) had it arrive while the engine was building the /metrics page (engine-sim: 18 KB, with
   * /proc reads), and its first token waited for that (bench:router's single stream, traced with strace). A request
   * under way when the delay is over stops the scrape (its own end asks again). A scrape under way may predate the end,
   * so another follows it. Not with scraping off (`metricsIntervalMs` 0), and at most once per half interval.
   */
  private scrapeWhenIdle(): void {
    if (this.metricsTimer === undefined || this.closed) return;
    this.idleSinceMs = this.opts.clock.now();
    if (this.idleScrapeTimer === undefined) this.armIdleScrape(IDLE_SCRAPE_DELAY_MS);
  }

  /** One timer for the idle scrape: when it fires early for the latest idle moment, it waits out the rest. */
  private armIdleScrape(ms: number): void {
    this.idleScrapeTimer = this.opts.clock.after(ms, () => {
      this.idleScrapeTimer = undefined;
      if (this.inFlight > 0) return;
      const left = this.idleSinceMs + IDLE_SCRAPE_DELAY_MS - this.opts.clock.now();
      if (left > 0) this.armIdleScrape(left);
      else this.scrapeNowIdle();
    });
  }

  private scrapeNowIdle(): void {
    if (this.closed) return;
    const now = this.opts.clock.now();
    if (now - this.lastIdleScrapeMs < this.metricsIntervalMs / 2) return;
    this.lastIdleScrapeMs = now;
    if (this.scraping === undefined) void this.scrape();
    else
      void this.scraping.then(() => {
        if (this.inFlight === 0) void this.scrape();
      });
  }

  /**
   * Serve-while-loading control over engine-sim's /tidegate/layerwise (engines/sim/layerwise/layerwise-host.ts). A server
   * without the route (vLLM) answers 404: not_found, and the region lets the new instance load stop-the-world.
   */
  readonly layerwise: LayerwiseControl = {
    update: (spec) => this.control("POST", LAYERWISE_PATH, JSON.stringify(spec)),
    end: (peer) => this.control("DELETE", `${LAYERWISE_PATH}?peer=${encodeURIComponent(peer)}`, undefined),
  };

  private async control(method: string, path: string, body: string | undefined): Promise<PairStatus> {
    const res = await this.send(method, path, body, {}, AbortSignal.timeout(this.scrapeTimeoutMs * 2));
    const status = res.statusCode ?? 0;
    if (status === 200) return JSON.parse(await readAll(res)) as PairStatus;
    const err = await upstreamError(res, status);
    if (status === 404 && err.code !== "not_found") throw new TidegateError("not_found", `${this.url.origin} has no serve-while-loading control (404 on ${LAYERWISE_PATH}): ${err.message}`);
    throw err;
  }

  /** Engine.switchRole: engine-sim's role control (engines/sim/http.ts ROLE_PATH); the role changes once it answers 200. */
  async switchRole(role: "prefill" | "decode"): Promise<void> {
    const res = await fetch(new URL("tidegate/role", this.url), { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ role }), signal: AbortSignal.timeout(5000) });
    const text = await res.text();
    if (res.status !== 200) throw new TidegateError("upstream_error", `engine ${this.instanceId} at ${this.url.href} refused the role ${role}: ${res.status} ${text.slice(0, 200)}`);
    this.role = role;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.metricsTimer?.cancel();
    this.idleScrapeTimer?.cancel();
    this.kvEvents.close();
    this.agent.destroy();
    this.h1?.close();
  }

  /**
   * The request head of a streamed POST to `path` (h1-stream.ts): what `send` would write, in one string. A header
   * value node:http would refuse (a control character) is refused here the same way, as an Error.
   */
  private h1Head(path: string, body: string, headers: Record<string, string>): string | Error {
    let fixed = this.h1Heads.get(path);
    if (fixed === undefined) {
      const u = new URL(path, this.url);
      fixed = `POST ${u.pathname}${u.search} HTTP/1.1\r\nhost: ${u.host}\r\nconnection: keep-alive\r\ncontent-type: application/json\r\n${this.opts.apiKey === undefined ? "" : `authorization: Bearer ${this.opts.apiKey}\r\n`}`;
      this.h1Heads.set(path, fixed);
    }
    let head = fixed;
    for (const k in headers) {
      const v = headers[k]!;
      if (BAD_HEADER_VALUE.test(v)) return Object.assign(new TypeError(`Invalid character in header content [${JSON.stringify(k)}]`), { code: "ERR_INVALID_CHAR" });
      head += `${k}: ${v}\r\n`;
    }
    return `${head}content-length: ${Buffer.byteLength(body)}\r\n\r\n`;
  }

  /** The request options of `path` resolved against the base URL (cached for the few fixed paths). */
  private target(path: string): RequestOptions {
    let t = this.targets.get(path);
    if (t === undefined) {
      t = urlToHttpOptions(new URL(path, this.url));
      // Paths with a query (serve-while-loading's `?peer=`) vary: resolved each time, not kept.
      if (!path.includes("?")) this.targets.set(path, t);
    }
    return t;
  }

  /**
   * One HTTP request; destroying it on abort. Resolves with the response once headers arrive, which must be within
   * `headersTimeoutMs` (or `headersMs`: an unstreamed completion's headers come with its whole body).
   *
   * The abort is wired here rather than through node's `signal` request option, with the same effect (the request
   * destroyed with an AbortError whose cause is the signal's reason) and without the end-of-stream watcher node sets
   * up for that option: a fifth of what creating a request cost the region under bench:router's load. The target's
   * URL is resolved once per path (`target`).
   */
  private send(method: string, path: string, body: string | undefined, headers: Record<string, string>, signal: AbortSignal | undefined, headersMs?: number): Promise<IncomingMessage> {
    const h: Record<string, string | number> = { accept: "*/*", ...headers };
    if (body !== undefined) {
      h["content-type"] = "application/json";
      h["content-length"] = Buffer.byteLength(body);
    }
    if (this.opts.apiKey !== undefined) h.authorization = `Bearer ${this.opts.apiKey}`;
    const make = this.url.protocol === "https:" ? httpsRequest : httpRequest;
    return new Promise((resolve, reject) => {
      const req = make({ ...this.target(path), method, headers: h, agent: this.agent });
      if (signal !== undefined) {
        const onAbort = () => req.destroy(abortError(signal));
        if (signal.aborted) onAbort();
        else {
          signal.addEventListener("abort", onAbort, { once: true });
          req.once("close", () => signal.removeEventListener("abort", onAbort));
        }
      }
      const waitMs = headersMs ?? this.opts.headersTimeoutMs ?? 30_000;
      req.setTimeout(waitMs, () => req.destroy(new Error(`no response headers within ${waitMs} ms`)));
      req.once("response", (res) => {
        req.setTimeout(0);
        resolve(res);
      });
      req.once("error", reject);
      req.end(body);
    });
  }
}

/** What node:http refuses in a header value (its checkInvalidHeaderChar). */
const BAD_HEADER_VALUE = /[^\t\x20-\x7e\x80-\xff]/;

/** The error node's `signal` request option destroys a request with: an AbortError with the signal's reason as cause. */
function abortError(signal: AbortSignal): Error {
  return Object.assign(new Error("The operation was aborted", { cause: signal.reason }), { name: "AbortError", code: "ABORT_ERR" });
}
