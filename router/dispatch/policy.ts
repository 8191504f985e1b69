/**
 * The NIW dispatch policy (SageServe §6.3, "Queue Manager for NIW"), pure: values in, decisions out.
 *
 * - A model endpoint in a region whose effective memory utilization is below `dispatchOneBelow` (0.60 in the paper)
 *   signals capacity; the queue manager sends it one request, two when below `dispatchTwoBelow` (0.50).
 * - A request older than `promoteAfterMs` (10 h) goes out with priority 0 (on par with interactive traffic), younger
 *   ones with priority 1, which the instance scheduler runs only when no priority-0 request waits (§6.2 "Scheduler at
 *   the model instance").
 */
import type { Priority, RegionTelemetry } from "../../core/ports.js";

export interface DispatchThresholds {
  /** Utilization strictly below this gets one request (0 < two ≤ one ≤ 1). */
  dispatchOneBelow: number;
  /** Utilization strictly below this gets two requests. */
  dispatchTwoBelow: number;
}

/**
 * Requests to send to one endpoint for one capacity signal: 2 below dispatchTwoBelow, 1 below dispatchOneBelow,
 * else 0. A utilization that is not a finite number ≥ 0 is unknown and gets 0 (never treated as idle).
 * Example: thresholds 0.6/0.5 → u=0.45 → 2, u=0.55 → 1, u=0.6 → 0.
 */
export function slotsForUtilization(utilization: number, t: DispatchThresholds): 0 | 1 | 2 {
  if (!Number.isFinite(utilization) || utilization < 0) return 0;
  if (utilization < t.dispatchTwoBelow) return 2;
  if (utilization < t.dispatchOneBelow) return 1;
  return 0;
}

/** Priority of a queued request at `nowMs`: 0 once its age (nowMs − enqueuedAtMs) is ≥ promoteAfterMs, else 1. */
export function requestPriority(enqueuedAtMs: number, nowMs: number, promoteAfterMs: number): Priority {
  return nowMs - enqueuedAtMs >= promoteAfterMs ? 0 : 1;
}

/** Requests one region can take now for one model: the sum over its endpoints of that model. */
export interface CapacitySignal {
  region: string;
  model: string;
  slots: number;
  /** The utilization of each endpoint that contributed, for logs and tests. */
  endpoints: { endpointId: string; utilization: number; slots: number }[];
}

/**
 * The capacity signals in one telemetry report, for the models the queue holds (`models`). Endpoints without a
 * serving instance signal nothing (there is nobody to run the request).
 */
export function capacitySignals(report: RegionTelemetry, models: ReadonlySet<string>, t: DispatchThresholds): CapacitySignal[] {
  const out: CapacitySignal[] = [];
  for (const m of report.models) {
    if (!models.has(m.model)) continue;
    const endpoints = m.endpoints
      .filter((e) => e.servingInstances > 0)
      .map((e) => ({ endpointId: e.endpointId, utilization: e.effectiveMemoryUtilization, slots: slotsForUtilization(e.effectiveMemoryUtilization, t) }));
    const slots = endpoints.reduce((s, e) => s + e.slots, 0);
    if (slots > 0) out.push({ region: report.region, model: m.model, slots, endpoints });
  }
  return out;
}
