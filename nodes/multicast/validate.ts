/**
 * Plan validation: every way a plan can be wrong is a DataPlaneError before any byte moves. Checks, in order:
 * zero blocks and block geometry; a node listed twice; a block or model over a node's memory (reason over_memory);
 * transfers naming unknown nodes or blocks; a block reaching a node twice or reaching a source; a cycle in a block's
 * transfer graph; a send order that deadlocks (a node waits to forward a block that only arrives after it); a target
 * that never receives a block. Unreachable peers are caught by checkAddresses here and by the executor's dial phase.
 */
import { DataPlaneError } from "../../native/errors.js";
import { planNodes, sendOrder, type MulticastPlan, type Transfer } from "./schedule.js";

/** What validation knows about a node. */
export interface NodeCapacity {
  id: string;
  /** Host memory available for the model's blocks. */
  memoryBytes: number;
}

function invalid(message: string, details: { peer?: string; block?: number } = {}): DataPlaneError {
  return new DataPlaneError("invalid_plan", message, details);
}

function checkGeometry(plan: MulticastPlan): void {
  const { blockCount: b, blockBytes, totalBytes } = plan;
  if (!Number.isInteger(b) || b < 1) throw invalid(`the plan has ${String(b)} blocks; a model needs at least one block`);
  if (!Number.isInteger(blockBytes) || blockBytes < 1) throw invalid(`blockBytes must be a positive integer, got ${String(blockBytes)}`);
  if (!Number.isInteger(totalBytes) || totalBytes > b * blockBytes || totalBytes <= (b - 1) * blockBytes)
    throw invalid(`totalBytes ${String(totalBytes)} does not fill ${b} blocks of ${blockBytes} bytes`);
}

function checkDuplicates(plan: MulticastPlan): void {
  const seen = new Set<string>();
  for (const n of [...plan.sources, ...plan.targets]) {
    if (typeof n !== "string" || n === "") throw invalid(`node ids must be non-empty strings, got ${JSON.stringify(n)}`);
    if (seen.has(n)) throw invalid(`node ${n} is listed twice in the plan`, { peer: n });
    seen.add(n);
  }
  if (plan.sources.length === 0) throw invalid("the plan has no source");
}

function checkMemory(plan: MulticastPlan, capacity: NodeCapacity[]): void {
  const byId = new Map(capacity.map((c) => [c.id, c.memoryBytes]));
  for (const n of planNodes(plan)) {
    const mem = byId.get(n);
    if (mem === undefined) continue;
    if (plan.blockBytes > mem)
      throw new DataPlaneError("over_memory", `node ${n}: a block of ${plan.blockBytes} bytes is over its memory of ${mem} bytes`, { peer: n });
    if (plan.totalBytes > mem)
      throw new DataPlaneError("over_memory", `node ${n}: ${plan.blockCount} blocks of ${plan.blockBytes} bytes (${plan.totalBytes} in all) are over its memory of ${mem} bytes`, { peer: n });
  }
}

function checkTransfers(plan: MulticastPlan): void {
  const nodes = new Set(planNodes(plan));
  plan.transfers.forEach((t: Transfer, i) => {
    if (!nodes.has(t.from)) throw invalid(`transfers[${i}]: sender ${t.from} is not in the plan`, { peer: t.from });
    if (!nodes.has(t.to)) throw invalid(`transfers[${i}]: receiver ${t.to} is not in the plan`, { peer: t.to });
    if (t.from === t.to) throw invalid(`transfers[${i}]: ${t.from} sends to itself`, { peer: t.from });
    if (!Number.isInteger(t.block) || t.block < 0 || t.block >= plan.blockCount)
      throw invalid(`transfers[${i}]: block ${String(t.block)} is not in [0, ${plan.blockCount})`, { block: t.block });
    if (!Number.isInteger(t.step) || t.step < 0) throw invalid(`transfers[${i}]: step must be a non-negative integer`);
  });
}

