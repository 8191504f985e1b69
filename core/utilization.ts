/**
 * The utilization the routing rules read (issue 37): SageServe §6.2's 0.70 rule (router/selection.ts) and §6.3's
 * 0.60 rule (router/dispatch/policy.ts) count KV that interactive traffic cannot have. Batch work an engine preempts
 * for a priority 0 request (vLLM priority scheduling; engines/sim/core.ts) is not such KV: the interactive
 * share plus what cannot be preempted is what an interactive arrival meets.
 */

/** A telemetry figure with its preemptible part (EndpointTelemetry, ModelTelemetry). */
export interface UtilizationFigures {
  effectiveMemoryUtilization: number;
  preemptibleMemoryUtilization?: number;
}

/**
 * effectiveMemoryUtilization − preemptibleMemoryUtilization (absent = 0), never below 0; a value that is not a
 * finite number stays as it is (callers treat it as unknown). Example: 0.85 with 0.60 of batch KV → 0.25.
 */
export function routingUtilization(t: UtilizationFigures): number {
  const u = t.effectiveMemoryUtilization;
  const p = t.preemptibleMemoryUtilization;
  if (!Number.isFinite(u) || p === undefined || !Number.isFinite(p) || p <= 0) return u;
  return Math.max(0, u - p);
}
