/**
 * Baseline multicast plans for comparison (λScale §7.1–7.2): naive unicast, where the source sends the whole model to
 * every target itself (≈ (N−1)·M/B on its one link); FaaSNet's binary tree (λScale [46], its default topology), where
 * every node forwards each block to two children (each internal node's uplink carries every block twice); and NCCL's
 * ring broadcast (λScale [15], §7.1: "we adapt its broadcast primitive by dynamically forming process groups"), the
 * model pipelined block by block around the ring in rank order, source first. NCCL must first create the group
 * (ncclCommInitRank: bootstrap and ring connections, "up to hundreds of milliseconds", λScale §7.2 and Fig. 8);
 * `planRingBootstrap` is that set-up as this data plane can run it (fresh connections along the ring and one small
 * message passed rank to rank), which a bench runs and times before the broadcast.
 */
import { blockBytesFor, withSteps, type ModelBlocks, type MulticastPlan, type Transfer } from "./schedule.js";

/** A model, one source holding it, and the targets that need it. */
export interface SingleSourceInput {
  model: ModelBlocks;
  source: string;
  targets: string[];
}

/** The source sends every block to every target, block by block (all targets finish together). */
export function planUnicast(input: SingleSourceInput): MulticastPlan {
  const transfers: Transfer[] = [];
  for (let i = 0; i < input.model.blockCount; i++)
    for (const t of input.targets) transfers.push({ from: input.source, to: t, block: i, step: i, medium: "network" });
  return withSteps({ algorithm: "unicast", ...geometry(input.model), sources: [input.source], targets: [...input.targets], transfers, sendMode: "per-peer" });
}

/** FaaSNet binary tree in breadth-first order: node i's parent is ⌊(i−1)/2⌋; blocks flow down block by block. */
export function planBinaryTree(input: SingleSourceInput): MulticastPlan {
  const nodes = [input.source, ...input.targets];
  const depth = (i: number): number => Math.floor(Math.log2(i + 1));
  const transfers: Transfer[] = [];
  for (let i = 0; i < input.model.blockCount; i++)
    for (let c = 1; c < nodes.length; c++) {
      const p = Math.floor((c - 1) / 2);
      transfers.push({ from: nodes[p]!, to: nodes[c]!, block: i, step: depth(p) + i, medium: "network" });
    }
  return withSteps({ algorithm: "tree", ...geometry(input.model), sources: [input.source], targets: [...input.targets], transfers, sendMode: "per-peer" });
}

/**
 * NCCL-style ring broadcast: ranks are the source then the targets in the given order; block i leaves rank r for rank
 * r + 1 at step r + i (NCCL pipelines chunks along the ring; the ring's last link, back to the source, carries nothing
 * in a broadcast). On equal links its time is the chain's, M/B + (N − 2)·(M/b)/B.
 */
export function planRingBroadcast(input: SingleSourceInput): MulticastPlan {
  const ranks = [input.source, ...input.targets];
  const transfers: Transfer[] = [];
  for (let i = 0; i < input.model.blockCount; i++)
    for (let r = 0; r + 1 < ranks.length; r++) transfers.push({ from: ranks[r]!, to: ranks[r + 1]!, block: i, step: r + i, medium: "network" });
  return withSteps({ algorithm: "ring", ...geometry(input.model), sources: [input.source], targets: [...input.targets], transfers, sendMode: "per-peer", chains: [ranks] });
}

/** Bytes each rank adds to NCCL's bootstrap exchange (its ncclUniqueId-addressed peer info; an order of magnitude). */
export const RING_BOOTSTRAP_BYTES = 4096;

/**
 * The ring group's set-up as a plan: one block of RING_BOOTSTRAP_BYTES × ranks passed rank to rank around the ring,
 * over connections the run dials fresh (a new group each scaling event, as λScale ran NCCL). Run before the
 * broadcast; its time is the group set-up this data plane pays, not NCCL's CUDA-side initialisation.
 */
export function planRingBootstrap(source: string, targets: readonly string[]): MulticastPlan {
  const ranks = 1 + targets.length;
  return planRingBroadcast({ model: { totalBytes: RING_BOOTSTRAP_BYTES * ranks, blockCount: 1 }, source, targets: [...targets] });
}

function geometry(m: ModelBlocks): { blockCount: number; blockBytes: number; totalBytes: number } {
  return { blockCount: m.blockCount, blockBytes: blockBytesFor(m), totalBytes: m.totalBytes };
}
