/**
 * Baseline multicast plans for comparison (λScale §7.2): naive unicast, where the source sends the whole model to
 * every target itself (≈ (N−1)·M/B on its one link), and FaaSNet's binary tree, where every node forwards each block
 * to two children (each internal node's uplink carries every block twice).
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

function geometry(m: ModelBlocks): { blockCount: number; blockBytes: number; totalBytes: number } {
  return { blockCount: m.blockCount, blockBytes: blockBytesFor(m), totalBytes: m.totalBytes };
}
