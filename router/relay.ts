/**
 * Dispatch with retry (DESIGN "Request path" step 4): pick a region with the selector, dispatch over its
 * RegionLink, and wait for the first event. A region that fails before the first event is excluded and the next
 * pick is tried; once the first event has arrived the stream is committed to that region and later failures are
 * the caller's to report in-stream. The caller's AbortSignal (client disconnect) aborts the upstream attempt.
 *
 * Two shapes over one walk (`RegionWalk`: select, exclude what was tried, note the in-flight KV): the stream
 * (`dispatchWithRetry`, the HTTP relay) and the callbacks (`submitWithRetry`, RegionLink.submit: the replays'
 * ten million requests a week, synchronously on their clock).
 */
import { blockHashesOfBody } from "../core/prefix.js";
import { COLD_START_CODES, TidegateError, findTidegateError } from "../core/errors.js";
import type { RegionName } from "../core/models.js";
import type { EngineEvent, GenerateRequest, LinkCallbacks, RegionLink } from "../core/ports.js";
import { NO_FLOW, pushFrom, type EventSink, type Flow } from "../core/push.js";
import { requestKvBytes, type RegionSelector } from "./selector.js";
import type { RegionDecision } from "./selection.js";
import type { StreamWatchdog, Watched } from "./watchdog.js";
import type { ConcurrencyLimiter, ConcurrencyShed, ConcurrencySlot } from "./concurrency.js";
import { ShedError } from "./admission.js";

/** A request committed to one region: its first event, and the rest pushed (`pipe`) or pulled (`next`). */
export interface OpenedStream {
  region: RegionName;
  /** Why the region was chosen (RegionWalk.reason): the `x-tidegate-region-reason` header and the choices counter. */
  reason: RegionChoiceReason;
  first: EngineEvent;
  /**
   * Hands every later event to `sink` as the region delivers it (core/push.ts: no promise per token), those that
   * came before the call first; a failure reaches `sink.fail`, given up as upstream_error ("region … stalled: …")
   * when the watchdog finds the stream stalled (watchdog.ts). `sink.event` returning false pauses the region's
   * stream until the returned flow resumes. Call it once, or use `next`.
   */
  pipe(sink: EventSink): Flow;
  /** The next event (pull form of `pipe`, for callers that want a stream); rejects as `pipe` fails. */
  next(): Promise<IteratorResult<EngineEvent>>;
  /** Aborts the upstream dispatch, then releases the stream (idempotent). */
  abort(): void;
  /** Once the stream is over: detaches from the client's signal and the watchdog. Idempotent. */
  release(): void;
}

/**
 * The sink one dispatch attempt opens the region's request with: the first event (or the failure before it)
 * settles `first`; later events wait in a queue until the caller pipes them on (OpenedStream.pipe) or pulls them.
 */
class Opening implements EventSink {
  readonly first: Promise<EngineEvent>;
  /** The region's flow (RegionLink.open's answer), set right after opening. */
  flow: Flow = NO_FLOW;
  /** Called with every event before it goes on (the watchdog's touch, the decode-pace measure). */
  seen: ((ev: EngineEvent) => void) | undefined;
  /** Maps a failure after the first event (the watchdog's verdict). */
  explain: (err: unknown) => unknown = (err) => err;
  private resolveFirst!: (ev: EngineEvent) => void;
  private rejectFirst!: (err: unknown) => void;
  private gotFirst = false;
  private readonly queue: EngineEvent[] = [];
  private head = 0;
  private paused = false;
  private failure: unknown;
  private failed = false;
  private downstream: EventSink | undefined;
  private waiter: { resolve: (r: IteratorResult<EngineEvent>) => void; reject: (e: unknown) => void } | undefined;
  /** The region sent `done`: once the queue is read, `next` ends. */
  private done = false;

  constructor() {
    this.first = new Promise((resolve, reject) => {
      this.resolveFirst = resolve;
      this.rejectFirst = reject;
    });
  }

