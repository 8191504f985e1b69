/**
 * The region gateway (SageServe §6.2, "Routing logic at region endpoint"; DESIGN "Request path" step 2). It holds
 * the endpoints (deployments) of each model in one region and their instances (an `Engine` plus a lifecycle
 * state), routes every request to the least-loaded endpoint by effective memory utilization and then to the
 * serving instance with the fewest remaining tokens (JSQ, region/gateway/jsq.ts), streams the engine's events
 * back, and produces the region's telemetry.
 *
 * Between stats refreshes (every `statsRefreshMs` of the injected Clock) it adds its own in-flight estimate to each
 * instance — the prompt + max output tokens and the prompt's KV bytes of the requests it sent there since the last
 * refresh — so a burst that arrives before the engines' stats move spreads over instances and endpoints instead of
 * herding onto the first. No HTTP and no timers: the same class runs live and in replay (virtual time).
 *
 * Requests enter by `generate` (a stream: HTTP, gRPC, in-process links) or by `submit` (callbacks: engines on the
 * injected Clock, the replay's ten million requests a week); both take the same route and keep the same in-flight
 * books (`admit` / `settle`), so a replayed burst spreads exactly as a live one does. Both judge every interactive
 * request against the model's SLO as it ends (TTFT from entering the gateway, TPOT; slo-book.ts), the same way.
 *
 * It only routes and reports: the planner's targets, the instance listing and the RegionService the links serve are
 * the region runtime's (region/runtime/runtime.ts, targets.ts).
 */
import type { Clock } from "../../core/clock.js";
import { DEFAULT_SLO, sloFor, type SloConfig } from "../../core/config.js";
import { TidegateError, findTidegateError } from "../../core/errors.js";
import { silentLogger, type Logger } from "../../core/log.js";
import { MODEL_SPECS, kvBytesPerToken, type GpuType, type ModelName, type RegionName } from "../../core/models.js";
import type { Engine, EngineEvent, EngineStats, GenerateRequest, InstanceState, RequestCallbacks, RegionTelemetry } from "../../core/ports.js";
import { pickEndpoint } from "./jsq.js";
import { JSQ_POLICY, RoutingPolicy, type PolicySpec } from "./scoring/plugins.js";
import { PrefixIndex } from "./scoring/prefix-index.js";
import { DEFAULT_BLOCK_TOKENS, blockHashesOfBody } from "../../core/prefix.js";
import { SloBook, tpotOf, type ModelSloSummary, type SloOutcome } from "./slo-book.js";
import { WindowedRate, modelTelemetry } from "./telemetry.js";
import type { ColdHold } from "./cold-hold.js";
import { BurstLog } from "../../core/burst-log.js";

export interface GatewayOptions {
  region: RegionName;
  clock: Clock;
  /** How long an instance's stats snapshot is used before `engine.stats()` is read again (default 100 ms). */
  statsRefreshMs?: number;
  /** Window of the tokens/s figure in telemetry (default 10 000 ms). */
  rateWindowMs?: number;
  /** Instances tried per request when one fails before its first event (default 2). */
  maxAttempts?: number;
  log?: Logger;
  /** Called once per request when it ends: ok, error (after retries) or cancelled. */
  onOutcome?: (model: ModelName, outcome: RequestOutcome) => void;
  /** Called at each routing decision (a request admitted to an instance, retries included): traces, tests. */
  onRouted?: (req: GenerateRequest, instanceId: string) => void;
  /** The interactive SLO each model is judged against (config `slo`; default DEFAULT_SLO for every model). */
  slo?: SloConfig;
  /** Called once per interactive request judged against its SLO (slo-book.ts): the region's `/metrics` counter. */
  onSlo?: (model: ModelName, outcome: SloOutcome) => void;
  /**
   * Scale from zero (cold-hold.ts): a request for a model in `coldModels` that finds no serving instance waits here
   * while the controller brings one up, instead of being refused. Absent: refused at once (no_region_available).
   */
  coldHold?: ColdHold;
  /** The models the hold applies to (those whose every endpoint here may be at zero instances). */
  coldModels?: ReadonlySet<ModelName>;
  /**
   * Instance choice within the chosen endpoint (issue 34; scoring/plugins.ts): the plugin policy (default JSQ_POLICY,
   * today's join-the-shortest-queue) and the block size prompts are hashed with for the prefix scorer (default 16).
   */
  routing?: { policy: PolicySpec; blockTokens: number };
}

/** What `submit` returns for a request held for a cold start (cold-hold.ts): no instance chosen yet. */
export const HELD: RouteChoice = Object.freeze({ endpointId: "", instanceId: "" });

export type RequestOutcome = "ok" | "error" | "cancelled";

/** A read-only view of one instance, for the region controller and tests. */
export interface InstanceView {
  instanceId: string;
  model: ModelName;
  endpointId: string;
  gpu: GpuType;
  state: InstanceState;
  /** Requests the gateway has streaming on it now. */
  inFlight: number;
  /** When it entered `state` (clock ms). */
  enteredAtMs: number;
  /** Its engine's stats are stale (EngineStats.stale): routed around while another instance serves. */
  stale: boolean;
  /** Why the region believes its engine down (`engineDown`); undefined while it does not. It takes no request then. */
  down: string | undefined;
}

