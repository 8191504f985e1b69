/**
 * The small HTTP server a process without its own HTTP API uses for Prometheus and Kubernetes probes:
 * - `GET /metrics`: the registry in Prometheus text format;
 * - `GET /livez`: 200 while the process answers (liveness: restart it when this fails);
 * - `GET /readyz` and `GET /healthz`: 200 when `ready()` says so, else 503 (readiness: take it out of a Service).
 * Both health answers are JSON: `{ "status": "ok" | <why not>, ...detail }`. Anything else is an OpenAI-style 404.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { Registry } from "./metrics.js";
import type { Logger } from "./log.js";

/** What readiness reports: `ready` picks 200/503; `status` is "ok" or why not; `detail` is merged into the body. */
export interface Readiness {
  ready: boolean;
  status: string;
  detail?: Record<string, unknown>;
}

export interface ProbeServerOptions {
  host: string;
  /** 0 picks a free port. */
  port: number;
  registry: Registry;
  /** Readiness now; liveness is answering at all. Default: always ready. */
  ready?: () => Readiness;
  log: Logger;
}

export interface ProbeServer {
  /** `http://host:port` with the bound port (IPv6 hosts in brackets). */
  url: string;
  port: number;
  /** Stops listening and closes open connections. */
  close(): Promise<void>;
}

/** Starts the server; resolves once it listens (rejects when the port cannot be bound). */
export async function startProbeServer(o: ProbeServerOptions): Promise<ProbeServer> {
  const json = (res: import("node:http").ServerResponse, status: number, body: unknown) => res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(body));
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? "/").split("?")[0];
    if (req.method !== "GET") return json(res, 405, { error: { message: `${req.method} not allowed`, type: "invalid_request_error", param: null, code: "method_not_allowed" } });
    if (path === "/metrics") {
      o.registry.metrics().then(
        (text) => res.writeHead(200, { "content-type": o.registry.contentType }).end(text),
        (err: unknown) => {
          o.log.error("metrics failed", { err });
          res.writeHead(500).end();
        },
      );
      return;
    }
    if (path === "/livez") return json(res, 200, { status: "ok" });
    if (path === "/readyz" || path === "/healthz") {
      const r = o.ready?.() ?? { ready: true, status: "ok" };
      return json(res, r.ready ? 200 : 503, { status: r.status, ...r.detail });
    }
    json(res, 404, { error: { message: `no route ${req.method} ${path}`, type: "invalid_request_error", param: null, code: "not_found" } });
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(o.port, o.host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  const addr = server.address() as AddressInfo;
  const host = addr.family === "IPv6" ? `[${addr.address}]` : addr.address;
  return {
    url: `http://${host}:${addr.port}`,
    port: addr.port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
