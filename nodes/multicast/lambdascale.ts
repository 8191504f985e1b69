/**
 * λScale's adaptive model multicast (λScale §4.2–4.3): a k → N scale-out splits the destinations into k sub-groups,
 * each fed by one source with a 1 → L binomial pipeline; the sub-groups send blocks in circularly shifted orders
 * (Algorithm 1, k-way transmission) so that execution pipelines across sub-groups (Algorithm 2) hold a complete
 * model after about b/k steps. A 1 → N binomial pipeline takes b + ⌈log₂N⌉ − 1 steps (§4.2).
 */
import { blockBytesFor, withSteps, type ModelBlocks, type MulticastPlan, type SubGroup, type Transfer } from "./schedule.js";
import { DataPlaneError } from "../../native/errors.js";

/** Algorithm 1: block transfer orders O_0..O_{k−1}: k chunks of ⌈b/k⌉ blocks, O_i = S_i ⊎ S_{i+1} ⊎ … (mod k). */
export function kWayOrders(blockCount: number, k: number): number[][] {
  const l = Math.ceil(blockCount / k); // line 1
  const chunks: number[][] = []; // line 2
  for (let i = 0; i < k; i++) {
    const c: number[] = [];
    for (let j = l * i; j <= Math.min(l * (i + 1), blockCount) - 1; j++) c.push(j);
    chunks.push(c);
  }
  const orders: number[][] = [];
  for (let i = 0; i < k; i++) {
    const o: number[] = [];
    for (let j = 0; j < k; j++) o.push(...chunks[(i + j) % k]!); // line 4
    orders.push(o);
  }
  return orders;
}

/** Algorithm 2: execution pipelines from sub-groups' destination nodes (one node per sub-group while ≥ 2 remain). */
export function executionPipelines(groups: string[][]): string[][] {
  const remaining = groups.map((g) => [...g]);
  const pipelines: string[][] = [];
  for (;;) {
    const live = remaining.filter((g) => g.length > 0); // lines 1, 13
    if (live.length === 0) return pipelines;
    if (live.length === 1) {
      pipelines.push(live[0]!.splice(0)); // lines 3–5
      continue;
    }
    const a = Math.min(...live.map((g) => g.length)); // line 7
    for (let t = 0; t < a; t++) pipelines.push(live.map((g) => g[t]!)); // lines 8–12
    for (const g of live) g.splice(0, a);
  }
}

/**
 * A 1 → L binomial pipeline over nodes[0] (the source) and nodes[1..], sending blocks in `order`. With L a power of
 * two it is the hypercube schedule: at step t node u pairs with u ⊕ 2^(t mod d), the source sends logical block
 * min(t, b−1), every other node the highest logical block it has that its partner lacks — b + log₂L − 1 steps
 * exactly (tested). Other L use a greedy one-send-one-receive matching, rarest block first (a few steps more).
 */
export function binomialTransfers(nodes: string[], order: number[]): Transfer[] {
  const L = nodes.length;
  const b = order.length;
  const has: Set<number>[] = nodes.map((_, u) => new Set(u === 0 ? order.map((_, j) => j) : []));
  const out: Transfer[] = [];
  const d = Math.ceil(Math.log2(L));
  const power = L > 1 && 1 << d === L;
  for (let t = 0; L > 1 && t < 4 * (b + d + L); t++) {
    if (has.every((h) => h.size === b)) return out;
    const moves: [number, number, number][] = [];
    if (power) {
      for (let u = 0; u < L; u++) {
        const v = u ^ (1 << t % d);
        if (v === 0) continue;
        let blk = -1;
        if (u === 0) {
          const want = Math.min(t, b - 1);
          if (!has[v]!.has(want)) blk = want;
          else for (let j = b - 1; j >= 0 && blk < 0; j--) if (!has[v]!.has(j)) blk = j;
        } else for (const j of has[u]!) if (!has[v]!.has(j) && j > blk) blk = j;
        if (blk >= 0) moves.push([u, v, blk]);
      }
    } else {
      const count = new Array<number>(b).fill(0);
      for (const h of has) for (const j of h) count[j]!++;
      const needy = nodes.map((_, v) => v).filter((v) => has[v]!.size < b).sort((x, y) => has[x]!.size - has[y]!.size || x - y);
      const busy = new Set<number>();
      for (const v of needy) {
        let best: { u: number; j: number; score: number } | undefined;
        for (let u = 0; u < L; u++) {
          if (u === v || busy.has(u)) continue;
          for (const j of has[u]!) {
            if (has[v]!.has(j)) continue;
            const score = count[j]! * 4 * (L + b) + (u === 0 ? 2 * (L + b) : 0) + has[u]!.size;
            if (best === undefined || score < best.score) best = { u, j, score };
          }
        }
        if (best !== undefined) {
          busy.add(best.u);
          moves.push([best.u, v, best.j]);
        }
      }
    }
    for (const [u, v, j] of moves) {
      has[v]!.add(j);
      out.push({ from: nodes[u]!, to: nodes[v]!, block: order[j]!, step: t, medium: "network" });
    }
  }
  if (!has.every((h) => h.size === b)) throw new DataPlaneError("invalid_plan", `binomial pipeline over ${L} nodes did not converge`);
  return out;
}

/** A k → N scale-out: k sources, N − k targets, the model geometry. */
export interface BinomialPlanInput {
  model: ModelBlocks;
  /** Nodes holding the model; k = sources.length sub-groups (k-way transmission). */
  sources: string[];
  targets: string[];
}

/** Splits targets into k contiguous sub-groups whose sizes differ by at most one (larger first). */
export function splitTargets(targets: string[], k: number): string[][] {
  const groups: string[][] = [];
  let at = 0;
  for (let i = 0; i < k; i++) {
    const size = Math.floor(targets.length / k) + (i < targets.length % k ? 1 : 0);
    groups.push(targets.slice(at, at + size));
    at += size;
  }
  return groups;
}

/** λScale k → N plan: k sub-groups, circularly shifted orders, one binomial pipeline each, execution pipelines. */
export function planBinomial(input: BinomialPlanInput): MulticastPlan {
  const { model, sources, targets } = input;
  const k = Math.max(1, Math.min(sources.length, targets.length));
  const orders = kWayOrders(model.blockCount, k);
  const groups = splitTargets(targets, k);
  const subGroups: SubGroup[] = groups.map((nodes, i) => ({ source: sources[i]!, nodes, order: orders[i]! }));
  const transfers = subGroups.flatMap((g) => binomialTransfers([g.source, ...g.nodes], g.order));
  return withSteps({
    algorithm: "binomial",
    blockCount: model.blockCount,
    blockBytes: blockBytesFor(model),
    totalBytes: model.totalBytes,
    sources: [...sources],
    targets: [...targets],
    transfers,
    sendMode: "in-order",
    subGroups,
    pipelines: executionPipelines(groups),
  });
}