  event(ev: EngineEvent): boolean {
    this.seen?.(ev);
    if (ev.type === "done" && this.downstream === undefined) this.done = true;
    if (!this.gotFirst) {
      this.gotFirst = true;
      this.resolveFirst(ev);
      return true;
    }
    if (this.downstream !== undefined) return this.downstream.event(ev);
    const w = this.waiter;
    if (w !== undefined) {
      this.waiter = undefined;
      w.resolve({ value: ev, done: false });
      return true;
    }
    this.queue.push(ev);
    if (this.queue.length - this.head >= 64) this.paused = true;
    return !this.paused;
  }

  fail(err: unknown): void {
    if (!this.gotFirst) {
      this.gotFirst = true;
      this.rejectFirst(err);
      return;
    }
    const e = this.explain(err);
    if (this.downstream !== undefined) return this.downstream.fail(e);
    this.failed = true;
    this.failure = e;
    const w = this.waiter;
    this.waiter = undefined;
    w?.reject(e);
  }

  pipe(sink: EventSink): Flow {
    this.downstream = sink;
    let room = true;
    while (this.head < this.queue.length) room = sink.event(this.queue[this.head++]!) && room;
    this.queue.length = 0;
    this.head = 0;
    if (this.failed) sink.fail(this.failure);
    else if (this.paused && room) {
      this.paused = false;
      this.flow.resume();
    }
    return this.flow;
  }

  next(): Promise<IteratorResult<EngineEvent>> {
    if (this.head < this.queue.length) {
      const ev = this.queue[this.head++]!;
      if (this.head === this.queue.length) {
        this.queue.length = 0;
        this.head = 0;
      }
      if (this.paused && this.queue.length - this.head < 32) {
        this.paused = false;
        this.flow.resume();
      }
      return Promise.resolve({ value: ev, done: false });
    }
    if (this.failed) return Promise.reject(this.failure);
    if (this.done) return Promise.resolve({ value: undefined, done: true });
    return new Promise((resolve, reject) => (this.waiter = { resolve, reject }));
  }
}

export interface DispatchOptions {
  selector: RegionSelector;
  links: ReadonlyMap<RegionName, RegionLink>;
  req: GenerateRequest;
  /** The client's region (header or API key), first in preference order. */
  clientRegion?: RegionName;
  /**
   * KV bytes the request will hold, for the in-flight estimate; default `requestKvBytes` (prompt + max output
   * tokens × bytes per token).
   */
  kvBytes?: number;
  /** Aborted when the client goes away. */
  signal: AbortSignal;
  /** Regions that may serve the request (an API key's `regions`, data residency); absent = any. */
  allowedRegions?: ReadonlySet<RegionName>;
  /** Called for each region that failed before its first event when another region is about to be tried. */
  onRetry?: (failedRegion: RegionName, err: unknown) => void;
  /** Called as the request is sent to a region (each try), so that an outcome before its first event names it. */
  onDispatch?: (region: RegionName) => void;
  /**
   * Watches every upstream wait: a region that goes dark before the first event is given up at once (and the next
   * region tried); a running stream that stalls ends (watchdog.ts). Absent: waits are unbounded (unit tests).
   */
  watchdog?: StreamWatchdog;
  /**
   * Adaptive concurrency (concurrency.ts): a region at its limit is passed over, and the request is shed (ShedError,
   * 429) when every region that may serve it is at its limit or the tenant is beyond its share. Absent: no limit.
   */
  concurrency?: { limiter: ConcurrencyLimiter; tenant: string; retryAfterS: number; queueMs: number };
  /** Retry-After (s) of a request shed because no region predicts within the SLO (router.retryAfterS); default 1. */
  sloRetryAfterS?: number;
}

