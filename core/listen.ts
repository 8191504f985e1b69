/**
 * Listen addresses a process cannot have, said in one line before it starts anything: `ensurePortFree` binds the
 * address for a moment (a command calls it first, so `tidegate dev --port P` with P taken exits at once, not after
 * starting its fleet), and `listenError` turns the same failure at the real listen (another process took the port in
 * between) into the same typed error. The CLI prints a TidegateError as `tidegate: <message>` and exits 2.
 */
import { createServer } from "node:net";
import { TidegateError } from "./errors.js";

/**
 * `err` as a TidegateError ("conflict") naming `host:port` and what set it (`setBy`, e.g. "--port / router.port")
 * when it is EADDRINUSE or EACCES; any other error unchanged.
 */
export function listenError(err: unknown, host: string, port: number, setBy?: string): unknown {
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  if (code !== "EADDRINUSE" && code !== "EACCES") return err;
  const where = `${host.includes(":") ? `[${host}]` : host}:${port}${setBy === undefined ? "" : ` (${setBy})`}`;
  const why = code === "EADDRINUSE" ? "is already in use: stop what listens there, or pick another port (0 picks a free one)" : "may not be bound by this user (ports below 1024 need privileges): pick another port";
  return new TidegateError("conflict", `${where} ${why}`, { cause: err });
}

/**
 * Resolves when `host:port` can be listened on (it binds and closes it); port 0 always can. Rejects with
 * `listenError`'s TidegateError when it cannot, or with the bind error itself for anything else (an unknown host).
 */
export function ensurePortFree(host: string, port: number, setBy?: string): Promise<void> {
  if (port === 0) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once("error", (err) => reject(listenError(err, host, port, setBy)));
    probe.listen({ port, host, exclusive: true }, () => probe.close(() => resolve()));
  });
}
