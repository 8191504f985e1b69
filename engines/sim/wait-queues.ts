/**
 * The waiting room of the simulated engine core: one FCFS queue per priority, served priority 0 first and
 * priority 1 only when no priority 0 request waits (SageServe §6.3; DESIGN "Instance scheduler"). Requests leave by
 * admission or cancellation; leaving is lazy (the head skips requests no longer waiting), so both are O(1). A
 * preempted request goes back to the front of its queue (vLLM puts preempted requests first), ahead of requests that
 * arrived after it.
 */
import type { Priority } from "../../core/ports.js";
import type { SimRequest } from "./request.js";

export class WaitQueues {
  private readonly queues: [SimRequest[], SimRequest[]] = [[], []];
  private readonly heads = [0, 0];
  /** Requests waiting now. */
  count = 0;
  /**
   * Σ prompt + maxTokens − generated − the prompt tokens expected cached (SimRequest.expectedCachedTokens, set by the
   * core before it queues a request) of the waiting requests: their share of the JSQ metric, the work still to do.
   */
  remainingTokens = 0;

  push(r: SimRequest): void {
    this.queues[r.priority].push(r);
    this.count++;
    r.countedRemaining = remainingOf(r);
    this.remainingTokens += r.countedRemaining;
  }

  /** Queues `r` (a preempted request) ahead of every request waiting at its priority. */
  pushFront(r: SimRequest): void {
    const q = this.queues[r.priority];
    const h = this.heads[r.priority]!;
    // Entries before the head are no longer waiting (the head skipped them): one can be overwritten.
    if (h > 0) {
      q[h - 1] = r;
      this.heads[r.priority] = h - 1;
    } else q.unshift(r);
    this.count++;
    r.countedRemaining = remainingOf(r);
    this.remainingTokens += r.countedRemaining;
  }

  /** Accounts for `r` leaving the queue (admitted or cancelled); the caller changes its state from "waiting". */
  leave(r: SimRequest): void {
    this.count--;
    this.remainingTokens -= r.countedRemaining;
  }

  /** The request the policy serves next, or undefined. */
  next(): SimRequest | undefined {
    return this.headOf(0) ?? this.headOf(1);
  }

  /** Every request still waiting, priority 0 first. */
  all(): SimRequest[] {
    // A preempted request may sit twice (its first entry not yet skipped by the head): list it once.
    return [...new Set([...this.queues[0], ...this.queues[1]])].filter((r) => r.state === "waiting");
  }

  private headOf(priority: Priority): SimRequest | undefined {
    let q = this.queues[priority];
    let h = this.heads[priority]!;
    while (h < q.length && q[h]!.state !== "waiting") h++;
    if (h > 1024 && h * 2 > q.length) {
      q = this.queues[priority] = q.slice(h);
      h = 0;
    }
    this.heads[priority] = h;
    return q[h];
  }
}

/** Prompt + output tokens a waiting request still has to process (its output so far kept when preempted). */
function remainingOf(r: SimRequest): number {
  return r.promptTokens + r.maxTokens - r.generated - r.expectedCachedTokens;
}
