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
 * No failed stream in any arm, and no check passes on an arm that failed a stream (issue 45): each check names the
 * arms it compares that failed and how many. A figure that is NaN (no data) or infinite never passes. The figures are
 * the unrounded medians (the bench rounds only what it prints: 10.04 µs is over 10).
 */
import { seededRandom } from "../../../core/random.js";
import { median, shuffled } from "../common.js";
import { atLeast, atMost, failuresNote, type ArmTally, type Check } from "./common.js";

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
  /** Each arm's streams over the run (32-stream and one-stream rounds) and how many failed. */
  streams: Record<RouterArm, { failed: number; total: number }>;
}

/** The arms of a run: A straight to the engine, N nginx's two hops, P two Node pipes, B tidegate's two hops. */
export type RouterArm = "direct" | "nginx" | "pipe" | "tidegate";

/** The arms in the order the bench names them (A N P B). */
export const ROUTER_ARMS: readonly RouterArm[] = ["direct", "nginx", "pipe", "tidegate"];

/** The seed of the arms' order (armOrder): fixed, so every run shuffles the same way, and printed. */
export const ARM_ORDER_SEED = 45;

/**
 * The order the arms run in round `round` (1-based; the one-stream rounds continue the count): a shuffle drawn from
 * seededRandom(seed, round), so no arm always runs first or right after the same other (BENCH.md: alternate arms).
 */
export function armOrder(round: number, seed = ARM_ORDER_SEED): RouterArm[] {
  return shuffled(ROUTER_ARMS, seededRandom(seed, round));
}

/** Each round's figure, in round order, as the bench measures them (per-round comparisons against arm A, N or P). */
export interface RouterRounds {
  throughputVsNginx: number[];
  addedTtftP50Ms: number[];
  nginxAddedTtftP50Ms: number[];
  addedTtftP50MsSingleStream: number[];
  cpuUsPerTokenGlobal: number[];
  cpuUsPerTokenRegion: number[];
  cpuVsNodePipeGlobal: number[];
  cpuVsNodePipeRegion: number[];
}

/**
 * The figures the checks read: the median over rounds of each, unrounded (issue 45: a median of 10.04 µs is over
 * 10, whatever it prints as). A figure with no round, or with a NaN round (P's CPU read 0 ticks), is NaN.
 */
export function routerFiguresOf(rounds: RouterRounds, streams: RouterFigures["streams"]): RouterFigures {
  const med = (xs: readonly number[]) => (xs.length === 0 || xs.some((x) => Number.isNaN(x)) ? Number.NaN : median(xs));
  return {
    throughputVsNginx: med(rounds.throughputVsNginx),
    addedTtftP50Ms: med(rounds.addedTtftP50Ms),
    nginxAddedTtftP50Ms: med(rounds.nginxAddedTtftP50Ms),
    addedTtftP50MsSingleStream: med(rounds.addedTtftP50MsSingleStream),
    cpuUsPerToken: { global: med(rounds.cpuUsPerTokenGlobal), region: med(rounds.cpuUsPerTokenRegion) },
    cpuVsNodePipe: { global: med(rounds.cpuVsNodePipeGlobal), region: med(rounds.cpuVsNodePipeRegion) },
    streams,
  };
}

/** Every check of one run, in the order the bench prints them. */
export function routerChecks(f: RouterFigures, target = ROUTER_TARGET): Check[] {
  const nginxAdded = Math.max(0, f.nginxAddedTtftP50Ms);
  const ttftLimit = Number.isFinite(nginxAdded) ? target.addedTtftP50VsNginx * nginxAdded : Number.NaN;
  const tally = (arm: RouterArm): ArmTally => ({ arm, failed: f.streams[arm].failed, requests: f.streams[arm].total, what: "streams failed" });
  /** A check of figure `value` that compares `arms`: it fails, and says so, when any of them failed a stream. */
  const check = (name: string, arms: RouterArm[], value: number, limit: number, holds: boolean): Check => {
    const note = failuresNote(arms.map(tally));
    return { check: `${name}${note}`, value, limit, ok: note === "" && holds };
  };
  const failed = Object.values(f.streams).reduce((a, s) => a + s.failed, 0);
  return [
    check("throughput", ["tidegate", "nginx"], f.throughputVsNginx, target.throughputVsNginx, atLeast(f.throughputVsNginx, target.throughputVsNginx)),
    check("addedTtft32Streams", ["tidegate", "nginx", "direct"], f.addedTtftP50Ms, ttftLimit, Number.isFinite(ttftLimit) && atMost(f.addedTtftP50Ms, ttftLimit)),
    check("addedTtftSingleStream", ["tidegate", "direct"], f.addedTtftP50MsSingleStream, target.addedTtftP50MsSingleStream, atMost(f.addedTtftP50MsSingleStream, target.addedTtftP50MsSingleStream)),
    check("cpuGlobal", ["tidegate"], f.cpuUsPerToken.global, target.cpuUsPerTokenPerHop, atMost(f.cpuUsPerToken.global, target.cpuUsPerTokenPerHop)),
    check("cpuRegion", ["tidegate"], f.cpuUsPerToken.region, target.cpuUsPerTokenPerHop, atMost(f.cpuUsPerToken.region, target.cpuUsPerTokenPerHop)),
    check("cpuGlobalVsNodePipe", ["tidegate", "pipe"], f.cpuVsNodePipe.global, target.cpuVsNodePipePerHop, atMost(f.cpuVsNodePipe.global, target.cpuVsNodePipePerHop)),
    check("cpuRegionVsNodePipe", ["tidegate", "pipe"], f.cpuVsNodePipe.region, target.cpuVsNodePipePerHop, atMost(f.cpuVsNodePipe.region, target.cpuVsNodePipePerHop)),
    check("addedTtftSingleStreamTwoHops", ["tidegate", "direct"], f.addedTtftP50MsSingleStream, target.addedTtftP50MsSingleStreamTwoHops, atMost(f.addedTtftP50MsSingleStream, target.addedTtftP50MsSingleStreamTwoHops)),
    check("noFailedStreams", ["direct", "nginx", "pipe", "tidegate"], failed, 0, failed === 0),
  ];
}
