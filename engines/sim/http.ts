/**
 * `tidegate engine-sim`'s HTTP face: a SimEngine that looks like vLLM to its clients (node:http, no framework, for
 * the least per-token overhead). Routes: POST /v1/chat/completions and /v1/completions (streaming and not,
 * stream_options.include_usage), GET /v1/models, /health (empty, or JSON with the parameters' origin and the
 * engine's settings when set; also as /healthz and /readyz), /livez, /metrics (vLLM names, engine-metrics.ts), and the serve-while-loading control the
 * region drives (layerwise/layerwise-host.ts): GET /tidegate/layerwise (the pairing and its counters), POST
 * /tidegate/layerwise (a PairSpec: start or update), DELETE /tidegate/layerwise?peer=ID (end it); λScale's
 * execute-while-load control (region/liveload/live-lambda.ts): POST /tidegate/lambda {"passOverheadMs": ms} makes an
 * engine waiting for its blocks serve now as an execution pipeline's head with ms added to every pass (λScale §4.3),
 * 0 switches it to local mode (§4.4, also done when its blocks are all here); with {"passOverheadMs": 0,
 * "behindBlocks": true} such an engine serves now with each prefill behind its blocks as they arrive (a blitzscale
 * cold start, BlitzScale §5.2 steps (1)–(2) with nothing to pair with: layerwise/behind-blocks.ts; the arrivals are
 * the block counts `blocks()` is told, mode "behind-blocks" until they are all here); GET /tidegate/lambda reports the
 * mode; and GET /tidegate/kv_events: the prefix cache's KV events (vLLM kv_events: BlockStored, BlockRemoved,
 * AllBlocksCleared) as Server-Sent Events, one JSON event per `data:` line, starting with AllBlocksCleared and one
 * BlockStored of every block cached at connect (the subscriber's snapshot; a second, medium "CPU", of the host KV tier's). Request validation,
 * SSE chunks and bodies come from core/openai.ts so every hop emits identical bytes. Bad input is a 4xx
 * OpenAI-style error, never a crash. A client disconnect cancels the generation (frees its KV).
 */
import { hostname } from "node:os";
import { KV_SEND_PATH, KvTransfer } from "./kv-transfer.js";
import { kvAskOf, type KvAsk } from "./kv-params.js";
import type { EngineSettings } from "../../core/engine-settings.js";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { WallClock, type Clock } from "../../core/clock.js";
import { TidegateError, toTidegateError } from "../../core/errors.js";
import { newId } from "../../core/ids.js";
import { MODEL_SPECS } from "../../core/models.js";
import { ChunkFormatter, parseOpenAIRequest, type ApiKind } from "../../core/openai.js";
import type { Engine, EngineEvent, GenerateRequest, Priority } from "../../core/ports.js";
import { parseJson } from "../../core/validate.js";
import type { PipelineSummary } from "../pipeline-summary.js";
import { parsePairSpec, type LayerwiseHost } from "./layerwise/layerwise-host.js";
import { BlockArrivals } from "./layerwise/behind-blocks.js";
import { EngineSimMetrics } from "./engine-metrics.js";

/** Where the engine's parameters came from (engine-sim --parameters-from): reported in /health. */
export interface EngineParameters {
  model: string;
  bytes: number;
  blocks: number;
}

/**
 * What the server serves: a SimEngine (with its serve-while-loading host), or a pipelined instance
 * (region/keystage/pipeline-engine.ts: `status()`, its PipelineStatus, answers GET /tidegate/keystage as JSON and
 * feeds the pipeline gauges; it has no layerwise pairing).
 */
export type ServedEngine = Engine & { layerwise?: LayerwiseHost; status?: () => PipelineSummary; setPassOverheadMs?(ms: number): void; setBlockArrivals?(arrivalsMs: readonly number[] | undefined): void };

/** λScale's execute-while-load control route (module comment). */
export const LAMBDA_PATH = "/tidegate/lambda";
/**
 * Switches a prefill instance to decode or back (BlitzScale §5.2; Engine.switchRole): POST {"role": "prefill" |
 * "decode"}, to an instance that has one of those roles; requests under way finish as they started.
 */
