/**
 * BlitzScale scale-plan generation (BlitzScale §5.1, Algorithm 1): (line 1) group NVLink-connected targets so only
 * one per group loads over the network and the rest get it by NVLink broadcast; (line 2) prune sources whose
 * outbound link serving traffic already uses (e.g. a prefill instance sending KV caches to decode); (lines 4–12)
 * greedily build multiple chains: targets by inbound bandwidth, fastest first; sources from a max-priority queue by
 * remaining outbound bandwidth (ties: insertion order, which keeps chains short); each served target joins the
 * queue as a source at the bandwidth it receives at. The chain order matters (Fig. 10b): with S→T2 faster than
 * S→T1, S→T2→T1 halves the downtime of S→T1→T2. `order: "insertion"` is the contrast baseline: the same greedy
 * with targets taken in the order given instead of sorted by bandwidth.
 */
import { DataPlaneError } from "../../native/errors.js";
import { blockBytesFor, withSteps, type ModelBlocks, type MulticastPlan, type Transfer } from "./schedule.js";

/** A node holding the model (a parameter-pool entry), with its outbound bandwidth in bytes/s. */
export interface ChainSource {
  id: string;
  /** Outbound bandwidth BWO_s. */
  outBytesPerS: number;
  /** True when serving traffic already uses this source's outbound link in the same direction (pruned, line 2). */
  servingOutbound?: boolean;
}

/** A node to scale onto, with its inbound bandwidth in bytes/s. */
export interface ChainTarget {
  id: string;
  /** Inbound bandwidth BWI_t. */
  inBytesPerS: number;
  /** Targets sharing an NVLink group id are grouped (line 1). */
  nvlinkGroup?: string;
}

/** Algorithm 1's inputs: D_src, D_tgt and the model geometry. */
export interface ChainPlanInput {
  model: ModelBlocks;
  sources: ChainSource[];
  targets: ChainTarget[];
  /** "bandwidth" (Algorithm 1, default) or "insertion" (targets in the given order, the contrast baseline). */
  order?: "bandwidth" | "insertion";
}

interface QueueEntry {
  id: string;
  bw: number;
  seq: number;
}

/** Line 1: one network representative per NVLink group (the fastest inbound), the rest fed from it. */
export function groupNvlink(targets: ChainTarget[]): { reps: ChainTarget[]; members: Map<string, string[]> } {
  const reps: ChainTarget[] = [];
  const members = new Map<string, string[]>();
  const byGroup = new Map<string, ChainTarget[]>();
  for (const t of targets) {
    if (t.nvlinkGroup === undefined) reps.push(t);
    else {
      const g = byGroup.get(t.nvlinkGroup);
      if (g === undefined) byGroup.set(t.nvlinkGroup, [t]);
      else g.push(t);
    }
  }
  for (const g of byGroup.values()) {
    let rep = g[0]!;
    for (const t of g) if (t.inBytesPerS > rep.inBytesPerS) rep = t;
    reps.push(rep);
    members.set(rep.id, g.filter((t) => t !== rep).map((t) => t.id));
  }
  return { reps, members };
}

/** The (source, target) edges of Algorithm 1, in the order they are chosen. */
export function chainEdges(input: ChainPlanInput): { edges: [string, string][]; members: Map<string, string[]> } {
  const byBandwidth = (input.order ?? "bandwidth") === "bandwidth";
  const { reps, members } = groupNvlink(input.targets);
  const sources = input.sources.filter((s) => !s.servingOutbound); // line 2
  if (sources.length === 0 && reps.length > 0)
    throw new DataPlaneError("invalid_plan", "every source's outbound link carries serving traffic; no interference-free source is left");
  const tgt = [...reps];
  if (byBandwidth) tgt.sort((a, b) => b.inBytesPerS - a.inBytesPerS);
  let seq = 0;
  const queue: QueueEntry[] = sources.map((s) => ({ id: s.id, bw: s.outBytesPerS, seq: seq++ }));
  const pop = (): QueueEntry => {
    let best = 0;
    for (let i = 1; i < queue.length; i++) if (queue[i]!.bw > queue[best]!.bw || (queue[i]!.bw === queue[best]!.bw && queue[i]!.seq < queue[best]!.seq)) best = i;
    return queue.splice(best, 1)[0]!;
  };
  const edges: [string, string][] = [];
  for (const t of tgt) {
    const s = pop(); // line 5
    const used = Math.min(s.bw, t.inBytesPerS); // line 6
    edges.push([s.id, t.id]); // line 8
    if (s.bw - used > 0) queue.push({ id: s.id, bw: s.bw - used, seq: seq++ }); // lines 7, 9
    queue.push({ id: t.id, bw: used, seq: seq++ }); // line 10
  }
  return { edges, members };
}

/** A BlitzScale multi-chain plan: each edge carries every block in order, forwarded block by block (§3, Fig. 10a). */
export function planChains(input: ChainPlanInput): MulticastPlan {
  const { model } = input;
  const { edges, members } = chainEdges(input);
  const depth = new Map<string, number>(input.sources.map((s) => [s.id, 0]));
  const transfers: Transfer[] = [];
  const children = new Map<string, string[]>();
  for (const [s, t] of edges) {
    const d = depth.get(s) ?? 0;
    depth.set(t, d + 1);
    for (let i = 0; i < model.blockCount; i++) transfers.push({ from: s, to: t, block: i, step: d + i, medium: "network" });
    children.set(s, [...(children.get(s) ?? []), t]);
  }
  for (const [rep, ms] of members)
    for (const m of ms)
      for (let i = 0; i < model.blockCount; i++) transfers.push({ from: rep, to: m, block: i, step: (depth.get(rep) ?? 0) + i, medium: "nvlink" });
  const chains: string[][] = [];
  const walk = (node: string, path: string[]) => {
    const kids = children.get(node) ?? [];
    if (kids.length === 0) chains.push(path);
    for (const k of kids) walk(k, [...path, k]);
  };
  for (const s of input.sources) if (children.has(s.id)) walk(s.id, [s.id]);
  return withSteps({
    algorithm: "chain",
    blockCount: model.blockCount,
    blockBytes: blockBytesFor(model),
    totalBytes: model.totalBytes,
    sources: input.sources.map((s) => s.id),
    targets: input.targets.map((t) => t.id),
    transfers,
    sendMode: "per-peer",
    chains,
  });
}
