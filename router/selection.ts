/**
 * Global region selection for interactive requests (SageServe §6.2, "memory-utilization-based routing"):
 * regions that host the model, in preference order (the client's region first, then its proximity list); the first
 * whose effective memory utilization is below the threshold (0.70) wins; if none is, the least utilized one does.
 * The utilization is the interactive share plus what cannot be preempted (core/utilization.ts routingUtilization:
 * batch KV that the region's engines would preempt for an interactive request does not count).
 * Scale from zero (issue 33): with no region serving the model, the region whose cold start is expected soonest (a
 * host copy before a peer's multicast before the origin, as its actuator measures them) gets the request and holds
 * it while the instance comes up. With a region serving it, that region (§6.2's pick among the warm ones) is taken
 * unless both its TTFT and a cold region's can be estimated (`ttftMs`; `expectedWarmTtftMs`, `expectedColdTtftMs`)
 * and the cold start's is lower ("if another region has a warm instance and its expected TTFT is lower than the cold
 * start, the request goes there"; otherwise the cold start does). Pure: values in, a decision out.
 * Prefix affinity (issue 34): when the candidates carry `prefixBlocks`, the region under the threshold holding the
 * longest prefix of the request wins (reason "prefix"), so a conversation stays where its KV is until that region
 * crosses the threshold; then the rule above moves it.
 * SLO-aware spill (issue 46 item 5, spill.ts): with `sloTtftMs`, a warm pick whose `ttftMs` exceeds it is left for the
 * first other region in preference order under the threshold whose `ttftMs` is within it (reason "slo-spill"); with
 * none, the pick stands and `overSlo` is set when another allowed warm region was there (the caller may shed the
 * request); a region alone is kept without it.
 */
import type { RegionName } from "../core/models.js";
import { spillFrom } from "./spill.js";

export interface RegionCandidate {
  region: RegionName;
  /** Effective memory utilization of (model, region) less its preemptible batch KV, plus the router's in-flight estimate; ≥ 0. */
  utilization: number;
  /**
   * False when the region is down, its telemetry is stale, or it has no serving instance of the model and does not
   * scale it from zero.
   */
  available: boolean;
  /**
   * Present when the region has no serving instance of the model but holds its requests while it brings one up
   * (scale from zero, issue 33): the expected time to that instance (ms; +Infinity when unknown).
   */
  coldStartMs?: number;
  /**
   * The request's expected time to first token there (ms): at a warm region its queue and prefill
   * (`expectedWarmTtftMs`), at a cold one the cold start, the requests held before it and its prefill
   * (`expectedColdTtftMs`). Absent when the router cannot estimate it (no performance profile): a warm region then
   * always beats a cold one.
   */
  ttftMs?: number;
  /** Leading blocks of the request's prompt the router believes the region holds (router/prefix-regions.ts; issue 34). */
  prefixBlocks?: number;
}

export interface RegionDecision {
  region: RegionName;
  /**
   * "threshold": first in preference order under the threshold; "least": none was, the least utilized; "cold": no
   * region serves the model, the one whose cold start is expected soonest (first in preference order on a tie);
   * "cold-sooner": a region serves it, but the soonest cold start's expected TTFT is lower than that region's.
   */
  reason: "threshold" | "least" | "cold" | "cold-sooner" | "prefix" | "slo-spill";
  /** The pick is the first available candidate not excluded (the client's nearest region that may serve it). */
  nearest: boolean;
  /** With `sloTtftMs`: the warm pick predicts beyond the SLO and no other region under the threshold predicts within it. */
  overSlo?: boolean;
}

/**
 * Picks a region. `candidates` must be in preference order; `exclude` skips regions already tried (retry after a
 * failure before the first token). Returns undefined when no candidate is available.
 */
