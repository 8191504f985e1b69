/**
 * The gateway's request path in push form (`Gateway.open`, and `Gateway.generate` as its stream: HTTP, gRPC,
 * in-process links; core/push.ts): choose an instance, book it, push the engine's events to the caller's sink as
 * they come (the engine's `open` where it has one: no promise per token), retry on another instance when one fails
 * before its first event, and report every ending to the judge. A request for a model that may be at zero waits in
 * the cold hold first (cold-hold.ts).
 */
import { disaggregates, prefillForRemote, splits } from "./pd.js";
import { DECODE_ROLES, PLAIN_ROLES, WHOLE_ROLES, type Role } from "./roles.js";
import type { Clock } from "../../core/clock.js";
import { TidegateError, findTidegateError } from "../../core/errors.js";
import type { Logger } from "../../core/log.js";
import type { RegionName } from "../../core/models.js";
import type { EngineEvent, GenerateRequest } from "../../core/ports.js";
import type { BurstLog } from "../../core/burst-log.js";
import { settle, type Chooser, type Ticket } from "./chooser.js";
import type { ColdHold } from "./cold-hold.js";
import type { Attempt, InstanceRecord, InstanceTable, ModelEntry } from "./instance-table.js";
import type { Judge, ModelBooks } from "./judge.js";
import { NO_FLOW, pushFrom, refused, type EventSink, type Flow } from "../../core/push.js";

/** What both request paths work with: the region's table, chooser and judge. */
export interface PathParts {
  region: RegionName;
  clock: Clock;
  log: Logger;
  table: InstanceTable;
  chooser: Chooser;
  judge: Judge;
}

export interface StreamPathOptions extends PathParts {
  /** Instances tried per request when one fails before its first event (≥ 1). */
  maxAttempts: number;
  /** One warning per burst of instances failing before a first event (a stopped engine fails all its requests). */
  retried: BurstLog;
}

/**
 * Whether a failure is retried on another instance: only before the first event, and never a client error (4xx
 * other than rate_limited) — the engine's `cancelled` (499) included: it is the request's end, not the instance's.
 */
export function retryable(err: unknown, started: boolean): boolean {
  if (started) return false;
  const te = findTidegateError(err);
  return te === undefined || te.status >= 500 || te.code === "rate_limited";
}

/** Routes requests to one region's instances and pushes their events to the caller's sink. */
export class StreamPath {
  constructor(private readonly p: StreamPathOptions) {}

  /**
   * A request for a model that may be at zero: held (cold-hold.ts) while no instance serves, then opened; TTFT is
   * judged from entering here, so a cold start's wait counts. A hold that ends in model_cold or a cancel is judged
   * as a refusal or a cancel.
   */
  openAfterHold(cold: ColdHold, req: GenerateRequest, sink: EventSink, signal: AbortSignal | undefined): Flow {
    const { table, judge, clock } = this.p;
    try {
      table.model(req.model);
    } catch (err) {
      return refused(sink, err);
    }
    const books = judge.of(req.model);
    const enteredAtMs = clock.now();
    cold.enter(req.model);
    let left = false;
    const leave = () => {
      if (left) return;
      left = true;
      cold.leave(req.model);
    };
    let inner: Flow = NO_FLOW;
    const held = !table.serves(req.model);
    const go = () => {
      let first = held;
      inner = this.open(
        req,
        {
          event: (ev) => {
            if (first) {
              first = false;
              cold.coldTtft(req.model, clock.now() - enteredAtMs);
            }
            // Left before `done` is handed on: its consumer may stop there (Gateway.open's contract).
            if (ev.type === "done") leave();
            return sink.event(ev);
          },
          fail: (err) => {
            leave();
            sink.fail(err);
          },
        },
        signal,
        enteredAtMs,
      );
    };
    if (!held) go();
    else
      cold.wait(req.model, signal).then(go, (err: unknown) => {
        judge.demand(books, req);
        if (findTidegateError(err, "cancelled") !== undefined) judge.cancelled(books);
        else judge.failed(books, req, false, err);
        leave();
        sink.fail(err);
      });
    return { resume: () => inner.resume() };
  }