/**
 * Why a request went to its region, as the response header `x-tidegate-region-reason` and
 * `tidegate_router_region_choices_total{reason}` say it: `nearest` (the first region in the client's preference order
 * that may serve it, under the memory threshold), `memory-threshold` (nearer ones were at or over it: SageServe §6.2),
 * `least-utilized` (every region was over it), `prefix` (it holds the longest prefix of the prompt, issue 34),
 * `slo-spill` (the §6.2 pick predicted a TTFT beyond the model's SLO and this one within it: spill.ts), `cold` /
 * `cold-sooner` (scale from zero, issue 33), `concurrency` (a region before it was at its concurrency limit),
 * `retry` (a region before it failed before the first token).
 */
export const REGION_CHOICE_REASONS = ["nearest", "memory-threshold", "least-utilized", "prefix", "slo-spill", "cold", "cold-sooner", "concurrency", "retry"] as const;
export type RegionChoiceReason = (typeof REGION_CHOICE_REASONS)[number];

/**
 * One request's walk over the regions, the same for both shapes of dispatch: each `next()` asks the selector for
 * the best region not tried yet (client region, its proximity list, the rest; the first under the memory threshold,
 * else the least utilized: SageServe §6.2), marks it tried, skips a region without a link, and adds the request's
 * KV bytes to the selector's in-flight estimate for the region it returns. Regions outside `allowed` count as tried
 * from the start. With spill on, a first pick that no allowed region predicts within the SLO for ends the walk
 * (`overSlo`: the caller sheds the request).
 */
export class RegionWalk {
  private tried: Set<RegionName> | undefined;
  /** Regions passed over because `hasRoom` said no (at their concurrency limit). */
  full = 0;
  /** When set, a region for which it returns false is passed over (and counted in `full`). */
  hasRoom: ((region: RegionName) => boolean) | undefined;
  /** Why the last region `next` returned was chosen. */
  reason: RegionChoiceReason = "nearest";
  /** Set when `next` returned undefined because the first pick predicted beyond the SLO with no region within it. */
  overSlo = false;
  /** Regions `next` has returned. */
  private returned = 0;
  /** The predicted TTFT (ms) of the region `next` last returned, when the selector predicted one (spill.ts). */
  predictedTtftMs: number | undefined;

  constructor(
    private readonly selector: RegionSelector,
    private readonly links: ReadonlyMap<RegionName, RegionLink>,
    private readonly req: GenerateRequest,
    private readonly clientRegion: RegionName | undefined,
    allowed?: ReadonlySet<RegionName>,
    private readonly kvBytes = requestKvBytes(req.model, req.promptTokens, req.maxTokens),
  ) {
    if (allowed !== undefined) for (const r of links.keys()) if (!allowed.has(r)) (this.tried ??= new Set()).add(r);
  }

  private hashes: readonly number[] | undefined;

  /**
   * The prompt's block hashes when regions are chosen by prefix (the request's own, a trace's in replay, else hashed
   * from its body with the chat template applied, core/prefix.ts), computed once; undefined otherwise.
   */
  private blocks(): readonly number[] | undefined {
    const blockTokens = this.selector.prefixBlockTokens;
    if (blockTokens === undefined) return undefined;
    return (this.hashes ??= this.req.blockHashes ?? blockHashesOfBody(this.req.kind, this.req.body, blockTokens));
  }

  /** The next region to send to and its link, or undefined when no region is left. */
  next(): { region: RegionName; link: RegionLink } | undefined {
    for (;;) {
      const pick = this.selector.select(this.req.model, this.clientRegion, this.tried, this.req.promptTokens, this.blocks(), this.req.maxTokens);
      if (pick === undefined) return undefined;
      if (pick.overSlo === true && this.returned === 0 && this.full === 0) {
        this.overSlo = true;
        return undefined;
      }
      (this.tried ??= new Set()).add(pick.region);
      const link = this.links.get(pick.region);
      if (link === undefined) continue;
      if (this.hasRoom !== undefined && !this.hasRoom(pick.region)) {
        this.full++;
        continue;
      }
      this.selector.noteDispatch(pick.region, this.req.model, this.kvBytes, this.blocks());
      this.reason = this.returned > 0 ? "retry" : this.full > 0 ? "concurrency" : choiceReason(pick);
      this.predictedTtftMs = pick.candidates.find((c) => c.region === pick.region)?.ttftMs;
      this.returned++;
      return { region: pick.region, link };
    }
  }
}