export function selectRegion(candidates: readonly RegionCandidate[], threshold: number, exclude: ReadonlySet<RegionName> = new Set(), sloTtftMs?: number): RegionDecision | undefined {
  let least: RegionCandidate | undefined;
  let warm: RegionCandidate | undefined;
  let coldest: RegionCandidate | undefined;
  let affine: RegionCandidate | undefined;
  let first: RegionCandidate | undefined;
  for (const c of candidates) {
    if (!c.available || exclude.has(c.region)) continue;
    first ??= c;
    if (c.coldStartMs !== undefined) {
      if (coldest === undefined || c.coldStartMs < coldest.coldStartMs!) coldest = c;
      continue;
    }
    if (least === undefined || c.utilization < least.utilization) least = c;
    if (c.utilization < threshold && warm === undefined) warm = c;
    // Prefix affinity (issue 34): among the regions under the threshold, the one holding the longest prefix of the
    // request (first in preference order on a tie); the 0.70 rule still decides which regions may take it.
    if (c.utilization < threshold && (c.prefixBlocks ?? 0) > (affine?.prefixBlocks ?? 0)) affine = c;
  }
  const decide = (c: RegionCandidate, reason: RegionDecision["reason"]): RegionDecision => {
    if (sloTtftMs === undefined || c.coldStartMs !== undefined) return { region: c.region, reason, nearest: c === first };
    const others = candidates.filter((o) => o.available && !exclude.has(o.region) && o.coldStartMs === undefined);
    const s = spillFrom({ ...c, underThreshold: c.utilization < threshold }, others.map((o) => ({ ...o, underThreshold: o.utilization < threshold })), sloTtftMs);
    if (s.spilled) return { region: s.to.region, reason: "slo-spill", nearest: s.to.region === first?.region };
    return { region: c.region, reason, nearest: c === first, ...(s.overSlo ? { overSlo: true } : {}) };
  };
  if (affine !== undefined && affine !== warm) return decide(affine, "prefix");
  const pick = warm ?? least;
  if (pick === undefined) return coldest === undefined ? undefined : { region: coldest.region, reason: "cold", nearest: coldest === first };
  if (coldest?.ttftMs !== undefined && pick.ttftMs !== undefined && coldest.ttftMs < pick.ttftMs) return { region: coldest.region, reason: "cold-sooner", nearest: coldest === first };
  return decide(pick, warm === undefined ? "least" : "threshold");
}

/** What the router knows of a warm region's queue for one model (its last report) and of the request. */
export interface WarmTtftInput {
  /** Requests waiting at the region's engines for the model, and its serving instances (> 0). */
  waiting: number;
  serving: number;
  /** The prefill of the request's prompt alone, and one decode step at a full batch (ms; router/pace.ts). */
  prefillMs: number;
  stepMs: number;
}

/**
 * A warm region's expected TTFT for one request: the waiting requests, spread over its serving instances, prefill
 * before it (each about as long as its own, the engine's FCFS), then its own prefill, after the decode step running
 * when it arrives. E.g. 6 waiting on 2 instances, 80 ms prefills, 30 ms steps: 30 + (3 + 1) × 80 = 350 ms. The
 * hops between regions are not counted (the configuration has no distances, only the proximity order).
 */
export function expectedWarmTtftMs(i: WarmTtftInput): number {
  return i.stepMs + (Math.max(0, i.waiting) / Math.max(1, i.serving) + 1) * i.prefillMs;
}

/**
 * A cold region's expected TTFT for one request: its cold start, then the requests it already holds and this one
 * prefilled in turn on the new instance. E.g. a 4,000 ms cold start holding 2 requests, 80 ms prefills: 4,240 ms;
 * +Infinity when the cold start is unknown.
 */
export function expectedColdTtftMs(coldStartMs: number, held: number, prefillMs: number): number {
  return coldStartMs + (Math.max(0, held) + 1) * prefillMs;
}

/**
 * Preference order for a client: its own region first (if it hosts the model), then that region's proximity
 * list, then every other hosting region in configuration order.
 */
export function preferenceOrder(
  hosting: readonly RegionName[],
  clientRegion: RegionName | undefined,
  proximity: Readonly<Record<RegionName, readonly RegionName[]>>,
): RegionName[] {
  const out: RegionName[] = [];
  const push = (r: RegionName) => {
    if (hosting.includes(r) && !out.includes(r)) out.push(r);
  };
  if (clientRegion !== undefined) {
    push(clientRegion);
    for (const r of proximity[clientRegion] ?? []) push(r);
  }
  for (const r of hosting) push(r);
  return out;
}

/**
 * Effective utilization between telemetry updates: the last reported value plus the KV bytes the router has
 * dispatched since that report, over the region's KV capacity for the model (DESIGN request path, step 1).
 */
export function correctedUtilization(reported: number, inflightKvBytes: number, kvCapacityBytes: number): number {
  if (!(kvCapacityBytes > 0)) return reported;
  return reported + Math.max(0, inflightKvBytes) / kvCapacityBytes;
}
