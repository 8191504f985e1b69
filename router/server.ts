/**
 * The global router as a running thing: selector fed by every region link's telemetry, metrics, the hono app served
 * by @hono/node-server on node:http. Used by `tidegate global` (gRPC links) and `tidegate dev` (in-process links).
 */
import type { AddressInfo } from "node:net";
import type { Server } from "node:http";
import { createAdaptorServer } from "@hono/node-server";
import type { Clock } from "../core/clock.js";
import type { TidegateConfig } from "../core/config.js";
import { regionModels } from "../core/config.js";
import type { Logger } from "../core/log.js";
import type { RegionName } from "../core/models.js";
import type { RegionLink, Unsubscribe } from "../core/ports.js";
import { createRouterApp, type RouterMount } from "./app.js";
import type { CompletionDeps } from "./completions.js";
import { createRouterMetrics } from "./metrics.js";
import { RegionSelector, instanceKvBytesFrom } from "./selector.js";

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
  readonly selector: RegionSelector;
  readonly deps: CompletionDeps;
  readonly server: Server;
  private readonly unsubscribes: Unsubscribe[] = [];
  private closed = false;

  constructor(private readonly opts: GlobalRouterOptions) {
    const { config, clock, logger } = opts;
    this.selector = new RegionSelector({
      clock,
      regions: config.regions.map((r) => ({ name: r.name, proximity: r.proximity, models: regionModels(r) })),
      memoryThreshold: config.router.memoryThreshold,
      telemetryStaleMs: config.router.telemetryStaleMs,
      instanceKvBytes: instanceKvBytesFrom(config),
    });
    const links = new Map<RegionName, RegionLink>();
    for (const link of opts.links) links.set(link.region, link);
    const metrics = createRouterMetrics(config.models.map((m) => m.name), config.regions.map((r) => r.name), opts.defaultMetrics ?? true);
    this.deps = { config, selector: this.selector, links, metrics, clock, logger };
    for (const link of opts.links) {
      this.unsubscribes.push(link.subscribe((t) => this.selector.onTelemetry(t)));
    }
    const app = createRouterApp(this.deps, opts.mounts === undefined ? {} : { mounts: opts.mounts });
    this.server = createAdaptorServer({ fetch: app.fetch, autoCleanupIncoming: true }) as Server;
    this.server.keepAliveTimeout = 65_000;
  }

  /** Starts listening; resolves to the bound address (port 0 picks a free port). */
  listen(host: string, port: number): Promise<AddressInfo> {
    return new Promise((resolve, reject) => {
      const onError = (err: Error) => reject(err);
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
    for (const u of this.unsubscribes) u();
    await new Promise<void>((resolve) => {
      this.server.close(() => resolve());
      this.server.closeAllConnections();
    });
  }
}
