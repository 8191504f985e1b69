/**
 * Ideal multicast times on links that all run at B bytes/s, for a model of M bytes in b blocks over N nodes in all
 * (one source and N − 1 receivers, λScale's "1 → N"). Store-and-forward per block; each node sends one block at a
 * time on its one link.
 *   chain     M/B + (N − 2)·(M/b)/B          a chain of N − 1 receivers adds one block time per extra hop (BlitzScale Fig. 10a)
 *   binomial  (b + ⌈log₂N⌉ − 1)·(M/b)/B       λScale §4.2
 *   tree      ≈ 2·M/B + 2·(⌊log₂N⌋ − 1)·(M/b)/B  binary tree, internal nodes send each block twice (an estimate)
 *   unicast   (N − 1)·M/B                     the source's link carries every copy
 *   ring      as chain                        NCCL ring broadcast: the same pipelined chain in rank order; its group
 *                                             set-up (communicator bootstrap) comes before and is not in this time
 */
import type { MulticastAlgorithm } from "./schedule.js";

/** Model size, block count, nodes in all (source included) and the common link rate in bytes/s. */
export interface IdealInput {
  totalBytes: number;
  blockCount: number;
  /** Nodes in all, the source included. */
  nodes: number;
  linkBytesPerS: number;
}

/** Seconds for `algorithm` to finish on ideal links. */
export function idealSeconds(algorithm: MulticastAlgorithm, x: IdealInput): number {
  const blockS = x.totalBytes / x.blockCount / x.linkBytesPerS;
  const fullS = x.totalBytes / x.linkBytesPerS;
  const n = x.nodes;
  const log = Math.ceil(Math.log2(n));
  switch (algorithm) {
    case "chain":
    case "ring":
      return fullS + Math.max(0, n - 2) * blockS;
    case "binomial":
      return (x.blockCount + log - 1) * blockS;
    case "tree":
      return n <= 2 ? fullS : 2 * fullS + 2 * Math.max(0, Math.floor(Math.log2(n)) - 1) * blockS;
    case "unicast":
      return Math.max(1, n - 1) * fullS;
  }
}
