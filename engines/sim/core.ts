/**
 * The simulated engine's core: one serving instance with continuous batching, KV-memory admission, priority 0
 * before priority 1 and FCFS within a priority, and cancellation (SageServe §3.4, §6.3; vLLM's scheduler — whole-prompt
 * prefills by default, chunked prefill with `maxNumBatchedTokens`, below). ONE core for live and replay: it takes a
 * Clock and is advanced analytically.
 *
 * The engine alternates two phases: a PREFILL of the requests admitted at an iteration boundary (one batched
 * prefill; each gets its first token at its end), and a DECODE SEGMENT: a run of iterations with a fixed batch in
 * which iteration k (0-based) lasts α + β·k ms (α = τ(B, C0), β = cCtx·B as context grows by B tokens an
 * iteration; perf/model.ts). A segment is one clock event: it ends at the first completion, or earlier at the next
 * iteration boundary when the batch must change (an arrival can be admitted, a request is cancelled). Token times
 * inside a segment are closed-form (T(n) = n·α + β·n(n−1)/2), so a trace costs events per arrival, first token,
 * completion and batch change, never one per token.
 *
 * Admission reserves prompt + maxTokens of KV; a request waits while the reservation does not fit. KV in use (stats)
 * is what the admitted requests hold now: prompt + generated tokens. Priority scheduling as vLLM's (`--scheduling-policy
 * priority`): priority 0 is admitted before priority 1, and a priority 0 request that lacks KV or a batch slot preempts
 * running priority 1 requests at the next iteration boundary (latest arrival first, preemption.ts), which go back to
 * the front of their queue with their output so far and resume later by recompute (a prefill of prompt + output that
 * yields their next token) or swap (their KV copied to host memory and back; `preemption`). A priority 0 request
 * arriving during decode thus waits for at most the iteration under way, then its prefill: beside priority 0 work a
 * priority 1 request prefills only riding along with a priority 0 prefill, or once it has waited `batchPrefillWaitMs`
 * (priority-first step composition, SimCoreOptions), so that iteration is seldom a batch request's prefill.
 * Phase ends use their nominal times, so a late wall-clock timer does not shift later tokens: real time and
 * virtual time give the same token timings for the same arrivals.
 *
 * CHUNKED PREFILL (`maxNumBatchedTokens` set; vLLM V1's scheduling): a prompt no longer prefills in a phase of its
 * own. Each engine step is one iteration of at most maxNumBatchedTokens tokens: every running request's decode token
 * (1 each) first, then prompt chunks — partially prefilled requests, then the waiting queue, priority 0 before
 * priority 1 — each chunk as much of the request's prompt as the tokens left allow. A request's first token comes at
 * the end of the step that completes its prompt; the decodes get a token at the end of every step. A step with
 * chunks is one clock event (a MIXED phase) timed by mixed-step.ts; a step without any is a plain decode iteration,
 * so runs of them are decode segments as above, cut at the next boundary when a waiting request becomes admissible.
 * Admission, KV reservation, batch slots and preemption are unchanged (preemption takes running requests only, not
 * partially prefilled ones); the priority 1 prefill hold (`batchPrefillWaitMs`) and riding along do not apply (a
 * step is bounded by the budget, so an arrival waits for at most one step), nor does `maxPrefillTokens`. Serving
 * beside a loading peer (setLayerwise) and behind arriving blocks (setBlockArrivals) time whole-prompt prefills and
 * are refused.
 */
import type { Clock, Timer } from "../../core/clock.js";
import { TidegateError } from "../../core/errors.js";
import type { EngineStats } from "../../core/ports.js";
import { DEFAULT_MAX_BATCH, type PerfProfile } from "../../core/perf/model.js";
import { Handle, SimRequest, isFinished, type HandleHost, type SimHandle, type SimHandlers, type SimSubmit } from "./request.js";
import { WaitQueues } from "./wait-queues.js";
import { itersWithin, segmentMs } from "./segment.js";
import { beyondSlots, preemptionVictims, type PreemptionMode } from "./preemption.js";
import { PrefixCache } from "./prefix-cache.js";
import { DEFAULT_BLOCK_TOKENS } from "../../core/prefix.js";
import { behindBlocksEndMs } from "./layerwise/behind-blocks.js";
import { mixedStepMs } from "./mixed-step.js";

export type { SimHandle, SimHandlers, SimSubmit } from "./request.js";
export type { PreemptionMode } from "./preemption.js";

/**
 * Most priority 1 requests that run beside a priority 0 one by default (SimCoreOptions.batchSlotsBeside). Each batch
 * request decoding beside an interactive one lengthens every step it waits for: on llama3.2-3b, 2 × h100, a step takes
 * 3.57 ms at a batch of 2 and 5.65 ms at 24, and an interactive arrival waits half a step on average before its 9.3 ms
 * prefill; 8 beside 2 interactive streams keep that wait within about 0.4 ms of their own.
 */
export const DEFAULT_BATCH_SLOTS_BESIDE = 8;

/**
 * Beside interactive work, how long the head of the priority 1 queue waits for a priority 0 prefill to ride along
 * with before it may have a prefill of its own (SimCoreOptions.batchPrefillWaitMs).
 */
export const DEFAULT_BATCH_PREFILL_WAIT_MS = 200;

/**
 * What riding along may add to a priority 0 prefill: at most this fraction of that prefill alone. On llama3.2-3b,
 * 2 × h100 a 152-token prompt prefills in 9.30 ms alone, 9.33 ms with one or two 136-token batch prompts beside it,
 * 9.80 ms with three: two ride along.
 */
const RIDE_ALONG_COST = 0.01;

/** Host ↔ GPU copy rate that swap preemption assumes by default: 25 GB/s (PCIe Gen4 ×16), in bytes per ms. */
export const DEFAULT_SWAP_BYTES_PER_MS = 25e6;

/**
 * Host → GPU rate at which prefix blocks found in the host KV tier (prefix-cache.ts) are loaded, bytes per ms: 128
 * Gbps, the host → GPU PCIe figure of BlitzScale Table 1, cluster A, which live loading uses too (region/liveload/
 * sources.ts TABLE1_CLUSTER_A; not imported from there, region/liveload already depends on this folder through
 * keystage — sources.test.ts checks the two agree).
 */
export const HOST_KV_LOAD_BYTES_PER_MS = 128e9 / 8 / 1000;

