/**
 * The one composition root of a region (issue 30): `buildRegion` makes the region's Gateway with an endpoint per
 * `regions[].endpoints[]`, hands it to an engine host, which makes the actuator (and whatever runs the engines),
 * and starts the region runtime (runtime.ts: TargetsStore → controller → actuator) over them. The links serve
 * `runtime.service` in every shape. The engine host is the only part that differs:
 *
 * | host (file)                                   | actuator | engines                                          | used by                                  |
 * |-----------------------------------------------|----------|--------------------------------------------------|------------------------------------------|
 * | `agentsOverGrpc` (agents-host.ts)             | agents   | engine processes node agents start (gRPC)        | `tidegate region` (agents mode)          |
 * | `agentsInProcess` (agents-host.ts)            | agents   | simulated, on in-process node agents             | `tidegate dev` (default), tests          |
 * | `simulated` (sim-region.ts)                   | sim      | simulated, started as instances serve            | the replays, `tidegate dev` "sim"        |
 * | `fixedEngines` (static-host.ts)               | static   | the configured engines (in process, spawned, URLs)| `tidegate region`/`dev` "static"        |
 *
 * Simulated engines, wherever they run, come from one builder (build-sim-engine.ts) with the config's engines.*.
 */
import type { Clock } from "../../core/clock.js";
import type { TidegateConfig } from "../../core/config.js";
import { silentLogger, type Logger } from "../../core/log.js";
import type { ModelName, RegionName } from "../../core/models.js";
import type { GenerateRequest } from "../../core/ports.js";
import type { RuntimeActuator } from "../actuator/port.js";
import type { ControllerAction } from "../controller/reconciler.js";
import { Gateway, type InstancePrefixStats, type InstanceView, type RequestOutcome } from "../gateway/gateway.js";
import { ColdHold, type ColdRefusal } from "../gateway/cold-hold.js";
import type { LoadSource } from "../actuator/port.js";
import type { ModelSloSummary, SloOutcome } from "../gateway/slo-book.js";
import type { RegionService } from "../link/service.js";
import type { BoundStrategy } from "../strategies/strategy-registry.js";
import { startRegionRuntime, type RegionRuntime, type RuntimeMetricsSink } from "./runtime.js";

/**
 * Where a region reports: scaling actions and failures (the runtime), request outcomes and SLO judgements (the
 * gateway), data-plane bytes (agents); `watchSlo` is handed the gateway's SLO summaries once, to read at each scrape.
 */
export interface RegionMetricsHooks extends RuntimeMetricsSink {
  outcome?(model: ModelName, outcome: RequestOutcome): void;
  slo?(model: ModelName, outcome: SloOutcome): void;
  watchSlo?(read: () => readonly ModelSloSummary[]): void;
  /** Handed the gateway's per-instance prefix-cache counters once (issue 34), to read at each scrape. */
  watchPrefix?(read: () => readonly InstancePrefixStats[]): void;
  /** Handed the gateway's instance listing once (their prefill/decode roles), to read at each scrape. */
  watchInstances?(read: () => readonly InstanceView[]): void;
  transferred?(bytes: number): void;
  /** Scale from zero (issue 33): a model's first instance landed from `source`; a held request's first token. */
  coldStart?(model: ModelName, source: LoadSource): void;
  coldTtft?(model: ModelName, ttftMs: number): void;
  /**
   * A held request refused: the hold was full, it waited controller.scaleToZero.holdMs, or the region cannot start
   * the model (no_capacity, not_placed, cold_start_failed; region/runtime/cold-verdict.ts).
   */
  coldRefused?(model: ModelName, reason: ColdRefusal): void;
  /** One KV pull between the region's in-process prefill and decode engines ended (engines/sim/kv-fabric.ts), or failed. */
  kvPulled?(ms: number, bytes: number): void;
  kvPullFailed?(): void;
}

/** What an engine host is given: the region, its clock and log, and the gateway buildRegion made. */
export interface HostContext {
  config: TidegateConfig;
  region: RegionName;
  clock: Clock;
  log: Logger;
  gateway: Gateway;
  metrics?: RegionMetricsHooks;
}

