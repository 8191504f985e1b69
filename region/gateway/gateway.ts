/**
 * The region gateway (SageServe §6.2, "Routing logic at region endpoint"; DESIGN "Request path" step 2). It holds
 * the endpoints (deployments) of each model in one region and their instances (an `Engine` plus a lifecycle state;
 * instance-table.ts), routes every request to the least-loaded endpoint by effective memory utilization and then to
 * the serving instance with the fewest remaining tokens (JSQ, region/gateway/jsq.ts; chooser.ts, which also keeps
 * the in-flight estimate between stats refreshes), streams the engine's events back, and produces the region's
 * telemetry (judge.ts). No HTTP and no timers: the same class runs live and in replay (virtual time).
 *
 * Requests enter by `generate` (a stream: HTTP, gRPC, in-process links; stream-path.ts) or by `submit` (callbacks:
 * engines on the injected Clock, the replay's ten million requests a week; callback-path.ts); both take the same
 * route and keep the same in-flight books (Chooser `book` / `settle`), so a replayed burst spreads exactly as a live
 * one does. Both judge every interactive request against the model's SLO as it ends (TTFT from entering the
 * gateway, TPOT; judge.ts, slo-book.ts), the same way, and both hold requests for a model at zero (cold-hold.ts).
 *
 * It only routes and reports: the planner's targets, the instance listing and the RegionService the links serve are
 * the region runtime's (region/runtime/runtime.ts, targets.ts).
 */
import type { Clock } from "../../core/clock.js";
import type { SloConfig } from "../../core/config.js";
import { silentLogger, type Logger } from "../../core/log.js";
import type { GpuType, ModelName, RegionName } from "../../core/models.js";
import type { Engine, GenerateRequest, InstanceState, RequestCallbacks, RegionTelemetry } from "../../core/ports.js";
import { BurstLog } from "../../core/burst-log.js";
import { CallbackPath } from "./callback-path.js";
import { Chooser, type RouteChoice } from "./chooser.js";
import type { ColdHold } from "./cold-hold.js";
import { InstanceTable, type InstanceView } from "./instance-table.js";
import { Judge, type InstancePrefixStats, type RequestOutcome } from "./judge.js";
import type { PolicySpec, RoutingPolicy } from "./scoring/plugins.js";
import type { PrefixIndex } from "./scoring/prefix-index.js";
import type { ModelSloSummary, SloOutcome } from "./slo-book.js";
import { StreamPath } from "./stream-path.js";
import { streamOf, type EventSink, type EventStream, type Flow } from "../../core/push.js";

export { HELD } from "./callback-path.js";
export type { RouteChoice } from "./chooser.js";
export type { InstanceView } from "./instance-table.js";
export type { InstancePrefixStats, RequestOutcome } from "./judge.js";

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
  routing?: { policy: PolicySpec; blockTokens: number; pdMinPrefillTokens?: number };
}

/** One region's gateway: the instance table, the chooser and the judge, and the two request paths over them. Not thread-safe (one event loop). */
export class Gateway {
  readonly region: RegionName;
  /** Instance choice (scoring/plugins.ts) and what each instance holds of which prefixes (scoring/prefix-index.ts). */
  readonly policy: RoutingPolicy;
  readonly prefixIndex: PrefixIndex;
  private readonly clock: Clock;
  private readonly table: InstanceTable;
  private readonly chooser: Chooser;
  private readonly judge: Judge;
  private readonly stream: StreamPath;
  private readonly callbacks: CallbackPath;
  private cold: ColdHold | undefined;
  private readonly coldModels: ReadonlySet<ModelName>;
  /** One warning per burst of instances failing before a first event (a stopped engine fails all its requests). */
  private readonly retried: BurstLog;

