/**
 * The Dispatcher's books for the fill policy and refill (policy.ts `FillPolicy`; DispatcherOptions `fill`, `refill`):
 * per region endpoint its batch gate (hysteresis), per model the running means of a request's tokens and of the KV
 * it holds over its life, and per `region|model` the batch requests sent there and not yet served, the most the last
 * report lets run at once, and whether that report allows refills. Values only: claiming and sending stay in the
 * Dispatcher.
 */
import type { GpuType } from "../../core/models.js";
import type { RegionTelemetry } from "../../core/ports.js";
import { routingUtilization } from "../../core/utilization.js";
import { fillSlots, fillTarget, nextGate, type EndpointGate, type FillPolicy } from "./policy.js";

/** One report's grant for a model under the fill policy: requests to send, and whether beside interactive traffic. */
export interface FillSignal {
  model: string;
  region: string;
  slots: number;
  beside: boolean;
}

/** Fill and refill books (see the file comment). */
export class FillBook {
  /** Batch gate per region endpoint (`region|endpointId`). */
  private readonly gates = new Map<string, EndpointGate>();
  /** Mean prompt + max output tokens of the requests sent per model (EWMA); 1024 until one is seen. */
  private readonly requestTokens = new Map<string, number>();
  /** Per model: mean KV one request holds over its life (prompt + half its max tokens), the same running mean. */
  private readonly holdTokens = new Map<string, number>();
  /**
   * Per `region|model`: batch requests sent there and not yet served or failed, and the most its last report lets
   * run at once under refill (Σ over serving endpoints of target × KV tokens / holdTokens; at least 1).
   */
  private readonly sentNow = new Map<string, number>();
  private readonly sentCap = new Map<string, number>();
  /** Per `region|model`: whether the region's last report allows refills. */
  private readonly refillOk = new Map<string, boolean>();

  constructor(
    private readonly models: ReadonlySet<string>,
    private readonly refill: boolean,
    private readonly kvCapacityTokens: ((model: string, gpu: GpuType) => number) | undefined,
  ) {}

  /** Adds a request sent to its model's running means. */
  noteSent(model: string, promptTokens: number, maxTokens: number): void {
    const seen = this.requestTokens.get(model);
    this.requestTokens.set(model, seen === undefined ? promptTokens + maxTokens : 0.9 * seen + 0.1 * (promptTokens + maxTokens));
    const hold = promptTokens + maxTokens / 2;
    const held = this.holdTokens.get(model);
    this.holdTokens.set(model, held === undefined ? hold : 0.9 * held + 0.1 * hold);
  }

  /** A batch request starts running in `key`'s region (`region|model`). */
  enter(key: string): void {
    this.sentNow.set(key, (this.sentNow.get(key) ?? 0) + 1);
  }

  /** A request sent to `key`'s region no longer runs there. */
  leave(key: string): void {
    this.sentNow.set(key, (this.sentNow.get(key) ?? 1) - 1);
  }

  /** Whether the last report of `key`'s region allows refills. */
  refillAllowed(key: string): boolean {
    return this.refillOk.get(key) === true;
  }

  /** Whether `pending` more refills still fit under the cap the last report set (it may have lowered it). */
  refillFits(key: string, pending: number): boolean {
    return (this.sentNow.get(key) ?? 0) + pending < (this.sentCap.get(key) ?? Number.POSITIVE_INFINITY);
  }

  /** Requests per model for one report under the fill policy: each endpoint's gate, then its free KV. */
  signals(report: RegionTelemetry, p: FillPolicy): FillSignal[] {
    const out: FillSignal[] = [];
    for (const m of report.models) {
      if (!this.models.has(m.model)) continue;
      let slots = 0;
      // Interactive traffic for this model in this region: fill less beside it; where its engines preempt batch, to
      // the real limit (policy.ts fillTarget).
      const { target, beside } = fillTarget(p, m);
      const policy = target === p.fillTo ? p : { ...p, fillTo: target };
      // Refill while none of the model's interactive traffic is there and every endpoint is under §6.3's threshold
      // (DispatcherOptions `refill`).
      let under = true;
      let serving = 0;
      let capacityTokens = 0;
      for (const e of m.endpoints) {
        const key = `${report.region}|${e.endpointId}`;
        // The thresholds read interactive + what cannot be preempted; the free KV counts all of it (core/utilization.ts).
        const u = routingUtilization(e);
        const gate = nextGate(this.gates.get(key) ?? { open: true, below: 0 }, u, p);
        this.gates.set(key, gate);
        if (e.servingInstances <= 0) continue;
        serving++;
        under &&= u < p.dispatchOneBelow;
        const capacity = e.servingInstances * (this.kvCapacityTokens?.(m.model, e.gpu) ?? 0);
        capacityTokens += capacity;
        slots += fillSlots(gate, u, capacity, this.requestTokens.get(m.model) ?? 1024, m.waiting, policy, e.effectiveMemoryUtilization);
      }
      const key = `${report.region}|${m.model}`;
      this.refillOk.set(key, !beside && serving > 0 && under);
      // With refill, what the dispatcher has sent there and not yet seen served is counted here, not only in the
      // report's utilization (a scrape and a report old, and lower than the requests' reservations while they run):
      // at most the count whose mean KV is the target, so grants and refills together hold the region at its fill
      // target. Without refill, completions already take the count down between reports, as before.
      if (capacityTokens > 0 && this.refill) {
        const cap = Math.max(1, Math.floor((target * capacityTokens) / (this.holdTokens.get(m.model) ?? 512)));
        this.sentCap.set(key, cap);
        slots = Math.min(slots, Math.max(0, cap - (this.sentNow.get(key) ?? 0)));
      } else this.sentCap.delete(key);
      if (slots > 0) out.push({ model: m.model, region: report.region, slots, beside });
    }
    return out;
  }
}
