/**
 * The gateway's stream path (`Gateway.generate`: HTTP, gRPC, in-process links): choose an instance, book it, stream
 * the engine's events, retry on another instance when one fails before its first event, and report every ending
 * to the judge. A request for a model that may be at zero waits in the cold hold first (cold-hold.ts).
 */
import { disaggregates, prefillForRemote } from "./pd.js";
import { DECODE_ROLES, PLAIN_ROLES } from "./roles.js";
import type { Clock } from "../../core/clock.js";
import { TidegateError, findTidegateError } from "../../core/errors.js";
import type { Logger } from "../../core/log.js";
import type { RegionName } from "../../core/models.js";
import type { EngineEvent, GenerateRequest } from "../../core/ports.js";
import type { BurstLog } from "../../core/burst-log.js";
import { settle, type Chooser } from "./chooser.js";
import type { ColdHold } from "./cold-hold.js";
import type { Attempt, InstanceRecord, InstanceTable } from "./instance-table.js";
import type { Judge } from "./judge.js";

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

/**
 * Returns an engine's stream so that its `finally` runs (Engine.generate's contract). A failure there is the
 * engine's cleanup failing after the request itself ended or was given up: logged, not the request's error.
 */
async function closeQuietly(it: AsyncIterator<EngineEvent>, log: Logger, instanceId: string, requestId: string): Promise<void> {
  try {
    await it.return?.();
  } catch (err) {
    log.warn("engine failed while closing a request's stream", { instanceId, requestId, err });
  }
}

/** Streams requests through one region's instances. */
export class StreamPath {
  constructor(private readonly p: StreamPathOptions) {}

  /**
   * A stream for a model that may be at zero: held (cold-hold.ts) while no instance serves, then streamed; TTFT is
   * judged from entering here, so a cold start's wait counts. A hold that ends in model_cold or a cancel is
   * judged as a refusal or a cancel.
   */
  async *afterHold(cold: ColdHold, req: GenerateRequest, signal: AbortSignal | undefined): AsyncGenerator<EngineEvent, void, undefined> {
    const { table, judge, clock } = this.p;
    table.model(req.model);
    const books = judge.of(req.model);
    const enteredAtMs = clock.now();
    cold.enter(req.model);
    let left = false;
    try {
      const held = !table.serves(req.model);
      if (held) {
        try {
          await cold.wait(req.model, signal);
        } catch (err) {
          judge.demand(books, req);
          if (findTidegateError(err, "cancelled") !== undefined) judge.cancelled(books);
          else judge.failed(books, req, false, err);
          throw err;
        }
      }
      let first = held;
      for await (const ev of this.run(req, signal, enteredAtMs)) {
        if (first) {
          first = false;
          cold.coldTtft(req.model, clock.now() - enteredAtMs);
        }
        // Closed before `done` is handed on: its consumer may stop pulling there (generate's contract).
        if (ev.type === "done" && !left) {
          left = true;
          cold.leave(req.model);
        }
        yield ev;
      }
    } finally {
      if (!left) cold.leave(req.model);
    }
  }