/** What an engine host started for one region. */
export interface HostedRegion<A extends RuntimeActuator, X> {
  actuator: A;
  /** What this shape adds to the Region (the agents' registry, the in-process agents, the sim engines…). */
  extras: X;
  /** Time before the runtime's first pass (agents over gRPC: until every live agent has announced). */
  startupGraceMs?: number;
  /** Resolves once the region's starting instances serve (or rejects saying which did not). */
  ready(timeoutMs?: number): Promise<void>;
  /** Stops what the host started; the runtime is already closed, the gateway closes its engines after. */
  close(): Promise<void>;
}

/** Where a region's engines run and how its instances come and go: the one thing that differs between shapes. */
export interface EngineHost<A extends RuntimeActuator = RuntimeActuator, X = object> {
  /** Gateway stats refresh for this host's engines (in-process engines: 0, exact stats at every decision). */
  readonly statsRefreshMs?: number;
  start(ctx: HostContext): HostedRegion<A, X>;
}

export interface BuildRegionOptions<A extends RuntimeActuator, X> {
  config: TidegateConfig;
  region: RegionName;
  clock: Clock;
  log?: Logger;
  metrics?: RegionMetricsHooks;
  host: EngineHost<A, X>;
  /** Gateway stats refresh, over the host's (default: the Gateway's, 100 ms). */
  statsRefreshMs?: number;
  /** Each routing decision of the gateway (traces, tests; Gateway onRouted). */
  onRouted?: (req: GenerateRequest, instanceId: string) => void;
  /** The controller's strategy (default: config controller.strategy). */
  strategy?: BoundStrategy;
  /** Every scaling action. */
  onAction?: (a: ControllerAction) => void;
}

/** A running region of any shape. */
export type Region<A extends RuntimeActuator = RuntimeActuator, X = object> = X & {
  readonly name: RegionName;
  readonly gateway: Gateway;
  readonly actuator: A;
  readonly runtime: RegionRuntime<A>;
  /** What the region's links serve (runtime.service). */
  readonly service: RegionService;
  ready(timeoutMs?: number): Promise<void>;
  /** Stops the runtime, the host, then the gateway's engines (idempotent). */
  close(): Promise<void>;
};

/** Builds and starts one region of `config` on `host`. */
export function buildRegion<A extends RuntimeActuator, X>(o: BuildRegionOptions<A, X>): Region<A, X> {
  const rc = o.config.regions.find((r) => r.name === o.region);
  if (rc === undefined) throw new RangeError(`unknown region ${o.region}`);
  const log = o.log ?? silentLogger;
  const statsRefreshMs = o.statsRefreshMs ?? o.host.statsRefreshMs;
  const outcome = o.metrics?.outcome;
  const slo = o.metrics?.slo;
  let cold = coldHoldFor(o.config, o.region, o.clock, o.metrics);
  const gateway = new Gateway({
    region: o.region,
    clock: o.clock,
    log,
    slo: o.config.slo,
    ...(slo === undefined ? {} : { onSlo: (m: ModelName, x: SloOutcome) => slo.call(o.metrics, m, x) }),
    ...(statsRefreshMs === undefined ? {} : { statsRefreshMs }),
    ...(outcome === undefined ? {} : { onOutcome: (m: ModelName, x: RequestOutcome) => outcome.call(o.metrics, m, x) }),
    ...(o.onRouted === undefined ? {} : { onRouted: o.onRouted }),
    ...(cold === undefined ? {} : { coldHold: cold.hold, coldModels: cold.models }),
    ...(o.config.routing === undefined ? {} : { routing: o.config.routing }),
  });
  for (const e of rc.endpoints) gateway.addEndpoint(e.model, e.gpu);
  o.metrics?.watchSlo?.(() => gateway.sloSummaries());
  o.metrics?.watchPrefix?.(() => gateway.prefixStats());
  o.metrics?.watchInstances?.(() => gateway.instances());
  const hosted = o.host.start({ config: o.config, region: o.region, clock: o.clock, log, gateway, ...(o.metrics === undefined ? {} : { metrics: o.metrics }) });
  // Fixed engines (`--spawn-engines`, engines.urls) cannot be scaled from zero: such a region refuses at once.
  if (cold !== undefined && hosted.actuator.fixed === true) {
    gateway.stopColdHold();
    cold = undefined;
  }
  const runtime = startRegionRuntime({
    config: o.config,
    region: o.region,
    clock: o.clock,
    log,
    gateway,
    actuator: hosted.actuator,
    ...(cold === undefined ? {} : { cold }),
    ...(o.metrics === undefined ? {} : { metrics: o.metrics }),
    ...(o.strategy === undefined ? {} : { strategy: o.strategy }),
    ...(o.onAction === undefined ? {} : { onAction: o.onAction }),
    ...(hosted.startupGraceMs === undefined ? {} : { startupGraceMs: hosted.startupGraceMs }),
  });
  let closing: Promise<void> | undefined;
  return {
    ...hosted.extras,
    name: o.region,
    gateway,
    actuator: hosted.actuator,
    runtime,
    service: runtime.service,
    ready: (timeoutMs?: number) => hosted.ready(timeoutMs),
    close: () =>
      (closing ??= (async () => {
        runtime.close();
        cold?.hold.close();
        await hosted.close();
        await gateway.close();
      })()),
  } as Region<A, X>;
}

