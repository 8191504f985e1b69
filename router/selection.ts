/**
 * Global region selection for interactive requests (SageServe §6.2, "memory-utilization-based routing"):
 * regions that host the model, in preference order (the client's region first, then its proximity list); the first
 * whose effective memory utilization is below the threshold (0.70) wins; if none is, the least utilized one does.
 * The utilization is the interactive share plus what cannot be preempted (core/utilization.ts routingUtilization:
 * batch KV that the region's engines would preempt for an interactive request does not count). Pure: values in, a
 * decision out.
 */
import type { RegionName } from "../core/models.js";

export interface RegionCandidate {
  region: RegionName;
  /** Effective memory utilization of (model, region) less its preemptible batch KV, plus the router's in-flight estimate; ≥ 0. */
  utilization: number;
  /** False when the region is down, has no serving instance of the model, or its telemetry is stale. */
  available: boolean;
}

export interface RegionDecision {
  region: RegionName;
  /** "threshold": first in preference order under the threshold; "least": none was, the least utilized. */
  reason: "threshold" | "least";
}

/**
 * Picks a region. `candidates` must be in preference order; `exclude` skips regions already tried (retry after a
 * failure before the first token). Returns undefined when no candidate is available.
 */
export function selectRegion(candidates: readonly RegionCandidate[], threshold: number, exclude: ReadonlySet<RegionName> = new Set()): RegionDecision | undefined {
  let least: RegionCandidate | undefined;
  for (const c of candidates) {
    if (!c.available || exclude.has(c.region)) continue;
    if (c.utilization < threshold) return { region: c.region, reason: "threshold" };
    if (least === undefined || c.utilization < least.utilization) least = c;
  }
  return least === undefined ? undefined : { region: least.region, reason: "least" };
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
