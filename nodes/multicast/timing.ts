/**
 * When each block of a multicast plan lands at each node on links that all run at one rate, with each node's link
 * carrying one block at a time each way (store-and-forward, as nodes/multicast/ideal.ts assumes): a transfer
 * starts no earlier than its plan step (step·blockMs), once its sender holds the block and both the sender's
 * outbound and the receiver's inbound link are free, and takes `blockMs`. Each node sends in its plan order (schedule.ts sendOrder). For λScale's binomial plans and
 * BlitzScale's chains — at most one block per node per step each way — this is the synchronous step model
 * (liveload/lambda.ts arrivalTimes: step s lands at (s + 1)·blockMs); for FaaSNet's binary tree it charges an
 * internal node's uplink for both children (≈ 2·M/B, λScale §7.2 Fig. 7), which the step model would not. The
 * virtual-time loading replays use it for λScale's baselines (liveload/sources.ts `faasnet-tree`, `nccl-ring`).
 */
import { sendOrder, type MulticastPlan, type Transfer } from "./schedule.js";

/** arrival[node][block] in ms from the start (sources 0; Infinity: never) under the link model above. */
export function linkArrivalTimes(plan: MulticastPlan, blockMs: number): Map<string, number[]> {
  if (!(blockMs > 0)) throw new RangeError(`blockMs must be > 0, got ${blockMs}`);
  const nodes = [...new Set([...plan.sources, ...plan.targets, ...plan.transfers.flatMap((t) => [t.from, t.to])])];
  const at = new Map<string, number[]>(nodes.map((n) => [n, new Array<number>(plan.blockCount).fill(plan.sources.includes(n) ? 0 : Infinity)]));
  const queues = new Map<string, Transfer[]>(nodes.map((n) => [n, sendOrder(plan, n)]));
  const outFree = new Map<string, number>(nodes.map((n) => [n, 0]));
  const inFree = new Map<string, number>(nodes.map((n) => [n, 0]));
  let left = plan.transfers.length;
  // Each round starts, of every node's next transfer whose block its sender holds, the one that can start first
  // (ties: plan order), so that links are taken in time order.
  while (left > 0) {
    let best: { node: string; t: Transfer; start: number } | undefined;
    for (const [node, q] of queues) {
      const t = q[0];
      if (t === undefined) continue;
      const has = at.get(node)![t.block]!;
      if (has === Infinity) continue;
      const start = Math.max(has, outFree.get(node)!, inFree.get(t.to)!, t.step * blockMs);
      if (best === undefined || start < best.start) best = { node, t, start };
    }
    if (best === undefined) throw new RangeError("the plan sends a block its sender never receives");
    queues.get(best.node)!.shift();
    left--;
    const end = best.start + blockMs;
    outFree.set(best.node, end);
    inFree.set(best.t.to, end);
    const row = at.get(best.t.to)!;
    row[best.t.block] = Math.min(row[best.t.block]!, end);
  }
  return at;
}