export const ROLE_PATH = "/tidegate/role";

/** Where an engine stands in λScale's execute-while-load: never pipelined, a pipeline's head, or local after one. */
export type LambdaMode = "whole" | "pipeline" | "local" | "behind-blocks";

export interface EngineSimServerOptions {
  engine: ServedEngine;
  /** Parameters taken from a node agent's block store; /health then answers JSON {status, parameters}. */
  parameters?: EngineParameters;
  /** Largest request body accepted (413 above). */
  bodyLimitBytes?: number;
  /** Adds the process's standard metrics (CPU, memory, event loop) to /metrics: true for the engine-sim process. */
  processMetrics?: boolean;
  /** The settings the engine was built with (core/engine-settings.ts); /health answers them when any is set. */
  settings?: EngineSettings;
  /** The engine's tensor parallelism, answered as a prefill's `tp_size` (kv-transfer.ts); default 1. */
  tp?: number;
  /**
   * The address other instances reach this one at for KV transfers (engine-sim --kv-host); default the listen
   * address, or this machine's hostname when it listens on every address (0.0.0.0, ::).
   */
  kvAdvertiseHost?: string;
  /** How long a prefill's KV is held for its decode instance, and how long a decode waits for it (kv-transfer.ts defaults). */
  kvHoldMs?: number;
  kvPullTimeoutMs?: number;
  /** The engine's clock, for the arrivals of its blocks (default a WallClock). */
  clock?: Clock;
}

/** The serve-while-loading control route (engines/sim/layerwise/layerwise-host.ts). */
export const LAYERWISE_PATH = "/tidegate/layerwise";
/** A pipelined instance's split over its stages (GET; region/keystage/pipeline-engine.ts PipelineStatus). */
export const KEYSTAGE_PATH = "/tidegate/keystage";
/** The KV-event stream of the prefix cache (SSE; module comment). */
export const KV_EVENTS_PATH = "/tidegate/kv_events";
/** Request id header the region gateway forwards so synthetic text is the same at every hop. */
export const REQUEST_ID_HEADER = "x-request-id";
/** Priority header (0 interactive, 1 batch) the region gateway forwards; default 0. */
export const PRIORITY_HEADER = "x-tidegate-priority";

/**
 * A request's priority: the x-tidegate-priority header ("1" → 1, anything else → 0) when sent, else vLLM's body field
 * `priority` (an integer, lower first: > 0 → 1, else 0), else 0.
 */
export function requestPriorityOf(header: string | string[] | undefined, field: unknown): Priority {
  if (typeof header === "string") return header === "1" ? 1 : 0;
  return typeof field === "number" && field > 0 ? 1 : 0;
}
const ID_RE = /^[A-Za-z0-9_.:-]{1,128}$/;

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
  res.end(text);
}

function sendError(res: ServerResponse, err: unknown): void {
  const e = toTidegateError(err);
  if (res.headersSent) {
    res.end();
    return;
  }
  sendJson(res, e.status, e.toOpenAI());
}

function readBody(req: IncomingMessage, limitBytes: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const declared = Number(req.headers["content-length"] ?? 0);
    if (declared > limitBytes) {
      reject(new TidegateError("payload_too_large", `request body exceeds ${limitBytes} bytes`));
      req.resume();
      return;
    }
    const parts: Buffer[] = [];
    let size = 0;
    req.on("data", (c: Buffer) => {
      size += c.length;
      if (size > limitBytes) {
        reject(new TidegateError("payload_too_large", `request body exceeds ${limitBytes} bytes`));
        req.destroy();
        return;
      }
      parts.push(c);
    });
    req.on("end", () => resolve(Buffer.concat(parts).toString("utf8")));
    req.on("error", reject);
  });
}

