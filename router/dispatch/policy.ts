/**
 * The NIW dispatch policy (SageServe §6.3, "Queue Manager for NIW"), pure: values in, decisions out.
 *
 * - A model endpoint in a region whose effective memory utilization is below `dispatchOneBelow` (0.60 in the paper)
 *   signals capacity; the queue manager sends it one request, two when below `dispatchTwoBelow` (0.50).
 * - A request older than `promoteAfterMs` (10 h) goes out with priority 0 (on par with interactive traffic), younger
 *   ones with priority 1, which the instance scheduler runs only when no priority-0 request waits (§6.2 "Scheduler at
 *   the model instance").
 *
 * The utilization these rules compare with their thresholds is the interactive share plus what cannot be preempted
 * (core/utilization.ts `routingUtilization`, issue 37): batch KV that the engines would preempt for an interactive
 * request does not close a region to more batch, as it does not turn interactive traffic away (router/selection.ts).
 */
import type { Priority, RegionTelemetry } from "../../core/ports.js";
import { routingUtilization } from "../../core/utilization.js";

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
      .map((e) => ({ endpointId: e.endpointId, utilization: routingUtilization(e), slots: slotsForUtilization(routingUtilization(e), t) }));
    const slots = endpoints.reduce((s, e) => s + e.slots, 0);
    if (slots > 0) out.push({ region: report.region, model: m.model, slots, endpoints });
  }
  return out;
}

/**
 * Filling what is idle (issue 15, item 9), on top of §6.3's thresholds:
 * - **Fill by free KV.** An open endpoint at utilization u gets floor((fillTo − u) × capacityTokens / requestTokens)
 *   requests on one report (at most `maxPerReport`), so an idle fleet is filled in a report or two instead of one or
 *   two requests per report; nothing is sent while the model's engines queue (`waiting` > 0): they are already full.
 * - **Hysteresis.** An endpoint that reports u ≥ dispatchOneBelow closes to batch; it reopens only after
 *   `reopenReports` consecutive reports under `reopenBelow`. A region hovering around 0.60 (where §6.3's rule let
 *   batch in on every dip and interactive TTFT rose ×1.13) stays closed.
 * Without a capacity figure (capacityTokens 0) the endpoint falls back to §6.3's 1-or-2 rule, gated the same way.
 * - **To the real limit where batch is preemptible (issue 37).** The gate and the thresholds read the routing
 *   utilization (interactive + what cannot be preempted); the free KV is the engines' whole KV in use. Where every
 *   engine of the model preempts batch work (its report carries `preemptibleMemoryUtilization`) and no interactive
 *   traffic is there, an endpoint fills to `fillToPreemptible` of its KV instead of `fillTo`.
 */
export interface FillPolicy extends DispatchThresholds {
  /** Fill an open endpoint up to this utilization (0 < fillTo ≤ dispatchOneBelow). */
  fillTo: number;
  /** A closed endpoint counts reports strictly below this toward reopening (≤ dispatchOneBelow). */
  reopenBelow: number;
  /** Consecutive reports under `reopenBelow` that reopen a closed endpoint (≥ 1). */
  reopenReports: number;
  /** Most requests one endpoint gets on one report (≥ 1). */
  maxPerReport: number;
  /**
   * Fill target while the region serves the model's interactive traffic too (its report shows non-batch tokens/s):
   * batch requests decoding beside interactive ones lengthen every engine step, so they get less room then
   * (0 < fillToBeside ≤ fillTo; absent = fillTo).
   */
  fillToBeside?: number;
  /**
   * Fill target where the model's engines preempt batch work for interactive requests and none of its interactive
   * traffic is there (fillTo ≤ fillToPreemptible ≤ 1; absent = fillTo): the real limit, since an interactive arrival
   * takes the room back at the engine's next iteration boundary.
   */
  fillToPreemptible?: number;
}

/** One endpoint's batch gate. Start with `{ open: true, below: 0 }`. */
export interface EndpointGate {
  open: boolean;
  /** Consecutive reports under `reopenBelow` while closed. */
  below: number;
}

/** The gate after one report at utilization `u` (unknown u closes it: never treated as idle). */
export function nextGate(g: EndpointGate, u: number, p: FillPolicy): EndpointGate {
  if (!Number.isFinite(u) || u < 0 || u >= p.dispatchOneBelow) return { open: false, below: 0 };
  if (g.open) return g;
  const below = u < p.reopenBelow ? g.below + 1 : 0;
  return below >= p.reopenReports ? { open: true, below: 0 } : { open: false, below };
}

/**
 * Requests to send to an open endpoint on one report. `u`: its routing utilization (the thresholds); `usedU`: the
 * KV in use over capacity, preemptible batch included (the free KV; default `u`). `capacityTokens`: KV tokens over its
 * serving instances (0 = unknown → §6.3's 1-or-2 rule); `requestTokens`: expected prompt + max output tokens of one
 * queued request (> 0); `waiting`: requests the model's engines hold queued. Never less than §6.3's 1-or-2. Example:
 * fillTo 0.55, u 0.15, 32,000 tokens, 700 per request → floor(0.40 × 32,000 / 700) = 18.
 */
export function fillSlots(gate: EndpointGate, u: number, capacityTokens: number, requestTokens: number, waiting: number, p: FillPolicy, usedU = u): number {
  if (!gate.open || !Number.isFinite(u) || u < 0 || u >= p.dispatchOneBelow) return 0;
  if (!(capacityTokens > 0) || !(requestTokens > 0)) return slotsForUtilization(u, p);
  if (waiting > 0) return 0;
  const n = Math.floor(((p.fillTo - (Number.isFinite(usedU) ? Math.max(u, usedU) : u)) * capacityTokens) / requestTokens);
  // Never less than §6.3's own rule (requests large against the headroom still trickle in).
  return Math.max(slotsForUtilization(u, p), Math.min(p.maxPerReport, n));
}

/**
 * The fill target for one model's endpoints on one report: `fillToBeside` while the region also serves the model's
 * interactive traffic (its report shows non-batch tokens/s), else `fillToPreemptible` where every engine of the model
 * preempts batch work (the report carries `preemptibleMemoryUtilization`), else `fillTo`. Measured in virtual time
 * (test/batch/interactive.test.ts, regions with room beside interactive load): filled to 0.55 their interactive
 * TTFT rose ×1.09–1.11; to 0.3 ×1.06–1.08; to 0.2 ×1.03–1.05; to 0.15 ×1.03–1.04 (the default), the batch taking
 * about twice as long; to 0.1 it did not finish in the window.
 */
export function fillTarget(p: FillPolicy, m: { tokensPerS: number; batchTokensPerS?: number; preemptibleMemoryUtilization?: number }): { target: number; beside: boolean } {
  const interactive = m.tokensPerS - (m.batchTokensPerS ?? 0) > 0;
  if (interactive && p.fillToBeside !== undefined) return { target: Math.min(p.fillTo, p.fillToBeside), beside: true };
  if (m.preemptibleMemoryUtilization !== undefined && p.fillToPreemptible !== undefined) return { target: Math.max(p.fillTo, p.fillToPreemptible), beside: false };
  return { target: p.fillTo, beside: false };
}

