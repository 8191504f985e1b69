/**
 * Test harness: runs every node of a multicast plan inside this process, one native Endpoint (own thread, own port
 * on 127.0.0.1) and one BlockStore per node, sources filled with a seeded pattern.
 */
import { BlockStore, Endpoint, type RunResult, type TransportPreference } from "../../native/index.js";
import { planNodes, type MulticastPlan } from "../../nodes/multicast/schedule.js";
import { roleFor, type RoleTimeouts } from "../../nodes/multicast/role.js";

/**
 * The role timeouts of the cases whose subject is bytes and failures, not the stall timer. The transport's defaults
 * (a peer silent for 1 s has failed, a heartbeat every 200 ms) are what a region runs; on a machine whose two cores
 * are busy with other work, and above all inside the soft-RoCE VM on emulated CPUs, a healthy peer's heartbeat can
 * come more than 1 s late, and the case then failed on a reset its peer sent after giving up ("peer s … failed:
 * Connection reset by peer", two CI runs of 2026-11-26). The cases that test the stall timer keep the defaults.
 * (Agents take stallMs and connectMs per run; their heartbeat stays at 200 ms, well inside 10 s.)
 */
export const NOT_ABOUT_TIMING: RoleTimeouts = { stallMs: 10_000, heartbeatMs: 500, connectMs: 10_000 };

/** Per-node stores and endpoints of one in-process cluster; close() frees them. */
export interface LocalCluster {
  nodes: string[];
  stores: Map<string, BlockStore>;
  endpoints: Map<string, Endpoint>;
  close(): void;
}

/** Endpoints and stores for every node of `plan`; sources hold the pattern of `seed`. */
export function localCluster(plan: MulticastPlan, seed: number, transport: TransportPreference = "tcp"): LocalCluster {
  const nodes = planNodes(plan);
  const stores = new Map<string, BlockStore>();
  const endpoints = new Map<string, Endpoint>();
  for (const n of nodes) {
    const s = BlockStore.create({ blockCount: plan.blockCount, blockBytes: plan.blockBytes, totalBytes: plan.totalBytes });
    if (plan.sources.includes(n)) s.fillPattern(seed);
    stores.set(n, s);
    endpoints.set(n, Endpoint.open({ host: "127.0.0.1", transport, log: () => undefined }));
  }
  return {
    nodes,
    stores,
    endpoints,
    close() {
      for (const e of endpoints.values()) if (!e.running && !e.closed) e.close();
      for (const s of stores.values()) if (!s.closed) s.close();
    },
  };
}

/** Runs every node's role; resolves to each node's outcome (a RunResult or the error it failed with). */
export async function runAll(
  c: LocalCluster,
  plan: MulticastPlan,
  runId: number,
  timeouts: RoleTimeouts = {},
  only?: string[],
): Promise<Map<string, RunResult | Error>> {
  const addrs = Object.fromEntries(c.nodes.map((n) => [n, { host: "127.0.0.1", port: c.endpoints.get(n)!.port }]));
  const out = new Map<string, RunResult | Error>();
  await Promise.all(
    (only ?? c.nodes).map(async (n) => {
      try {
        out.set(n, await c.endpoints.get(n)!.run(roleFor(plan, n, addrs, runId, timeouts), c.stores.get(n)!));
      } catch (e) {
        out.set(n, e as Error);
      }
    }),
  );
  return out;
}