/** Writes `chunk`, waiting for drain when the socket buffer is full; throws when the client is gone. */
async function write(res: ServerResponse, chunk: string): Promise<void> {
  if (res.destroyed) throw new TidegateError("cancelled", "client disconnected");
  if (!res.write(chunk)) {
    await new Promise<void>((resolve, reject) => {
      const onClose = () => reject(new TidegateError("cancelled", "client disconnected"));
      res.once("drain", () => {
        res.off("close", onClose);
        resolve();
      });
      res.once("close", onClose);
    });
  }
}

/** The vLLM-compatible server around one SimEngine. */
export class EngineSimServer {
  readonly server: Server;
  readonly metrics: EngineSimMetrics;
  private readonly engine: ServedEngine;
  private readonly bodyLimitBytes: number;
  private parameters: EngineParameters | undefined;
  /** While set, the engine waits for its parameters: /health and completions answer 503 with this text. */
  private loading: string | undefined;
  private lambda: { mode: LambdaMode; passOverheadMs: number } = { mode: "whole", passOverheadMs: 0 };
  /** The blocks seen so far while waiting for them (`blocks`). */
  private arrivals: BlockArrivals | undefined;
  private readonly clock: Clock;
  private readonly createdS = Math.floor(Date.now() / 1000);
  private settings: EngineSettings | undefined;
  private listenHost = "127.0.0.1";
  private readonly opts: EngineSimServerOptions;
  /** Prefill/decode KV transfers, opened at listen (its host is the listen host). */
  private kv: KvTransfer | undefined;

  constructor(opts: EngineSimServerOptions) {
    this.engine = opts.engine;
    this.bodyLimitBytes = opts.bodyLimitBytes ?? 4 * 1024 * 1024;
    this.parameters = opts.parameters;
    this.settings = opts.settings !== undefined && Object.keys(opts.settings).length > 0 ? opts.settings : undefined;
    this.opts = opts;
    this.clock = opts.clock ?? new WallClock();
    const status = this.engine.status?.bind(this.engine);
    this.metrics = new EngineSimMetrics(this.engine.model, () => this.engine.stats(), opts.processMetrics ?? false, status);
    this.server = createServer((req, res) => {
      this.route(req, res).catch((err: unknown) => sendError(res, err));
    });
    this.server.keepAliveTimeout = 65_000;
  }

  /** Listens on host:port (0 = a free port); resolves to the base URL, e.g. http://127.0.0.1:41234. */
  listen(port: number, host = "127.0.0.1"): Promise<string> {
    return new Promise((resolve, reject) => {
      this.server.once("error", reject);
      this.server.listen(port, host, () => {
        const a = this.server.address() as AddressInfo;
        this.listenHost = a.address;
        resolve(`http://${a.family === "IPv6" ? `[${a.address}]` : a.address}:${a.port}`);
      });
    });
  }

  /** Serves 503 (/health and completions) with `why` until `ready(parameters)`: the engine waits for its blocks. */
  waitForParameters(why: string): void {
    this.loading = why;
  }

  /** `present` of the model's `blockCount` blocks are here (the wait loop's reports): a behind-blocks engine's arrivals. */
  blocks(present: number, blockCount: number): void {
    if (this.arrivals?.blockCount !== blockCount) this.arrivals = new BlockArrivals(blockCount);
    const at = this.arrivals.observe(present, this.clock.now());
    if (this.lambda.mode === "behind-blocks") this.engine.setBlockArrivals!(at);
  }

  /** The parameters arrived: /health answers 200 with them and completions are served. */
  ready(parameters: EngineParameters): void {
    this.blocks(parameters.blocks, parameters.blocks);
    this.parameters = parameters;
    this.loading = undefined;
    if (this.lambda.mode === "behind-blocks") this.lambda = { mode: "local", passOverheadMs: 0 };
    // A pipeline head whose own copy is complete serves locally (λScale §4.4).
    if (this.lambda.mode === "pipeline") this.setLambda(0);
  }

  private setLambda(passOverheadMs: number): void {
    this.engine.setPassOverheadMs!(passOverheadMs);
    this.lambda = { mode: passOverheadMs > 0 ? "pipeline" : this.lambda.mode === "whole" ? "whole" : "local", passOverheadMs };
  }

