/**
 * bench:dataplane's verdict (test/bench/dataplane.ts): every part ran, at every N of the target, and nothing in
 * the environment shrank or changed the run (DATAPLANE_NODES "2" measures one N; it cannot pass for 2, 4 and 8);
 * at `speedupNodes` (8 targets) binomial beats FaaSNet's binary tree by `binomialOverTreeMin` (λScale §7.2).
 */
import { atLeast, atMost } from "./common.js";

/** The figures the verdict reads. `multicast` is keyed `N<n>`, then by algorithm. */
export interface DataplaneFigures {
  error: string | undefined;
  p2pFraction: number | null;
  /** Why parts 2–3 did not run (no namespaces, P2P only), when they did not. */
  notRun: string | undefined;
  multicast: Readonly<Record<string, Readonly<Record<string, { ratio: number; seconds?: number }>>>>;
  hetero: { bandwidthFirstCopyS: number; insertionFirstCopyS: number } | undefined;
  shrunk: readonly string[];
}

/** Tree time ÷ binomial time at `n` nodes; NaN when either did not run. */
export function binomialOverTree(f: Pick<DataplaneFigures, "multicast">, n: number): number {
  const m = f.multicast[`N${n}`];
  const tree = m?.tree?.seconds;
  const binomial = m?.binomial?.seconds;
  return tree === undefined || binomial === undefined || !(binomial > 0) ? Number.NaN : tree / binomial;
}

/**
 * met: p2p ≥ target fraction; chain and binomial within target × ideal at every N of `target.nodes`; binomial ≥
 * `binomialOverTreeMin` × faster than the binary tree at `speedupNodes`; bandwidth order first.
 */
export function dataplaneMet(f: DataplaneFigures, target: { p2pFractionOfRawTcp: number; multicastTimeOverIdealMax: number; nodes: readonly number[]; binomialOverTreeMin: number; speedupNodes: number }): boolean {
  const everyN = target.nodes.every((n) => {
    const m = f.multicast[`N${n}`];
    return m !== undefined && atMost(m.chain?.ratio ?? Number.NaN, target.multicastTimeOverIdealMax) && atMost(m.binomial?.ratio ?? Number.NaN, target.multicastTimeOverIdealMax);
  });
  return (
    f.error === undefined &&
    f.shrunk.length === 0 &&
    f.p2pFraction !== null &&
    atLeast(f.p2pFraction, target.p2pFractionOfRawTcp) &&
    f.notRun === undefined &&
    everyN &&
    atLeast(binomialOverTree(f, target.speedupNodes), target.binomialOverTreeMin) &&
    f.hetero !== undefined &&
    f.hetero.bandwidthFirstCopyS < f.hetero.insertionFirstCopyS
  );
}