/** One instance's prefix-cache counters as its engine reports them (EngineStats; vLLM prefix_cache_*). */
export interface InstancePrefixStats {
  instanceId: string;
  model: ModelName;
  /** Prompt tokens looked up in its prefix cache and found there, since its engine started. */
  queriedTokens: number;
  hitTokens: number;
}

/** Where one request went. */
export interface RouteChoice {
  endpointId: string;
  instanceId: string;
}

interface InstanceRecord {
  engine: Engine;
  endpoint: EndpointRecord;
  state: InstanceState;
  stats: EngineStats;
  statsAtMs: number;
  /** Bumped at every refresh; a request's correction is undone only within the epoch it was added in. */
  epoch: number;
  addedTokens: number;
  addedKvBytes: number;
  inFlight: number;
  /** When it entered `state` (clock ms). */
  enteredAtMs: number;
  /** Why the region believes its engine down (engineDown), or undefined. */
  down: string | undefined;
  /** The streams (`generate`) on it now: each one's upstream abort and, once failed by `engineDown`, why. */
  attempts: Set<Attempt>;
}

/** One `generate` attempt on an instance: aborting `upstream` with `failure` set ends it as that failure. */
interface Attempt {
  upstream: AbortController;
  failure: TidegateError | undefined;
}

interface EndpointRecord {
  endpointId: string;
  gpu: GpuType;
  instances: InstanceRecord[];
  /** Routing inputs, rebuilt in `choose`: estimated utilization and the per-instance remaining-token loads. */
  effectiveMemoryUtilization: number;
  loads: { instanceId: string; remainingTokens: number; serving: boolean; waiting: number; kvUtilization: number; rec: InstanceRecord }[];
}

interface ModelRecord {
  model: ModelName;
  kvBytesPerToken: number;
  endpoints: EndpointRecord[];
  /**
   * Prompt tokens (at the first event) + output tokens (when the request ends), cumulative: counted at the same
   * moments by both entry shapes, so telemetry's tokens/s is the same streamed or replayed.
   */
  tokensServed: number;
  /** The part of `tokensServed` that batch requests (GenerateRequest.batch) took. */
  batchTokensServed: number;
  rate: WindowedRate;
  batchRate: WindowedRate;
  /** Prompt + max tokens of every request that entered (placed or not), cumulative, and its rate. */
  demanded: number;
  demandRate: WindowedRate;
  /** SLO attainment of its interactive requests. */
  slo: SloBook;
}

const NO_BLOCKS: readonly number[] = Object.freeze([]);

const ZERO_STATS: EngineStats = { kvBytesUsed: 0, kvBytesCapacity: 0, running: 0, waiting: 0, remainingTokens: 0, generatedTokensTotal: 0 };

/**
 * An error that is the request's own fault (4xx other than rate_limited and cancelled): not judged against the SLO.
 * `cancelled` here is an engine that went away under the request; the caller's own cancel is told apart by its signal.
 */
function clientFault(err: unknown): boolean {
  const te = findTidegateError(err);
  return te !== undefined && te.status >= 400 && te.status < 500 && te.code !== "rate_limited" && te.code !== "cancelled";
}