  /** Stops accepting, ends open streams (cancelling their generations) and closes the engine. */
  async close(): Promise<void> {
    this.kv?.close();
    await this.engine.close();
    await new Promise<void>((resolve) => {
      this.server.close(() => resolve());
      this.server.closeAllConnections();
    });
  }

  /** The KV transfers of this instance (kv-transfer.ts), opened on first use on the listen host. */
  private kvTransfer(): KvTransfer {
    if (this.kv !== undefined) return this.kv;
    const a = this.server.address();
    if (a === null || typeof a === "string") throw new TidegateError("conflict", "engine-sim is not listening: no side channel for KV transfers");
    this.kv = new KvTransfer({
      model: this.engine.model,
      engineId: this.engine.instanceId,
      host: this.listenHost,
      advertiseHost: this.opts.kvAdvertiseHost ?? (this.listenHost === "0.0.0.0" || this.listenHost === "::" ? hostname() : this.listenHost),
      httpPort: () => a.port,
      tp: this.opts.tp ?? 1,
      ...(this.opts.kvHoldMs === undefined ? {} : { holdMs: this.opts.kvHoldMs }),
      ...(this.opts.kvPullTimeoutMs === undefined ? {} : { pullTimeoutMs: this.opts.kvPullTimeoutMs }),
    });
    const kv = this.kv;
    this.metrics.kvTransfers(() => kv.totals);
    return this.kv;
  }

  /** What the body's kv_transfer_params ask (kv-transfer.ts), refused where this instance's role or the shape does not allow it. */
  private checkKvAsk(body: Record<string, unknown>, stream: boolean): KvAsk {
    const ask = kvAskOf(body);
    const role = this.settings?.role ?? "both";
    if (role === "prefill" && ask.kind !== "prefill-for-remote") throw new TidegateError("invalid_request", `this instance of ${this.engine.model} prefills for remote decode only (role prefill): send kv_transfer_params {"do_remote_decode": true}`, { param: "kv_transfer_params" });
    // A decode instance also serves a request whole (a short prompt the router did not split: routing.pdMinPrefillTokens),
    // as a vLLM consumer instance does for a request without kv_transfer_params; it never prefills for a remote decode.
    if (role === "decode" && ask.kind === "prefill-for-remote") throw new TidegateError("invalid_request", `this instance of ${this.engine.model} is a decode instance (role decode): it decodes from a remote prefill or serves a request whole, and does not prefill for a remote decode`, { param: "kv_transfer_params" });
    if (ask.kind === "prefill-for-remote" && stream) throw new TidegateError("invalid_request", "a prefill for a remote decode is not streamed (vLLM's contract: stream false, max_tokens 1); its answer carries kv_transfer_params", { param: "stream" });
    return ask;
  }