/** The header's reason for a selector's decision (REGION_CHOICE_REASONS). */
function choiceReason(d: RegionDecision): RegionChoiceReason {
  switch (d.reason) {
    case "threshold":
      return d.nearest ? "nearest" : "memory-threshold";
    case "least":
      return "least-utilized";
    default:
      return d.reason;
  }
}

/**
 * True for failures worth trying elsewhere: server-side errors, not the client's own (4xx), a cancellation, or a
 * cold-start hold that ran out (model_cold: the region chosen for the cold start was the best one).
 */
export function isRetryable(err: unknown): boolean {
  const te = findTidegateError(err);
  if (te === undefined) return true;
  return te.status >= 500 && te.code !== "cancelled" && te.code !== "model_cold";
}

/**
 * Opens the stream in the first region that produces a first event. Throws TidegateError: cancelled when the
 * client aborted; the region's own error when it is not retryable (a 4xx from upstream); when every region tried
 * refused to start the model from zero (no_capacity, not_placed, cold_start_failed: issue 50), the first one's code
 * with every region's reason; no_region_available (503) when no region is available (saying why of each) or every
 * available one failed before its first event.
 */
export async function dispatchWithRetry(opts: DispatchOptions): Promise<OpenedStream> {
  const { req, signal } = opts;
  const walk = new RegionWalk(opts.selector, opts.links, req, opts.clientRegion, opts.allowedRegions, opts.kvBytes);
  const cc = opts.concurrency;
  if (cc !== undefined) {
    // Synchronous unless the request waits for a slot (no microtask turn on the common path).
    const waiting = shedIfFull(opts, cc);
    if (waiting !== undefined) await waiting;
    walk.hasRoom = (r) => cc.limiter.hasRoom(r, req.model);
  }
  const failures: string[] = [];
  let lastErr: unknown;
  let pendingRetry: RegionName | undefined;
  // The first region's refusal to start the model from zero, while every failure so far is one.
  let coldRefusal: TidegateError | undefined;
  let onlyColdRefusals = true;
  for (;;) {
    if (signal.aborted) throw new TidegateError("cancelled", "client went away before the first token");
    const next = walk.next();
    if (next === undefined && walk.overSlo) throw sloShedError(opts);
    if (next === undefined && cc !== undefined && walk.full > 0 && failures.length === 0) {
      throw shedError("concurrency", req.model, cc);
    }
    if (next === undefined) {
      const among = opts.allowedRegions === undefined ? "" : ` among this API key's regions (${[...opts.allowedRegions].join(", ")})`;
      const cause = lastErr === undefined ? {} : { cause: lastErr };
      if (coldRefusal !== undefined && onlyColdRefusals) throw new TidegateError(coldRefusal.code, `model ${req.model}: no region${among} can start it from zero (${failures.join("; ")})`, cause);
      const detail = failures.length === 0 ? `no region${among} can serve it now (${unavailability(opts)})` : `every available region${among} failed before the first token (${failures.join("; ")})`;
      throw new TidegateError("no_region_available", `model ${req.model}: ${detail}`, cause);
    }
    const { region, link } = next;
    if (pendingRetry !== undefined) {
      opts.onRetry?.(pendingRetry, lastErr);
      pendingRetry = undefined;
    }
    const slot: ConcurrencySlot | undefined = cc?.limiter.acquire(region, req.model, cc.tenant, req.promptTokens);
    // The router's own count of its requests there, live between telemetry reports (spill.ts).
    const tracked = opts.selector.track(region, req.model, walk.predictedTtftMs);
    const attempt = new AbortController();
    const onClientAbort = () => attempt.abort(signal.reason);
    signal.addEventListener("abort", onClientAbort, { once: true });
    const watched: Watched | undefined = opts.watchdog?.watch(region, req.model);
    // A wait given up by the watchdog aborts the upstream dispatch, which fails its pending next(); the caller then
    // sees the watchdog's error. No per-event race: the hot path pays one then() per event.
    let stalledErr: unknown;
    void watched?.stalled.catch((err: unknown) => {
      stalledErr = err;
      attempt.abort(err);
    });
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      signal.removeEventListener("abort", onClientAbort);
      watched?.close();
      slot?.release();
      tracked.end();
    };
    const abort = () => {
      release();
      attempt.abort();
    };
    try {
      opts.onDispatch?.(region);
      const opening = new Opening();
      // The done event measures the region's decode pace (RegionSelector.track) — with the spill on only: otherwise
      // nothing reads it. The watchdog hears of every event (touch) once the first has come.
      const measure = opts.selector.spillOn;
      let started = false;
      opening.seen = (ev) => {
        if (!started) return void (started = true);
        watched?.touch();
        if (measure && ev.type === "done") tracked.done(ev.usage.completion_tokens);
      };
      // The watchdog's own verdict first; a link failure after a long silence reads as the stall it is.
      if (watched !== undefined) opening.explain = (err) => stalledErr ?? watched.explain(err);
      opening.flow = link.open !== undefined ? link.open(req, opening, attempt.signal) : pushFrom(link.dispatch(req, attempt.signal), opening, { signal: attempt.signal });
      const first = watched === undefined ? await opening.first : await Promise.race([opening.first, watched.stalled]);
      slot?.firstEvent();
      tracked.firstEvent();
      watched?.started();
      watched?.touch();
      if (first.type === "done") tracked.done(first.usage.completion_tokens);
      return {
        region,
        reason: walk.reason,
        first,
        pipe: (sink) => opening.pipe(sink),
        next: () => opening.next(),
        abort,
        release,
      };
    } catch (err) {
      abort();
      if (signal.aborted) throw new TidegateError("cancelled", "client went away before the first token", { cause: err });
      if (!isRetryable(err)) throw err;
      lastErr = err;
      pendingRetry = region;
      const te = findTidegateError(err);
      const cold = te !== undefined && COLD_START_CODES.has(te.code) ? te : undefined;
      if (cold === undefined) onlyColdRefusals = false;
      else coldRefusal ??= cold;
      // A region's refusal to start the model names the model and the region already.
      failures.push(cold !== undefined ? cold.message : `${region}: ${err instanceof Error ? err.message : String(err)}`);
    }
  }
}