export interface SimCoreOptions {
  profile: PerfProfile;
  clock: Clock;
  /** Multiplies every simulated duration (1 = as measured; 0.01 = 100× faster). > 0. */
  timeScale?: number;
  /** Most requests in the running batch (vLLM max_num_seqs). */
  maxBatch?: number;
  /** Most prompt tokens one prefill batches (vLLM max_num_batched_tokens); one request is always admitted alone. */
  maxPrefillTokens?: number;
  /** KV capacity in tokens; default the profile's (GPU memory × fraction − weights). Lower it to model a smaller cache. */
  kvCapacityTokens?: number;
  /**
   * Added to every prefill and every decode iteration (ms, before timeScale): the activation hops of an execution
   * pipeline whose stages sit on several GPUs (λScale §4.3; region/liveload/lambda.ts). Default 0.
   */
  passOverheadMs?: number;
  /**
   * What a priority 0 request short of KV or of a batch slot does while priority 1 requests run (vLLM priority
   * scheduling): "recompute" (default, vLLM V1's only mode) preempts them, freeing their KV, and prefills their prompt +
   * output again when they resume; "swap" copies their KV to host memory and back at `swapBytesPerMs` (the copy out
   * is added to the prefill that admits the priority 0 request, the copy in replaces the resumed request's prefill);
   * "off": it waits (SageServe §6.3 as written).
   */
  preemption?: PreemptionMode | "off";
  /** Host ↔ GPU copy rate for swap preemption, bytes per ms (before timeScale; default DEFAULT_SWAP_BYTES_PER_MS). */
  swapBytesPerMs?: number;
  /**
   * With preemption on: most priority 1 requests that run while a priority 0 request runs or waits (≥ 0; default
   * DEFAULT_BATCH_SLOTS_BESIDE; Infinity: no cap). At an iteration boundary with a priority 0 request present, the
   * running priority 1 requests beyond it are preempted (latest arrival first) and no more are admitted; without one,
   * batch fills the instance to its KV and batch limits.
   */
  batchSlotsBeside?: number;
  /**
   * How long after the last priority 0 request the cap of `batchSlotsBeside` still holds (ms of the engine clock;
   * default 1000): interactive traffic comes and goes between requests, and batch admitted to the full KV in such a gap
   * is preempted again by the next arrival, whose first token then waits for that batch's prefill.
   */
  besideHoldMs?: number;
  /**
   * Automatic prefix caching (prefix-cache.ts; vLLM's default in V1): KV blocks of `blockTokens` (default 16) tokens
   * kept and reused by requests that carry `blockHashes`; `false` turns it off (every prompt computed in full).
   * `hostKvCacheGiB`: a host-memory KV tier under it (prefix-cache.ts; default 0 = none here, SimEngine gives one):
   * a prefix found there is loaded at HOST_KV_LOAD_BYTES_PER_MS instead of prefilled.
   */
  prefixCache?: { blockTokens?: number; hostKvCacheGiB?: number } | false;
  /**
   * Priority-first step composition (issue 37), with preemption on: while priority 0 work is present (as for
   * `batchSlotsBeside`), a priority 1 request is prefilled only beside a priority 0 one, where it adds at most
   * RIDE_ALONG_COST to that prefill, and not in a prefill of its own — an interactive arrival would wait for that
   * whole prefill (9.3 ms on llama3.2-3b, 2 × h100, as long as its own) — until the head of the priority 1 queue has
   * waited this long (ms of the engine clock; default DEFAULT_BATCH_PREFILL_WAIT_MS; Infinity: never), so batch
   * still moves beside interactive work that seldom prefills. Without priority 0 work batch prefills as before.
   */
  batchPrefillWaitMs?: number;
  /**
   * Chunked prefill (vLLM max_num_batched_tokens; module comment): the most tokens one step computes, the running
   * requests' decode tokens (1 each) and prompt chunks together. An integer ≥ maxBatch — vLLM refuses
   * max_num_batched_tokens < max_num_seqs, so every running request always decodes in every step. Unset (default):
   * whole-prompt prefill phases that stall the decodes.
   */
  maxNumBatchedTokens?: number;
}

/**
 * The `layerwise` capability (issue 12; BlitzScale §5.2): while a peer instance of the same model is loading, this
 * instance shares the prefill of its queue with it, the peer running the first layers of each batch, this one the
 * rest. At a prefill start the core admits up to `maxEpisodeBatches` batches at once (a loading episode) and asks
 * the planner when each ends; it then runs them back to back (FIFO, as the source in §5.2) and decodes after.
 * Decode iterations are not shared: BlitzScale live-scales prefill and leaves P/D-colocated decode to future work.
 */
export interface EpisodePlanner {
  /** Whether a loading peer is paired with this instance at `atMs` (false: plain prefill). */
  active(atMs: number): boolean;
  /**
   * The end time of each batch of an episode starting at `startMs`, given each batch's prompt tokens and its
   * prefill time on the whole model alone (ms). Ends must be ≥ startMs and non-decreasing (the core clamps them).
   */
  plan(startMs: number, batches: readonly { tokens: number; aloneMs: number }[]): readonly number[];
  /** Most batches one episode admits (default 8). */
  readonly maxEpisodeBatches?: number;
  /**
   * How much further this instance's KV cache reaches at `atMs` (≥ 1): with the peer holding T of L layers, each
   * admitted token keeps only (L − T)/L of its KV here, the rest on the peer, so the same memory holds L/(L − T)
   * times the tokens. A request admitted under it keeps that share here (SimRequest.localShare) until it finishes or is
   * preempted (no migration; resumed, it takes its new admission's share): after the pairing ends new requests take whole tokens from what its own cache has
   * left, and the stats report this instance's own memory — the share of the KV in use that it holds, over its own
   * capacity — never the peer's.
   */
  kvScale?(atMs: number): number;
}

type Phase =
  | { kind: "idle" }
  | { kind: "prefill"; startMs: number; endMs: number; batch: SimRequest[] }
  | { kind: "decode"; startMs: number; endMs: number; alphaMs: number; betaMs: number; nEnd: number }
  /** One chunked-prefill step: the running requests' decodes and prompt chunks (tokens of each request's prefill). */
  | { kind: "mixed"; startMs: number; endMs: number; decodes: SimRequest[]; chunks: { r: SimRequest; tokens: number }[] };


export class SimEngineCore implements HandleHost {
  readonly profile: PerfProfile;
  readonly clock: Clock;
  readonly timeScale: number;
  readonly maxBatch: number;
  readonly maxPrefillTokens: number;
  /** Chunked prefill's token budget per step (SimCoreOptions.maxNumBatchedTokens); undefined: whole-prompt prefills. */
  readonly maxNumBatchedTokens: number | undefined;
  /** KV tokens the instance holds (profile capacity). */
  readonly capacityTokens: number;

  private readonly waiting = new WaitQueues();
  private running: SimRequest[] = [];
  /** Chunked prefill: the admitted requests whose prompt is not complete yet, in admission order (empty otherwise). */
  private prefilling: SimRequest[] = [];
  private phase: Phase = { kind: "idle" };
  private timer: Timer | undefined;
  private kick: Timer | undefined;
  private kickAtMs = 0;
  /** Nominal time of the last phase end or start processed; arrivals cannot be placed before it. */
  private lastEventMs = Number.NEGATIVE_INFINITY;
  private reservedTokens = 0;
  /** Σ over admitted requests of their reservation × localShare: what they hold of this instance's own cache. */
  private reservedLocal = 0;
  /** A former pairing peer's requests whose KV share lives in this instance's cache (handOffTo), and its tokens. */
  private readonly foreign = new Set<SimRequest>();
  private foreignTokens = 0;
  /** Σ prompt + generated of `running` at the segment start, and Σ maxTokens − generated. */
  private runningCtx = 0;
  private runningRemaining = 0;
  private prefillTokens = 0;
  private prefillRemaining = 0;
  private prefillCount = 0;
  private generatedBase = 0;
  private closed = false;
  private passOverheadMs: number;
  readonly preemption: PreemptionMode | "off";
  private readonly swapBytesPerMs: number;
  private readonly batchSlotsBeside: number;
  private readonly besideHoldMs: number;
  private readonly batchPrefillWaitMs: number;
  /** Wakes the engine when held priority 1 work may go (its head's wait, or the interactive hold, ran out). */
  private heldWake: Timer | undefined;
  private heldWakeAtMs = Number.POSITIVE_INFINITY;
  /** When a priority 0 request was last seen here (arrival, or running at a boundary). */
  private lastInteractiveMs = Number.NEGATIVE_INFINITY;
  /** Swap-outs of this boundary's preemptions not yet charged to a phase (ms, scaled). */
  private swapOutPendingMs = 0;
  /** Of `running`: the priority 1 ones (preemptible) and Σ their prompt + generated at the segment start. */
  private runningLow = 0;
  private runningCtxLow = 0;
  /** Preemptions and resumptions since start. */
  private preemptedTotal = 0;
  private resumedTotal = 0;
  private layerwise: EpisodePlanner | undefined;
  /** The batches of a loading episode still to prefill after the current one, with their planned ends. */
  private planned: { endMs: number; batch: SimRequest[] }[] = [];
  /** Automatic prefix caching (prefix-cache.ts); undefined when off. */
  readonly prefixCache: PrefixCache | undefined;
  /** Serving while loading behind the arriving blocks (setBlockArrivals): each block's arrival, clock ms. */
  private blockArrivals: number[] | undefined;
  /** The prefill now running behind the blocks: when it could start and its compute alone (ms, scaled). */
  private behind: { startMs: number; computeMs: number } | undefined;

