/**
 * The region's transfer queue: one multicast transfer at a time (a node agent runs one role at a time on its one
 * data port), and every target that asks for the same model while a transfer is queued or running joins the next
 * plan of that model — so a scale-out of N instances started in one controller pass moves the model once, as one
 * multicast, instead of N unicasts. Models are served in the order they were first asked for.
 */
import { TidegateError } from "../../core/errors.js";
import type { ModelParameters, TransferResult } from "./transfer.js";

type Waiter = { resolve: () => void; reject: (e: Error) => void };

/** Runs `transfer` for batched targets; `want` resolves when its node holds the model, rejects with why not. */
export class TransferQueue {
  private readonly pending = new Map<string, { params: ModelParameters; waiters: Map<string, Waiter[]> }>();
  private running: Promise<void> | undefined;
  private closed = false;

  constructor(private readonly transfer: (p: ModelParameters, targets: string[]) => Promise<TransferResult>) {}

  /** Asks for `params.model` on `nodeId`; joins the model's next plan. */
  want(params: ModelParameters, nodeId: string): Promise<void> {
    if (this.closed) return Promise.reject(new TidegateError("cancelled", "the region is shutting down"));
    let entry = this.pending.get(params.model);
    if (entry === undefined) this.pending.set(params.model, (entry = { params, waiters: new Map() }));
    const list = entry.waiters.get(nodeId) ?? [];
    entry.waiters.set(nodeId, list);
    const done = new Promise<void>((resolve, reject) => list.push({ resolve, reject }));
    // Start on the next turn so every want() of this turn (one controller pass) joins the same plan.
    if (this.running === undefined) this.running = new Promise<void>((r) => setImmediate(r)).then(() => this.drain());
    return done;
  }

  /** Models with targets waiting (not yet in a running transfer). */
  get waiting(): number {
    return this.pending.size;
  }

  /** Rejects everything still waiting; a running transfer finishes (its agents are cancelled by their own close). */
  close(): void {
    this.closed = true;
    for (const e of this.pending.values()) for (const ws of e.waiters.values()) for (const w of ws) w.reject(new TidegateError("cancelled", "the region is shutting down"));
    this.pending.clear();
  }

  private async drain(): Promise<void> {
    for (;;) {
      const next = this.pending.entries().next();
      if (next.done === true) break;
      const [model, entry] = next.value;
      this.pending.delete(model);
      const targets = [...entry.waiters.keys()];
      try {
        const r = await this.transfer(entry.params, targets);
        const failed = new Map(r.failed.map((f) => [f.nodeId, f.error]));
        for (const [node, ws] of entry.waiters) {
          const why = failed.get(node) ?? (r.completed.includes(node) ? undefined : "not completed");
          for (const w of ws) (why === undefined ? w.resolve() : w.reject(new TidegateError("upstream_error", `transfer of ${model} to ${node} failed: ${why}`)));
        }
      } catch (err) {
        const e = err instanceof Error ? err : new Error(String(err));
        for (const ws of entry.waiters.values()) for (const w of ws) w.reject(e);
      }
    }
    this.running = undefined;
  }
}