/**
 * The region's hold of requests for models at zero (region/gateway/cold-hold.ts): for the models whose every endpoint
 * in the region has `minInstances` 0, when the region's instances can change (not the static actuator) — whatever
 * `controller.scaleToZero.idleMs` says (issue 50: coming up from zero is on by default; only the idle drain down to
 * zero is opt-in). Undefined when the region has no such model or its engines are fixed (requests for a model with no
 * serving instance are then refused at once).
 */
export function coldHoldFor(config: TidegateConfig, region: RegionName, clock: Clock, metrics?: RegionMetricsHooks): { hold: ColdHold; models: ReadonlySet<ModelName> } | undefined {
  const z = config.controller.scaleToZero;
  const rc = config.regions.find((r) => r.name === region);
  if (config.controller.actuator === "static" || rc === undefined) return undefined;
  const models = new Set(rc.endpoints.map((e) => e.model).filter((m) => rc.endpoints.every((e) => e.model !== m || e.minInstances === 0)));
  if (models.size === 0) return undefined;
  const hold = new ColdHold({
    region,
    clock,
    holdMs: z.holdMs,
    maxHeld: z.maxHeld,
    ...(metrics?.coldTtft === undefined ? {} : { onColdTtft: (m: ModelName, ms: number) => metrics.coldTtft!(m, ms) }),
    ...(metrics?.coldRefused === undefined ? {} : { onRefused: (m: ModelName, r: ColdRefusal) => metrics.coldRefused!(m, r) }),
  });
  return { hold, models };
}

/**
 * Waits until every endpoint of the region serves its configured `instances` in `gateway` (a host's `ready` when
 * its instances come up over time: agents), polling on the clock; rejects after `timeoutMs` naming those short.
 */
export async function untilConfiguredServe(ctx: Pick<HostContext, "config" | "region" | "clock" | "gateway">, timeoutMs = 60_000): Promise<void> {
  const rc = ctx.config.regions.find((r) => r.name === ctx.region)!;
  const shortOf = () =>
    rc.endpoints
      .map((e) => ({ e, serving: ctx.gateway.instances().filter((i) => i.model === e.model && i.gpu === e.gpu && i.state === "serving").length }))
      .filter((x) => x.serving < x.e.instances)
      .map((x) => `${x.e.model}/${x.e.gpu} ${x.serving}/${x.e.instances}`);
  const deadline = ctx.clock.now() + timeoutMs;
  for (;;) {
    const short = shortOf();
    if (short.length === 0) return;
    if (ctx.clock.now() >= deadline) throw new Error(`${ctx.region}: the initial deployment did not land within ${timeoutMs} ms (serving/wanted: ${short.join(", ")}); see the region's failures at /admin/regions/${ctx.region}/instances`);
    await ctx.clock.sleep(50);
  }
}