  private async route(req: IncomingMessage, res: ServerResponse): Promise<void> {
    let path = (req.url ?? "/").split("?")[0];
    const method = req.method ?? "GET";
    // /healthz and /readyz are /health (vLLM's name) under the names every tidegate process answers; /livez is liveness.
    if (path === "/healthz" || path === "/readyz") path = "/health";
    if (path === "/livez") return sendJson(res, 200, { status: "ok" });
    if (this.loading !== undefined && (path === "/health" || path === "/v1/chat/completions" || path === "/v1/completions")) {
      sendJson(res, 503, { status: "loading", detail: this.loading, error: { message: `engine-sim is not ready: ${this.loading}`, type: "server_error", param: null, code: "no_region_available" } });
      return;
    }
    if (path === "/v1/chat/completions" || path === "/v1/completions") {
      if (method !== "POST") throw new TidegateError("not_found", `${method} ${path} is not supported; use POST`);
      return this.completions(path === "/v1/chat/completions" ? "chat" : "completion", req, res);
    }
    if (path === KV_SEND_PATH) {
      if (method !== "POST") throw new TidegateError("not_found", `${method} ${path} is not supported; use POST`);
      const body = parseJson(await readBody(req, this.bodyLimitBytes), "request body");
      return sendJson(res, 200, await this.kvTransfer().send(body));
    }
    if (path === LAYERWISE_PATH) return this.layerwise(method, req, res);
    if (path === LAMBDA_PATH) return this.lambdaControl(method, req, res);
    if (path === ROLE_PATH) return this.switchRole(method, req, res);
    if (path === KV_EVENTS_PATH && method === "GET") return this.kvEvents(req, res);
    if (path === KEYSTAGE_PATH) {
      if (this.engine.status === undefined) throw new TidegateError("not_found", `${KEYSTAGE_PATH}: this instance of ${this.engine.model} is not pipelined`);
      if (method !== "GET") throw new TidegateError("not_found", `${method} ${KEYSTAGE_PATH} is not supported; use GET`);
      return sendJson(res, 200, this.engine.status());
    }
    if (method !== "GET" && method !== "HEAD") throw new TidegateError("not_found", `${method} ${path} is not supported`);
    if (path === "/health") {
      if (this.parameters !== undefined || this.settings !== undefined) {
        sendJson(res, 200, { status: "ok", ...(this.parameters === undefined ? {} : { parameters: this.parameters }), ...(this.settings === undefined ? {} : { settings: this.settings }) });
      } else {
        res.writeHead(200, { "content-length": 0 });
        res.end();
      }
    } else if (path === "/v1/models") {
      const spec = MODEL_SPECS[this.engine.model];
      sendJson(res, 200, {
        object: "list",
        data: [{ id: this.engine.model, object: "model", created: this.createdS, owned_by: "tidegate", root: this.engine.model, parent: null, max_model_len: spec?.maxContextTokens ?? null }],
      });
    } else if (path === "/metrics") {
      const text = await this.metrics.registry.metrics();
      res.writeHead(200, { "content-type": this.metrics.registry.contentType });
      res.end(text);
    } else throw new TidegateError("not_found", `no route ${method} ${path}`);
  }

  /** ROLE_PATH: a prefill instance becomes a decode one or back. */
  private async switchRole(method: string, req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (method !== "POST") throw new TidegateError("not_found", `${method} ${ROLE_PATH} is not supported; use POST`);
    const body = parseJson(await readBody(req, this.bodyLimitBytes), "request body") as { role?: unknown };
    const role = typeof body === "object" && body !== null ? body.role : undefined;
    if (role !== "prefill" && role !== "decode") throw new TidegateError("invalid_request", 'role must be "prefill" or "decode"', { param: "role" });
    const now = this.settings?.role ?? "both";
    if (now === "both") throw new TidegateError("conflict", "this instance serves plain requests (role both): only a prefill or decode instance switches");
    this.settings = { ...this.settings, role };
    return sendJson(res, 200, { role });
  }

  /** λScale's execute-while-load control (module comment). */
  private async lambdaControl(method: string, req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (this.engine.setPassOverheadMs === undefined) throw new TidegateError("not_found", `${LAMBDA_PATH}: this instance of ${this.engine.model} is pipelined by stages and takes no λScale pipeline`);
    if (method === "GET") return sendJson(res, 200, { ...this.lambda, waiting: this.loading !== undefined });
    if (method !== "POST") throw new TidegateError("not_found", `${method} ${LAMBDA_PATH} is not supported; use GET or POST`);
    const body = parseJson(await readBody(req, this.bodyLimitBytes), "request body") as { passOverheadMs?: unknown; behindBlocks?: unknown };
    const ms = typeof body === "object" && body !== null ? body.passOverheadMs : undefined;
    if (typeof ms !== "number" || !(ms >= 0) || !Number.isFinite(ms)) throw new TidegateError("invalid_request", "passOverheadMs must be a finite number ≥ 0", { param: "passOverheadMs" });
    if (typeof body === "object" && body !== null && body.behindBlocks === true) {
      if (ms !== 0) throw new TidegateError("invalid_request", "behindBlocks goes with passOverheadMs 0 (one engine, no activation hops)", { param: "passOverheadMs" });
      if (this.engine.setBlockArrivals === undefined) throw new TidegateError("not_found", `${LAMBDA_PATH}: this instance of ${this.engine.model} cannot serve behind its blocks`);
      if (this.loading === undefined) throw new TidegateError("conflict", "this engine holds its whole model already: it serves as loaded");
      // First, so that an engine refusing the mode (chunked prefill) leaves this one as it was.
      this.engine.setBlockArrivals(this.arrivals?.observe(0, this.clock.now()) ?? [Number.POSITIVE_INFINITY]);
      this.loading = undefined; // it serves now, each prefill behind its blocks
      this.lambda = { mode: "behind-blocks", passOverheadMs: 0 };
      return sendJson(res, 200, { ...this.lambda, waiting: false });
    }
    if (ms > 0 && this.loading === undefined && this.lambda.mode !== "pipeline") throw new TidegateError("conflict", "this engine holds its whole model already: it serves locally, not as a pipeline head");
    if (ms > 0) this.loading = undefined; // it serves now, before its own blocks are all here
    this.setLambda(ms);
    return sendJson(res, 200, { ...this.lambda, waiting: false });
  }

