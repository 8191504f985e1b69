/**
 * bench:router's verdict (test/bench/router.ts): tidegate's two hops (global → region → engine-sim) against nginx's
 * two hops and against arm P, two bare Node TCP relays (node-pipe.ts), all measured in the same run. Pure: the bench
 * hands in its medians over rounds; test/bench/verdicts.test.ts shows each failure mode.
 *
 * Targets:
 * - issue 15 item 10: throughput ≥ 0.97 × nginx's; added median TTFT at 32 streams ≤ 5 × nginx's added median (a
 *   non-positive nginx figure, within noise of zero, asks tidegate's to be ≤ 0 too); ≤ 0.5 ms added median TTFT for
 *   one stream at a time; ≤ 10 µs CPU per relayed token in each of the global and region processes.
 * - issue 32 item 8 ("a lighter hop"): the CPU per relayed token of each tidegate hop ≤ 1.5 × arm P's same hop
 *   (global against P's hop 1, the client-facing relay; region against P's hop 2, the engine-facing one), as the
 *   median over rounds of each round's ratio; and ≤ 1 ms added median TTFT for one stream through the two hops.
 * No failed stream in any arm. A figure that is NaN (no data) or infinite never passes.
 */
import { atLeast, atMost, type Check } from "./common.js";

export const ROUTER_TARGET = {
  throughputVsNginx: 0.97,
  addedTtftP50VsNginx: 5,
  addedTtftP50MsSingleStream: 0.5,
  cpuUsPerTokenPerHop: 10,
  cpuVsNodePipePerHop: 1.5,
  addedTtftP50MsSingleStreamTwoHops: 1,
};

/** The run's medians over rounds, as the bench prints them. */
export interface RouterFigures {
  /** tidegate's tokens/s over nginx's, per round. */
  throughputVsNginx: number;
  /** Added median TTFT at 32 streams over the direct arm, ms: tidegate's and nginx's. */
  addedTtftP50Ms: number;
  nginxAddedTtftP50Ms: number;
  /** Added median TTFT of one stream at a time over the direct arm, ms. */
  addedTtftP50MsSingleStream: number;
  /** CPU µs per relayed token of each tidegate process. */
  cpuUsPerToken: { global: number; region: number };
  /** Each round's tidegate CPU per token over arm P's same hop (global / hop 1, region / hop 2). */
  cpuVsNodePipe: { global: number; region: number };
  /** Streams that failed in any arm. */
  failedStreams: number;
}

/** Every check of one run, in the order the bench prints them. */
export function routerChecks(f: RouterFigures, target = ROUTER_TARGET): Check[] {
  const nginxAdded = Math.max(0, f.nginxAddedTtftP50Ms);
  const ttftLimit = Number.isFinite(nginxAdded) ? target.addedTtftP50VsNginx * nginxAdded : Number.NaN;
  return [
    { check: "throughput", value: f.throughputVsNginx, limit: target.throughputVsNginx, ok: atLeast(f.throughputVsNginx, target.throughputVsNginx) },
    { check: "addedTtft32Streams", value: f.addedTtftP50Ms, limit: ttftLimit, ok: Number.isFinite(ttftLimit) && atMost(f.addedTtftP50Ms, ttftLimit) },
    { check: "addedTtftSingleStream", value: f.addedTtftP50MsSingleStream, limit: target.addedTtftP50MsSingleStream, ok: atMost(f.addedTtftP50MsSingleStream, target.addedTtftP50MsSingleStream) },
    { check: "cpuGlobal", value: f.cpuUsPerToken.global, limit: target.cpuUsPerTokenPerHop, ok: atMost(f.cpuUsPerToken.global, target.cpuUsPerTokenPerHop) },
    { check: "cpuRegion", value: f.cpuUsPerToken.region, limit: target.cpuUsPerTokenPerHop, ok: atMost(f.cpuUsPerToken.region, target.cpuUsPerTokenPerHop) },
    { check: "cpuGlobalVsNodePipe", value: f.cpuVsNodePipe.global, limit: target.cpuVsNodePipePerHop, ok: atMost(f.cpuVsNodePipe.global, target.cpuVsNodePipePerHop) },
    { check: "cpuRegionVsNodePipe", value: f.cpuVsNodePipe.region, limit: target.cpuVsNodePipePerHop, ok: atMost(f.cpuVsNodePipe.region, target.cpuVsNodePipePerHop) },
    { check: "addedTtftSingleStreamTwoHops", value: f.addedTtftP50MsSingleStream, limit: target.addedTtftP50MsSingleStreamTwoHops, ok: atMost(f.addedTtftP50MsSingleStream, target.addedTtftP50MsSingleStreamTwoHops) },
    { check: "noFailedStreams", value: f.failedStreams, limit: 0, ok: f.failedStreams === 0 },
  ];
}