  constructor(opts: GatewayOptions) {
    const { region, clock } = opts;
    const log = opts.log ?? silentLogger;
    const maxAttempts = opts.maxAttempts ?? 2;
    this.region = region;
    this.clock = clock;
    this.cold = opts.coldHold;
    this.coldModels = opts.coldModels ?? new Set();
    const chooser = (this.chooser = new Chooser({ clock, statsRefreshMs: opts.statsRefreshMs ?? 100, routing: opts.routing, onRouted: opts.onRouted }));
    this.policy = chooser.policy;
    this.prefixIndex = chooser.prefixIndex;
    const judge = (this.judge = new Judge({ region, clock, rateWindowMs: opts.rateWindowMs ?? 10_000, slo: opts.slo, onSlo: opts.onSlo, onOutcome: opts.onOutcome }));
    const table = (this.table = new InstanceTable({ region, clock, onModel: (m) => judge.open(m), onAdded: (rec, kv) => chooser.attach(rec, kv), onRemoved: (id) => chooser.detach(id) }));
    // Subscribed first: held requests are let go before any other listener hears of a change.
    table.onChange(() => this.cold?.release((m) => table.serves(m)));
    this.retried = new BurstLog({ clock, log, msg: "instances failed before a first event; their requests were retried" });
    if (!Number.isInteger(maxAttempts) || maxAttempts < 1) throw new RangeError(`maxAttempts must be an integer ≥ 1, got ${maxAttempts}`);
    const parts = { region, clock, log, table, chooser, judge };
    this.stream = new StreamPath({ ...parts, maxAttempts, retried: this.retried });
    this.callbacks = new CallbackPath({ ...parts, open: (req, sink) => this.open(req, sink) });
  }

  /** Adds an endpoint (deployment) of `model` on `gpu`; its id is `model/gpu`. Adding it twice is a no-op. */
  addEndpoint(model: ModelName, gpu: GpuType): string {
    return this.table.addEndpoint(model, gpu);
  }

  /** Adds an instance to an endpoint (created if needed). Its `instanceId` must be unique in the region. */
  addInstance(gpu: GpuType, engine: Engine, state: InstanceState = "serving"): void {
    this.table.addInstance(gpu, engine, state);
  }

  /** Calls `cb` after every instance added, removed or moved to another state (RegionService.onChange). */
  onChange(cb: () => void): () => void {
    return this.table.onChange(cb);
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
    return this.table.serves(model);
  }

  /** Moves an instance to another lifecycle state; only `serving` instances take new requests. */
  setInstanceState(instanceId: string, state: InstanceState): void {
    this.table.setInstanceState(instanceId, state);
  }

  /**
   * The region believes the instance's engine down (issue 49 item 2): it takes no request until `engineUp`, and every
   * stream on it now ends with `upstream_error` — retried elsewhere before its first event (InstanceTable.engineDown).
   * Returns how many streams it ended. Idempotent; unknown instance: not_found.
   */
  engineDown(instanceId: string, reason: string): number {
    return this.table.engineDown(instanceId, reason);
  }

  /** The engine answers again: the instance takes requests as its state allows (undoes `engineDown`). */
  engineUp(instanceId: string): void {
    this.table.engineUp(instanceId);
  }

  /** Removes an instance (its in-flight streams continue) and returns its engine for the caller to close. */
  removeInstance(instanceId: string): Engine {
    return this.table.removeInstance(instanceId);
  }

  /** The engine of an instance in the gateway, if any. */
  engine(instanceId: string): Engine | undefined {
    return this.table.engine(instanceId);
  }

  /** Every instance, in endpoint order. */
  instances(): InstanceView[] {
    return this.table.views();
  }

  /** Models with at least one endpoint here. */
  modelNames(): ModelName[] {
    return [...this.table.models.keys()];
  }

  /**
   * Where a request for `model` would go now (endpoint by estimated utilization, then JSQ), without sending it;
   * undefined when no instance of the model is serving. Unknown model: model_not_found.
   */
  route(model: ModelName): RouteChoice | undefined {
    return this.chooser.route(this.table.model(model));
  }