/** Why each region that may serve the request is unavailable to it, in words (the selector's `unavailableWhy`). */
function unavailability(opts: DispatchOptions): string {
  const regions = opts.selector.hostingRegions(opts.req.model).filter((r) => opts.allowedRegions === undefined || opts.allowedRegions.has(r));
  if (regions.length === 0) return "no region that may serve it hosts it";
  return regions.map((r) => `${r}: ${opts.links.has(r) ? opts.selector.unavailableWhy(r, opts.req.model) : "no link to it"}`).join("; ");
}

/**
 * Sheds `opts.req` (ShedError) when its tenant is beyond its fair share while the model is near its limits, or when
 * every region that may serve its model is at its concurrency limit and no slot came within `queueMs`
 * (concurrency.ts `refusal`, `waitForRoom`).
 */
function shedIfFull(opts: DispatchOptions, cc: NonNullable<DispatchOptions["concurrency"]>): Promise<void> | undefined {
  const model = opts.req.model;
  const regions = opts.selector.hostingRegions(model).filter((r) => opts.links.has(r) && (opts.allowedRegions === undefined || opts.allowedRegions.has(r)) && opts.selector.candidate(r, model).available);
  if (regions.length === 0) return undefined; // nothing available: the walk says so (503)
  const why = cc.limiter.refusal(model, cc.tenant, regions);
  if (why === undefined) return undefined;
  // Within its share: wait briefly for a slot, handed out fairly (concurrency.ts waitForRoom).
  if (why !== "concurrency" || !(cc.queueMs > 0) || !cc.limiter.mayWait(model, cc.queueMs)) throw shedError(why, model, cc);
  return cc.limiter.waitForRoom(model, cc.tenant, regions, cc.queueMs, opts.signal).then((got) => {
    if (got) return;
    if (opts.signal.aborted) throw new TidegateError("cancelled", "client went away before the first token");
    throw shedError(why, model, cc);
  });
}

