/**
 * The global router as a running thing: its region choice (router-core.ts: the selector fed by every region link's
 * telemetry, the one the replays build too), metrics, the hono app served by @hono/node-server on node:http. Used
 * by `tidegate global` (gRPC links) and `tidegate dev` (in-process links).
 */
import type { AddressInfo } from "node:net";
import type { Server, ServerResponse } from "node:http";
import { createAdaptorServer } from "@hono/node-server";
import type { Clock } from "../core/clock.js";
import type { TidegateConfig } from "../core/config.js";
import type { Logger } from "../core/log.js";
import type { RegionLink } from "../core/ports.js";
import { createRouterApp, type RouterMount } from "./app.js";
import { routerBursts, type CompletionDeps } from "./completions.js";
import { createRouterMetrics } from "./metrics.js";
import { instanceKvBytesFrom, type RegionSelector } from "./selector.js";
import { RouterCore } from "./router-core.js";
import { StreamWatchdog } from "./watchdog.js";
import { tokenPaceFrom } from "./pace.js";
import { Admission } from "./admission.js";
import { limiterFromConfig } from "./concurrency.js";
import { listenError } from "../core/listen.js";

export interface GlobalRouterOptions {
  config: TidegateConfig;
  /** One link per configured region (missing regions are simply never selected). */
  links: readonly RegionLink[];
  clock: Clock;
  logger: Logger;
  mounts?: readonly RouterMount[];
  /** Process metrics in /metrics (default true; tests with several routers in one process pass false). */
  defaultMetrics?: boolean;
}

/** Re-exported for callers that import it from here (sim/replay); it lives with the selector. */
export { instanceKvBytesFrom };

export class GlobalRouter {
  /** The region choice: selector and links (router-core.ts). */
  readonly core: RouterCore;
  readonly selector: RegionSelector;
  readonly deps: CompletionDeps;
  readonly server: Server;
  readonly watchdog: StreamWatchdog;
  private closed = false;

  constructor(private readonly opts: GlobalRouterOptions) {
    const { config, clock, logger } = opts;
    // A link that reports its region down (telemetry stream broken: process killed, connection refused) makes the
    // region unavailable at once instead of after router.telemetryStaleMs; its next snapshot brings it back.
    const limiter = limiterFromConfig(config, clock);
    // The limiter also reads each region's engine queue from its telemetry (concurrency.ts onQueueReport).
    this.core = new RouterCore({ config, clock, links: opts.links, ...(limiter === undefined ? {} : { observe: (t) => limiter.onTelemetry(t) }) });
    this.selector = this.core.selector;
    const links = this.core.links;
    const metrics = createRouterMetrics(config.models.map((m) => m.name), config.regions.map((r) => r.name), opts.defaultMetrics ?? true, limiter);
    const selector = this.selector;
    this.watchdog = new StreamWatchdog({
      clock,
      stallMs: config.router.streamStallMs,
      available: (r, m) => selector.candidate(r, m).available,
      // A region scaling the model from zero holds the request up to controller.scaleToZero.holdMs (issue 33).
      firstEventExtraMs: (r, m) => (selector.candidate(r, m).coldStartMs === undefined ? 0 : config.controller.scaleToZero.holdMs),
      telemetryAgeMs: (r) => selector.telemetryAgeMs(r),
      telemetryStaleMs: config.router.telemetryStaleMs,
      pace: tokenPaceFrom(config),
    });
    const bursts = routerBursts(clock, logger);
    this.watchdog.onFire = (region, model, reason) => {
      metrics.watchdogFired.inc({ region, reason });
      bursts.watchdog.note(`${region} ${reason}`, { region, model, reason });
    };
    const admission = new Admission({ maxInflight: config.router.maxInflight, tenantMaxInflight: config.router.tenantMaxInflight, retryAfterS: config.router.retryAfterS });
    this.deps = { config, selector, links, metrics, clock, logger, watchdog: this.watchdog, admission, bursts, ...(limiter === undefined ? {} : { limiter }) };
    const app = createRouterApp(this.deps, opts.mounts === undefined ? {} : { mounts: opts.mounts });
    this.server = createAdaptorServer({ fetch: app.fetch, autoCleanupIncoming: true }) as Server;
    this.server.keepAliveTimeout = 65_000;
    // Requests node's HTTP parser rejects (malformed request line or headers, headers too large, a body that does
    // not match its framing) get an OpenAI-style error body too, instead of node's bare "400 Bad Request".
    this.server.on("clientError", (err: NodeJS.ErrnoException, socket) => {
      if (!socket.writable) {
        socket.destroy();
        return;
      }
      // Bytes after a complete request that do not parse (a body sent without framing): the request before them is
      // still answered, then the connection is closed (node's default would destroy it with the answer unsent).
      const inFlight = (socket as { _httpMessage?: ServerResponse | null })._httpMessage;
      if (inFlight != null) {
        inFlight.shouldKeepAlive = false;
        if (inFlight.writableFinished) socket.end();
        else inFlight.once("finish", () => socket.end());
        inFlight.once("close", () => socket.destroy());
        return;
      }
      const tooLarge = err.code === "HPE_HEADER_OVERFLOW";
      const timedOut = err.code === "ERR_HTTP_REQUEST_TIMEOUT";
      const status = tooLarge ? 431 : timedOut ? 408 : 400;
      const reason = tooLarge ? "Request Header Fields Too Large" : timedOut ? "Request Timeout" : "Bad Request";
      const message = tooLarge ? "request headers are too large" : timedOut ? "the request was not received in time" : `malformed HTTP request (${err.code ?? "parse error"})`;
      const body = JSON.stringify({ error: { message, type: "invalid_request_error", param: null, code: "invalid_request" } });
      socket.end(`HTTP/1.1 ${status} ${reason}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`);
    });
  }

  /** Starts listening; resolves to the bound address (port 0 picks a free port). A port in use rejects with core/listen.ts `listenError`. */
  listen(host: string, port: number): Promise<AddressInfo> {
    return new Promise((resolve, reject) => {
      const onError = (err: Error) => reject(listenError(err, host, port, "--port / router.port"));
      this.server.once("error", onError);
      this.server.listen(port, host, () => {
        this.server.off("error", onError);
        resolve(this.server.address() as AddressInfo);
      });
    });
  }

  /** The http://host:port URL of a listening router. */
  url(): string {
    const a = this.server.address() as AddressInfo | null;
    if (a === null) throw new Error("router is not listening");
    const host = a.family === "IPv6" ? `[${a.address}]` : a.address;
    return `http://${host}:${a.port}`;
  }

  /** Stops accepting, ends open connections, unsubscribes from telemetry. Does not close the links. Idempotent. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.core.close();
    this.watchdog.close();
    for (const b of Object.values(this.deps.bursts)) b.flush();
    await new Promise<void>((resolve) => {
      this.server.close(() => resolve());
      this.server.closeAllConnections();
    });
  }
}