  constructor(opts: SimCoreOptions) {
    this.profile = opts.profile;
    this.clock = opts.clock;
    this.timeScale = opts.timeScale ?? 1;
    if (!(this.timeScale > 0)) throw new RangeError(`timeScale must be > 0, got ${this.timeScale}`);
    this.maxBatch = opts.maxBatch ?? DEFAULT_MAX_BATCH;
    this.maxPrefillTokens = opts.maxPrefillTokens ?? 8192;
    this.capacityTokens = opts.kvCapacityTokens ?? opts.profile.kvCapacityTokens;
    this.passOverheadMs = opts.passOverheadMs ?? 0;
    if (!(this.passOverheadMs >= 0)) throw new RangeError(`passOverheadMs must be ≥ 0, got ${this.passOverheadMs}`);
    this.preemption = opts.preemption ?? "recompute";
    this.swapBytesPerMs = opts.swapBytesPerMs ?? DEFAULT_SWAP_BYTES_PER_MS;
    if (!(this.swapBytesPerMs > 0)) throw new RangeError(`swapBytesPerMs must be > 0, got ${this.swapBytesPerMs}`);
    this.batchSlotsBeside = opts.batchSlotsBeside ?? DEFAULT_BATCH_SLOTS_BESIDE;
    if (!(this.batchSlotsBeside >= 0)) throw new RangeError(`batchSlotsBeside must be ≥ 0, got ${this.batchSlotsBeside}`);
    this.besideHoldMs = opts.besideHoldMs ?? 1000;
    if (!(this.besideHoldMs >= 0)) throw new RangeError(`besideHoldMs must be ≥ 0, got ${this.besideHoldMs}`);
    if (opts.prefixCache === false) this.prefixCache = undefined;
    else {
      const blockTokens = opts.prefixCache?.blockTokens ?? DEFAULT_BLOCK_TOKENS;
      const hostGiB = opts.prefixCache?.hostKvCacheGiB ?? 0;
      if (!(hostGiB >= 0)) throw new RangeError(`hostKvCacheGiB must be ≥ 0, got ${hostGiB}`);
      this.prefixCache = new PrefixCache(blockTokens, Math.floor((hostGiB * 2 ** 30) / (opts.profile.kvBytesPerToken * blockTokens)));
    }
    this.batchPrefillWaitMs = opts.batchPrefillWaitMs ?? DEFAULT_BATCH_PREFILL_WAIT_MS;
    if (!(this.batchPrefillWaitMs >= 0)) throw new RangeError(`batchPrefillWaitMs must be ≥ 0, got ${this.batchPrefillWaitMs}`);
    this.maxNumBatchedTokens = opts.maxNumBatchedTokens;
    if (this.maxNumBatchedTokens !== undefined) {
      if (!(Number.isInteger(this.maxNumBatchedTokens) && this.maxNumBatchedTokens >= 1)) throw new RangeError(`maxNumBatchedTokens must be an integer ≥ 1, got ${this.maxNumBatchedTokens}`);
      if (this.maxNumBatchedTokens < this.maxBatch) {
        // A setting a user gives (config, StartEngine, engine-sim's flags): refused with a message, not a stack.
        throw new TidegateError("invalid_config", `maxNumBatchedTokens (${this.maxNumBatchedTokens}) must be ≥ maxBatch (${this.maxBatch}): each running request's decode token counts against it (vLLM refuses max_num_batched_tokens < max_num_seqs)`, { param: "maxNumBatchedTokens" });
      }
    }
  }

  /**
   * Changes the per-pass overhead (ms, before timeScale; SimCoreOptions.passOverheadMs) from the next prefill or
   * decode iteration: a live λScale pipeline head sets its activation hops when its pipeline forms and 0 when it
   * switches to local mode (λScale §4.3–4.4; region/liveload/live-lambda.ts).
   */
  setPassOverheadMs(ms: number): void {
    if (!(ms >= 0)) throw new RangeError(`passOverheadMs must be ≥ 0, got ${ms}`);
    this.sync();
    this.passOverheadMs = ms;
  }

  /** The per-pass overhead now (ms). */
  get passOverhead(): number {
    return this.passOverheadMs;
  }

  /**
   * Pairs this instance with a loading peer (EpisodePlanner) or, with undefined, ends the pairing. Takes effect at
   * the next prefill start; an episode already planned runs to its end.
   */
  setLayerwise(planner: EpisodePlanner | undefined): void {
    if (planner !== undefined && this.maxNumBatchedTokens !== undefined) {
      throw new TidegateError("invalid_request", "this engine prefills in chunks (maxNumBatchedTokens): it cannot share its prefills with a loading instance layer by layer");
    }
    this.sync();
    this.layerwise = planner;
  }

  /**
   * Serves while the model's blocks arrive (a cold start under BlitzScale's live scaling, layerwise/behind-blocks.ts):
   * `arrivalsMs[k]` is when block k (layer order) is here, clock ms, +Infinity while not known; a prefill's blocks
   * run no earlier than they arrive. Called again as arrivals become known (live: the data plane's reports), a
   * prefill running behind the blocks gets its end again; undefined, or every block here, ends the mode.
   */
  setBlockArrivals(arrivalsMs: readonly number[] | undefined): void {
    if (this.maxNumBatchedTokens !== undefined && arrivalsMs !== undefined && arrivalsMs.some((a) => a > this.clock.now())) {
      throw new TidegateError("invalid_request", "this engine prefills in chunks (maxNumBatchedTokens): it cannot serve behind its arriving blocks");
    }
    this.sync();
    this.blockArrivals = arrivalsMs === undefined || arrivalsMs.every((a) => a <= this.clock.now()) ? undefined : [...arrivalsMs];
    const p = this.phase;
    if (p.kind !== "prefill" || this.behind === undefined) return;
    const endMs = behindBlocksEndMs(this.behind.startMs, this.behind.computeMs, arrivalsMs ?? []);
    const end = Math.max(endMs, this.clock.now());
    this.phase = { ...p, endMs: end };
    this.schedule(end);
  }

  /** Whether this engine serves behind blocks still arriving (setBlockArrivals). */
  get behindBlocks(): boolean {
    const now = this.clock.now();
    return this.blockArrivals?.some((a) => a > now) === true;
  }

  /** Whether a loading peer is paired with this instance now. */
  get paired(): boolean {
    return this.layerwise !== undefined;
  }