  /** Routes one request that entered the gateway at `enteredAtMs` and pushes its events (Gateway.open's contract). */
  open(req: GenerateRequest, sink: EventSink, signal: AbortSignal | undefined, enteredAtMs: number): Flow {
    const { table, judge } = this.p;
    let model: ModelEntry;
    try {
      model = table.model(req.model);
    } catch (err) {
      return refused(sink, err);
    }
    const books = judge.of(req.model);
    judge.demand(books, req);
    const routed = new Routed(this.p, model, books, req, sink, signal, enteredAtMs);
    routed.start();
    return routed;
  }
}

/**
 * One request through the stream path: its attempts, one instance each (at most `maxAttempts`, another instance
 * when one fails before its first event), and its books. Events go from the engine's sink to the caller's in the
 * same call; the only promises are per request (the prefill step of a disaggregated model, an engine without `open`).
 */
class Routed implements Flow {
  private readonly judged: boolean;
  private readonly tried = new Set<InstanceRecord>();
  private readonly blocks: readonly number[];
  private lastError: unknown;
  private kvTransfer: GenerateRequest["kvTransfer"];
  /** The roles that take this request: plain, a decode after the prefill step, or a short one whole (pd.ts). */
  private roles: ReadonlySet<Role> = PLAIN_ROLES;
  private attempt = 0;
  /** The attempt under way: its instance, books and progress (undefined between attempts and after the end). */
  private cur: { rec: InstanceRecord; ticket: Ticket; upstream: AbortController; onAbort: () => void; attemptRec: Attempt; flow: Flow } | undefined;
  private started = false;
  private streamed = 0;
  private outputTokens = 0;
  private firstAtMs = 0;
  private lastAtMs = 0;

  constructor(
    private readonly p: StreamPathOptions,
    private readonly model: ModelEntry,
    private readonly books: ModelBooks,
    private readonly req: GenerateRequest,
    private readonly sink: EventSink,
    private readonly signal: AbortSignal | undefined,
    private readonly enteredAtMs: number,
  ) {
    this.judged = req.batch !== true;
    this.blocks = p.chooser.blocksOf(req);
  }

  start(): void {
    const { chooser, log, judge } = this.p;
    // Prefill/decode disaggregation (pd.ts): a prefill instance first; its kv_transfer_params go to a decode instance.
    // A short uncached prompt goes whole to an instance that prefills and decodes.
    if (!disaggregates(this.model)) return this.next();
    if (!splits(chooser, this.model, this.req, this.blocks)) {
      this.roles = WHOLE_ROLES;
      return this.next();
    }
    prefillForRemote(chooser, this.model, this.req, this.blocks, log, this.signal).then(
      (params) => {
        this.kvTransfer = { params };
        this.roles = DECODE_ROLES;
        this.next();
      },
      (err: unknown) => {
        if (this.signal?.aborted) judge.cancelled(this.books);
        else judge.failed(this.books, this.req, false, err);
        this.sink.fail(err);
      },
    );
  }

  resume(): void {
    this.cur?.flow.resume();
  }

  /** The next attempt, or the request's end when none is left. */
  private next(): void {
    const { chooser, judge, region } = this.p;
    const { req, signal, books } = this;
    if (this.attempt >= this.p.maxAttempts) return this.giveUp();
    this.attempt++;
    if (signal?.aborted) {
      judge.cancelled(books);
      return this.sink.fail(new TidegateError("cancelled", `request ${req.id} cancelled`, { cause: signal.reason }));
    }
    const rec = chooser.choose(this.model, this.tried, this.blocks, this.roles);
    if (rec === undefined) return this.giveUp();
    const ticket = chooser.book(rec, req, this.model.kvBytesPerToken, this.blocks);
    const upstream = new AbortController();
    const onAbort = () => upstream.abort(signal?.reason);
    signal?.addEventListener("abort", onAbort, { once: true });
    // Registered on the instance so that `engineDown` can end it (issue 49 item 2).
    const attemptRec: Attempt = { upstream, failure: undefined };
    rec.attempts.add(attemptRec);
    const cur = (this.cur = { rec, ticket, upstream, onAbort, attemptRec, flow: NO_FLOW });
    this.started = false;
    this.streamed = this.outputTokens = this.firstAtMs = this.lastAtMs = 0;
    const cached = ticket.cachedTokens;
    const kvTransfer = this.kvTransfer;
    const sent = cached > 0 || kvTransfer !== undefined ? { ...req, ...(cached > 0 ? { expectedCachedTokens: cached } : {}), ...(kvTransfer === undefined ? {} : { kvTransfer }) } : req;
    // Events of an attempt that already ended (an engine calling its sink late) are dropped.
    const engineSink: EventSink = {
      event: (ev) => (this.cur === cur ? this.onEvent(ev) : false),
      fail: (err) => {
        if (this.cur === cur) this.onFail(err);
      },
    };
    try {
      const engine = rec.engine;
      cur.flow = engine.open !== undefined ? engine.open(sent, engineSink, upstream.signal) : pushFrom(engine.generate(sent, upstream.signal), engineSink, { signal: upstream.signal, onCloseError: (err) => this.p.log.warn("engine failed while closing a request's stream", { region, instanceId: engine.instanceId, requestId: req.id, err }) });
    } catch (err) {
      engineSink.fail(err);
    }
  }