  /**
   * Streams the prefix cache's KV events until the client goes (module comment). Events are written as they happen;
   * a slow reader's socket buffers them (Node's writable queue), and a write to a gone client ends the stream.
   */
  private kvEvents(req: IncomingMessage, res: ServerResponse): void {
    const source = this.engine.kvEvents;
    if (source === undefined) throw new TidegateError("not_found", `${KV_EVENTS_PATH}: prefix caching is off on this instance`);
    res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" });
    const send = (ev: unknown) => {
      if (!res.destroyed) res.write(`data: ${JSON.stringify(ev)}\n\n`);
    };
    send({ type: "AllBlocksCleared" });
    const now = source.snapshot?.() ?? [];
    if (now.length > 0) send({ type: "BlockStored", blockHashes: now, parentBlockHash: null, blockSize: source.blockTokens, medium: "GPU" });
    const hosted = source.hostSnapshot?.() ?? [];
    if (hosted.length > 0) send({ type: "BlockStored", blockHashes: hosted, parentBlockHash: null, blockSize: source.blockTokens, medium: "CPU" });
    const off = source.subscribe(send);
    const end = () => off();
    req.on("close", end);
    res.on("close", end);
  }

  /** The serve-while-loading control (module comment). */
  private async layerwise(method: string, req: IncomingMessage, res: ServerResponse): Promise<void> {
    const host = this.engine.layerwise;
    if (host === undefined) throw new TidegateError("not_found", `${LAYERWISE_PATH}: this instance of ${this.engine.model} is pipelined and does not pair with loading instances`);
    if (method === "GET") return sendJson(res, 200, host.status());
    if (method === "POST") {
      const spec = parsePairSpec(parseJson(await readBody(req, this.bodyLimitBytes), "request body"));
      return sendJson(res, 200, await host.update(spec));
    }
    if (method === "DELETE") {
      const peer = new URL(req.url ?? "/", "http://x").searchParams.get("peer");
      if (peer === null || peer === "") throw new TidegateError("invalid_request", "DELETE /tidegate/layerwise needs ?peer=<loading instance id>", { param: "peer" });
      return sendJson(res, 200, await host.end(peer));
    }
    throw new TidegateError("not_found", `${method} ${LAYERWISE_PATH} is not supported; use GET, POST or DELETE`);
  }