  /** Routes and streams one request that entered the gateway at `enteredAtMs` (Gateway.generate's contract). */
  async *run(req: GenerateRequest, signal: AbortSignal | undefined, enteredAtMs: number): AsyncGenerator<EngineEvent, void, undefined> {
    const { region, clock, log, table, chooser, judge } = this.p;
    const model = table.model(req.model);
    const books = judge.of(req.model);
    judge.demand(books, req);
    const judged = req.batch !== true;
    const tried = new Set<InstanceRecord>();
    const blocks = chooser.blocksOf(req);
    let lastError: unknown;
    // Prefill/decode disaggregation (pd.ts): a prefill instance first; its kv_transfer_params go to a decode instance.
    let kvTransfer: GenerateRequest["kvTransfer"];
    if (disaggregates(model)) {
      try {
        kvTransfer = { params: await prefillForRemote(chooser, model, req, blocks, log, signal) };
      } catch (err) {
        if (signal?.aborted) judge.cancelled(books);
        else judge.failed(books, req, false, err);
        throw err;
      }
    }
    for (let attempt = 0; attempt < this.p.maxAttempts; attempt++) {
      if (signal?.aborted) {
        judge.cancelled(books);
        throw new TidegateError("cancelled", `request ${req.id} cancelled`, { cause: signal.reason });
      }
      const rec = chooser.choose(model, tried, blocks, kvTransfer === undefined ? PLAIN_ROLES : DECODE_ROLES);
      if (rec === undefined) break;
      const ticket = chooser.book(rec, req, model.kvBytesPerToken, blocks);
      const cached = ticket.cachedTokens;
      let settled = false;
      const settleOnce = () => {
        if (settled) return;
        settled = true;
        settle(ticket);
      };
      const upstream = new AbortController();
      const onAbort = () => upstream.abort(signal?.reason);
      signal?.addEventListener("abort", onAbort, { once: true });
      // Registered on the instance so that `engineDown` can end it (issue 49 item 2).
      const attemptRec: Attempt = { upstream, failure: undefined };
      rec.attempts.add(attemptRec);
      let started = false;
      let finished = false;
      let streamed = 0;
      let outputTokens = 0;
      let firstAtMs = 0;
      let lastAtMs = 0;
      let iterator: AsyncIterator<EngineEvent> | undefined;
      try {
        const sent = cached > 0 || kvTransfer !== undefined ? { ...req, ...(cached > 0 ? { expectedCachedTokens: cached } : {}), ...(kvTransfer === undefined ? {} : { kvTransfer }) } : req;
        iterator = rec.engine.generate(sent, upstream.signal)[Symbol.asyncIterator]();
        for (;;) {
          const step = await iterator.next();
          if (step.done === true) break;
          const ev = step.value;
          if (!started) {
            started = true;
            judge.served(books, req, req.promptTokens);
            firstAtMs = lastAtMs = clock.now();
          }
          if (ev.type === "token") {
            streamed += ev.tokens;
            if (judged) {
              outputTokens += ev.tokens;
              lastAtMs = clock.now();
            }
            yield ev;
            continue;
          }
          // `done` ends the request even if the consumer stops pulling right after it (a consumer may hold this
          // generator suspended at the yield below and drop it), so everything closes before it is handed on: the
          // books, the caller's signal, and the engine's own stream — returned so that its `finally` runs (the
          // openai-http adapter's in-flight count, remaining tokens and idle scrape; issue 32 item 6).
          judge.served(books, req, streamed);
          streamed = 0;
          finished = true;
          settleOnce();
          rec.attempts.delete(attemptRec);
          signal?.removeEventListener("abort", onAbort);
          await closeQuietly(iterator, log, rec.engine.instanceId, req.id);
          judge.finished(books, req, enteredAtMs, firstAtMs, lastAtMs, outputTokens);
          yield ev;
          return;
        }
        finished = true;
        throw new TidegateError("upstream_error", `instance ${rec.engine.instanceId} ended request ${req.id} without a done event`);
      } catch (caught) {
        finished = true;
        // Ended by `engineDown`: its reason, whatever the engine threw on the abort.
        const err = attemptRec.failure ?? caught;
        if (signal?.aborted) {
          judge.cancelled(books);
          log.debug("request cancelled by its caller", { region, instanceId: rec.engine.instanceId, requestId: req.id, started });
          throw new TidegateError("cancelled", `request ${req.id} cancelled`, { cause: err });
        }
        if (!retryable(err, started)) {
          judge.failed(books, req, started, err);
          // Before the first event only a client error gets here: passed through unretried.
          if (!started) throw findTidegateError(err)!;
          // Ended by engineDown: its own error ("instance … stopped answering (why)").
          if (attemptRec.failure !== undefined) throw attemptRec.failure;
          throw new TidegateError("upstream_error", `instance ${rec.engine.instanceId} failed mid-stream`, { cause: err });
        }
        this.p.retried.note(rec.engine.instanceId, { region, instanceId: rec.engine.instanceId, requestId: req.id, err });
        log.debug("instance failed before first event", { region, instanceId: rec.engine.instanceId, requestId: req.id, err });
        tried.add(rec);
        lastError = err;
      } finally {
        rec.attempts.delete(attemptRec);
        signal?.removeEventListener("abort", onAbort);
        settleOnce();
        judge.served(books, req, streamed); // what a failed or cancelled stream delivered
        streamed = 0;
        if (!finished) {
          log.debug("request cancelled: its consumer stopped early", { region, instanceId: rec.engine.instanceId, requestId: req.id });
          // The consumer stopped early: abort first so the engine frees the request even if return() is a no-op.
          upstream.abort(new TidegateError("cancelled", `request ${req.id} cancelled by its consumer`));
          judge.cancelled(books);
          if (iterator !== undefined) await closeQuietly(iterator, log, rec.engine.instanceId, req.id);
        }
      }
    }
    judge.failed(books, req, false, lastError);
    if (tried.size === 0) throw new TidegateError("no_region_available", `no serving instance of ${req.model} in region ${this.p.region}`);
    throw new TidegateError("upstream_error", `${tried.size} instance(s) of ${req.model} in region ${this.p.region} failed before the first token`, { cause: lastError });
  }
}