  private onEvent(ev: EngineEvent): boolean {
    const { judge, clock } = this.p;
    const { books, req } = this;
    if (!this.started) {
      this.started = true;
      judge.served(books, req, req.promptTokens);
      this.firstAtMs = this.lastAtMs = clock.now();
    }
    if (ev.type === "token") {
      this.streamed += ev.tokens;
      if (this.judged) {
        this.outputTokens += ev.tokens;
        this.lastAtMs = clock.now();
      }
      return this.sink.event(ev);
    }
    // `done` ends the request: everything closes before it is handed on (the books, the caller's signal; the engine
    // has closed its own), so its consumer may stop there.
    judge.served(books, req, this.streamed);
    this.streamed = 0;
    this.endAttempt();
    judge.finished(books, req, this.enteredAtMs, this.firstAtMs, this.lastAtMs, this.outputTokens);
    this.sink.event(ev);
    return true;
  }

  private onFail(caught: unknown): void {
    const { judge, log, region } = this.p;
    const { books, req, signal } = this;
    const { rec, attemptRec } = this.cur!;
    this.endAttempt();
    judge.served(books, req, this.streamed); // what a failed or cancelled stream delivered
    this.streamed = 0;
    // Ended by `engineDown`: its reason, whatever the engine threw on the abort.
    const err = attemptRec.failure ?? caught;
    if (signal?.aborted) {
      judge.cancelled(books);
      log.debug("request cancelled by its caller", { region, instanceId: rec.engine.instanceId, requestId: req.id, started: this.started });
      return this.sink.fail(new TidegateError("cancelled", `request ${req.id} cancelled`, { cause: err }));
    }
    if (!retryable(err, this.started)) {
      judge.failed(books, req, this.started, err);
      // Before the first event only a client error gets here: passed through unretried.
      if (!this.started) return this.sink.fail(findTidegateError(err)!);
      // Ended by engineDown: its own error ("instance … stopped answering (why)").
      if (attemptRec.failure !== undefined) return this.sink.fail(attemptRec.failure);
      return this.sink.fail(new TidegateError("upstream_error", `instance ${rec.engine.instanceId} failed mid-stream`, { cause: err }));
    }
    this.p.retried.note(rec.engine.instanceId, { region, instanceId: rec.engine.instanceId, requestId: req.id, err });
    log.debug("instance failed before first event", { region, instanceId: rec.engine.instanceId, requestId: req.id, err });
    this.tried.add(rec);
    this.lastError = err;
    this.next();
  }

  /** Closes the attempt under way: off the instance, off the caller's signal, its booking settled. */
  private endAttempt(): void {
    const cur = this.cur!;
    this.cur = undefined;
    cur.rec.attempts.delete(cur.attemptRec);
    this.signal?.removeEventListener("abort", cur.onAbort);
    settle(cur.ticket);
  }

  private giveUp(): void {
    const { judge, region } = this.p;
    const { req } = this;
    judge.failed(this.books, req, false, this.lastError);
    if (this.tried.size === 0) return this.sink.fail(new TidegateError("no_region_available", `no serving instance of ${req.model} in region ${region}`));
    this.sink.fail(new TidegateError("upstream_error", `${this.tried.size} instance(s) of ${req.model} in region ${region} failed before the first token`, { cause: this.lastError }));
  }
}
