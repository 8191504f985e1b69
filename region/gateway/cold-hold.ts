/**
 * The gateway's hold of requests for a model with no serving instance (issue 33, scale from zero; BlitzScale §6's
 * serverless setting). A request that finds no serving instance of its model waits here — at most `maxHeld` per
 * model, each at most `holdMs` — while the region controller brings an instance up (region/controller/zero.ts reads
 * `held`); when the gateway reports a change (an instance serving), every waiter of that model is let go, in arrival
 * order, and routes as usual. A request beyond either bound fails with 503 `model_cold` (its message says why the
 * model is not coming up when the region knows: `note`), and the router adds Retry-After; the region may also refuse
 * every waiter of a model at once with its reason's code (`refuse`: no_capacity, not_placed, cold_start_failed;
 * region/runtime/cold-verdict.ts). A waiter whose caller aborts leaves at once.
 *
 * It also keeps each model's activity — requests entering, in flight and held — so the controller can tell how long
 * a model has been idle (`idleForMs`), and what each held request's first token took (`onColdTtft`).
 * No timers of its own: the injected Clock's `after`. The same object serves both of the gateway's shapes (stream
 * and callbacks), live and in replay.
 */
import type { Clock, Timer } from "../../core/clock.js";
import { TidegateError, type ErrorCode } from "../../core/errors.js";
import type { ModelName, RegionName } from "../../core/models.js";

export interface ColdHoldOptions {
  region: RegionName;
  clock: Clock;
  /** Longest a request is held (ms, > 0). */
  holdMs: number;
  /** Most requests held per model at once (≥ 1). */
  maxHeld: number;
  /** A held request got its first token `ttftMs` after entering the gateway (cold-start TTFT). */
  onColdTtft?(model: ModelName, ttftMs: number): void;
  /**
   * A request was refused: the hold was full, it waited `holdMs`, or the region refused the model's waiters with why
   * it cannot start it (`refuse`: no_capacity, not_placed, cold_start_failed).
   */
  onRefused?(model: ModelName, reason: ColdRefusal): void;
}

/** Why a held request was refused (the region's `tidegate_region_cold_refused_total` label). */
export type ColdRefusal = "full" | "timeout" | ColdReason["code"];

/** Every ColdRefusal (the metric's labels, each initialised to 0). */
export const COLD_REFUSALS: readonly ColdRefusal[] = ["full", "timeout", "no_capacity", "not_placed", "cold_start_failed"];

/** Why the region cannot bring a model up now (region/runtime/cold-verdict.ts), in words and as an error code. */
export interface ColdReason {
  code: Extract<ErrorCode, "no_capacity" | "not_placed" | "cold_start_failed">;
  /** E.g. "llama2-70b/h100-80gb: no free GPU (needs 4 h100-80gb, 2 free; no spot instance to reclaim or redeploy)". */
  detail: string;
}

/** Why a model is cold-held, for the listing. */
export interface ColdModelView {
  model: ModelName;
  held: number;
  inFlight: number;
  idleForMs: number;
}

interface Waiter {
  /** Called once the model has a serving instance (or to retry when it lost it again). */
  resume(): void;
  fail(err: TidegateError): void;
  deadlineMs: number;
  timer: Timer | undefined;
}

interface ModelActivity {
  waiters: Waiter[];
  inFlight: number;
  lastActiveMs: number;
  /** Why the region could not bring the model up at its last try (`note`); undefined when it could or did. */
  reason: ColdReason | undefined;
}

export class ColdHold {
  private readonly models = new Map<ModelName, ModelActivity>();
  private readonly startedAtMs: number;
  private readonly wakeListeners = new Set<(model: ModelName) => void>();

  /** Longest a request is held (ms). */
  get holdMs(): number {
    return this.o.holdMs;
  }

  constructor(private readonly o: ColdHoldOptions) {
    if (!(o.holdMs > 0)) throw new RangeError(`holdMs must be > 0, got ${o.holdMs}`);
    if (!(Number.isInteger(o.maxHeld) && o.maxHeld >= 1)) throw new RangeError(`maxHeld must be an integer ≥ 1, got ${o.maxHeld}`);
    this.startedAtMs = o.clock.now();
  }

  private activity(model: ModelName): ModelActivity {
    let a = this.models.get(model);
    if (a === undefined) this.models.set(model, (a = { waiters: [], inFlight: 0, lastActiveMs: this.startedAtMs, reason: undefined }));
    return a;
  }

  /**
   * Calls `cb` when a model's first request is held (none was): the region runtime runs a controller pass then
   * instead of at its next tick, so a cold start is decided when its first request arrives.
   */
  onWake(cb: (model: ModelName) => void): () => void {
    this.wakeListeners.add(cb);
    return () => this.wakeListeners.delete(cb);
  }

  /** A request for `model` entered the gateway (pair with `leave`). */
  enter(model: ModelName): void {
    const a = this.activity(model);
    a.inFlight++;
    a.lastActiveMs = this.o.clock.now();
  }

  /** A request for `model` ended (served, failed or cancelled). */
  leave(model: ModelName): void {
    const a = this.activity(model);
    a.inFlight = Math.max(0, a.inFlight - 1);
    a.lastActiveMs = this.o.clock.now();
  }

  /** Requests for `model` held now. */
  held(model: ModelName): number {
    return this.models.get(model)?.waiters.length ?? 0;
  }