  /**
   * The pairing has ended and the peer (`target`) now serves on its own: the requests admitted here while paired
   * keep their KV of the layers the peer ran in its cache (no migration) until they end, so the peer's cache starts
   * with that share in use — its admissions count it, its stats report it — and frees it as each request ends.
   */
  handOffTo(target: SimEngineCore): void {
    this.sync();
    const admitted = [...this.running, ...this.prefilling, ...(this.phase.kind === "prefill" ? this.phase.batch : []), ...this.planned.flatMap((p) => p.batch)];
    for (const r of admitted) {
      if (r.localShare >= 1 || r.peer !== undefined) continue;
      const tokens = (r.promptTokens + r.maxTokens) * (1 - r.localShare);
      r.peer = { core: target, tokens };
      target.holdForeign(r, tokens);
    }
  }

  /** @internal for handOffTo: `r` of another core keeps `tokens` of its reservation here. */
  holdForeign(r: SimRequest, tokens: number): void {
    this.sync();
    this.foreign.add(r);
    this.foreignTokens += tokens;
  }

  /** @internal for release(): `r` of another core ended; what it kept here is free (waiting requests may fit now). */
  releaseForeign(r: SimRequest): void {
    if (r.peer === undefined || !this.foreign.delete(r)) return;
    this.sync();
    this.foreignTokens = this.foreign.size === 0 ? 0 : this.foreignTokens - r.peer.tokens;
    if (this.closed) return;
    const now = this.clock.now();
    if (this.phase.kind === "idle" && this.admissible(now)) this.kickAt(now);
    else if (this.phase.kind === "decode" && this.admissible(now)) this.cutAtNextBoundary(now);
  }

  /**
   * Queues a request. Throws invalid_request when prompt + maxTokens can never fit this instance's KV memory, and
   * `cancelled` after close(). Handlers fire from clock callbacks (or synchronously inside later calls).
   * `arrivalMs` (default now; clamped to [last processed event, now]) is the nominal arrival time: a driver whose
   * wall-clock timer fired late passes the time it meant, so live and virtual runs see the same arrivals. An idle
   * engine starts its step in a zero-delay event, so arrivals at the same instant share one prefill.
   */
  submit(req: SimSubmit, handlers: SimHandlers = {}, arrivalMs?: number): SimHandle {
    if (this.closed) throw new TidegateError("cancelled", "engine closed");
    if (!(req.promptTokens >= 1 && req.maxTokens >= 1)) throw new TidegateError("invalid_request", "promptTokens and maxTokens must be ≥ 1");
    if (req.promptTokens + req.maxTokens > this.capacityTokens) {
      throw new TidegateError("invalid_request", `prompt + max tokens (${req.promptTokens + req.maxTokens}) exceed this instance's KV capacity of ${this.capacityTokens} tokens`, { param: "max_tokens" });
    }
    const now = this.clock.now();
    const at = Math.max(this.lastEventMs, Math.min(arrivalMs ?? now, now));
    this.syncTo(at);
    const r = new SimRequest(req.id, req.promptTokens, req.maxTokens, req.priority, at, handlers);
    if (req.blockHashes !== undefined && this.prefixCache !== undefined) r.blockHashes = req.blockHashes;
    if (req.remoteTokens !== undefined) r.remoteTokens = Math.min(Math.max(0, Math.floor(req.remoteTokens)), req.promptTokens - 1);
    if (r.priority === 0) this.lastInteractiveMs = at;
    this.expectCached(r);
    this.waiting.push(r);
    if (this.phase.kind === "idle") this.kickAt(at);
    else if (this.phase.kind === "decode" && this.admissible(at)) this.cutAtNextBoundary(at);
    else this.armHeldWake(at);
    // No sync to `now` here: a driver submitting several requests at one nominal time (real clock ticking between
    // the calls) must see them share the start that the first one scheduled.
    return this.handle(r);
  }

  /** The instance's load now (O(1)). */
  stats(): EngineStats {
    this.sync();
    const k = this.itersNow();
    const local = this.localFraction();
    const stats: EngineStats = {
      // KV of the admitted requests in this instance's own memory: those admitted while paired hold part of it on the
      // peer, so the tokens in use are scaled by the reservations' mean local share (exactly 1 when none was).
      kvBytesUsed: ((this.runningCtx + this.running.length * k + this.prefillTokens) * local + this.foreignInUse()) * this.profile.kvBytesPerToken,
      kvBytesCapacity: this.capacityTokens * this.profile.kvBytesPerToken,
      running: this.running.length + this.prefillCount,
      waiting: this.waiting.count,
      remainingTokens: this.waiting.remainingTokens + this.prefillRemaining + this.runningRemaining - this.running.length * k,
      generatedTokensTotal: this.generatedBase + this.running.length * k,
    };
    if (this.preemption !== "off") {
      // What a priority 0 arrival may take back: the running priority 1 requests' KV (those in a prefill are
      // preemptible from the next boundary on).
      stats.preemptibleKvBytes = (this.runningCtxLow + this.runningLow * k) * local * this.profile.kvBytesPerToken;
      stats.preemptionsTotal = this.preemptedTotal;
    }
    if (this.prefixCache !== undefined) {
      const c = this.prefixCache.counts();
      stats.prefixQueriedTokensTotal = c.queriedTokens;
      stats.prefixHitTokensTotal = c.hitTokens;
      if (this.prefixCache.hostCapacityBlocks > 0) {
        stats.hostKvQueriedTokensTotal = c.hostQueriedTokens;
        stats.hostKvHitTokensTotal = c.hostHitTokens;
      }
    }
    return stats;
  }

  /** Requests preempted and resumed since start. */
  preemptionCounts(): { preempted: number; resumed: number } {
    return { preempted: this.preemptedTotal, resumed: this.resumedTotal };
  }

  /** KV in use over capacity, in [0, 1]. */
  kvUtilization(): number {
    const s = this.stats();
    return s.kvBytesUsed / s.kvBytesCapacity;
  }

  /** Cancels everything and stops the timer. Idempotent. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.timer?.cancel();
    this.kick?.cancel();
    this.kick = undefined;
    this.heldWake?.cancel();
    this.heldWake = undefined;
    const all = [...this.running, ...this.prefilling, ...this.waiting.all(), ...(this.phase.kind === "prefill" ? this.phase.batch : []), ...this.planned.flatMap((p) => p.batch)];
    for (const r of all) this.cancel(r);
    this.planned = [];
    this.phase = { kind: "idle" };
  }

  private handle(r: SimRequest): SimHandle {
    return new Handle(this, r);
  }

  /** @internal for Handle */
  generatedFor(r: SimRequest): number {
    return this.generatedOf(r);
  }
  /** @internal for Handle */
  nextTokenFor(r: SimRequest): number | undefined {
    return this.nextTokenOf(r);
  }
  /** @internal for Handle */
  cancelFor(r: SimRequest): void {
    this.cancel(r);
  }

  // ---- time arithmetic of a decode segment -------------------------------------------------------------------

  /** Iterations of the current decode segment finished by `now` (≤ nEnd); 0 outside decode. */
  private itersAt(now: number): number {
    const p = this.phase;
    return p.kind === "decode" ? itersWithin(now - p.startMs, p.alphaMs, p.betaMs, p.nEnd) : 0;
  }

  private itersNow(): number {
    return this.itersAt(this.clock.now());
  }

  private generatedOf(r: SimRequest): number {
    this.sync();
    return r.state === "running" ? r.generated + this.itersNow() : r.generated;
  }