  private async completions(kind: ApiKind, req: IncomingMessage, res: ServerResponse): Promise<void> {
    const text = await readBody(req, this.bodyLimitBytes);
    const body = parseJson(text, "request body");
    const model = this.engine.model;
    const parsed = parseOpenAIRequest(kind, body, MODEL_SPECS[model]?.maxContextTokens);
    if (parsed.model !== model) throw new TidegateError("model_not_found", `The model \`${parsed.model}\` does not exist. This server serves ${model}.`, { param: "model" });
    const headerId = req.headers[REQUEST_ID_HEADER];
    const id = typeof headerId === "string" && ID_RE.test(headerId) ? headerId : newId(kind === "chat" ? "chatcmpl-" : "cmpl-");
    const priority = requestPriorityOf(req.headers[PRIORITY_HEADER], parsed.body.priority);
    const greq: GenerateRequest = { id, model, kind, promptTokens: parsed.promptTokens, maxTokens: parsed.maxTokens, priority, body: parsed.body };
    const ask = this.checkKvAsk(parsed.body, parsed.stream);
    const ac = new AbortController();
    const onClose = () => {
      if (!res.writableFinished) ac.abort(new TidegateError("cancelled", "client disconnected"));
    };
    res.on("close", onClose);
    const startMs = Date.now();
    if (ask.kind === "decode-from-remote") {
      // The transfer runs before the request queues, so its time is part of this instance's TTFT.
      try {
        const pulled = await this.kvTransfer().pull(ask.params, parsed.promptTokens, ac.signal);
        this.metrics.kvTransferSeconds?.observe(this.metrics.labels, pulled.ms / 1000);
        greq.remotePrefillTokens = pulled.remoteTokens;
      } catch (err) {
        res.off("close", onClose); // the request ends here: its error answer, not a generation, follows
        throw err;
      }
    }
    const fmt = new ChunkFormatter(kind, id, model, Math.floor(Date.now() / 1000));
    const it = this.engine.generate(greq, ac.signal)[Symbol.asyncIterator]();
    const gaps: number[] = [];
    let ttftMs: number | undefined;
    let lastMs = 0;
    let outputTokens = 0;
    let finished: "stop" | "length" | "abort" = "abort";
    const next = async (): Promise<EngineEvent | undefined> => {
      const r = await it.next();
      if (r.done) return undefined;
      const now = Date.now();
      if (r.value.type === "token") {
        if (ttftMs === undefined) ttftMs = now - startMs;
        else gaps.push(now - lastMs);
        lastMs = now;
        outputTokens += r.value.tokens;
      }
      return r.value;
    };
    try {
      // The first event comes before any header: a request the engine rejects is a plain 4xx, not a broken stream.
      let ev = await next();
      if (!parsed.stream) {
        let out = "";
        while (ev !== undefined && ev.type === "token") {
          out += ev.text;
          ev = await next();
        }
        if (ev === undefined) throw new TidegateError("internal", "engine ended without a done event");
        finished = ev.finishReason;
        const full = fmt.fullResponse(out, ev.finishReason, ev.usage);
        // A prefill for a remote decode answers where its KV is held (vLLM's kv_transfer_params).
        sendJson(res, 200, ask.kind === "prefill-for-remote" ? { ...full, kv_transfer_params: this.kvTransfer().offer(id, parsed.promptTokens) } : full);
        return;
      }
      res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" });
      const role = fmt.roleChunk();
      let pending = role;
      while (ev !== undefined && ev.type === "token") {
        pending += fmt.textChunk(ev.text);
        await write(res, pending);
        pending = "";
        ev = await next();
      }
      if (ev === undefined) throw new TidegateError("internal", "engine ended without a done event");
      finished = ev.finishReason;
      let tail = pending + fmt.finishChunk(ev.finishReason);
      if (parsed.includeUsage) tail += fmt.usageChunk(ev.usage);
      tail += ChunkFormatter.DONE;
      res.end(tail);
    } catch (err) {
      if (res.headersSent && !res.destroyed) {
        const e = toTidegateError(err);
        res.end(fmt.errorChunk(e.message, e.code) + ChunkFormatter.DONE);
        return;
      }
      throw err;
    } finally {
      res.off("close", onClose);
      if (finished === "abort") ac.abort(new TidegateError("cancelled", "request ended"));
      await it.return?.();
      if (ttftMs !== undefined) this.metrics.observeRequest({ ttftMs, e2eMs: Date.now() - startMs, promptTokens: parsed.promptTokens, outputTokens, gapsMs: gaps, finishedReason: finished });
    }
  }
}
