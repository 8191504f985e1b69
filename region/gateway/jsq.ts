/**
 * In-region routing (SageServe §6.2): the least-loaded endpoint (deployment) of the model by effective memory
 * utilization; the instance within it is the routing policy's (scoring/plugins.ts; `jsq`: the least remaining tokens,
 * join-the-shortest-queue on prompt + max output tokens still to process). Ties go to the first listed. Pure.
 */

export interface InstanceLoad {
  instanceId: string;
  /** Prompt + max output tokens still to process on this instance. */
  remainingTokens: number;
  /** Only serving instances take requests. */
  serving: boolean;
}

export interface EndpointLoad {
  endpointId: string;
  /** KV in use / KV capacity over the endpoint's serving instances. */
  effectiveMemoryUtilization: number;
  instances: readonly InstanceLoad[];
}

/** The endpoint with the least effective memory utilization among those with a serving instance. */
export function pickEndpoint<E extends EndpointLoad>(endpoints: readonly E[]): E | undefined {
  let best: E | undefined;
  for (const e of endpoints) {
    if (!e.instances.some((i) => i.serving)) continue;
    if (best === undefined || e.effectiveMemoryUtilization < best.effectiveMemoryUtilization) best = e;
  }
  return best;
}
