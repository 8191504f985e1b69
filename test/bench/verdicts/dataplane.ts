/**
 * bench:dataplane's verdict (test/bench/dataplane.ts): every part ran, at every N of the target, and nothing in
 * the environment shrank or changed the run (DATAPLANE_NODES "2" measures one N; it cannot pass for 2, 4 and 8).
 */
import { atLeast, atMost } from "./common.js";

/** The figures the verdict reads. `multicast` is keyed `N<n>`, then by algorithm. */
export interface DataplaneFigures {
  error: string | undefined;
  p2pFraction: number | null;
  /** Why parts 2–3 did not run (no namespaces, P2P only), when they did not. */
  notRun: string | undefined;
  multicast: Readonly<Record<string, Readonly<Record<string, { ratio: number }>>>>;
  hetero: { bandwidthFirstCopyS: number; insertionFirstCopyS: number } | undefined;
  shrunk: readonly string[];
}

/** met: p2p ≥ target fraction; chain and binomial within target × ideal at every N of `target.nodes`; bandwidth order first. */
export function dataplaneMet(f: DataplaneFigures, target: { p2pFractionOfRawTcp: number; multicastTimeOverIdealMax: number; nodes: readonly number[] }): boolean {
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
    f.hetero !== undefined &&
    f.hetero.bandwidthFirstCopyS < f.hetero.insertionFirstCopyS
  );
}
