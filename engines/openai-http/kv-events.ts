/**
 * The KV-event subscription of an engine behind the openai-http adapter (issue 34; Engine.kvEvents): engine-sim
 * streams its prefix cache's events as Server-Sent Events at GET /tidegate/kv_events (sim/http.ts KV_EVENTS_PATH),
 * one JSON event per `data:` line (vLLM kv_events: BlockStored, BlockRemoved, AllBlocksCleared), starting with
 * AllBlocksCleared and a BlockStored of what it holds. The stream opens on the first subscriber and reopens
 * `retryMs` (on the Clock) after it ends or fails, each time starting from the engine's snapshot again. A server
 * that answers 404 (vLLM publishes its events over ZMQ, not here; SGLang has none) is not asked again: the router
 * then indexes its routing history alone. Events whose block size differs from `blockTokens` are dropped (the router
 * hashes prompts with its own block size; hashes of another size never match).
 */
import { request as httpRequest, type ClientRequest, type IncomingMessage } from "node:http";
import { request as httpsRequest } from "node:https";
import type { Clock, Timer } from "../../core/clock.js";
import type { Logger } from "../../core/log.js";
import type { KvEvent, KvEventListener } from "../../core/prefix.js";
import type { KvEventSource } from "../../core/ports.js";

/** engine-sim's KV-event route (engines/sim/http.ts KV_EVENTS_PATH; not imported: that module is the server's). */
export const KV_EVENTS_ROUTE = "tidegate/kv_events";

export interface KvEventStreamOptions {
  /** The engine's base URL (with a trailing slash), e.g. http://10.0.0.5:8000/. */
  url: URL;
  clock: Clock;
  blockTokens: number;
  /** Wait before reopening a stream that ended or failed (ms; default 1000). */
  retryMs?: number;
  log?: Logger;
}

export class KvEventStream implements KvEventSource {
  readonly blockTokens: number;
  private readonly listeners = new Set<KvEventListener>();
  private req: ClientRequest | undefined;
  private retry: Timer | undefined;
  /** The server has no such route (404): not asked again. */
  private unsupported = false;
  private closed = false;
  private connectedOnce = false;

  constructor(private readonly opts: KvEventStreamOptions) {
    this.blockTokens = opts.blockTokens;
  }

  /** Whether a stream is open now (events are flowing). */
  get open(): boolean {
    return this.req !== undefined && this.connectedOnce;
  }

  subscribe(listener: KvEventListener): () => void {
    this.listeners.add(listener);
    if (this.listeners.size === 1) this.connect();
    return () => {
      this.listeners.delete(listener);
      if (this.listeners.size === 0) this.stop();
    };
  }

  /** Stops the stream for good. */
  close(): void {
    this.closed = true;
    this.stop();
  }

  private stop(): void {
    this.retry?.cancel();
    this.retry = undefined;
    this.req?.destroy();
    this.req = undefined;
  }

  private connect(): void {
    if (this.closed || this.unsupported || this.req !== undefined || this.listeners.size === 0) return;
    const url = new URL(KV_EVENTS_ROUTE, this.opts.url);
    const make = url.protocol === "https:" ? httpsRequest : httpRequest;
    const req = make(url, { method: "GET", headers: { accept: "text/event-stream" } });
    this.req = req;
    const again = () => {
      if (this.req !== req) return;
      this.req = undefined;
      this.connectedOnce = false;
      if (this.closed || this.unsupported || this.listeners.size === 0) return;
      this.retry = this.opts.clock.after(this.opts.retryMs ?? 1000, () => {
        this.retry = undefined;
        this.connect();
      });
    };
    req.on("response", (res: IncomingMessage) => {
      if (res.statusCode === 404) {
        this.unsupported = true;
        this.opts.log?.info("engine has no KV-event stream: the prefix index uses routing history", { url: url.href });
        res.resume();
        return;
      }
      if (res.statusCode !== 200) {
        res.resume();
        req.destroy();
        return;
      }
      this.connectedOnce = true;
      res.setEncoding("utf8");
      let buf = "";
      res.on("data", (chunk: string) => {
        buf += chunk;
        for (let i = buf.indexOf("\n\n"); i >= 0; i = buf.indexOf("\n\n")) {
          const frame = buf.slice(0, i);
          buf = buf.slice(i + 2);
          if (frame.startsWith("data: ")) this.deliver(frame.slice(6));
        }
      });
      res.on("close", again);
      res.on("error", again);
    });
    req.on("error", again);
    req.on("close", again);
    req.end();
  }

  private deliver(json: string): void {
    let ev: KvEvent;
    try {
      ev = JSON.parse(json) as KvEvent;
    } catch {
      this.opts.log?.warn("bad KV event from engine (not JSON); dropped", { url: this.opts.url.href });
      return;
    }
    if (ev.type === "BlockStored" && ev.blockSize !== this.blockTokens) return;
    if (ev.type !== "BlockStored" && ev.type !== "BlockRemoved" && ev.type !== "AllBlocksCleared") return;
    for (const l of this.listeners) l(ev);
  }
}