  private nextTokenOf(r: SimRequest): number | undefined {
    this.sync();
    const p = this.phase;
    // A prefill behind a block not known to arrive yet (setBlockArrivals) has no time yet: its first token wakes the waiter.
    if (r.state === "prefill" && p.kind === "prefill") return p.batch.includes(r) ? (Number.isFinite(p.endMs) ? p.endMs : undefined) : this.planned.find((x) => x.batch.includes(r))?.endMs;
    // Chunked: a prompt's first token comes at the end of the step that completes it; every running request decodes.
    if (p.kind === "mixed") {
      if (r.state === "running") return p.endMs;
      const c = r.state === "prefill" ? p.chunks.find((x) => x.r === r) : undefined;
      return c !== undefined && r.prefilledTokens + c.tokens >= this.prefillCost(r) ? p.endMs : undefined;
    }
    if (r.state !== "running") return undefined;
    if (p.kind !== "decode") return p.kind === "prefill" && Number.isFinite(p.endMs) ? p.endMs : undefined;
    const k = this.itersNow();
    return k >= p.nEnd ? p.endMs : p.startMs + segmentMs(k + 1, p.alphaMs, p.betaMs);
  }

  // ---- scheduling ----------------------------------------------------------------------------------------------

  /** Fires phase ends whose nominal time has passed (a wall-clock timer may be late). */
  private sync(): void {
    this.syncTo(this.clock.now());
  }

  /** Fires the pending start (strictly before `t`) and every phase end at or before `t`, in nominal time. */
  private syncTo(t: number): void {
    for (;;) {
      if (this.kick !== undefined && this.kickAtMs < t) this.fireKick();
      else if (this.phase.kind !== "idle" && this.phase.endMs <= t) this.firePhaseEnd();
      else return;
    }
  }

  /** Starts an idle engine at `atMs` from a zero-delay event (same-instant arrivals join the same prefill). */
  private kickAt(atMs: number): void {
    if (this.kick !== undefined) return;
    this.kickAtMs = atMs;
    this.kick = this.clock.after(Math.max(0, atMs - this.clock.now()), () => {
      if (this.kick !== undefined) this.fireKick();
    });
  }

  private fireKick(): void {
    this.kick?.cancel();
    this.kick = undefined;
    this.lastEventMs = Math.max(this.lastEventMs, this.kickAtMs);
    if (this.phase.kind === "idle" && !this.closed) this.step(this.kickAtMs);
  }

  private schedule(endMs: number): void {
    this.timer?.cancel();
    this.timer = undefined;
    // A pass behind a block not yet known to arrive ends when setBlockArrivals learns of it.
    if (!Number.isFinite(endMs)) return;
    this.timer = this.clock.after(Math.max(0, endMs - this.clock.now()), () => {
      this.timer = undefined;
      if (this.phase.kind !== "idle" && this.phase.endMs === endMs) this.firePhaseEnd();
    });
  }

  private firePhaseEnd(): void {
    this.timer?.cancel();
    this.timer = undefined;
    const p = this.phase;
    if (p.kind !== "idle") this.lastEventMs = Math.max(this.lastEventMs, p.endMs);
    if (p.kind === "prefill") this.endPrefill(p.endMs, p.batch);
    else if (p.kind === "decode") this.endSegment(p.endMs, p.nEnd);
    else if (p.kind === "mixed") this.endMixed(p.endMs, p.decodes, p.chunks);
  }

  /** The share of an admitted token's KV this instance keeps at `atMs`: 1, or 1/kvScale while a loading peer shares layers. */
  private localShareAt(atMs: number): number {
    const lw = this.layerwise;
    if (lw?.kvScale === undefined || !lw.active(atMs)) return 1;
    return 1 / Math.max(1, lw.kvScale(atMs));
  }

  /**
   * Tokens in use here by a former peer's requests: their context as of their current decode segment's start (the
   * peer's own iteration arithmetic stays there) × the share kept here; 0 almost always.
   */
  private foreignInUse(): number {
    if (this.foreign.size === 0) return 0;
    let t = 0;
    for (const r of this.foreign) t += (r.promptTokens + r.generated) * (1 - r.localShare);
    return t;
  }

  /** reservedLocal / reservedTokens (1 with nothing reserved). */
  private localFraction(): number {
    return this.reservedTokens > 0 ? Math.min(1, this.reservedLocal / this.reservedTokens) : 1;
  }

  private fits(r: SimRequest, admitted: number, batchCount: number, batchTokens: number, interactiveInBatch = false): boolean {
    if (this.reservedLocal + this.foreignTokens + (r.promptTokens + r.maxTokens) * this.localShareAt(this.lastEventMs) > this.capacityTokens + 1e-9) return false;
    if (this.running.length + admitted >= this.maxBatch) return false;
    // Beside interactive work (running, waiting, recent, or in the prefill being built), batch only within its slots.
    if (r.priority === 1 && this.preemption !== "off" && this.runningLow + admitted + batchCount >= this.batchSlotsBeside && (interactiveInBatch || this.interactivePresent())) return false;
    return batchCount === 0 || batchTokens + this.prefillCost(r) <= this.maxPrefillTokens;
  }

  /**
   * A priority 0 request runs here or heads the queue (at a boundary none is in a prefill), or one did within
   * `besideHoldMs`.
   */
  private interactivePresent(): boolean {
    if (this.running.length > this.runningLow || this.waiting.next()?.priority === 0 || this.prefilling.some((r) => r.priority === 0)) {
      this.lastInteractiveMs = Math.max(this.lastInteractiveMs, this.lastEventMs);
      return true;
    }
    return this.lastEventMs - this.lastInteractiveMs < this.besideHoldMs;
  }

  /**
   * Prompt tokens a request's prefill computes: its prompt less its cached prefix (prefix-cache.ts; 0 before it is
   * admitted), + its output when resumed by recompute, 0 by swap-in.
   */
  private prefillCost(r: SimRequest): number {
    return r.resume === "swap" ? 0 : r.promptTokens + r.generated - r.cachedTokens;
  }

  /**
   * Whether the batch must change at the next boundary: the head of the queue can be admitted (it fits, or preempting
   * makes it fit), or a priority 0 head finds more batch running than its slots beside it.
   */
  private admissible(atMs: number): boolean {
    const r = this.waiting.next();
    if (r === undefined) return false;
    if (r.priority === 0 && this.preemption !== "off" && this.runningLow > this.batchSlotsBeside) return true;
    if (this.batchPrefillHeld(r, atMs)) return false;
    return this.fits(r, 0, 0, 0) || this.victimsFor(r, 0).length > 0;
  }

  /**
   * Whether `r`, at the head of the queue at `atMs`, may not start a prefill of its own (batchPrefillWaitMs): it is
   * priority 1, priority 0 work is present (none waits: `r` heads the queue), and it has waited less than the wait.
   */
  private batchPrefillHeld(r: SimRequest, atMs: number): boolean {
    // Compared as sums, as armHeldWake computes its time: at that time the hold has ended, in floating point too.
    // Chunked prefill bounds every step by its budget: nothing to hold back for (module comment).
    if (r.priority !== 1 || this.preemption === "off" || this.maxNumBatchedTokens !== undefined || atMs >= r.waitingSinceMs + this.batchPrefillWaitMs) return false;
    return this.running.length > this.runningLow || atMs < this.lastInteractiveMs + this.besideHoldMs;
  }

