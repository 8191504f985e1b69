/**
 * The schedule format every multicast planner produces and the native executor runs (via roleFor in role.ts).
 * A plan is a list of block transfers. Each node sends its transfers in (step, list position) order, one at a
 * time, each as soon as its block is present there; each receiver gets a peer's blocks in that peer's order.
 * With `sendMode: "per-peer"` each peer's transfers keep that order but different peers are fed concurrently
 * (a BlitzScale source feeding several chains, a tree node feeding its children).
 * `step` is the planner's logical time: for λScale's binomial pipeline it is the synchronous step (§4.2, one block
 * per node per step); for BlitzScale chains it is depth + block (block i leaves depth-d node at step d + i).
 */

/** Which planner made a plan. */
export type MulticastAlgorithm = "chain" | "binomial" | "tree" | "unicast" | "ring";

/** One block moving from one node to another. */
export interface Transfer {
  from: string;
  to: string;
  /** Block index in [0, blockCount). */
  block: number;
  /** Logical step (see the file comment); orders a node's sends. */
  step: number;
  /** "nvlink" for BlitzScale's intra-group broadcast (§5.1 line 1); the executor here moves it over the network too. */
  medium?: "network" | "nvlink";
}

/** A λScale sub-group (§4.2): one source multicasting to `nodes` in its circularly shifted block order. */
export interface SubGroup {
  source: string;
  /** Destination nodes in the sub-group, in order (n_i^0, n_i^1, ...). */
  nodes: string[];
  /** Block transfer order O_i (Algorithm 1). */
  order: number[];
}

/** A complete schedule: geometry, who holds the model, who needs it, and every block transfer. */
export interface MulticastPlan {
  algorithm: MulticastAlgorithm;
  blockCount: number;
  /** Bytes per block; the last block holds totalBytes − (blockCount − 1) × blockBytes. */
  blockBytes: number;
  totalBytes: number;
  /** Nodes holding every block at the start. */
  sources: string[];
  /** Nodes that must hold every block at the end. */
  targets: string[];
  transfers: Transfer[];
  /** "in-order" (λScale binomial steps, the default) or "per-peer" (chains, trees, unicast, ring). */
  sendMode?: "in-order" | "per-peer";
  /** Number of logical steps (max step + 1). */
  steps: number;
  /** BlitzScale: the chains, each starting at a source. */
  chains?: string[][];
  /** λScale: sub-groups and execution pipelines (Algorithm 2). */
  subGroups?: SubGroup[];
  pipelines?: string[][];
}

/** The model geometry every planner takes. */
export interface ModelBlocks {
  totalBytes: number;
  blockCount: number;
}

/** Bytes per block for a model cut into blockCount blocks (8-byte aligned, as native BlockStore.forModel does). */
export function blockBytesFor(m: ModelBlocks): number {
  return Math.ceil(m.totalBytes / m.blockCount / 8) * 8;
}

/** The transfers `node` sends, in the order it sends them. */
export function sendOrder(plan: MulticastPlan, node: string): Transfer[] {
  return plan.transfers
    .map((t, i) => ({ t, i }))
    .filter((x) => x.t.from === node)
    .sort((a, b) => a.t.step - b.t.step || a.i - b.i)
    .map((x) => x.t);
}

/** Every node of the plan (sources first, then targets, each once). */
export function planNodes(plan: MulticastPlan): string[] {
  return [...new Set([...plan.sources, ...plan.targets])];
}

/** Finishes a plan: computes `steps` from the transfers. */
export function withSteps(p: Omit<MulticastPlan, "steps">): MulticastPlan {
  let max = -1;
  for (const t of p.transfers) max = Math.max(max, t.step);
  return { ...p, steps: max + 1 };
}