/** Counts tokens a request was served (batch ones apart as well). */
function served(model: ModelRecord, req: GenerateRequest, tokens: number): void {
  if (tokens <= 0) return;
  model.tokensServed += tokens;
  if (req.batch === true) model.batchTokensServed += tokens;
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

/** What one admitted request added to its instance's estimate, to take back when it ends. */
interface Ticket {
  rec: InstanceRecord;
  epoch: number;
  tokens: number;
  kvBytes: number;
  /** Ends the request's in-flight entry in the prefix index (scoring/prefix-index.ts `routed`), if it has one. */
  unroute: (() => void) | undefined;
}

/**
 * Adds a request to its instance's in-flight estimate until the next stats refresh: prompt + max output tokens less
 * `cachedTokens`, the prompt tokens the prefix index says the instance holds (the JSQ load: work still to do, as the
 * engine counts it, core/ports.ts remainingTokens), and the prompt's KV bytes (the endpoint's effective memory), plus
 * one request in flight.
 */
function admit(rec: InstanceRecord, req: GenerateRequest, kvBytesPerToken: number, cachedTokens: number): Ticket {
  const t: Ticket = { rec, epoch: rec.epoch, tokens: req.promptTokens + req.maxTokens - cachedTokens, kvBytes: req.promptTokens * kvBytesPerToken, unroute: undefined };
  rec.addedTokens += t.tokens;
  rec.addedKvBytes += t.kvBytes;
  rec.inFlight++;
  return t;
}

/** Takes an ended request out of the estimate (only within the refresh epoch it was added in). */
function settle(t: Ticket): void {
  t.unroute?.();
  t.rec.inFlight--;
  if (t.rec.epoch === t.epoch) {
    t.rec.addedTokens -= t.tokens;
    t.rec.addedKvBytes -= t.kvBytes;
  }
}

/**
 * One callback-form request in flight: counts its tokens, settles its books and judges it against the SLO (when
 * interactive), then calls the caller's hooks. The engine cancels a callback-form request only when it goes away
 * (Gateway.submit takes no signal): a miss once it had its first token, unserved before.
 */
class Submitted implements RequestCallbacks {
  private firstAtMs = -1;

  constructor(
    private readonly gateway: Gateway,
    private readonly model: ModelRecord,
    private readonly ticket: Ticket,
    private readonly req: GenerateRequest,
    private readonly callbacks: RequestCallbacks,
    private readonly enteredAtMs: number,
  ) {}

  onFirstToken(atMs: number): void {
    this.firstAtMs = atMs;
    this.gateway.noteServed(this.model, this.req, this.req.promptTokens);
    this.callbacks.onFirstToken?.(atMs);
  }

  onDone(atMs: number, generatedTokens: number): void {
    settle(this.ticket);
    this.gateway.noteServed(this.model, this.req, generatedTokens, "ok");
    if (this.req.batch !== true) {
      const first = this.firstAtMs < 0 ? atMs : this.firstAtMs;
      this.model.slo.finished(first - this.enteredAtMs, tpotOf(first, atMs, generatedTokens), this.req.promptTokens, generatedTokens);
    }
    this.callbacks.onDone?.(atMs, generatedTokens);
  }

  onCancelled(atMs: number, generatedTokens: number): void {
    settle(this.ticket);
    this.gateway.noteServed(this.model, this.req, generatedTokens, "cancelled");
    if (this.req.batch !== true) {
      if (this.firstAtMs < 0) this.model.slo.refused();
      else this.model.slo.broken();
    }
    this.callbacks.onError?.(atMs, new TidegateError("cancelled", `request ${this.req.id} cancelled`));
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

/** One region's gateway. Not thread-safe (one event loop). */
export class Gateway {
  readonly region: RegionName;
  private readonly clock: Clock;
  private readonly statsRefreshMs: number;
  private readonly rateWindowMs: number;
  private readonly maxAttempts: number;
  private readonly log: Logger;
  private readonly onOutcome: GatewayOptions["onOutcome"];
  private readonly onRouted: GatewayOptions["onRouted"];
  private readonly slo: SloConfig;
  private readonly onSlo: GatewayOptions["onSlo"];
  private cold: ColdHold | undefined;
  private readonly coldModels: ReadonlySet<ModelName>;
  private readonly models = new Map<ModelName, ModelRecord>();
  private readonly byId = new Map<string, InstanceRecord>();
  /** RegionService.onChange listeners: instances added, removed or moved to another state. */
  private readonly changeListeners = new Set<() => void>();
  private seq = 0;
  /** Instance choice (scoring/plugins.ts) and what each instance holds of which prefixes (scoring/prefix-index.ts). */
  readonly policy: RoutingPolicy;
  readonly prefixIndex: PrefixIndex;
  /** One warning per burst of instances failing before a first event (a stopped engine fails all its requests). */
  private readonly retried: BurstLog;

  constructor(opts: GatewayOptions) {
    this.region = opts.region;
    this.clock = opts.clock;
    this.statsRefreshMs = opts.statsRefreshMs ?? 100;
    this.rateWindowMs = opts.rateWindowMs ?? 10_000;
    this.maxAttempts = opts.maxAttempts ?? 2;
    this.log = opts.log ?? silentLogger;
    this.onOutcome = opts.onOutcome;
    this.onRouted = opts.onRouted;
    this.slo = opts.slo ?? { ...DEFAULT_SLO, models: {} };
    this.onSlo = opts.onSlo;
    this.cold = opts.coldHold;
    this.coldModels = opts.coldModels ?? new Set();
    this.policy = new RoutingPolicy(opts.routing?.policy ?? JSQ_POLICY);
    this.prefixIndex = new PrefixIndex(opts.routing?.blockTokens ?? DEFAULT_BLOCK_TOKENS);
    this.retried = new BurstLog({ clock: this.clock, log: this.log, msg: "instances failed before a first event; their requests were retried" });
    if (!(this.statsRefreshMs >= 0)) throw new RangeError(`statsRefreshMs must be ≥ 0, got ${this.statsRefreshMs}`);
    if (!Number.isInteger(this.maxAttempts) || this.maxAttempts < 1) throw new RangeError(`maxAttempts must be an integer ≥ 1, got ${this.maxAttempts}`);
  }

  /** Adds an endpoint (deployment) of `model` on `gpu`; its id is `model/gpu`. Adding it twice is a no-op. */
  addEndpoint(model: ModelName, gpu: GpuType): string {
    const spec = MODEL_SPECS[model];
    if (spec === undefined) throw new TidegateError("invalid_config", `unknown model ${JSON.stringify(model)}`);
    let m = this.models.get(model);
    if (m === undefined) {
      m = { model, kvBytesPerToken: kvBytesPerToken(spec), endpoints: [], tokensServed: 0, batchTokensServed: 0, rate: new WindowedRate(this.rateWindowMs, this.clock.now()), batchRate: new WindowedRate(this.rateWindowMs, this.clock.now()), demanded: 0, demandRate: new WindowedRate(this.rateWindowMs, this.clock.now()), slo: new SloBook(model, sloFor(this.slo, model), this.clock, this.onSlo) };
      this.models.set(model, m);
    }
    const endpointId = `${model}/${gpu}`;
    if (!m.endpoints.some((e) => e.endpointId === endpointId)) {
      m.endpoints.push({ endpointId, gpu, instances: [], effectiveMemoryUtilization: 0, loads: [] });
    }
    return endpointId;
  }

  /** Adds an instance to an endpoint (created if needed). Its `instanceId` must be unique in the region. */
  addInstance(gpu: GpuType, engine: Engine, state: InstanceState = "serving"): void {
    if (this.byId.has(engine.instanceId)) throw new TidegateError("conflict", `instance ${engine.instanceId} already exists`);
    const endpointId = this.addEndpoint(engine.model, gpu);
    const endpoint = this.models.get(engine.model)!.endpoints.find((e) => e.endpointId === endpointId)!;
    const rec: InstanceRecord = { engine, endpoint, state, stats: ZERO_STATS, statsAtMs: -Infinity, epoch: 0, addedTokens: 0, addedKvBytes: 0, inFlight: 0, enteredAtMs: this.clock.now(), down: undefined, attempts: new Set() };
    endpoint.instances.push(rec);
    this.byId.set(engine.instanceId, rec);
    if (this.policy.needsPrefix) {
      // The routing history of an instance remembers about as many blocks as its KV holds.
      const kvTokens = engine.stats().kvBytesCapacity / this.models.get(engine.model)!.kvBytesPerToken;
      this.prefixIndex.attach(engine.instanceId, kvTokens > 1 ? kvTokens / this.prefixIndex.blockTokens : 65_536, engine.kvEvents);
    }
    this.changed();
  }

  /** Calls `cb` after every instance added, removed or moved to another state (RegionService.onChange). */
  onChange(cb: () => void): () => void {
    this.changeListeners.add(cb);
    return () => this.changeListeners.delete(cb);
  }

  private changed(): void {
    this.cold?.release((m) => this.serves(m));
    for (const cb of [...this.changeListeners]) cb();
  }

  /**
   * Stops holding requests for cold models (the region's instances turned out fixed: nothing can bring one up); a
   * request that finds no serving instance is refused at once again. Requests already held stay held until released
   * or refused by their hold.
   */
  stopColdHold(): void {
    this.cold = undefined;
  }

  /** Whether some instance of `model` serves here now. */
  serves(model: ModelName): boolean {
    const m = this.models.get(model);
    return m !== undefined && m.endpoints.some((e) => e.instances.some((i) => i.state === "serving"));
  }

  /** Moves an instance to another lifecycle state; only `serving` instances take new requests. */
  setInstanceState(instanceId: string, state: InstanceState): void {
    const rec = this.instance(instanceId);
    if (rec.state === state) return;
    rec.enteredAtMs = this.clock.now();
    rec.state = state;
    this.changed();
  }

  /**
   * The region believes the instance's engine down (issue 49 item 2; region/process/engine-health.ts: it refused, or
   * owed bytes and sent none): from now until `engineUp` it takes no request — whatever its state, so an ejection cap
   * that keeps it `serving` keeps no request waiting on it — its stats count as stale (full, in telemetry), and every
   * stream on it now is ended with `upstream_error` "instance … stopped answering (reason)": one without a first event is
   * retried on another instance (then, failing there too or with none left, by the router in another region), one
   * with it ends with that error. Returns how many streams it ended. Idempotent; unknown instance: not_found.
   */
  engineDown(instanceId: string, reason: string): number {
    const rec = this.instance(instanceId);
    const was = rec.down;
    rec.down = reason;
    let ended = 0;
    for (const a of rec.attempts) {
      if (a.failure !== undefined) continue;
      a.failure = new TidegateError("upstream_error", `instance ${instanceId} stopped answering (${reason})`);
      a.upstream.abort(a.failure);
      ended++;
    }
    if (was === undefined) this.changed();
    return ended;
  }

  /** The engine answers again: the instance takes requests as its state allows (undoes `engineDown`). */
  engineUp(instanceId: string): void {
    const rec = this.instance(instanceId);
    if (rec.down === undefined) return;
    rec.down = undefined;
    this.changed();
  }

  /** Removes an instance (its in-flight streams continue) and returns its engine for the caller to close. */
  removeInstance(instanceId: string): Engine {
    const rec = this.instance(instanceId);
    const list = rec.endpoint.instances;
    list.splice(list.indexOf(rec), 1);
    this.byId.delete(instanceId);
    this.prefixIndex.detach(instanceId);
    this.changed();
    return rec.engine;
  }

  /** The engine of an instance in the gateway, if any. */
  engine(instanceId: string): Engine | undefined {
    return this.byId.get(instanceId)?.engine;
  }

  /** Every instance, in endpoint order. */
  instances(): InstanceView[] {
    const out: InstanceView[] = [];
    for (const m of this.models.values()) {
      for (const e of m.endpoints) {
        for (const i of e.instances) out.push({ instanceId: i.engine.instanceId, model: m.model, endpointId: e.endpointId, gpu: e.gpu, state: i.state, inFlight: i.inFlight, enteredAtMs: i.enteredAtMs, stale: i.stats.stale === true, down: i.down });
      }
    }
    return out;
  }

  /** Models with at least one endpoint here. */
  modelNames(): ModelName[] {
    return [...this.models.keys()];
  }

  /**
   * Where a request for `model` would go now (endpoint by estimated utilization, then JSQ), without sending it;
   * undefined when no instance of the model is serving. Unknown model: model_not_found.
   */
  route(model: ModelName): RouteChoice | undefined {
    const rec = this.choose(this.modelRecord(model), undefined, NO_BLOCKS);
    return rec === undefined ? undefined : { endpointId: rec.endpoint.endpointId, instanceId: rec.engine.instanceId };
  }

  /**
   * Routes and streams one request. Throws (before the first event) model_not_found, no_region_available when no
   * instance of the model serves here, upstream_error when every instance tried failed, cancelled when `signal`
   * aborted; a client error from the engine (4xx) is passed through unretried. After the first event an engine
   * failure is an upstream_error. Aborting `signal` or stopping the iteration cancels the engine's generation. By
   * the time `done` is yielded the request is closed everywhere — its books settled, its outcome counted and the
   * engine's stream returned — so a consumer may stop pulling there without calling `return()`.
   * An interactive request is judged against the SLO when it ends (slo-book.ts): TTFT from entering here to its
   * first event, TPOT from its first to its last token event; a failure before the first event (every instance
   * tried, or none serving) is unserved, one after it a miss; the caller's cancel and client errors are not judged.
   */
  generate(req: GenerateRequest, signal?: AbortSignal): AsyncGenerator<EngineEvent, void, undefined> {
    const cold = this.cold;
    if (cold === undefined || !this.coldModels.has(req.model)) return this.stream(req, signal, this.clock.now());
    return this.streamAfterHold(cold, req, signal);
  }

  /**
   * `generate` for a model that may be at zero: held (cold-hold.ts) while no instance serves, then streamed; TTFT is
   * judged from entering here, so a cold start's wait counts. A hold that ends in model_cold or a cancel is
   * judged as `generate` judges a refusal or a cancel.
   */
  private async *streamAfterHold(cold: ColdHold, req: GenerateRequest, signal: AbortSignal | undefined): AsyncGenerator<EngineEvent, void, undefined> {
    const model = this.modelRecord(req.model);
    const enteredAtMs = this.clock.now();
    cold.enter(req.model);
    let left = false;
    try {
      const held = !this.serves(req.model);
      if (held) {
        try {
          await cold.wait(req.model, signal);
        } catch (err) {
          model.demanded += req.promptTokens + req.maxTokens;
          const cancelled = findTidegateError(err, "cancelled") !== undefined;
          this.onOutcome?.(req.model, cancelled ? "cancelled" : "error");
          if (!cancelled && req.batch !== true) model.slo.refused();
          throw err;
        }
      }
      let first = held;
      for await (const ev of this.stream(req, signal, enteredAtMs)) {
        if (first) {
          first = false;
          cold.coldTtft(req.model, this.clock.now() - enteredAtMs);
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

  private async *stream(req: GenerateRequest, signal: AbortSignal | undefined, enteredAtMs: number): AsyncGenerator<EngineEvent, void, undefined> {
    const model = this.modelRecord(req.model);
    model.demanded += req.promptTokens + req.maxTokens;
    const judged = req.batch !== true;
    const tried = new Set<InstanceRecord>();
    const blocks = this.blocksOf(req);
    let lastError: unknown;
    for (let attempt = 0; attempt < this.maxAttempts; attempt++) {
      if (signal?.aborted) {
        this.onOutcome?.(req.model, "cancelled");
        throw new TidegateError("cancelled", `request ${req.id} cancelled`, { cause: signal.reason });
      }
      const rec = this.choose(model, tried, blocks);
      if (rec === undefined) break;
      const cached = this.cachedOn(rec, req, blocks);
      const ticket = admit(rec, req, model.kvBytesPerToken, cached);
      ticket.unroute = this.prefixIndex.routed(rec.engine.instanceId, blocks);
      let settled = false;
      const settleOnce = () => {
        if (settled) return;
        settled = true;
        settle(ticket);
      };
      this.onRouted?.(req, rec.engine.instanceId);
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
        iterator = rec.engine.generate(cached > 0 ? { ...req, expectedCachedTokens: cached } : req, upstream.signal)[Symbol.asyncIterator]();
        for (;;) {
          const step = await iterator.next();
          if (step.done === true) break;
          const ev = step.value;
          if (!started) {
            started = true;
            served(model, req, req.promptTokens);
            firstAtMs = lastAtMs = this.clock.now();
          }
          if (ev.type === "token") {
            streamed += ev.tokens;
            if (judged) {
              outputTokens += ev.tokens;
              lastAtMs = this.clock.now();
            }
            yield ev;
            continue;
          }
          // `done` ends the request even if the consumer stops pulling right after it (a consumer may hold this
          // generator suspended at the yield below and drop it), so everything closes before it is handed on: the
          // books, the caller's signal, and the engine's own stream — returned so that its `finally` runs (the
          // openai-http adapter's in-flight count, remaining tokens and idle scrape; issue 32 item 6).
          served(model, req, streamed);
          streamed = 0;
          finished = true;
          settleOnce();
          rec.attempts.delete(attemptRec);
          signal?.removeEventListener("abort", onAbort);
          await closeQuietly(iterator, this.log, rec.engine.instanceId, req.id);
          this.onOutcome?.(req.model, "ok");
          if (judged) model.slo.finished(firstAtMs - enteredAtMs, tpotOf(firstAtMs, lastAtMs, outputTokens), req.promptTokens, outputTokens);
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
          this.onOutcome?.(req.model, "cancelled");
          this.log.debug("request cancelled by its caller", { region: this.region, instanceId: rec.engine.instanceId, requestId: req.id, started });
          throw new TidegateError("cancelled", `request ${req.id} cancelled`, { cause: err });
        }
        const clientError = findTidegateError(err);
        if (started || (clientError !== undefined && clientError.status < 500 && clientError.code !== "rate_limited")) {
          this.onOutcome?.(req.model, "error");
          if (judged && started) model.slo.broken();
          else if (judged && !clientFault(err)) model.slo.refused();
          if (!started) throw clientError;
          // Ended by engineDown: its own error ("instance … stopped answering (why)").
          if (attemptRec.failure !== undefined) throw attemptRec.failure;
          throw new TidegateError("upstream_error", `instance ${rec.engine.instanceId} failed mid-stream`, { cause: err });
        }
        this.retried.note(rec.engine.instanceId, { region: this.region, instanceId: rec.engine.instanceId, requestId: req.id, err });
        this.log.debug("instance failed before first event", { region: this.region, instanceId: rec.engine.instanceId, requestId: req.id, err });
        tried.add(rec);
        lastError = err;
      } finally {
        rec.attempts.delete(attemptRec);
        signal?.removeEventListener("abort", onAbort);
        settleOnce();
        served(model, req, streamed); // what a failed or cancelled stream delivered
        streamed = 0;
        if (!finished) {
          this.log.debug("request cancelled: its consumer stopped early", { region: this.region, instanceId: rec.engine.instanceId, requestId: req.id });
          // The consumer stopped early: abort first so the engine frees the request even if return() is a no-op.
          upstream.abort(new TidegateError("cancelled", `request ${req.id} cancelled by its consumer`));
          this.onOutcome?.(req.model, "cancelled");
          if (iterator !== undefined) await closeQuietly(iterator, this.log, rec.engine.instanceId, req.id);
        }
      }
    }
    this.onOutcome?.(req.model, "error");
    if (judged) model.slo.refused();
    if (tried.size === 0) throw new TidegateError("no_region_available", `no serving instance of ${req.model} in region ${this.region}`);
    throw new TidegateError("upstream_error", `${tried.size} instance(s) of ${req.model} in region ${this.region} failed before the first token`, { cause: lastError });
  }

  /**
   * The callback form of `generate` (one entry point, two shapes): routes `req` exactly as `generate` would, keeps
   * the same in-flight books and token counts, and reports through `callbacks` at clock times. Returns where it
   * went, or undefined when no instance of the model serves here (nothing is called then). Throws model_not_found
   * for an unknown model, and what the engine throws before accepting the request (e.g. a prompt too long for it).
   * Engines without a callback form are driven through `generate`; a failure then reaches `onError`. An interactive
   * request is judged against the SLO as `generate` judges it; returning undefined (refused) counts it unserved.
   */
  submit(req: GenerateRequest, callbacks: RequestCallbacks): RouteChoice | undefined {
    const cold = this.cold;
    if (cold === undefined || !this.coldModels.has(req.model)) return this.submitNow(req, callbacks, this.clock.now());
    this.modelRecord(req.model);
    const enteredAtMs = this.clock.now();
    const tracked = new ColdTracked(cold, req.model, callbacks, enteredAtMs);
    if (this.serves(req.model)) {
      tracked.held = false;
      let choice: RouteChoice | undefined;
      try {
        choice = this.submitNow(req, tracked, enteredAtMs);
      } finally {
        if (choice === undefined) tracked.abandon();
      }
      return choice;
    }
    this.holdSubmitted(cold, req, tracked, enteredAtMs, enteredAtMs + cold.holdMs);
    return HELD;
  }

  /**
   * Holds a callback-form request for a cold model until it serves (then routes it as `submit` does; an instance
   * gone again by then holds it again until the same deadline) or the hold refuses it (`onError` with model_cold).
   */
  private holdSubmitted(cold: ColdHold, req: GenerateRequest, tracked: ColdTracked, enteredAtMs: number, deadlineMs: number): void {
    cold.hold(
      req.model,
      () => {
        if (!this.serves(req.model)) return this.holdSubmitted(cold, req, tracked, enteredAtMs, deadlineMs);
        try {
          this.submitNow(req, tracked, enteredAtMs);
        } catch (err) {
          tracked.onError(this.clock.now(), err);
        }
      },
      (err) => {
        const model = this.modelRecord(req.model);
        model.demanded += req.promptTokens + req.maxTokens;
        this.onOutcome?.(req.model, "error");
        if (req.batch !== true) model.slo.refused();
        tracked.onError(this.clock.now(), err);
      },
      deadlineMs,
    );
  }

  private submitNow(req: GenerateRequest, callbacks: RequestCallbacks, enteredAtMs: number): RouteChoice | undefined {
    const model = this.modelRecord(req.model);
    const blocks = this.blocksOf(req);
    const rec = this.choose(model, undefined, blocks);
    const choice = rec === undefined ? undefined : { endpointId: rec.endpoint.endpointId, instanceId: rec.engine.instanceId };
    // A stream-only engine: `generate` (started now, so it makes the same choice) keeps the books and the counts.
    if (rec !== undefined && rec.engine.submit === undefined) {
      void this.drive(req, callbacks);
      return choice;
    }
    model.demanded += req.promptTokens + req.maxTokens;
    if (rec === undefined) {
      if (req.batch !== true) model.slo.refused();
      return undefined;
    }
    const ticket = admit(rec, req, model.kvBytesPerToken, this.cachedOn(rec, req, blocks));
    ticket.unroute = this.prefixIndex.routed(rec.engine.instanceId, blocks);
    this.onRouted?.(req, rec.engine.instanceId);
    try {
      rec.engine.submit!(req, new Submitted(this, model, ticket, req, callbacks, enteredAtMs));
    } catch (err) {
      settle(ticket);
      this.onOutcome?.(req.model, "error");
      if (req.batch !== true && !clientFault(err)) model.slo.refused();
      throw err;
    }
    return choice;
  }

  /** Counts tokens served and the outcome of a callback-form request (Submitted's hooks). */
  noteServed(model: ModelRecord, req: GenerateRequest, tokens: number, outcome?: RequestOutcome): void {
    served(model, req, tokens);
    if (outcome !== undefined) this.onOutcome?.(model.model, outcome);
  }

  /** `submit` over an engine that only streams. */
  private async drive(req: GenerateRequest, callbacks: RequestCallbacks): Promise<void> {
    let first = true;
    let generated = 0;
    try {
      for await (const ev of this.generate(req)) {
        if (first) {
          first = false;
          callbacks.onFirstToken?.(this.clock.now());
        }
        if (ev.type === "token") generated += ev.tokens;
        else callbacks.onDone?.(this.clock.now(), generated);
      }
    } catch (err) {
      callbacks.onError?.(this.clock.now(), err);
    }
  }

  /**
   * The region's telemetry now: one entry per model; reads fresh stats from every instance. Each model's `slo` is its
   * SLO running totals (slo-book.ts): any number of readers may take snapshots.
   */
  snapshot(): RegionTelemetry {
    const now = this.clock.now();
    const models = [...this.models.values()].map((m) => {
      const samples = [];
      for (const e of m.endpoints) {
        for (const i of e.instances) {
          this.refresh(i, now);
          samples.push({ endpointId: e.endpointId, state: i.state, stats: i.down === undefined ? i.stats : { ...i.stats, stale: true } });
        }
      }
      const t = modelTelemetry(m.model, m.endpoints, samples, m.rate.rate(now, m.tokensServed), m.batchRate.rate(now, m.batchTokensServed), m.demandRate.rate(now, m.demanded));
      t.slo = m.slo.totals();
      return t;
    });
    return { region: this.region, seq: ++this.seq, atMs: now, models };
  }

  /**
   * The prefix-cache counters of every instance whose engine reports them (engine-sim; vLLM through the openai-http
   * adapter's scrape), read from each engine now.
   */
  prefixStats(): InstancePrefixStats[] {
    const out: InstancePrefixStats[] = [];
    for (const m of this.models.values()) {
      for (const e of m.endpoints) {
        for (const i of e.instances) {
          const s = i.engine.stats();
          if (s.prefixQueriedTokensTotal === undefined) continue;
          out.push({ instanceId: i.engine.instanceId, model: m.model, queriedTokens: s.prefixQueriedTokensTotal, hitTokens: s.prefixHitTokensTotal ?? 0 });
        }
      }
    }
    return out;
  }

  /** Each model's SLO targets, judged requests, attainment over the last hour and hours in violation (slo-book.ts). */
  sloSummaries(): ModelSloSummary[] {
    return [...this.models.values()].map((m) => m.slo.summary());
  }

  /** `model`'s judged requests over the last `minutes` clock minutes and those met, with its SLO percentile; undefined before its first request. */
  sloRecent(model: ModelName, minutes: number): { requests: number; met: number; percentile: number } | undefined {
    const m = this.models.get(model);
    return m === undefined ? undefined : { ...m.slo.recent(minutes), percentile: m.slo.slo.percentile };
  }

  /**
   * The prompt's block hashes when the policy scores prefixes: those the request carries (a trace's), else hashed
   * from its body with the chat template applied, as the engine hashes it (core/prefix.ts); none otherwise.
   */
  private blocksOf(req: GenerateRequest): readonly number[] {
    if (!this.policy.needsPrefix) return NO_BLOCKS;
    return req.blockHashes ?? blockHashesOfBody(req.kind, req.body, this.prefixIndex.blockTokens);
  }

  /** Prompt tokens of `req` that `rec`'s instance holds by the prefix index (at most prompt − 1; 0 without block hashes). */
  private cachedOn(rec: InstanceRecord, req: GenerateRequest, blocks: readonly number[]): number {
    if (blocks.length === 0) return 0;
    return Math.min(req.promptTokens - 1, this.prefixIndex.prefixBlocks(rec.engine.instanceId, blocks) * this.prefixIndex.blockTokens);
  }

  /** Closes every engine. */
  async close(): Promise<void> {
    this.retried.flush();
    this.prefixIndex.close();
    await Promise.all([...this.byId.values()].map((i) => i.engine.close()));
  }

  private instance(instanceId: string): InstanceRecord {
    const rec = this.byId.get(instanceId);
    if (rec === undefined) throw new TidegateError("not_found", `no instance ${JSON.stringify(instanceId)} in region ${this.region}`);
    return rec;
  }

  private modelRecord(model: ModelName): ModelRecord {
    const m = this.models.get(model);
    if (m === undefined) throw new TidegateError("model_not_found", `model ${JSON.stringify(model)} is not served in region ${this.region}`, { param: "model" });
    return m;
  }

  private refresh(rec: InstanceRecord, now: number): void {
    rec.stats = rec.engine.stats();
    rec.statsAtMs = now;
    rec.epoch++;
    rec.addedTokens = 0;
    rec.addedKvBytes = 0;
  }

  /**
   * Endpoint by estimated utilization, then the instance by the routing policy (scoring/plugins.ts; JSQ on estimated
   * remaining tokens by default) given the prompt's `blocks`; `exclude` holds failed instances.
   */
  private choose(model: ModelRecord, exclude: ReadonlySet<InstanceRecord> | undefined, blocks: readonly number[]): InstanceRecord | undefined {
    const now = this.clock.now();
    for (const e of model.endpoints) {
      for (const i of e.instances) if (now - i.statsAtMs >= this.statsRefreshMs) this.refresh(i, now);
    }
    // Stale instances (stats unreadable) are routed around while any fresh one serves; only then are they tried. An
    // instance whose engine the region believes down takes nothing (engineDown), and counts as full.
    const fresh = model.endpoints.some((e) => e.instances.some((i) => i.state === "serving" && i.down === undefined && i.stats.stale !== true && !(exclude?.has(i) ?? false)));
    for (const e of model.endpoints) {
      let used = 0;
      let capacity = 0;
      e.loads.length = 0;
      for (const i of e.instances) {
        const serving = i.state === "serving" && i.down === undefined && !(exclude?.has(i) ?? false) && !(fresh && i.stats.stale === true);
        if (i.state === "serving") {
          used += (i.stats.stale === true || i.down !== undefined ? i.stats.kvBytesCapacity : i.stats.kvBytesUsed) + i.addedKvBytes;
          capacity += i.stats.kvBytesCapacity;
        }
        const kvUtilization = i.stats.kvBytesCapacity > 0 ? (i.stats.kvBytesUsed + i.addedKvBytes) / i.stats.kvBytesCapacity : 0;
        e.loads.push({ instanceId: i.engine.instanceId, remainingTokens: i.stats.remainingTokens + i.addedTokens, serving, waiting: i.stats.waiting, kvUtilization, rec: i });
      }
      e.effectiveMemoryUtilization = capacity > 0 ? used / capacity : 1;
    }
    const endpoint = pickEndpoint(model.endpoints.map((e) => ({ endpointId: e.endpointId, effectiveMemoryUtilization: e.effectiveMemoryUtilization, instances: e.loads })));
    if (endpoint === undefined) return undefined;
    const index = this.prefixIndex;
    return this.policy.choose({ blockHashes: blocks, prefixBlocks: (id) => index.prefixBlocks(id, blocks) }, endpoint.instances)?.rec;
  }
}