  /**
   * With held priority 1 work at the head of the queue, wakes the engine when it may go: the head's wait ends, or,
   * with no priority 0 request running, the interactive hold does; then a decode segment ends at its next boundary
   * or an idle engine starts.
   */
  private armHeldWake(atMs: number): void {
    const r = this.waiting.next();
    if (r === undefined || this.closed || !this.batchPrefillHeld(r, atMs)) return;
    let t = r.waitingSinceMs + this.batchPrefillWaitMs;
    if (this.running.length === this.runningLow) t = Math.min(t, this.lastInteractiveMs + this.besideHoldMs);
    if (this.heldWake !== undefined && this.heldWakeAtMs <= t) return;
    this.heldWake?.cancel();
    this.heldWakeAtMs = t;
    this.heldWake = this.clock.after(Math.max(0, t - this.clock.now()), () => {
      this.heldWake = undefined;
      this.heldWakeAtMs = Number.POSITIVE_INFINITY;
      if (this.closed) return;
      // At its nominal time, as phase ends: a late wall-clock timer shifts nothing (virtual and real time agree).
      this.syncTo(t);
      const at = Math.max(this.lastEventMs, t);
      if (this.phase.kind === "idle") {
        if (this.waiting.next() !== undefined) this.kickAt(at);
      } else if (this.phase.kind === "decode" && this.admissible(at)) this.cutAtNextBoundary(at);
      else this.armHeldWake(at);
    });
  }

  /** The running requests whose preemption would make room for `r` ([] when preemption is off or cannot). */
  private victimsFor(r: SimRequest, admitted: number): SimRequest[] {
    if (this.preemption === "off" || r.priority !== 0 || this.runningLow === 0) return [];
    const need = {
      kvTokens: (r.promptTokens + r.maxTokens) * this.localShareAt(this.lastEventMs),
      kvFreeTokens: this.capacityTokens - this.reservedLocal - this.foreignTokens,
      slotsFree: this.maxBatch - this.running.length - admitted,
    };
    return preemptionVictims(this.running, r.priority, need, (v) => (v.promptTokens + v.maxTokens) * v.localShare);
  }

  /**
   * At an iteration boundary (`lastEventMs`): preempts the running requests that keep `r` out for lack of KV or a
   * slot; false when there are none (nothing preempted). A prefill-token limit is not a reason to preempt.
   */
  private preemptFor(r: SimRequest, admitted: number, batchCount: number, batchTokens: number): boolean {
    if (batchCount > 0 && batchTokens + this.prefillCost(r) > this.maxPrefillTokens) return false;
    const victims = this.victimsFor(r, admitted);
    for (const v of victims) this.preempt(v, this.lastEventMs);
    return victims.length > 0 && this.fits(r, admitted, batchCount, batchTokens);
  }

  /** Takes a running request out of the batch at a boundary: its KV freed (or swapped out), back to the queue's front. */
  private preempt(v: SimRequest, atMs: number): void {
    this.running.splice(this.running.indexOf(v), 1);
    this.leaveRunning(v);
    this.release(v);
    v.state = "waiting";
    v.preemptions++;
    v.waitingSinceMs = atMs;
    v.resume = this.preemption === "swap" ? "swap" : "recompute";
    if (v.resume === "swap") this.swapOutPendingMs += this.swapMs(v);
    this.preemptedTotal++;
    this.expectCached(v);
    this.waiting.pushFront(v);
    v.handlers.onPreempted?.(atMs, v.generated);
  }

  /** Time to copy a request's KV (prompt + output so far) between GPU and host memory (ms, scaled). */
  private swapMs(r: SimRequest): number {
    return (((r.promptTokens + r.generated) * this.profile.kvBytesPerToken) / this.swapBytesPerMs) * this.timeScale;
  }

  /** `r` joins the running batch (its prompt + generated in the segment arithmetic). */
  private enterRunning(r: SimRequest): void {
    r.state = "running";
    this.running.push(r);
    this.runningCtx += r.promptTokens + r.generated;
    this.runningRemaining += r.maxTokens - r.generated;
    if (r.priority === 1) {
      this.runningLow++;
      this.runningCtxLow += r.promptTokens + r.generated;
    }
  }

  /** `r` (already out of `running`, `generated` as of the segment start) no longer counts in the segment arithmetic. */
  private leaveRunning(r: SimRequest): void {
    this.runningCtx -= r.promptTokens + r.generated;
    this.runningRemaining -= r.maxTokens - r.generated;
    if (r.priority === 1) {
      this.runningLow--;
      this.runningCtxLow -= r.promptTokens + r.generated;
    }
  }

  /** Admits the next prefill batch from the queue (`admitted`: requests already admitted at this boundary). */
  private takeBatch(admitted: number): SimRequest[] {
    const batch: SimRequest[] = [];
    let tokens = 0;
    let interactive = false;
    let interactiveMs = 0;
    for (;;) {
      const r = this.waiting.next();
      if (r === undefined) break;
      if (r.priority === 1 && interactive) {
        // Beside a priority 0 prefill a priority 1 request rides along only where it adds at most RIDE_ALONG_COST:
        // the first token of the priority 0 request would wait for its prompt too (SageServe §6.2, priority 1 only
        // when no priority 0 waits); a prefill's cost is mostly fixed, so a few short prompts cost almost nothing.
        interactiveMs ||= this.aloneMs(batch);
        if (this.aloneMs([...batch, r]) > interactiveMs * (1 + RIDE_ALONG_COST)) break;
      } else if (batch.length === 0 && this.batchPrefillHeld(r, this.lastEventMs)) break;
      if (!this.fits(r, admitted + batch.length, batch.length, tokens, interactive) && !this.preemptFor(r, admitted + batch.length, batch.length, tokens)) break;
      this.admit(r);
      batch.push(r);
      tokens += this.prefillCost(r);
      interactive ||= r.priority === 0;
    }
    return batch;
  }

  /** Takes `r` (the head of the queue, which fits) out of the queue into a prefill: its KV reserved, its prefix looked up. */
  private admit(r: SimRequest): void {
    this.waiting.leave(r);
    r.state = "prefill";
    r.prefilledTokens = 0;
    r.localShare = this.localShareAt(this.lastEventMs);
    this.reservedTokens += r.promptTokens + r.maxTokens;
    this.reservedLocal += (r.promptTokens + r.maxTokens) * r.localShare;
    this.prefillTokens += r.promptTokens + r.generated;
    this.prefillCount++;
    this.acquirePrefix(r);
    // KV received from a prefill instance counts as cached: only the rest of the prompt is computed here.
    if (r.remoteTokens > 0) r.cachedTokens = Math.max(r.cachedTokens, r.remoteTokens);
    r.countedRemaining = r.promptTokens + r.maxTokens - r.generated - r.cachedTokens;
    this.prefillRemaining += r.countedRemaining;
  }

  /**
   * Prefill time of a batch on the whole model, alone (ms, scaled): its prompts (a recomputed request's output too)
   * less their cached prefixes, the load of prefix blocks found only in the host KV tier (bytes / host → GPU PCIe,
   * HOST_KV_LOAD_BYTES_PER_MS; serial with the pass, as a load that is not layer-pipelined), and the copy back of
   * requests resumed by swap-in (a batch of swap-ins alone only copies).
   */
  private aloneMs(batch: readonly SimRequest[]): number {
    let tokens = 0;
    let count = 0;
    let swapInMs = 0;
    for (const r of batch) {
      if (r.resume === "swap") swapInMs += this.swapMs(r);
      else {
        tokens += this.prefillCost(r);
        count++;
        // Prefix blocks found only in the host KV tier are loaded over PCIe, not recomputed (before the pass).
        swapInMs += ((r.hostLoadedTokens * this.profile.kvBytesPerToken) / HOST_KV_LOAD_BYTES_PER_MS) * this.timeScale;
      }
    }
    return (count > 0 ? (this.profile.prefillMs(tokens, count) + this.passOverheadMs) * this.timeScale : 0) + swapInMs;
  }

