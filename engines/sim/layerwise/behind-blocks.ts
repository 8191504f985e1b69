/**
 * A cold start under BlitzScale's live scaling with nothing to pair with (issue 33): the new instance serves while
 * its parameters arrive, each pass executing layer by layer behind the arriving blocks.
 *
 * BlitzScale §5.2's transition protocol, step (1): "once inst.1 starts loading parameters, we redirect all queued
 * requests from inst.0 to it"; step (2): "after the first layer is loaded on inst.1, it begins executing the first
 * layer of all requests". From zero there is no inst.0 (Eq. 1 with S_i = 0 for every batch: every layer runs on the
 * target), so the held requests go to the new instance when its load starts and the pass overlaps the transfer the
 * way PipeSwitch's layer pipelining does (§4 Figure 7 (c)): the compute of layer i overlaps the transfer of layer
 * i + 1, and no layer's compute starts before the layer is here.
 *
 * Time model (one pass of compute C over n blocks in layer order, each block C/n of it, block k here at a_k, the pass
 * ready to start at s):
 *
 *   t_0 = s,   t_k = max(t_{k−1}, a_k) + C/n   (k = 1..n),   the pass ends at t_n
 *
 * so it ends at max(s + C, max_k (a_k + (n − k + 1)·C/n)): about max(load, prefill) + one block's compute when the
 * blocks arrive evenly, rather than load + prefill. Blocks already here (a_k ≤ s) cost nothing more than C; a block
 * not here yet and not scheduled (+Infinity, live: the data plane has not reported it) makes the end +Infinity until
 * its arrival is known.
 */

/** When a pass of `computeMs` that may start at `startMs` ends, its blocks arriving at `arrivalsMs` (module comment). */
export function behindBlocksEndMs(startMs: number, computeMs: number, arrivalsMs: readonly number[]): number {
  const n = arrivalsMs.length;
  if (n === 0) return startMs + computeMs;
  const per = computeMs / n;
  let t = startMs;
  for (const a of arrivalsMs) t = Math.max(t, a) + per;
  return t;
}

/**
 * Live arrivals of one store's blocks as its present count is observed (an agent reports how many blocks are here,
 * not which): the first `present` blocks in layer order are taken as here, each since it was first seen, the rest
 * +Infinity (not known yet). A transfer that delivers out of order is then seen a little late for its early layers'
 * blocks and early for late ones; the last block, which bounds the pass (module comment), is exact.
 */
export class BlockArrivals {
  private readonly at: number[];
  private seen = 0;

  constructor(readonly blockCount: number) {
    this.at = Array.from({ length: Math.max(0, blockCount) }, () => Number.POSITIVE_INFINITY);
  }

  /** `present` blocks are here at `nowMs`; returns every block's arrival so far. */
  observe(present: number, nowMs: number): number[] {
    for (; this.seen < Math.min(present, this.blockCount); this.seen++) this.at[this.seen] = nowMs;
    return [...this.at];
  }
}
