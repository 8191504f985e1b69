/**
 * Starts `tidegate agent` processes (from dist/, as npm test and the bench build it), optionally inside a network
 * namespace, and returns a typed client for each. stop() ends every process it started (SIGTERM, then SIGKILL).
 */
import { spawn, type ChildProcess } from "node:child_process";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { repoRoot } from "../../native/lib/addon.js";
import { AgentClient } from "../../region/agent/client.js";

/** A started agent process: its client, gRPC address, data address and captured stderr lines. */
export interface RunningAgent {
  nodeId: string;
  proc: ChildProcess;
  client: AgentClient;
  grpc: string;
  data: { host: string; port: number };
  stderr: string[];
}

/** How to start one agent. */
export interface AgentSpawn {
  nodeId: string;
  /** Run inside this namespace (ip netns exec). */
  ns?: string;
  /** Data and gRPC bind address (the node's IP in its namespace, or 127.0.0.1). */
  host: string;
  stallMs?: number;
  /** How long to wait for the ready line (default 60 s; a loaded 2-core box starts 8 agents slowly). */
  readyMs?: number;
  /** More flags for `tidegate agent` (e.g. --gpu-slots 4 --region-address host:port). */
  extraArgs?: string[];
  /** --transport (default tcp). */
  transport?: "tcp" | "verbs" | "auto";
  /** Extra environment (e.g. TIDEGATE_VERBS_FAULT for a misbehaving node in the verbs suite). */
  env?: Record<string, string>;
}

/** Spawns an agent and waits for its ready line; kills it if it is not ready in time. */
export async function spawnAgent(s: AgentSpawn): Promise<RunningAgent> {
  const readyMs = s.readyMs ?? 60_000;
  const cli = join(repoRoot(), "dist", "bin", "tidegate.js");
  const args = [cli, "agent", "--node-id", s.nodeId, "--data-host", s.host, "--grpc-host", s.host, "--transport", s.transport ?? "tcp", "--log-level", "warn", ...(s.extraArgs ?? [])];
  const opts = { stdio: ["ignore", "pipe", "pipe"] as ["ignore", "pipe", "pipe"], env: { ...process.env, ...(s.env ?? {}) } };
  const proc = s.ns === undefined ? spawn(process.execPath, args, opts) : spawn("ip", ["netns", "exec", s.ns, process.execPath, ...args], opts);
  const stderr: string[] = [];
  createInterface({ input: proc.stderr! }).on("line", (l) => stderr.push(l));
  const line = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => {
      proc.kill("SIGKILL");
      reject(new Error(`agent ${s.nodeId} not ready in ${readyMs} ms: ${stderr.join("\n")}`));
    }, readyMs);
    createInterface({ input: proc.stdout! }).once("line", (l) => {
      clearTimeout(timer);
      resolve(l);
    });
    proc.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`agent ${s.nodeId} exited with ${code}: ${stderr.join("\n")}`));
    });
  });
  const m = /grpc (\S+) data (\S+):(\d+) transport/.exec(line);
  if (m === null) throw new Error(`unexpected agent ready line: ${line}`);
  return { nodeId: s.nodeId, proc, client: new AgentClient(m[1]!, s.nodeId), grpc: m[1]!, data: { host: m[2]!, port: Number(m[3]) }, stderr };
}

/** Stops agents: SIGTERM, SIGKILL after 3 s. */
export async function stopAgents(agents: RunningAgent[]): Promise<void> {
  await Promise.all(
    agents.map(async (a) => {
      a.client.close();
      if (a.proc.exitCode !== null || a.proc.signalCode !== null) return;
      const exited = new Promise<void>((resolve) => a.proc.once("exit", () => resolve()));
      a.proc.kill("SIGTERM");
      const t = setTimeout(() => a.proc.kill("SIGKILL"), 3000);
      await exited;
      clearTimeout(t);
    }),
  );
}

/** Spawns every agent; if one fails, stops the ones that started and rethrows. */
export async function spawnAll(specs: AgentSpawn[]): Promise<RunningAgent[]> {
  const settled = await Promise.allSettled(specs.map((s) => spawnAgent(s)));
  const ok = settled.flatMap((r) => (r.status === "fulfilled" ? [r.value] : []));
  const failed = settled.find((r): r is PromiseRejectedResult => r.status === "rejected");
  if (failed !== undefined) {
    await stopAgents(ok);
    throw failed.reason;
  }
  return ok;
}
