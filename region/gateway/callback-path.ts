/**
 * The gateway's callback path (`Gateway.submit`: engines on the injected Clock, the replay's ten million requests a
 * week): the same choice and books as the stream path (chooser.ts), the same judge (judge.ts), reported through
 * RequestCallbacks at clock times with no promise per request. It does not retry: what the engine throws before
 * accepting a request is the caller's to handle. Engines without a callback form are driven through the stream path.
 */
import { disaggregates } from "./pd.js";
import { TidegateError } from "../../core/errors.js";
import type { ModelName } from "../../core/models.js";
import type { GenerateRequest, RequestCallbacks } from "../../core/ports.js";
import { openReportingLater, type EventSink, type Flow } from "../../core/push.js";
import { settle, type RouteChoice, type Ticket } from "./chooser.js";
import type { ColdHold } from "./cold-hold.js";
import type { Judge, ModelBooks } from "./judge.js";
import type { PathParts } from "./stream-path.js";

/** What `submit` returns for a request held for a cold start (cold-hold.ts): no instance chosen yet. */
export const HELD: RouteChoice = Object.freeze({ endpointId: "", instanceId: "" });

export interface CallbackPathOptions extends PathParts {
  /** The gateway's push entry (Gateway.open), for engines without a callback form. */
  open(req: GenerateRequest, sink: EventSink): Flow;
}

/**
 * One callback-form request in flight: counts its tokens, settles its books and has it judged, then calls the
 * caller's hooks. The engine cancels a callback-form request only when it goes away (Gateway.submit takes no
 * signal): a miss once it had its first token, unserved before.
 */
class Submitted implements RequestCallbacks {
  private firstAtMs = -1;

  constructor(
    private readonly judge: Judge,
    private readonly books: ModelBooks,
    private readonly ticket: Ticket,
    private readonly req: GenerateRequest,
    private readonly callbacks: RequestCallbacks,
    private readonly enteredAtMs: number,
  ) {}

  onFirstToken(atMs: number): void {
    this.firstAtMs = atMs;
    this.judge.served(this.books, this.req, this.req.promptTokens);
    this.callbacks.onFirstToken?.(atMs);
  }

  onDone(atMs: number, generatedTokens: number): void {
    settle(this.ticket);
    this.judge.served(this.books, this.req, generatedTokens);
    this.judge.finished(this.books, this.req, this.enteredAtMs, this.firstAtMs < 0 ? atMs : this.firstAtMs, atMs, generatedTokens);
    this.callbacks.onDone?.(atMs, generatedTokens);
  }

  onCancelled(atMs: number, generatedTokens: number): void {
    settle(this.ticket);
    this.judge.served(this.books, this.req, generatedTokens);
    const err = new TidegateError("cancelled", `request ${this.req.id} cancelled`);
    this.judge.failed(this.books, this.req, this.firstAtMs >= 0, err, "cancelled");
    this.callbacks.onError?.(atMs, err);
  }
}

/**
 * The callbacks of a request for a model that may be at zero (cold-hold.ts): its activity is counted from entering
 * to its end, and a held request's first token reports the cold start's TTFT.
 */
class ColdTracked implements RequestCallbacks {
  held = true;
  private ended = false;

  constructor(
    private readonly cold: ColdHold,
    private readonly model: ModelName,
    private readonly callbacks: RequestCallbacks,
    private readonly enteredAtMs: number,
  ) {
    cold.enter(model);
  }

  onFirstToken(atMs: number): void {
    if (this.held) this.cold.coldTtft(this.model, atMs - this.enteredAtMs);
    this.callbacks.onFirstToken?.(atMs);
  }

  onDone(atMs: number, generatedTokens: number): void {
    this.end();
    this.callbacks.onDone?.(atMs, generatedTokens);
  }

  onError(atMs: number, err: unknown): void {
    this.end();
    this.callbacks.onError?.(atMs, err);
  }

  /** The request never started (refused when submitted): its activity ends, the caller is told nothing. */
  abandon(): void {
    this.end();
  }

  private end(): void {
    if (this.ended) return;
    this.ended = true;
    this.cold.leave(this.model);
  }
}

/** Submits requests to one region's instances in callback form. */
export class CallbackPath {
  constructor(private readonly p: CallbackPathOptions) {}

