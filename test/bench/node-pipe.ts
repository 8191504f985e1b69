/**
 * The cheapest hop Node can be, for bench:router's floor arm: a TCP relay that copies bytes both ways and
 * understands nothing (no HTTP parsing, no SSE, no framing). Each client connection gets its own upstream
 * connection, opened when the client connects and closed with it, so a keep-alive client keeps one upstream socket,
 * as nginx's `keepalive` does. Whatever tidegate's hops do beyond moving bytes (parse a request, route it, re-frame
 * every event) costs on top of what this costs: its CPU per relayed token is the floor of a hop written in Node
 * on this machine, measured beside the other arms in the same run.
 *
 * Run as a process: `node node-pipe.js --listen <port> --upstream <host:port>`; prints `node-pipe: listening on
 * http://127.0.0.1:<port>` once bound and stops on SIGTERM. As a module: `startNodePipeHops` starts two in front of
 * an engine (client → hop 1 → hop 2 → engine), like `startNginxHops`.
 */
import { createConnection, createServer, type Socket } from "node:net";
import { fileURLToPath } from "node:url";
import { freePort, spawnScript, type Proc } from "../e2e/procs.js";

const HERE = fileURLToPath(import.meta.url);

/** Relays every connection to `upstream` until the server closes. Resolves once listening. */
export function servePipe(listen: number, upstream: { host: string; port: number }): Promise<{ close(): void }> {
  const sockets = new Set<Socket>();
  const server = createServer({ noDelay: true }, (client) => {
    const up = createConnection({ host: upstream.host, port: upstream.port, noDelay: true });
    sockets.add(client);
    sockets.add(up);
    const end = () => {
      client.destroy();
      up.destroy();
      sockets.delete(client);
      sockets.delete(up);
    };
    client.on("error", end).on("close", end);
    up.on("error", end).on("close", end);
    client.pipe(up);
    up.pipe(client);
  });
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(listen, "127.0.0.1", () =>
      resolve({
        close: () => {
          server.close();
          for (const s of sockets) s.destroy();
        },
      }),
    );
  });
}

export interface NodePipeHops {
  url: string;
  /** Process ids, hop 1 first. */
  pids: number[];
  procs: Proc[];
}

/** Starts two pipe processes in front of `engine` (host:port): client → hop 1 → hop 2 → engine. */
export async function startNodePipeHops(engine: string): Promise<NodePipeHops> {
  const [p1, p2] = [await freePort(), await freePort()];
  const hop2 = await spawnScript("node-pipe", HERE, ["--listen", String(p2), "--upstream", engine], /node-pipe: listening/, 10_000);
  const hop1 = await spawnScript("node-pipe", HERE, ["--listen", String(p1), "--upstream", `127.0.0.1:${p2}`], /node-pipe: listening/, 10_000);
  return { url: `http://127.0.0.1:${p1}`, pids: [hop1.child.pid!, hop2.child.pid!], procs: [hop1, hop2] };
}

function parseArgs(argv: string[]): { listen: number; upstream: { host: string; port: number } } {
  const usage = "usage: node node-pipe.js --listen <port> --upstream <host:port>";
  let listen: number | undefined;
  let upstream: { host: string; port: number } | undefined;
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i];
    const value = argv[++i];
    if (value === undefined) throw new Error(`${flag}: missing value; ${usage}`);
    if (flag === "--listen") listen = Number(value);
    else if (flag === "--upstream") {
      const at = value.lastIndexOf(":");
      upstream = { host: value.slice(0, at), port: Number(value.slice(at + 1)) };
    } else throw new Error(`unknown flag ${flag}; ${usage}`);
  }
  if (listen === undefined || !Number.isInteger(listen) || listen < 0 || listen > 65535) throw new Error(`--listen: a port is required; ${usage}`);
  if (upstream === undefined || upstream.host === "" || !Number.isInteger(upstream.port) || upstream.port <= 0) throw new Error(`--upstream: host:port is required; ${usage}`);
  return { listen, upstream };
}

if (process.argv[1] === HERE) {
  try {
    const { listen, upstream } = parseArgs(process.argv.slice(2));
    const pipe = await servePipe(listen, upstream);
    console.log(`node-pipe: listening on http://127.0.0.1:${listen} → ${upstream.host}:${upstream.port}`);
    process.once("SIGTERM", () => {
      pipe.close();
      process.exit(0);
    });
  } catch (err) {
    console.error(`node-pipe: ${(err as Error).message}`);
    process.exit(2);
  }
}