/**
 * The 429 of a request no region that may serve it predicts within its model's TTFT SLO (spill.ts), with the
 * router's `retryAfterS` (the concurrency options' when present, else 1 s).
 */
function sloShedError(opts: DispatchOptions): ShedError {
  const retryAfterS = opts.concurrency?.retryAfterS ?? opts.sloRetryAfterS ?? 1;
  return new ShedError("slo", retryAfterS, `model ${opts.req.model}: no region that may serve it predicts a first token within its TTFT SLO now; retry after ${retryAfterS} s`);
}

/** The 429 of a request shed by the adaptive limits: every region full, or the tenant beyond its share. */
function shedError(why: ConcurrencyShed, model: string, cc: NonNullable<DispatchOptions["concurrency"]>): ShedError {
  const message =
    why === "concurrency"
      ? `model ${model}: every region that may serve it is at its concurrency limit; retry after ${cc.retryAfterS} s`
      : `model ${model} is near its concurrency limits and tenant ${JSON.stringify(cc.tenant)} has its fair share in flight; retry after ${cc.retryAfterS} s`;
  return new ShedError(why, cc.retryAfterS, message);
}

/** What `submitWithRetry` needs: the router's selector and links (RouterCore), the request and its callbacks. */
export interface SubmitOptions {
  selector: RegionSelector;
  links: ReadonlyMap<RegionName, RegionLink>;
  req: GenerateRequest;
  /** The client's region, first in preference order. */
  clientRegion?: RegionName | undefined;
  callbacks: LinkCallbacks;
}

/**
 * The callback shape of `dispatchWithRetry` (RegionLink.submit; RouterCore.submit): the same walk over the regions,
 * and a region that refuses the request at once with a retryable error (no_region_available: nothing serves the
 * model there) excluded for the next pick; a refusal of the request itself (4xx) is thrown. Failures reported later
 * (`onError`) are the caller's. Returns the region the request went to, or undefined when no region took it.
 */
export function submitWithRetry(opts: SubmitOptions): RegionName | undefined {
  const walk = new RegionWalk(opts.selector, opts.links, opts.req, opts.clientRegion);
  for (;;) {
    const next = walk.next();
    if (next === undefined) return undefined;
    const tracked = opts.selector.track(next.region, opts.req.model, walk.predictedTtftMs);
    const cb = opts.callbacks;
    // Delegates by name (the caller's callbacks may be a class instance with methods on its prototype).
    const callbacks: LinkCallbacks = {
      onFirstToken: (atMs) => {
        tracked.firstEvent();
        cb.onFirstToken?.(atMs);
      },
      onDone: (atMs, generated) => {
        tracked.done(generated);
        cb.onDone?.(atMs, generated);
      },
      onError: (atMs, err) => {
        tracked.end();
        cb.onError?.(atMs, err);
      },
      ...(cb.onToken === undefined ? {} : { onToken: (text: string, tokens: number) => cb.onToken!(text, tokens) }),
      ...(cb.onFinish === undefined ? {} : { onFinish: (reason: Parameters<NonNullable<LinkCallbacks["onFinish"]>>[0], usage: Parameters<NonNullable<LinkCallbacks["onFinish"]>>[1]) => cb.onFinish!(reason, usage) }),
    };
    try {
      next.link.submit(opts.req, callbacks);
      return next.region;
    } catch (err) {
      tracked.end();
      if (!isRetryable(err)) throw err;
    }
  }
}
