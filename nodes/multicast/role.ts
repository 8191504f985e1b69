/**
 * Turns a validated plan into one node's role for the native executor (native/index.ts RoleSpec): peers by index
 * in a fixed order (every node derives the same order), the node's sends in order, per peer the blocks it will
 * receive from that peer in that peer's send order, and for step-ordered plans (binomial) pull mode with the
 * node's receives in step order.
 */
import type { RoleSpec } from "../../native/index.js";
import { DataPlaneError } from "../../native/errors.js";
import { planNodes, sendOrder, type MulticastPlan } from "./schedule.js";
import { checkAddresses } from "./validate.js";

/** Liveness settings passed to the executor (defaults: stall 1000 ms, connect 2000 ms, heartbeat 200 ms). */
export interface RoleTimeouts {
  stallMs?: number;
  connectMs?: number;
  heartbeatMs?: number;
}

/** The role of `node` in `plan`; throws DataPlaneError when the node is not in the plan or an address is missing. */
export function roleFor(
  plan: MulticastPlan,
  node: string,
  addresses: Record<string, { host: string; port: number } | undefined>,
  runId: number,
  timeouts: RoleTimeouts = {},
): RoleSpec {
  checkAddresses(plan, addresses);
  const nodes = planNodes(plan);
  const self = nodes.indexOf(node);
  if (self < 0) throw new DataPlaneError("invalid_plan", `node ${node} is not part of this plan`, { peer: node });
  const index = new Map(nodes.map((n, i) => [n, i]));
  const expect: number[][] = nodes.map(() => []);
  for (const n of nodes) for (const t of sendOrder(plan, n)) if (t.to === node) expect[index.get(n)!]!.push(t.block);
  return {
    runId,
    self,
    peers: nodes.map((id) => ({ id, host: addresses[id]!.host, port: addresses[id]!.port })),
    sends: sendOrder(plan, node).map((t) => ({ peer: index.get(t.to)!, block: t.block })),
    expect,
    sendMode: plan.sendMode ?? "in-order",
    // in-order plans run step by step: receivers pull one block at a time in step order (λScale §4.2)
    pull: (plan.sendMode ?? "in-order") === "in-order",
    recvOrder: plan.transfers
      .map((t, i) => ({ t, i }))
      .filter((x) => x.t.to === node)
      .sort((a, b) => a.t.step - b.t.step || a.i - b.i)
      .map((x) => ({ peer: index.get(x.t.from)!, block: x.t.block })),
    ...timeouts,
  };
}
