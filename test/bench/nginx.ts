/**
 * nginx (Debian's package) as two plain proxy hops in front of an OpenAI-compatible engine, for bench:router's
 * third arm: two nginx instances, one worker each (as tidegate's two hops are two single-threaded processes),
 * client → hop 1 → hop 2 → engine, HTTP/1.1 keep-alive upstreams, no buffering either way, no access log. Files
 * live in `dir`; `stop()` ends both.
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { freePort } from "../e2e/procs.js";

export interface NginxHops {
  url: string;
  /** Worker process ids (the processes that relay), hop 1 first. */
  workerPids: number[];
  version: string;
  stop(): Promise<void>;
}

/** The nginx binary: NGINX_BIN, else `nginx` on PATH or in /usr/sbin (Debian's package puts it there). */
export function nginxBinary(): string | undefined {
  for (const candidate of [process.env.NGINX_BIN, "nginx", "/usr/sbin/nginx"]) {
    if (candidate === undefined) continue;
    if (spawnSync(candidate, ["-v"], { stdio: "pipe" }).status === 0) return candidate;
  }
  return undefined;
}

function config(dir: string, name: string, listen: number, upstream: string): string {
  const tmp = join(dir, `${name}-tmp`);
  mkdirSync(tmp, { recursive: true });
  return `daemon off;
master_process on;
worker_processes 1;
pid ${join(dir, `${name}.pid`)};
error_log ${join(dir, `${name}.err`)} warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path ${tmp}/body;
  proxy_temp_path ${tmp}/proxy;
  fastcgi_temp_path ${tmp}/fastcgi;
  uwsgi_temp_path ${tmp}/uwsgi;
  scgi_temp_path ${tmp}/scgi;
  upstream next_hop { server ${upstream}; keepalive 128; }
  server {
    listen 127.0.0.1:${listen};
    location / {
      proxy_pass http://next_hop;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
      proxy_request_buffering off;
    }
  }
}
`;
}

async function waitListening(url: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      await fetch(url);
      return;
    } catch {
      if (Date.now() > deadline) throw new Error(`nginx at ${url} not answering after ${timeoutMs} ms`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }
}

function workerOf(master: number): number {
  const children = readFileSync(`/proc/${master}/task/${master}/children`, "utf8").trim().split(/\s+/).filter((s) => s.length > 0);
  if (children.length !== 1) throw new Error(`nginx master ${master} has ${children.length} workers, expected 1`);
  return Number(children[0]);
}

/** Starts the two hops in front of `engine` (host:port). */
export async function startNginxHops(bin: string, dir: string, engine: string): Promise<NginxHops> {
  const [p1, p2] = [await freePort(), await freePort()];
  const procs: ChildProcess[] = [];
  const hops = [
    { name: "nginx-hop2", listen: p2, upstream: engine },
    { name: "nginx-hop1", listen: p1, upstream: `127.0.0.1:${p2}` },
  ];
  for (const h of hops) {
    const file = join(dir, `${h.name}.conf`);
    writeFileSync(file, config(dir, h.name, h.listen, h.upstream));
    const child = spawn(bin, ["-c", file, "-p", dir, "-e", join(dir, `${h.name}.err`)], { stdio: "ignore" });
    procs.push(child);
    await waitListening(`http://127.0.0.1:${h.listen}/`, 10_000).catch((err: unknown) => {
      throw new Error(`${h.name}: ${(err as Error).message}; ${readFileSync(join(dir, `${h.name}.err`), "utf8").slice(-500)}`);
    });
  }
  // nginx -v writes "nginx version: nginx/1.22.1" to stderr.
  const version = spawnSync(bin, ["-v"], { encoding: "utf8" }).stderr.trim().replace(/^nginx version: /, "");
  return {
    url: `http://127.0.0.1:${p1}`,
    workerPids: [workerOf(procs[1]!.pid!), workerOf(procs[0]!.pid!)],
    version,
    stop: async () => {
      await Promise.all(procs.map((p) => new Promise<void>((resolve) => {
        if (p.exitCode !== null || p.signalCode !== null) return resolve();
        p.once("exit", () => resolve());
        p.kill("SIGQUIT");
      })));
    },
  };
}