  /**
   * Routes and streams one request. Throws (before the first event) model_not_found, no_region_available when no
   * instance of the model serves here, upstream_error when every instance tried failed, cancelled when `signal`
   * aborted; a client error from the engine (4xx) is passed through unretried. After the first event an engine
   * failure is an upstream_error. Aborting `signal` or stopping the iteration cancels the engine's generation. By
   * the time `done` is yielded the request is closed everywhere — its books settled, its outcome counted and the
   * engine's stream returned — so a consumer may stop pulling there without calling `return()`.
   * An interactive request is judged against the SLO when it ends (judge.ts): TTFT from entering here to its
   * first event, TPOT from its first to its last token event; a failure before the first event (every instance
   * tried, or none serving) is unserved, one after it a miss; the caller's cancel and client errors are not judged.
   */
  generate(req: GenerateRequest, signal?: AbortSignal): EventStream {
    return streamOf((sink, s) => this.open(req, sink, s), signal);
  }

  /**
   * The push form of `generate` (core/push.ts), the one path both shapes take: the same route, books and judging,
   * each event handed to `sink` in the call that delivers it from the engine (no promise per token where the engine
   * has `open`); `sink.event` returning false pauses the engine until the returned flow resumes. Every failure,
   * refusals before the first event included, reaches `sink.fail` (none is thrown); a `done` goes on once the request
   * is closed everywhere.
   */
  open(req: GenerateRequest, sink: EventSink, signal?: AbortSignal): Flow {
    const cold = this.cold;
    if (cold === undefined || !this.coldModels.has(req.model)) return this.stream.open(req, sink, signal, this.clock.now());
    return this.stream.openAfterHold(cold, req, sink, signal);
  }

  /**
   * The callback form of `generate` (one entry point, two shapes): routes `req` exactly as `generate` would, keeps
   * the same in-flight books and token counts, and reports through `callbacks` at clock times. Returns where it
   * went, or undefined when no instance of the model serves here (nothing is called then), or HELD while a request
   * for a cold model waits for an instance. Throws model_not_found for an unknown model, and what the engine throws
   * before accepting the request (e.g. a prompt too long for it). Engines without a callback form are driven through
   * `generate`; a failure then reaches `onError`. An interactive request is judged against the SLO as `generate`
   * judges it; returning undefined (refused) counts it unserved.
   */
  submit(req: GenerateRequest, callbacks: RequestCallbacks): RouteChoice | undefined {
    const cold = this.cold;
    return this.callbacks.submit(req, callbacks, cold !== undefined && this.coldModels.has(req.model) ? cold : undefined);
  }

  /**
   * The region's telemetry now: one entry per model; reads fresh stats from every instance. Each model's `slo` is its
   * SLO running totals (slo-book.ts): any number of readers may take snapshots.
   */
  snapshot(): RegionTelemetry {
    return this.judge.snapshot(this.table, (rec, now) => this.chooser.refresh(rec, now));
  }

  /** The prefix-cache counters of every instance whose engine reports them, read from each engine now. */
  prefixStats(): InstancePrefixStats[] {
    return this.judge.prefixStats(this.table);
  }

  /** `model`'s demand over the rate window (judge.ts demandRates): requests/s, prompt and output tokens/s. */
  demandRates(model: ModelName): { requestsPerS: number; promptTokensPerS: number; outputTokensPerS: number } {
    return this.judge.demandRates(model);
  }

  /** Each model's SLO targets, judged requests, attainment over the last hour and hours in violation (slo-book.ts). */
  sloSummaries(): ModelSloSummary[] {
    return this.judge.sloSummaries();
  }

  /** `model`'s judged requests over the last `minutes` clock minutes and those met, with its SLO percentile; undefined before its first request. */
  sloRecent(model: ModelName, minutes: number): { requests: number; met: number; percentile: number } | undefined {
    return this.judge.sloRecent(model, minutes);
  }

  /** Closes every engine. */
  async close(): Promise<void> {
    this.retried.flush();
    this.chooser.close();
    await Promise.all(this.table.engines().map((e) => e.close()));
  }
}
