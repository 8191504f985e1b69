/**
 * Which running requests the simulated engine preempts for a waiting one (vLLM's priority scheduling: a request that
 * cannot be scheduled for lack of KV blocks or batch slots preempts running requests of a lower priority, the lowest
 * priority first and, within it, the latest arrival first; vLLM docs "Scheduler config: policy = priority" and
 * `Scheduler._schedule_running` / V1 `Scheduler.schedule`). Pure: values in, a list out.
 */
import type { SimRequest } from "./request.js";

/** How a preempted request gets its KV back: prefill its prompt and output again, or copy it back from host memory. */
export type PreemptionMode = "recompute" | "swap";

/** What the head of the queue lacks, and what the engine holds now. */
export interface RoomNeeded {
  /** KV tokens the request must reserve here (its prompt + max tokens × its local share). */
  kvTokens: number;
  /** KV tokens free now (capacity − reservations). */
  kvFreeTokens: number;
  /** Batch slots free now (maxBatch − running − admitted at this boundary). */
  slotsFree: number;
}

/**
 * The running requests of priority > `priority` beyond the first `slots` of them (by arrival), latest arrival first:
 * what a cap on batch requests running beside interactive ones preempts. Example: slots 1, running p1 a (arrived 1),
 * p0 i, p1 b (2), p1 c (3) → [c, b].
 */
export function beyondSlots(running: readonly SimRequest[], priority: number, slots: number): SimRequest[] {
  const lower = running.filter((r) => r.priority > priority).reverse();
  lower.sort((a, b) => b.priority - a.priority || b.arrivalMs - a.arrivalMs);
  return lower.slice(0, Math.max(0, lower.length - slots));
}

/**
 * The running requests to preempt, in preemption order, so that a waiting request of priority `priority` fits; [] when
 * it fits already or when preempting every lower-priority request would still not make it fit (nothing is preempted
 * in vain). `reservedOf(r)`: the KV tokens a running request frees when preempted.
 * Example: priority 0 needs 300 tokens and 1 slot with 100 free and 0 slots; running p0 a (400), p1 b (200, arrived
 * 1), p1 c (150, arrived 2) → [c, b] (c frees 150: 250 < 300; b then: 450 ≥ 300, slots 2 ≥ 1).
 */
export function preemptionVictims(running: readonly SimRequest[], priority: number, need: RoomNeeded, reservedOf: (r: SimRequest) => number): SimRequest[] {
  let kv = need.kvFreeTokens;
  let slots = need.slotsFree;
  const fits = () => kv + 1e-9 >= need.kvTokens && slots >= 1;
  if (fits()) return [];
  // Lowest priority first, then the latest arrival first (same arrival: the later admitted, later in `running`).
  const lower = running.filter((r) => r.priority > priority).reverse();
  lower.sort((a, b) => b.priority - a.priority || b.arrivalMs - a.arrivalMs);
  const out: SimRequest[] = [];
  for (const r of lower) {
    out.push(r);
    kv += reservedOf(r);
    slots++;
    if (fits()) return out;
  }
  return [];
}
