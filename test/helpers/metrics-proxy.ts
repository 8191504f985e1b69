/**
 * A pass-through HTTP proxy in front of an engine (127.0.0.1 only) whose /metrics answers a test can take over: the
 * health tests make an engine's scrapes fail (test/deploy/health.test.ts) or never answer
 * (engines/openai-http/liveness-load.test.ts) while its completions pass through untouched.
 */
import { createServer, request, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";

export interface MetricsProxy {
  url: string;
  /** Stops listening and drops every connection: the next connect is refused. */
  close(): Promise<void>;
}

/**
 * Starts the proxy to `target`. `onMetrics` sees each /metrics request first: it returns true when it handled the
 * request itself (answered it, or left it unanswered on purpose), false to pass it through.
 */
export async function metricsProxy(target: string, onMetrics: (req: IncomingMessage, res: ServerResponse) => boolean): Promise<MetricsProxy> {
  const t = new URL(target);
  const sockets = new Set<Socket>();
  const server = createServer((req, res) => {
    if (req.url?.startsWith("/metrics") === true && onMetrics(req, res)) return;
    const up = request({ host: t.hostname, port: t.port, path: req.url, method: req.method, headers: req.headers }, (r) => {
      res.writeHead(r.statusCode ?? 502, r.headers);
      r.pipe(res);
    });
    up.on("error", () => res.destroy());
    res.on("close", () => up.destroy());
    req.pipe(up);
  });
  server.on("connection", (s) => {
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  let closed: Promise<void> | undefined;
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () =>
      (closed ??= new Promise<void>((r) => {
        server.close(() => r());
        for (const s of sockets) s.destroy();
      })),
  };
}
