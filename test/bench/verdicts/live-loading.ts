/**
 * bench:live-loading's verdict (test/bench/live-loading.ts; issue 12 item 5): each pairing arm's mean TTFT while the
 * new instance loads below the network arm's (strictly: the pairing must help), and zigzag's at most 1.05 × best
 * effort's. Each check compares two arms' means over the requests they served: it fails, and names the arm and the
 * count, when either failed a request (issue 45); the ratio of means is judged unrounded.
 */
import { atMost, failuresNote, ratio, type Check } from "./common.js";

/** Each pairing arm strictly below network's mean TTFT while loading; zigzag ≤ 1.05 × best effort's (5% for a live run's noise). */
export const LIVE_LOADING_TARGET = { pairedVsNetworkMean: 1, zigzagVsBestEffortMean: 1.05 };

/** What the checks read of one arm. */
export interface LiveLoadingArm {
  name: string;
  /** Mean TTFT of the requests sent while the new instance loaded and served (ms). */
  meanTtftMs: number;
  /** Requests sent over the whole arm, and those that failed (no first token). */
  sent: number;
  failed: number;
}

/** The checks of the arms that ran (network, blitzscale-best-effort, blitzscale): one per pair that both ran. */
export function liveLoadingChecks(arms: readonly LiveLoadingArm[]): Check[] {
  const by = (n: string) => arms.find((a) => a.name === n);
  const net = by("network");
  const be = by("blitzscale-best-effort");
  const zz = by("blitzscale");
  const checks: Check[] = [];
  const add = (check: string, a: LiveLoadingArm, b: LiveLoadingArm, limit: number, strict: boolean) => {
    const value = ratio(a.meanTtftMs, b.meanTtftMs);
    const note = failuresNote([a, b].map((x) => ({ arm: x.name, failed: x.failed, requests: x.sent })));
    checks.push({ check: `${check}${note}`, value, limit, ok: note === "" && (strict ? value < limit : atMost(value, limit)) });
  };
  const T = LIVE_LOADING_TARGET;
  if (net !== undefined && be !== undefined) add("best-effort mean TTFT while loading / network", be, net, T.pairedVsNetworkMean, true);
  if (net !== undefined && zz !== undefined) add("zigzag mean TTFT while loading / network", zz, net, T.pairedVsNetworkMean, true);
  if (be !== undefined && zz !== undefined) add("zigzag mean TTFT while loading / best-effort", zz, be, T.zigzagVsBestEffortMean, false);
  return checks;
}