// Per block: each node receives it at most once, never at a source, and the edges form no cycle.
function checkBlockGraphs(plan: MulticastPlan): void {
  const sources = new Set(plan.sources);
  const edges = new Map<number, Map<string, string>>(); // block → (to → from)
  for (const t of plan.transfers) {
    if (sources.has(t.to)) throw invalid(`block ${t.block} is sent to ${t.to}, which is a source and already holds it`, { peer: t.to, block: t.block });
    let m = edges.get(t.block);
    if (m === undefined) edges.set(t.block, (m = new Map()));
    const prev = m.get(t.to);
    if (prev !== undefined) throw invalid(`block ${t.block} reaches node ${t.to} twice (from ${prev} and from ${t.from})`, { peer: t.to, block: t.block });
    m.set(t.to, t.from);
  }
  for (const [block, parent] of edges) {
    for (const start of parent.keys()) {
      const path = [start];
      let cur = parent.get(start);
      while (cur !== undefined && !sources.has(cur)) {
        const at = path.indexOf(cur);
        if (at >= 0) throw invalid(`cycle in block ${block}: ${[...path.slice(at), cur].reverse().join(" → ")}`, { peer: cur, block });
        path.push(cur);
        cur = parent.get(cur);
      }
    }
  }
}

// Runs the send orders as the executor would: one queue per node ("in-order") or per node and peer ("per-peer");
// a queue's head waits until its block is present at the sender.
function checkProgress(plan: MulticastPlan): void {
  const nodes = planNodes(plan);
  const has = new Map(nodes.map((n) => [n, new Set<number>()]));
  for (const s of plan.sources) for (let b = 0; b < plan.blockCount; b++) has.get(s)!.add(b);
  const queues: { node: string; q: Transfer[]; pos: number }[] = [];
  for (const n of nodes) {
    const order = sendOrder(plan, n);
    if (plan.sendMode === "per-peer") for (const to of new Set(order.map((t) => t.to))) queues.push({ node: n, q: order.filter((t) => t.to === to), pos: 0 });
    else queues.push({ node: n, q: order, pos: 0 });
  }
  for (let progress = true; progress; ) {
    progress = false;
    for (const x of queues)
      while (x.pos < x.q.length && has.get(x.node)!.has(x.q[x.pos]!.block)) {
        has.get(x.q[x.pos]!.to)!.add(x.q[x.pos]!.block);
        x.pos++;
        progress = true;
      }
  }
  for (const x of queues)
    if (x.pos < x.q.length) {
      const t = x.q[x.pos]!;
      throw invalid(`deadlock: node ${x.node} must forward block ${t.block} to ${t.to} before anything else, but block ${t.block} never reaches ${x.node} first`, { peer: x.node, block: t.block });
    }
  for (const n of plan.targets)
    for (let b = 0; b < plan.blockCount; b++)
      if (!has.get(n)!.has(b)) throw invalid(`target ${n} never receives block ${b}`, { peer: n, block: b });
}

/**
 * Throws DataPlaneError (invalid_plan or over_memory) naming the node and block at fault, or returns the plan.
 * `capacity` lists node memory; nodes not listed are not memory-checked.
 */
export function validatePlan(plan: MulticastPlan, capacity: NodeCapacity[] = []): MulticastPlan {
  checkGeometry(plan);
  checkDuplicates(plan);
  checkMemory(plan, capacity);
  checkTransfers(plan);
  checkBlockGraphs(plan);
  checkProgress(plan);
  return plan;
}

/** Throws DataPlaneError peer_unreachable for any plan node without a usable host:port. */
export function checkAddresses(plan: MulticastPlan, addresses: Record<string, { host: string; port: number } | undefined>): void {
  for (const n of planNodes(plan)) {
    const a = addresses[n];
    if (a === undefined || typeof a.host !== "string" || a.host === "" || !Number.isInteger(a.port) || a.port < 1 || a.port > 65535)
      throw new DataPlaneError("peer_unreachable", `node ${n} has no data-plane address (host:port), so it cannot be reached`, { peer: n });
  }
}