  /**
   * At an iteration boundary `atMs`: admit and prefill (a whole episode when paired) — with chunked prefill, one step
   * of decodes and prompt chunks — else decode, else idle.
   */
  private step(atMs: number): void {
    // Interactive work present: batch beyond its slots beside it goes back to the queue first.
    if (this.preemption !== "off" && this.runningLow > this.batchSlotsBeside && this.interactivePresent()) {
      for (const v of beyondSlots(this.running, 0, this.batchSlotsBeside)) this.preempt(v, atMs);
    }
    if (this.maxNumBatchedTokens !== undefined ? this.stepChunked(atMs, this.maxNumBatchedTokens) : this.stepPrefill(atMs)) return;
    if (this.running.length > 0) {
      let nEnd = Number.POSITIVE_INFINITY;
      for (const r of this.running) nEnd = Math.min(nEnd, r.maxTokens - r.generated);
      const alphaMs = (this.profile.decodeIterMs(this.running.length, this.runningCtx) + this.passOverheadMs) * this.timeScale;
      const betaMs = this.profile.decodeMsPerContextToken * this.running.length * this.timeScale;
      const endMs = atMs + segmentMs(nEnd, alphaMs, betaMs);
      this.phase = { kind: "decode", startMs: atMs, endMs, alphaMs, betaMs, nEnd };
      this.schedule(endMs);
      return;
    }
    this.phase = { kind: "idle" };
  }

  /** At a boundary without chunked prefill: admits a prefill batch (a whole episode when paired) and starts it; false when none is admitted. */
  private stepPrefill(atMs: number): boolean {
    const batch = this.takeBatch(0);
    if (batch.length === 0) {
      this.armHeldWake(atMs);
      return false;
    }
    // The KV of requests preempted by swap at this boundary is copied out before the prefill runs.
    const swapOutMs = this.swapOutPendingMs;
    this.swapOutPendingMs = 0;
    let endMs = atMs + swapOutMs + this.aloneMs(batch);
    const lw = this.layerwise;
    if (lw !== undefined && lw.active(atMs)) {
      const batches = [batch];
      let admitted = batch.length;
      for (let more = (lw.maxEpisodeBatches ?? 8) - 1; more > 0; more--) {
        const b = this.takeBatch(admitted);
        if (b.length === 0) break;
        batches.push(b);
        admitted += b.length;
      }
      const ends = lw.plan(atMs + swapOutMs, batches.map((b) => ({ tokens: b.reduce((s, r) => s + r.promptTokens, 0), aloneMs: this.aloneMs(b) })));
      let prev = atMs;
      const at = (i: number) => (prev = Math.max(prev, Number.isFinite(ends[i]) ? ends[i]! : atMs + this.aloneMs(batches[i]!)));
      endMs = at(0);
      this.planned = batches.slice(1).map((b, i) => ({ batch: b, endMs: at(i + 1) }));
    }
    this.behind = undefined;
    if (this.blockArrivals !== undefined) {
      if (this.blockArrivals.every((a) => a <= atMs)) this.blockArrivals = undefined;
      else {
        // Layer by layer behind the arriving blocks (behind-blocks.ts; BlitzScale §5.2 step (1)–(2)).
        this.behind = { startMs: atMs + swapOutMs, computeMs: endMs - atMs - swapOutMs };
        endMs = behindBlocksEndMs(this.behind.startMs, this.behind.computeMs, this.blockArrivals);
      }
    }
    this.phase = { kind: "prefill", startMs: atMs, endMs, batch };
    this.schedule(endMs);
    return true;
  }

  private endPrefill(atMs: number, batch: SimRequest[]): void {
    this.phase = { kind: "idle" };
    this.behind = undefined;
    this.completePrefills(atMs, batch);
    if (this.phase.kind !== "idle") return;
    // The next batch of a loading episode, at its planned end (a batch emptied by cancels ends at once).
    const next = this.planned.shift();
    if (next !== undefined) {
      const endMs = next.batch.some((r) => r.state === "prefill") ? Math.max(atMs, next.endMs) : atMs;
      this.phase = { kind: "prefill", startMs: atMs, endMs, batch: next.batch };
      this.schedule(endMs);
      return;
    }
    this.step(atMs);
  }

  /**
   * The prefills of `done` (those still in state "prefill") complete at `atMs`: each yields its next token (a
   * swap-in only brings its KV back) and joins the running batch, or finishes; then their handlers run.
   */
  private completePrefills(atMs: number, done: Iterable<SimRequest>): void {
    const finished: SimRequest[] = [];
    const started: SimRequest[] = [];
    const resumed: SimRequest[] = [];
    for (const r of done) {
      if (r.state !== "prefill") continue;
      this.prefillTokens -= r.promptTokens + r.generated;
      this.prefillCount--;
      this.prefillRemaining -= r.countedRemaining;
      const resume = r.resume;
      r.resume = undefined;
      // A prefill yields the next token (a recompute's too); a swap-in only brings the KV back.
      if (resume !== "swap") {
        r.generated += 1;
        this.generatedBase += 1;
      }
      if (resume === undefined) {
        r.firstTokenAtMs = atMs;
        started.push(r);
      } else {
        this.resumedTotal++;
        resumed.push(r);
      }
      if (r.generated >= r.maxTokens) finished.push(r);
      else this.enterRunning(r);
    }
    for (const r of started) r.handlers.onFirstToken?.(atMs);
    for (const r of resumed) r.handlers.onResumed?.(atMs, r.generated);
    for (const r of finished) this.finish(r, atMs);
  }

  /**
   * Chunked prefill at a boundary `atMs` (module comment): composes one step of at most `budget` tokens — every running
   * request's decode, then chunks of the partially prefilled requests and of the waiting ones it admits, priority 0
   * before priority 1 — and starts it as a mixed phase. False when the step has no chunk (a plain decode iteration,
   * or nothing to do): the caller decodes or idles.
   */
  private stepChunked(atMs: number, budget: number): boolean {
    const chunks: { r: SimRequest; tokens: number }[] = [];
    let used = 0;
    let extraMs = 0;
    const left = () => budget - this.running.length - used;
    const chunk = (r: SimRequest) => {
      const tokens = Math.min(this.prefillCost(r) - r.prefilledTokens, left());
      chunks.push({ r, tokens });
      used += tokens;
    };
    // The head of the queue while it is of `priority` and fits (or preempting makes it fit): a priority 0 head that
    // does not fit keeps priority 1 out, as in a whole-prompt prefill (head-of-line blocking).
    const admitWaiting = (priority: 0 | 1) => {
      for (let r = this.waiting.next(); r !== undefined && r.priority === priority && left() > 0; r = this.waiting.next()) {
        if (!this.fits(r, this.prefilling.length, 0, 0) && !this.preemptFor(r, this.prefilling.length, 0, 0)) return;
        this.admit(r);
        this.prefilling.push(r);
        // A swap-in copies its KV back; prefix blocks found only in the host tier load over PCIe (as aloneMs).
        if (r.resume === "swap") extraMs += this.swapMs(r);
        else extraMs += ((r.hostLoadedTokens * this.profile.kvBytesPerToken) / HOST_KV_LOAD_BYTES_PER_MS) * this.timeScale;
        chunk(r);
      }
    };
    const partial = this.prefilling.slice();
    for (const priority of [0, 1] as const) {
      for (const r of partial) if (r.priority === priority && left() > 0) chunk(r);
      admitWaiting(priority);
    }
    if (chunks.length === 0) return false;
    const swapOutMs = this.swapOutPendingMs;
    this.swapOutPendingMs = 0;
    let chunkTokens = 0;
    let chunkSequences = 0;
    for (const c of chunks) {
      chunkTokens += c.tokens;
      if (c.tokens > 0) chunkSequences++;
    }
    const computeMs = mixedStepMs(this.profile, this.running.length, this.runningCtx, chunkTokens, chunkSequences);
    const passMs = computeMs > 0 ? (computeMs + this.passOverheadMs) * this.timeScale : 0;
    const endMs = atMs + swapOutMs + extraMs + passMs;
    this.phase = { kind: "mixed", startMs: atMs, endMs, decodes: this.running.slice(), chunks };
    this.schedule(endMs);
    return true;
  }