  /** Milliseconds since `model` last had a request entering, in flight or held (0 while it has one). */
  idleForMs(model: ModelName): number {
    const a = this.models.get(model);
    if (a === undefined) return this.o.clock.now() - this.startedAtMs;
    if (a.inFlight > 0 || a.waiters.length > 0) return 0;
    return this.o.clock.now() - a.lastActiveMs;
  }

  /**
   * Holds one request for `model` until `resume` (the model serves) or `fail` (model_cold: the hold is full, or
   * `deadlineMs` passed; default now + holdMs). Returns a cancel function (the caller went away: the waiter leaves,
   * nothing is called). Full: `fail` is called at once.
   */
  hold(model: ModelName, resume: () => void, fail: (err: TidegateError) => void, deadlineMs = this.o.clock.now() + this.o.holdMs): () => void {
    const a = this.activity(model);
    if (a.waiters.length >= this.o.maxHeld) {
      this.o.onRefused?.(model, "full");
      fail(new TidegateError("model_cold", `model ${model} has no serving instance in region ${this.o.region} and ${a.waiters.length} requests already wait for one (controller.scaleToZero.maxHeld)`));
      return () => undefined;
    }
    const w: Waiter = { resume, fail, deadlineMs, timer: undefined };
    const waitMs = Math.max(0, deadlineMs - this.o.clock.now());
    w.timer = this.o.clock.after(waitMs, () => {
      w.timer = undefined;
      if (!this.remove(a, w)) return;
      this.o.onRefused?.(model, "timeout");
      const why = a.reason;
      const prefix = `model ${model} had no serving instance in region ${this.o.region} within ${this.o.holdMs} ms (controller.scaleToZero.holdMs)`;
      fail(new TidegateError("model_cold", `${prefix}: ${why === undefined ? "its scale-out is still under way or blocked (see the region's listing)" : why.detail}`));
    });
    a.waiters.push(w);
    a.lastActiveMs = this.o.clock.now();
    if (a.waiters.length === 1) for (const cb of this.wakeListeners) cb(model);
    return () => {
      if (this.remove(a, w)) w.timer?.cancel();
    };
  }

  /** The stream shape of `hold`: resolves when the model serves, rejects model_cold, or cancelled when `signal` aborts. */
  wait(model: ModelName, signal: AbortSignal | undefined): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      if (signal?.aborted === true) return reject(new TidegateError("cancelled", `request for ${model} cancelled while held for a cold start`, { cause: signal.reason }));
      const onAbort = () => {
        cancel();
        reject(new TidegateError("cancelled", `request for ${model} cancelled while held for a cold start`, { cause: signal?.reason }));
      };
      const cancel = this.hold(
        model,
        () => {
          signal?.removeEventListener("abort", onAbort);
          resolve();
        },
        (err) => {
          signal?.removeEventListener("abort", onAbort);
          reject(err);
        },
      );
      signal?.addEventListener("abort", onAbort, { once: true });
    });
  }

  /**
   * Records why the region cannot bring `model` up now (undefined: it can, or something is coming up): a hold that
   * runs out then says so in its `model_cold` message.
   */
  note(model: ModelName, reason: ColdReason | undefined): void {
    const a = reason === undefined ? this.models.get(model) : this.activity(model);
    if (a !== undefined) a.reason = reason;
  }

  /**
   * Fails every request held for `model` now with `reason` (503 with its code, naming the model, the region and the
   * reason; counted as refused with the code). Returns how many were refused.
   */
  refuse(model: ModelName, reason: ColdReason): number {
    const a = this.models.get(model);
    if (a === undefined || a.waiters.length === 0) return 0;
    a.reason = reason;
    const go = a.waiters.splice(0);
    for (const w of go) {
      w.timer?.cancel();
      this.o.onRefused?.(model, reason.code);
      w.fail(new TidegateError(reason.code, `model ${model} cannot start from zero in region ${this.o.region}: ${reason.detail}`));
    }
    return go.length;
  }

  /** Lets go every waiter of each model for which `serves(model)` is true (the gateway's change hook). */
  release(serves: (model: ModelName) => boolean): void {
    for (const [model, a] of this.models) {
      if (a.waiters.length === 0 || !serves(model)) continue;
      const go = a.waiters.splice(0);
      a.lastActiveMs = this.o.clock.now();
      a.reason = undefined;
      for (const w of go) {
        w.timer?.cancel();
        w.resume();
      }
    }
  }

  /** A held request's first token, `ttftMs` after it entered the gateway. */
  coldTtft(model: ModelName, ttftMs: number): void {
    this.o.onColdTtft?.(model, ttftMs);
  }

  /** Fails every waiter (the region is shutting down). */
  close(): void {
    for (const [model, a] of this.models) {
      for (const w of a.waiters.splice(0)) {
        w.timer?.cancel();
        w.fail(new TidegateError("model_cold", `region ${this.o.region} closed while ${model} was cold`));
      }
    }
  }

  /** Per model: held, in flight and idle time (the admin listing). */
  view(): ColdModelView[] {
    return [...this.models.keys()].map((model) => ({ model, held: this.held(model), inFlight: this.models.get(model)!.inFlight, idleForMs: this.idleForMs(model) }));
  }

  private remove(a: ModelActivity, w: Waiter): boolean {
    const i = a.waiters.indexOf(w);
    if (i === -1) return false;
    a.waiters.splice(i, 1);
    return true;
  }
}
