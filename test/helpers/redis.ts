/**
 * Redis for tests: `REDIS_URL` when set, otherwise a private `redis-server` on a free port that this helper starts
 * and stops. Every test takes its own key prefix (`testPrefix()`), and `cleanup(prefix)` deletes its keys.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { createServer } from "node:net";
import { randomBytes } from "node:crypto";
import { Redis, type RedisOptions } from "ioredis";

export interface TestRedis {
  url: string;
  stop(): Promise<void>;
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const addr = srv.address();
      const port = typeof addr === "object" && addr !== null ? addr.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

/** Starts (or reuses, via REDIS_URL) a Redis and waits until it answers PING. */
export async function startTestRedis(): Promise<TestRedis> {
  const fromEnv = process.env.REDIS_URL;
  if (fromEnv) return { url: fromEnv, stop: async () => {} };
  const server = await spawnRedisServer({ args: ["--save", "", "--appendonly", "no"] });
  return { url: server.url, stop: server.stop };
}

export interface RedisServer {
  url: string;
  port: number;
  /** SIGKILL (no shutdown save); resolves once it exited. */
  kill(): Promise<void>;
  /** SIGTERM; resolves once it exited. */
  stop(): Promise<void>;
}

export interface RedisServerOptions {
  /** Port to listen on; a free one when absent (a restart passes the old one). */
  port?: number;
  /** More redis-server arguments (persistence, ACL users, TLS). */
  args?: string[];
  /** The URL clients use; default `redis://127.0.0.1:<port>`. */
  url?: (port: number) => string;
  /** ioredis options the readiness probe needs (TLS, say); user and password go in `url`. */
  client?: RedisOptions;
  /** Waits this long for PING (default 10 s). */
  timeoutMs?: number;
  /** Listen with TLS only (`--tls-port`; the TLS files go in `args`). */
  tls?: boolean;
}

/** Starts a private redis-server and waits until it answers PING (tests that kill or configure their own Redis). */
export async function spawnRedisServer(o: RedisServerOptions = {}): Promise<RedisServer> {
  const port = o.port ?? (await freePort());
  const child: ChildProcess = spawn("redis-server", [...(o.tls === true ? ["--port", "0", "--tls-port", String(port)] : ["--port", String(port)]), "--bind", "127.0.0.1", ...(o.args ?? [])], { stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  const keep = (d: Buffer) => void (out = (out + d.toString()).slice(-8192));
  child.stdout!.on("data", keep);
  child.stderr!.on("data", keep);
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const url = o.url?.(port) ?? `redis://127.0.0.1:${port}`;
  const deadline = Date.now() + (o.timeoutMs ?? 10_000);
  for (;;) {
    const probe = new Redis(url, { ...o.client, lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
    probe.on("error", () => {});
    try {
      await probe.connect();
      await probe.ping();
      probe.disconnect();
      break;
    } catch (err) {
      probe.disconnect();
      if (Date.now() > deadline || child.exitCode !== null) {
        child.kill("SIGKILL");
        throw new Error(`redis-server on port ${port} did not answer PING: ${(err as Error).message}\n${out}`);
      }
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  const signal = async (sig: NodeJS.Signals) => {
    if (child.exitCode === null && child.signalCode === null) child.kill(sig);
    await exited;
  };
  return { url, port, kill: () => signal("SIGKILL"), stop: () => signal("SIGTERM") };
}

/** A fresh key prefix for one test. */
export function testPrefix(name: string): string {
  return `tidegate-test:${name}:${randomBytes(4).toString("hex")}:`;
}

/** Deletes every key under `prefix`. */
export async function cleanupPrefix(url: string, prefix: string): Promise<void> {
  const r = new Redis(url);
  try {
    let cursor = "0";
    do {
      const [next, keys] = await r.scan(cursor, "MATCH", `${prefix}*`, "COUNT", 1000);
      cursor = next;
      if (keys.length > 0) await r.del(...keys);
    } while (cursor !== "0");
  } finally {
    r.disconnect();
  }
}