  /** The end of a chunked-prefill step: each decode yields a token, each chunk is computed, completed prompts run. */
  private endMixed(atMs: number, decodes: SimRequest[], chunks: { r: SimRequest; tokens: number }[]): void {
    this.phase = { kind: "idle" };
    let done: SimRequest[] | undefined;
    for (const r of decodes) {
      if (r.state !== "running") continue; // cancelled during the step
      r.generated += 1;
      this.generatedBase += 1;
      this.runningCtx += 1;
      this.runningRemaining -= 1;
      if (r.priority === 1) this.runningCtxLow += 1;
      if (r.generated >= r.maxTokens) (done ??= []).push(r);
    }
    if (done !== undefined) {
      const ended = new Set(done);
      this.running = this.running.filter((r) => !ended.has(r));
      for (const r of done) this.leaveRunning(r);
      for (const r of done) this.finish(r, atMs);
    }
    const completed: SimRequest[] = [];
    for (const c of chunks) {
      if (c.r.state !== "prefill") continue; // cancelled during the step
      c.r.prefilledTokens += c.tokens;
      if (c.r.prefilledTokens >= this.prefillCost(c.r)) completed.push(c.r);
    }
    if (completed.length > 0) {
      const ended = new Set(completed);
      this.prefilling = this.prefilling.filter((r) => !ended.has(r));
    }
    this.completePrefills(atMs, completed);
    if (this.phase.kind === "idle") this.step(atMs);
  }

  private endSegment(atMs: number, n: number): void {
    this.phase = { kind: "idle" };
    const running = this.running;
    const count = running.length;
    this.generatedBase += n * count;
    this.runningCtx += n * count;
    this.runningCtxLow += n * this.runningLow;
    this.runningRemaining -= n * count;
    // In-place: keep the unfinished in order (index keep ≤ i is already read), finish the rest afterwards.
    let keep = 0;
    let done: SimRequest[] | undefined;
    for (let i = 0; i < count; i++) {
      const r = running[i]!;
      r.generated += n;
      if (r.generated < r.maxTokens) running[keep++] = r;
      else (done ??= []).push(r);
    }
    running.length = keep;
    if (done !== undefined) {
      for (const r of done) {
        this.leaveRunning(r);
        this.finish(r, atMs);
      }
    }
    if (this.phase.kind === "idle") this.step(atMs);
  }

  /** Before `r` is queued: the prompt tokens it would find cached now (none for a swapped-out request, whose KV comes back whole). */
  private expectCached(r: SimRequest): void {
    r.expectedCachedTokens = this.prefixCache === undefined || r.blockHashes === undefined || r.resume === "swap" ? 0 : this.prefixCache.peek(r.blockHashes, r.promptTokens);
  }

  /**
   * At admission: `r` reuses its cached prefix and stores its other blocks (prefix-cache.ts); cached blocks nobody
   * uses are then evicted down to the KV left unreserved. Counted once, at its first admission.
   */
  private acquirePrefix(r: SimRequest): void {
    const cache = this.prefixCache;
    if (cache === undefined || r.blockHashes === undefined) return;
    const hit = cache.acquireTiered(r.blockHashes, r.promptTokens, !r.prefixCounted);
    r.prefixHeld = true;
    r.prefixCounted = true;
    r.cachedTokens = r.resume === "swap" ? 0 : hit.gpuTokens + hit.hostTokens;
    r.hostLoadedTokens = r.resume === "swap" ? 0 : hit.hostTokens;
    cache.fitFree((this.capacityTokens - this.reservedLocal - this.foreignTokens) / cache.blockTokens);
  }

  /** Frees a request's KV reservation (its whole tokens, and its share of this instance's own cache). */
  private release(r: SimRequest): void {
    if (r.prefixHeld && r.blockHashes !== undefined) this.prefixCache?.release(r.blockHashes);
    r.prefixHeld = false;
    r.cachedTokens = 0;
    r.hostLoadedTokens = 0;
    r.remoteTokens = 0; // the received KV goes with the reservation: a preempted request computes its prompt again
    this.reservedTokens -= r.promptTokens + r.maxTokens;
    this.reservedLocal -= (r.promptTokens + r.maxTokens) * r.localShare;
    if (this.reservedTokens <= 0) this.reservedLocal = 0; // no drift from float sums once empty
    if (r.peer !== undefined) {
      r.peer.core.releaseForeign(r);
      r.peer = undefined;
    }
  }

  private finish(r: SimRequest, atMs: number): void {
    if (r.priority === 0) this.lastInteractiveMs = Math.max(this.lastInteractiveMs, atMs);
    r.state = "done";
    r.doneAtMs = atMs;
    this.release(r);
    r.handlers.onDone?.(atMs, r.generated);
  }

  /** Ends the current decode segment at the next iteration boundary (the batch changes there). */
  private cutAtNextBoundary(now: number): void {
    const p = this.phase;
    if (p.kind !== "decode") return;
    const k = this.itersAt(now);
    const nEnd = Math.min(p.nEnd, k + 1);
    if (nEnd === p.nEnd) return;
    p.nEnd = nEnd;
    p.endMs = p.startMs + segmentMs(nEnd, p.alphaMs, p.betaMs);
    this.schedule(p.endMs);
  }

  private cancel(r: SimRequest): void {
    if (r.state === "done" || r.state === "cancelled") return;
    this.sync();
    if (isFinished(r)) return;
    const now = this.clock.now();
    const prev = r.state;
    if (prev === "waiting") {
      this.waiting.leave(r);
      r.state = "cancelled";
      // It may have been the head that blocked the queue: let the next one in at the next boundary.
      if (this.phase.kind === "decode" && this.admissible(now)) this.cutAtNextBoundary(now);
    } else if (prev === "prefill") {
      if (this.prefilling.length > 0) this.prefilling = this.prefilling.filter((x) => x !== r);
      this.release(r);
      this.prefillTokens -= r.promptTokens + r.generated;
      this.prefillRemaining -= r.countedRemaining;
      this.prefillCount--;
    } else if (prev === "running") {
      const k = this.itersAt(now);
      this.running = this.running.filter((x) => x !== r);
      this.leaveRunning(r);
      r.generated += k;
      this.generatedBase += k;
      this.release(r);
      this.cutAtNextBoundary(now);
    }
    r.state = "cancelled";
    r.doneAtMs = now;
    r.handlers.onCancelled?.(now, r.generated);
  }
}