  /**
   * Routes `req` (Gateway.submit's contract); `cold` is the hold when its model may be at zero: a request that finds
   * no serving instance then waits there (HELD) instead of being refused.
   */
  submit(req: GenerateRequest, callbacks: RequestCallbacks, cold: ColdHold | undefined): RouteChoice | undefined {
    const { clock, table } = this.p;
    if (cold === undefined) return this.now(req, callbacks, clock.now());
    table.model(req.model);
    const enteredAtMs = clock.now();
    const tracked = new ColdTracked(cold, req.model, callbacks, enteredAtMs);
    if (table.serves(req.model)) {
      tracked.held = false;
      let choice: RouteChoice | undefined;
      try {
        choice = this.now(req, tracked, enteredAtMs);
      } finally {
        if (choice === undefined) tracked.abandon();
      }
      return choice;
    }
    this.hold(cold, req, tracked, enteredAtMs, enteredAtMs + cold.holdMs);
    return HELD;
  }

  /**
   * Holds a request for a cold model until it serves (then routes it as `submit` does; an instance gone again by
   * then holds it again until the same deadline) or the hold refuses it (`onError` with model_cold).
   */
  private hold(cold: ColdHold, req: GenerateRequest, tracked: ColdTracked, enteredAtMs: number, deadlineMs: number): void {
    const { clock, table, judge } = this.p;
    cold.hold(
      req.model,
      () => {
        if (!table.serves(req.model)) return this.hold(cold, req, tracked, enteredAtMs, deadlineMs);
        try {
          this.now(req, tracked, enteredAtMs);
        } catch (err) {
          tracked.onError(clock.now(), err);
        }
      },
      (err) => {
        table.model(req.model);
        const books = judge.of(req.model);
        judge.demand(books, req);
        judge.failed(books, req, false, err);
        tracked.onError(clock.now(), err);
      },
      deadlineMs,
    );
  }

  /** Routes a request that entered at `enteredAtMs` now: where it went, or undefined when nothing serves. */
  private now(req: GenerateRequest, callbacks: RequestCallbacks, enteredAtMs: number): RouteChoice | undefined {
    const { table, chooser, judge } = this.p;
    const model = table.model(req.model);
    const books = judge.of(req.model);
    const blocks = chooser.blocksOf(req);
    // A model served disaggregated (pd.ts) takes the stream path's two steps; its decode instance is chosen after the
    // prefill, so the choice names no instance yet.
    if (disaggregates(model)) {
      this.drive(req, callbacks);
      return { endpointId: model.endpoints[0]!.endpointId, instanceId: "" };
    }
    const rec = chooser.choose(model, undefined, blocks);
    const choice = rec === undefined ? undefined : { endpointId: rec.endpoint.endpointId, instanceId: rec.engine.instanceId };
    // A stream-only engine: the stream path (started now, so it makes the same choice) keeps the books and the counts.
    if (rec !== undefined && rec.engine.submit === undefined) {
      this.drive(req, callbacks);
      return choice;
    }
    judge.demand(books, req);
    if (rec === undefined) {
      judge.unplaced(books, req);
      return undefined;
    }
    const ticket = chooser.book(rec, req, model.kvBytesPerToken, blocks);
    try {
      rec.engine.submit!(req, new Submitted(judge, books, ticket, req, callbacks, enteredAtMs));
    } catch (err) {
      settle(ticket);
      judge.failed(books, req, false, err);
      throw err;
    }
    return choice;
  }

  /**
   * `submit` over an engine without a callback form: the push path, its events counted into `callbacks`; what it
   * reports while `submit` runs (a refusal) comes after `submit` returns its choice.
   */
  private drive(req: GenerateRequest, callbacks: RequestCallbacks): void {
    const clock = this.p.clock;
    let first = true;
    let generated = 0;
    openReportingLater((sink) => this.p.open(req, sink), {
      event(ev) {
        if (first) {
          first = false;
          callbacks.onFirstToken?.(clock.now());
        }
        if (ev.type === "token") generated += ev.tokens;
        else callbacks.onDone?.(clock.now(), generated);
        return true;
      },
      fail(err) {
        callbacks.onError?.(clock.now(), err);
      },
    });
  }
}
