/**
 * Scale to zero and back (issue 33; BlitzScale §6's serverless setting, ServerlessLLM's keep-alive): the rule the
 * region controller lays over the strategy's count for an endpoint whose `minInstances` is 0 in a region that holds
 * requests for its model while it has no serving instance (region/runtime/build-region.ts `coldHoldFor`: every such
 * model, whatever `controller.scaleToZero.idleMs` says — issue 50). Pure: values in, a count out.
 *
 * Coming up from zero (always):
 * - At zero with requests held for the model at the gateway (cold-hold.ts): at least one instance ("cold-start").
 * Going down to zero (the idle drain, only with `idleMs` > 0):
 * - At zero with nothing held: zero ("at-zero"), whatever the strategy says — a model with no serving instance
 *   reads as fully utilized to the strategies (region/runtime), which would bring it back with no request.
 * - Above zero: no fewer than one instance until the model has been idle (no request in flight or held, none
 *   entered) for `idleMs`; then zero ("idle") — the last instance drains to spot (its GPUs go to spot or to other
 *   models, its blocks stay in host memory under the parameter pool's LRU).
 * Without the idle drain (`idleMs` 0), at zero with nothing held the strategy's count stands (a plan may bring the
 * model up), and above zero the last instance stays ("warm"): nothing takes a model back to zero by itself.
 * Endpoints with `minInstances` > 0 keep the strategy's count.
 */

/** What the rule reads about one endpoint at one pass. */
export interface ZeroInput {
  /** Instances that serve or will serve (serving + provisioning + loading). */
  current: number;
  /** The strategy's count (already clamped to the endpoint's bounds). */
  desired: number;
  /** The strategy's reason for `desired`. */
  reason: string;
  minInstances: number;
  /** Requests for the model held at the gateway now, waiting for an instance. */
  held: number;
  /** Milliseconds since the model last had a request in flight, held or entering (0 while it has one). */
  idleForMs: number;
}

/** The count the controller acts on, and why. */
export interface ZeroDecision {
  desired: number;
  reason: string;
}

/** Applies the rule (file comment) with idle window `idleMs` (> 0: the idle drain is on; 0: off). */
export function applyZeroRule(input: ZeroInput, idleMs: number): ZeroDecision {
  const keep = { desired: input.desired, reason: input.reason };
  if (input.minInstances > 0) return keep;
  const drain = idleMs > 0;
  if (input.current === 0) {
    if (input.held > 0) return input.desired >= 1 ? keep : { desired: 1, reason: "cold-start" };
    return drain ? { desired: 0, reason: "at-zero" } : keep;
  }
  if (drain && input.held === 0 && input.idleForMs >= idleMs) return { desired: 0, reason: "idle" };
  return input.desired >= 1 ? keep : { desired: 1, reason: drain ? "idle-window" : "warm" };
}
