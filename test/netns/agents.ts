/**
 * Starts `tidegate agent` processes (from dist/, as npm test and the bench build it), optionally inside a network
 * namespace, and returns a typed client for each. stop() ends every process it started (SIGTERM, then SIGKILL).
 */
import { spawn, type ChildProcess } from "node:child_process";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { repoRoot } from "../../core/paths.js";
import { AgentClient } from "../../nodes/agent/client.js";
import { planChains } from "../../nodes/multicast/blitzscale.js";

/** A started agent process: its client, gRPC address, data address and captured stderr lines. */
export interface RunningAgent {
  nodeId: string;
  proc: ChildProcess;
  client: AgentClient;
  grpc: string;
  data: { host: string; port: number };
  stderr: string[];
  /** The line it printed when ready (`tidegate agent <id>: grpc … data … transport … metrics …`). */
  readyLine: string;
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
  /** The compiled CLI to run (default: dist/bin/tidegate.js under the repository root; a copy of the build, say). */
  cli?: string;
}

/** Spawns an agent and waits for its ready line; kills it if it is not ready in time. */
export async function spawnAgent(s: AgentSpawn): Promise<RunningAgent> {
  const readyMs = s.readyMs ?? 60_000;
  const cli = s.cli ?? join(repoRoot(), "dist", "bin", "tidegate.js");
  // TIDEGATE_NODE_FLAGS_AGENT: node flags for every agent (e.g. --cpu-prof --cpu-prof-dir=DIR to profile them).
  const flags = (process.env.TIDEGATE_NODE_FLAGS_AGENT ?? "").split(" ").filter((f) => f.length > 0);
  const args = [...flags, cli, "agent", "--node-id", s.nodeId, "--data-host", s.host, "--grpc-host", s.host, "--transport", s.transport ?? "tcp", "--log-level", "warn", ...(s.extraArgs ?? [])];
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
  return { nodeId: s.nodeId, proc, client: new AgentClient(m[1]!, s.nodeId), grpc: m[1]!, data: { host: m[2]!, port: Number(m[3]) }, stderr, readyLine: line };
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

/** How one node's run ended and when (performance.now()). */
export interface RunEnd {
  err: Error | undefined;
  at: number;
}

/** One try of the killed-peer scenario; `late` when the kill landed after the source and the tail had both finished. */
interface KillTry {
  killedAt: number;
  /** How late a 1 s timer started at the kill fired in this process: the machine's own scheduling delay meanwhile. */
  timerLateMs: number;
  source: RunEnd;
  tail: RunEnd;
  late: boolean;
}

/**
 * The killed-peer scenario both transports' suites run: three new agents k0 → k1 → k2 move a chain of `totalBytes`
 * in `blockCount` blocks; k1 is SIGKILLed when k2 reports block 1. Returns when it was killed and how the source
 * and the tail ended; the three agents are stopped before it returns.
 *
 * The kill is sent from this process when k2's arrival of block 1 reaches it over gRPC. On a busy machine that event
 * can be handled after the whole chain has already moved (192 MiB on loopback takes ~0.2 s), so the peer was not
 * killed mid-transfer at all and nothing could fail. That try does not test the promise, so it is run again on three
 * new agents (up to `tries`, default 3); `tries` in the result says how many it took.
 */
export async function killRelayMidTransfer(o: { totalBytes: number; blockCount: number; runId: number; transport?: "tcp" | "verbs"; readyMs?: number; tries?: number }): Promise<{ killedAt: number; timerLateMs: number; source: RunEnd; tail: RunEnd; tries: number }> {
  const tries = o.tries ?? 3;
  for (let i = 1; ; i++) {
    const t = await killRelayOnce({ ...o, runId: o.runId * 100 + i });
    if (!t.late || i >= tries) return { killedAt: t.killedAt, timerLateMs: t.timerLateMs, source: t.source, tail: t.tail, tries: i };
  }
}

async function killRelayOnce(o: { totalBytes: number; blockCount: number; runId: number; transport?: "tcp" | "verbs"; readyMs?: number }): Promise<KillTry> {
  const nodes = await spawnAll(["k0", "k1", "k2"].map((nodeId) => ({ nodeId, host: "127.0.0.1", ...(o.transport === undefined ? {} : { transport: o.transport }), ...(o.readyMs === undefined ? {} : { readyMs: o.readyMs }) })));
  try {
    const plan = planChains({ model: { totalBytes: o.totalBytes, blockCount: o.blockCount }, sources: [{ id: "k0", outBytesPerS: 1 }], targets: ["k1", "k2"].map((id) => ({ id, inBytesPerS: 1 })) });
    const addresses = Object.fromEntries(nodes.map((a) => [a.nodeId, a.data]));
    let killedAt = 0;
    let timerLate: Promise<number> = Promise.resolve(0);
    await Promise.all(nodes.map((a) => a.client.load({ model: "big", totalBytes: plan.totalBytes, blockCount: plan.blockCount, fill: a.nodeId === "k0" ? "pattern" : "empty", seed: 1 })));
    const runs = nodes.map((a) =>
      a.client
        .run({ model: "big", plan, runId: o.runId, addresses }, (arr) => {
          if (a.nodeId === "k2" && arr.block === 1 && killedAt === 0) {
            killedAt = performance.now();
            nodes[1]!.proc.kill("SIGKILL");
            timerLate = new Promise((r) => setTimeout(() => r(performance.now() - killedAt - 1000), 1000));
          }
        })
        .then(
          (): RunEnd => ({ err: undefined, at: performance.now() }),
          (e: unknown): RunEnd => ({ err: e as Error, at: performance.now() }),
        ),
    );
    const [source, , tail] = await Promise.all(runs);
    return { killedAt, timerLateMs: await timerLate, source: source!, tail: tail!, late: source!.err === undefined && tail!.err === undefined };
  } finally {
    await stopAgents(nodes);
  }
}
