/**
 * The region runtime (DESIGN "Tiers and processes", STYLE "One runtime, many clocks and adapters"): one wiring of a
 * region's control loop that `tidegate region`, `tidegate dev` and the week replay all run —
 *
 *   gateway telemetry ─▶ RegionController (strategy from config) ─▶ RuntimeActuator (agents live: engines + data
 *   planner targets ─▶ TargetsStore (the one decisionId rule) ─┘       plane; sim in replay: config delays)
 *
 * It also makes the RegionService the links serve: telemetry whose instance counts are the actuator's (provisioning,
 * loading and spot included, per model and per endpoint — what the planner's fleet reads) with each model's SLO
 * running totals, and the admin listing (instances, nodes, failures, actions, and
 * each model's SLO attainment). Every scaling action is logged and counted; failures back the endpoint off.
 * The region's TargetsStore is the runtime's (the gateway only routes). With a fixed actuator (static: the configured
 * engines, region/actuator/static.ts) no controller pass runs: targets are acknowledged and held, never acted on.
 */
import type { Clock, Timer } from "../../core/clock.js";
import { instanceGpus, type TidegateConfig } from "../../core/config.js";
import type { Logger } from "../../core/log.js";
import type { GpuType, ModelName, RegionName } from "../../core/models.js";
import type { Engine, GenerateRequest, InstanceState, PoolRole, RegionInstances, RegionTargets, RegionTelemetry, TargetsAck } from "../../core/ports.js";
import type { EventSink, Flow } from "../../core/push.js";
import type { ModelSource } from "../actuator/agents.js";
import { poolKey, type LoadSource, type RuntimeActuator } from "../actuator/port.js";
import type { ColdHold } from "../gateway/cold-hold.js";
import { DEFAULT_MULTICAST, type MulticastPolicy } from "../pool/transfer.js";
import { MODEL_SPECS } from "../../core/models.js";
import { RegionController, type ControllerAction, type ControllerError } from "../controller/reconciler.js";
import type { Gateway } from "../gateway/gateway.js";
import type { HoldingEntry, RegionListing } from "../gateway/slo-book.js";
import type { PipelineSummary } from "../../engines/pipeline-summary.js";
import type { RegionService } from "../link/service.js";
import { resolveStrategy, type BoundStrategy } from "../strategies/strategy-registry.js";
import { TargetsStore } from "./targets.js";
import { ColdVerdicts } from "./cold-verdict.js";
import { PoolSignals } from "./pool-signals.js";

/** Where the runtime reports what it does (Prometheus in the region process). */
export interface RuntimeMetricsSink {
  action(model: string, kind: ControllerAction["kind"]): void;
  failure(model: string): void;
  /** A model's first instance landed from zero (issue 33), with where its parameters came from. */
  coldStart?(model: string, source: LoadSource): void;
}

/** One cold start (a model's first instance from zero), for the admin listing. */
export interface ColdStartRecord {
  atMs: number;
  model: ModelName;
  gpu: GpuType;
  instanceId: string;
  source: LoadSource | "unknown";
  /** From the scale-out decision to serving (ms). */
  tookMs: number;
}

export interface RegionRuntimeOptions<A extends RuntimeActuator = RuntimeActuator> {
  config: TidegateConfig;
  region: RegionName;
  clock: Clock;
  log: Logger;
  gateway: Gateway;
  actuator: A;
  metrics?: RuntimeMetricsSink;
  /** The strategy with its parameters (default: config controller.strategy with its defaults); the replay sets it. */
  strategy?: BoundStrategy;
  /** Hears every scaling action (the replay's books keep all of them; the listing keeps the last `keepActions`). */
  onAction?: (a: ControllerAction) => void;
  /** How many recent actions the listing keeps (default 100). */
  keepActions?: number;
  /**
   * Time before the first pass, so every live agent has announced (and its engines are adopted) before anything
   * is deployed (default 0; the region process waits controller.agentLostAfterMs).
   */
  startupGraceMs?: number;
  /**
   * Scale to zero and back (issue 33; build-region.ts coldHoldFor): the gateway's hold of requests for `models`, the
   * controller's zero rule (a cold start for held requests; the idle drain when controller.scaleToZero.idleMs > 0),
   * the refusal of held requests the region cannot start (cold-verdict.ts), the `cold` telemetry and the cold starts
   * listed.
   */
  cold?: { hold: ColdHold; models: ReadonlySet<ModelName> };
}

/** A running region runtime. */
export interface RegionRuntime<A extends RuntimeActuator = RuntimeActuator> {
  readonly controller: RegionController;
  readonly actuator: A;
  /** The planner's targets as this region holds them (the one decisionId rule); `service.acceptTargets` stores here. */
  readonly targets: TargetsStore;
  /** What the region's links serve. */
  readonly service: RegionService;
  /** Recent scaling actions, oldest first. */
  readonly actions: readonly ControllerAction[];
  /** Recent cold starts (a model's first instance from zero), oldest first. */
  readonly coldStarts: readonly ColdStartRecord[];
  close(): void;
}

/**
 * Before any plan: which of an endpoint's instances (spot and draining excluded) to cancel to come back to the
 * configured count — only instances not serving yet, so a restarted region keeps the serving engines it adopted.
 */
export function bootstrapSurplus<I extends { state: string }>(instances: readonly I[], configured: number): I[] {
  return instances.filter((i) => i.state !== "serving").slice(0, Math.max(0, instances.length - configured));
}

/** Wires the controller to the gateway, a TargetsStore and the actuator, and starts it on the clock (unless the actuator is fixed). */
export function startRegionRuntime<A extends RuntimeActuator>(o: RegionRuntimeOptions<A>): RegionRuntime<A> {
  const regionConfig = o.config.regions.find((r) => r.name === o.region);
  if (regionConfig === undefined) throw new RangeError(`unknown region ${o.region}`);
  const log = o.log;
  const keep = o.keepActions ?? 100;
  const actions: ControllerAction[] = [];
  const blockedSaid = new Map<string, number>();
  // The last time each endpoint wanted more instances and could not have them, and why (say-why below).
  const lastBlocked = new Map<string, { atMs: number; reason: string }>();
  // One telemetry snapshot per pass, shared by every endpoint's signals.
  let snap: { atMs: number; t: RegionTelemetry } | undefined;
  const snapshot = () => {
    const now = o.clock.now();
    if (snap === undefined || snap.atMs !== now) snap = { atMs: now, t: o.gateway.snapshot() };
    return snap.t;
  };
  const gpusOf = (model: ModelName, gpu: GpuType) => instanceGpus(o.config, model, gpu);
  const targets = new TargetsStore(o.region, log);
  const cc = o.config.controller;
  const strategy = o.strategy ?? resolveStrategy(cc.strategy, cc.strategyParams, "controller.strategy", "controller.strategyParams");
  const managed = regionConfig.endpoints.map((e) => ({ model: e.model, gpu: e.gpu, ...(e.role === undefined ? {} : { role: e.role }), gpusPerInstance: gpusOf(e.model, e.gpu), minInstances: e.minInstances, maxInstances: e.maxInstances }));
  // A disaggregated model's prefill and decode pools each scale on their own role's load (pool-signals.ts).
  const pools = new PoolSignals(o.config, o.gateway, o.actuator);
  const verdicts = o.cold === undefined ? undefined : new ColdVerdicts({ endpoints: managed, backoffOf: (m, g, r) => controller.backoffOf(m, g, r) });
  const controller = new RegionController({
    region: o.region,
    clock: o.clock,
    actuator: o.actuator,
    strategy,
    endpoints: managed,
    signals: (model, gpu, role) => {
      if (role !== undefined) return pools.signals(model, gpu, role);
      const m = snapshot().models.find((x) => x.model === model);
      const ep = m?.endpoints.find((e) => e.gpu === gpu);
      // LT-UA's "observed traffic" is demand (what entered the gateway), not what was served: served tokens/s
      // saturates at capacity exactly when a burst needs more of it.
      return { utilization: ep === undefined || ep.servingInstances === 0 ? 1 : ep.effectiveMemoryUtilization, observedTokensPerS: m?.demandTokensPerS ?? 0 };
    },
    inFlightTokens: (id) => o.gateway.instances().find((i) => i.instanceId === id)?.inFlight ?? 0,
    windowMs: o.config.planner.intervalMs,
    scaleOutMs: (model, gpu) => o.actuator.expectedScaleOutMs(model, gpu),
    maxStepsPerPass: cc.maxStepsPerPass,
    pdSwitch: cc.pdSwitch,
    retryInitialMs: cc.retryInitialMs,
    retryMaxMs: cc.retryMaxMs,
    ...(o.cold === undefined ? {} : { scaleToZero: { models: o.cold.models, idleMs: cc.scaleToZero.idleMs, held: (m: ModelName) => o.cold!.hold.held(m), idleForMs: (m: ModelName) => o.cold!.hold.idleForMs(m) } }),
    onAction: (a) => record(a),
    onBlocked: (b) => {
      const name = poolKey(b.model, b.gpu, b.role);
      lastBlocked.set(name, { atMs: b.atMs, reason: b.reason });
      // Said once per endpoint and reason a minute: an operator reads why the target is not reached.
      const key = `${name}/${b.reason}`;
      // Every block counts for held requests at zero (cold-verdict.ts), said or not.
      verdicts?.blocked(b.model, b.gpu, b.reason, b.freeGpus, b.role);
      if ((blockedSaid.get(key) ?? -Infinity) > b.atMs - 60_000) return;
      blockedSaid.set(key, b.atMs);
      const message = b.reason === "at-max" ? `${name}: wants ${b.desired} instances, at its maximum (${b.current})` : `${name}: wants ${b.desired} instances, has ${b.current}; no spot instance to reclaim or redeploy and ${b.freeGpus} free ${b.gpu} GPU slots`;
      log.warn("cannot scale out", { model: b.model, gpu: b.gpu, ...(b.role === undefined ? {} : { role: b.role }), reason: b.reason, current: b.current, desired: b.desired, freeGpus: b.freeGpus });
      o.actuator.report({ model: b.model, gpu: b.gpu, message });
    },
    onError: (e: ControllerError) => {
      verdicts?.failed(e.model, e.gpu, e.kind, e.message, e.role);
      o.metrics?.failure(e.model);
      log.warn("scale-out failed; backing off", { model: e.model, gpu: e.gpu, ...(e.role === undefined ? {} : { role: e.role }), failures: e.failures, retryInMs: Math.max(0, Math.round(e.retryAtMs - e.atMs)), error: e.message });
    },
  });
  // Scale-outs that fail after the actuator accepted them (a transfer, an engine that never became healthy) back the
  // endpoint off like those that fail at once; a landed instance clears it.
  o.actuator.listen({
    onFailure: (model, gpu, message, role) => controller.noteFailure(model, gpu, message, "failed", role),
    onLanded: (model, gpu, instanceId, source) => {
      const role = o.actuator.instances().find((i) => i.id === instanceId)?.role;
      controller.noteSuccess(model, gpu, role);
      verdicts?.landed(model, gpu, role);
      if (o.cold?.models.has(model) === true) noteColdStart(model, gpu, instanceId, source);
    },
  });
  // A model's first serving instance after none (the gateway has just added it): a cold start, listed and counted.
  const coldStarts: ColdStartRecord[] = [];
  const noteColdStart = (model: ModelName, gpu: GpuType, instanceId: string, source: LoadSource | undefined) => {
    if (o.gateway.instances().filter((i) => i.model === model && i.state === "serving").length !== 1) return;
    const inst = o.actuator.instances().find((i) => i.id === instanceId);
    const now = o.clock.now();
    const r: ColdStartRecord = { atMs: now, model, gpu, instanceId, source: source ?? "unknown", tookMs: Math.max(0, now - (inst?.actionAtMs ?? now)) };
    coldStarts.push(r);
    if (coldStarts.length > keep) coldStarts.shift();
    if (source !== undefined) o.metrics?.coldStart?.(model, source);
    log.info("cold start", { model, gpu, instanceId, source: r.source, tookMs: Math.round(r.tookMs) });
  };
  const fixed = o.actuator.fixed === true;
  const unsubscribe = targets.onTargets((t: RegionTargets) => {
    log.info(fixed ? "targets accepted; not acted on: the region's engines are fixed" : "targets accepted", { decisionId: t.decisionId, endpoints: t.endpoints.map((e) => `${poolKey(e.model, e.gpu, e.role)}=${e.instances}`).join(" ") });
    controller.setTargets(t);
  });
  const firstPassAtMs = o.clock.now() + (o.startupGraceMs ?? 0);
  const record = (a: ControllerAction) => {
    actions.push(a);
    if (actions.length > keep) actions.shift();
    o.metrics?.action(a.model, a.kind);
    o.onAction?.(a);
    log.info("scaling step", { model: a.model, gpu: a.gpu, ...(a.role === undefined ? {} : { role: a.role }), kind: a.kind, instanceId: a.instanceId, from: a.from, desired: a.desired, reason: a.reason });
  };
  /**
   * Before any plan, the configured instances (regions[].endpoints[].instances) are the target: each pass deploys
   * the deficit (agents may join late, a node may have no room yet), with the controller's backoff after failures,
   * and cancels a surplus that is not serving yet (a node declared lost comes back and its engine is adopted while
   * its replacement is still deploying). Serving instances are never drained before a plan: a restarted region that
   * adopts more engines than configured keeps them until the planner's targets arrive.
   * Once a plan is held the controller alone decides. A strategy that reads no forecast (reactive, reactive-hpa)
   * decides from the first pass: bootstrap then only brings each endpoint up to its configured instances once and
   * never cancels what the controller started (a scale-out still loading is not a surplus).
   */
  const reached = new Set<string>();
  const bootstrap = () => {
    if (targets.latest() !== undefined) return;
    const now = o.clock.now();
    for (const e of regionConfig.endpoints) {
      const name = poolKey(e.model, e.gpu, e.role);
      if (!strategy.usesForecast && reached.has(name)) continue;
      const b = controller.backoffOf(e.model, e.gpu, e.role);
      if (b !== undefined && now < b.retryAtMs) continue;
      const mine = o.actuator.instances().filter((i) => i.model === e.model && i.gpu === e.gpu && i.role === e.role && i.state !== "spot" && i.state !== "draining");
      const have = mine.length;
      if (!strategy.usesForecast && have >= e.instances) {
        reached.add(name);
        continue;
      }
      // A model scaled from zero is the controller's from the first pass: its cold starts are no surplus.
      if (have > e.instances && o.cold?.models.has(e.model) === true) continue;
      if (have > e.instances) {
        const surplus = bootstrapSurplus(mine, e.instances);
        surplus.forEach((inst, k) => {
          o.actuator.drainToSpot(inst.id);
          record({ atMs: now, region: o.region, model: e.model, gpu: e.gpu, ...(e.role === undefined ? {} : { role: e.role }), kind: "drain", instanceId: inst.id, reason: "initial-deployment-surplus", from: have - k, desired: e.instances });
        });
        continue;
      }
      for (let k = have; k < e.instances; k++) {
        try {
          const inst = o.actuator.provision(e.model, e.gpu, gpusOf(e.model, e.gpu), e.role);
          record({ atMs: now, region: o.region, model: e.model, gpu: e.gpu, ...(e.role === undefined ? {} : { role: e.role }), kind: "provision", instanceId: inst.id, reason: "initial-deployment", from: k, desired: e.instances });
        } catch (err) {
          controller.noteFailure(e.model, e.gpu, err instanceof Error ? err.message : String(err), "refused", e.role);
          break;
        }
      }
    }
  };
  const refusedSaid = new Map<string, number>();
  const pass = () => {
    if (o.clock.now() < firstPassAtMs) return;
    verdicts?.beginPass();
    o.actuator.tick();
    bootstrap();
    controller.reconcile();
    // Held requests for a model the region cannot start (no capacity, not placed, its cold start failed) hear why.
    if (verdicts === undefined || o.cold === undefined) return;
    const now = o.clock.now();
    for (const r of verdicts.judge(o.cold.hold, o.cold.models, o.actuator.instances(), now, cc.scaleToZero.idleMs > 0)) {
      // Said once per model and reason a minute, as "cannot scale out" is (a request a pass may hear it).
      const key = `${r.model}/${r.reason.code}`;
      if ((refusedSaid.get(key) ?? -Infinity) > now - 60_000) continue;
      refusedSaid.set(key, now);
      log.warn("cold start refused", { model: r.model, code: r.reason.code, reason: r.reason.detail, refused: r.refused });
    }
  };
  // A fixed actuator refuses every step: no pass runs over it (its instances are what the config names).
  const timer: Timer | undefined = fixed ? undefined : o.clock.every(cc.reconcileIntervalMs, pass);
  // A model's first held request (scale from zero) runs a pass at once, not at the next tick: its cold start is
  // decided when the request arrives (one pass at a time; the pass is idempotent).
  let wakeTimer: Timer | undefined;
  const unwake = fixed || o.cold === undefined ? undefined : o.cold.hold.onWake(() => {
    wakeTimer ??= o.clock.after(0, () => {
      wakeTimer = undefined;
      pass();
    });
  });
  const first: Timer | undefined = fixed ? undefined : o.clock.after(o.startupGraceMs ?? 0, pass);
  const holding = new Map<string, HoldingEntry>();
  /**
   * Say why (issue 46): once a minute, each endpoint whose model's SLO attainment over the last two minutes is below its
   * percentile while no scale-out of it is under way — the strategy holds (its decision and reason) or wants more and
   * cannot have it (at its maximum, no capacity) — is logged and listed (`holding`) until it recovers or scales.
   */
  const sayWhy = () => {
    const now = o.clock.now();
    for (const e of regionConfig.endpoints) {
      const key = poolKey(e.model, e.gpu, e.role);
      const d = controller.lastDecision(e.model, e.gpu, e.role);
      const slo = o.gateway.sloRecent(e.model, 2);
      const b = lastBlocked.get(key);
      const atMax = d !== undefined && d.current >= e.maxInstances && d.desired >= e.maxInstances;
      const blocked = b !== undefined && b.atMs > now - 60_000 ? b.reason : atMax ? "at-max" : "";
      const missing = d !== undefined && slo !== undefined && slo.requests > 0 && slo.met / slo.requests < slo.percentile;
      // A scale-out under way (wanted, or started and not serving yet) is the controller acting: not listed.
      if (!missing || (blocked === "" && (d.desired > d.current || d.current > d.serving))) {
        holding.delete(key);
        continue;
      }
      const entry: HoldingEntry = { atMs: now, sinceMs: holding.get(key)?.sinceMs ?? now, model: e.model, gpu: e.gpu, attainment: slo.met / slo.requests, percentile: slo.percentile, strategy: strategy.name, current: d.current, desired: d.desired, reason: d.reason, utilization: d.utilization, blocked };
      holding.set(key, entry);
      log.warn("SLO missed and not scaling out", { model: e.model, gpu: e.gpu, attainment: Math.round(entry.attainment * 1000) / 1000, percentile: entry.percentile, strategy: entry.strategy, current: entry.current, desired: entry.desired, reason: entry.reason, utilization: Math.round(entry.utilization * 1000) / 1000, ...(blocked === "" ? {} : { blocked }), forMs: now - entry.sinceMs });
    }
  };
  const whyTimer: Timer | undefined = fixed ? undefined : o.clock.every(60_000, sayWhy);

  const service: RegionService = {
    region: o.region,
    snapshot: () => withColdStart(withActuatorCounts(o.gateway.snapshot(), o.actuator), o.cold, o.actuator),
    open: (req: GenerateRequest, sink: EventSink, signal?: AbortSignal): Flow => o.gateway.open(req, sink, signal),
    acceptTargets: (t: RegionTargets): TargetsAck => targets.accept(t),
    listing: (): RegionInstances => listing(o.region, o.actuator, actions, o.gateway, o.clock.now(), coldStarts, o.cold, [...holding.values()]),
    onChange: (cb: () => void) => o.gateway.onChange(cb),
  };
  return {
    controller,
    actuator: o.actuator,
    targets,
    service,
    actions,
    coldStarts,
    close: () => {
      timer?.cancel();
      first?.cancel();
      whyTimer?.cancel();
      wakeTimer?.cancel();
      unwake?.();
      unsubscribe();
    },
  };
}

type Counts = Record<InstanceState, number>;
const zeroCounts = (): Counts => ({ provisioning: 0, loading: 0, serving: 0, draining: 0, spot: 0 });
/** Per actuator: its counts at a version (adapters with `version` are counted once per state change, not per report). */
const countCache = new WeakMap<RuntimeActuator, ActuatorCounts>();
/** The actuator's instances by state: per model, per `model/gpu` endpoint and per `model/gpu/role` pool. */
interface ActuatorCounts {
  version: number;
  byModel: Map<string, Counts>;
  byEndpoint: Map<string, Counts>;
  byPool: Map<string, Counts>;
}

function actuatorCounts(actuator: RuntimeActuator): ActuatorCounts {
  const cached = countCache.get(actuator);
  if (cached !== undefined && actuator.version !== undefined && cached.version === actuator.version) return cached;
  const byModel = new Map<string, Counts>();
  const byEndpoint = new Map<string, Counts>();
  const byPool = new Map<string, Counts>();
  for (const i of actuator.instances()) {
    let m = byModel.get(i.model);
    if (m === undefined) byModel.set(i.model, (m = zeroCounts()));
    m[i.state]++;
    const key = `${i.model}/${i.gpu}`;
    let e = byEndpoint.get(key);
    if (e === undefined) byEndpoint.set(key, (e = zeroCounts()));
    e[i.state]++;
    if (i.role === "prefill" || i.role === "decode") {
      const pk = `${key}/${i.role}`;
      let p = byPool.get(pk);
      if (p === undefined) byPool.set(pk, (p = zeroCounts()));
      p[i.state]++;
    }
  }
  const out = { version: actuator.version ?? -1, byModel, byEndpoint, byPool };
  if (actuator.version !== undefined) countCache.set(actuator, out);
  return out;
}

/**
 * Replaces the gateway's instance counts (serving/draining only) with the actuator's, per model and endpoint, and
 * gives an endpoint that holds prefill/decode pools each pool's counts (`pools`).
 */
export function withActuatorCounts(t: RegionTelemetry, actuator: RuntimeActuator): RegionTelemetry {
  const { byModel, byEndpoint, byPool } = actuatorCounts(actuator);
  return {
    ...t,
    models: t.models.map((m) => ({
      ...m,
      instances: { ...(byModel.get(m.model) ?? zeroCounts()) },
      endpoints: m.endpoints.map((e) => {
        const expected = actuator.expectedScaleOutMs(m.model, e.gpu);
        const key = `${m.model}/${e.gpu}`;
        const pools = byPool.size === 0 ? undefined : poolCounts(byPool, key);
        return { ...e, instances: { ...(byEndpoint.get(key) ?? zeroCounts()) }, ...(expected === undefined ? {} : { expectedScaleOutMs: expected }), ...(pools === undefined ? {} : { pools }) };
      }),
    })),
  };
}

/** The pools of endpoint `key` (`model/gpu`) with instances, each its counts (copies); undefined when it has none. */
function poolCounts(byPool: ReadonlyMap<string, Counts>, key: string): Partial<Record<PoolRole, Counts>> | undefined {
  const prefill = byPool.get(`${key}/prefill`);
  const decode = byPool.get(`${key}/decode`);
  if (prefill === undefined && decode === undefined) return undefined;
  return { ...(prefill === undefined ? {} : { prefill: { ...prefill } }), ...(decode === undefined ? {} : { decode: { ...decode } }) };
}

/**
 * Adds `cold` (issue 33) to each model the region scales from zero: requests held now and the expected time to a
 * first instance (the slowest of its endpoints' expected scale-outs).
 */
export function withColdStart(t: RegionTelemetry, cold: RegionRuntimeOptions["cold"], actuator: RuntimeActuator): RegionTelemetry {
  if (cold === undefined) return t;
  return {
    ...t,
    models: t.models.map((m) => {
      if (!cold.models.has(m.model)) return m;
      let expectedMs: number | undefined;
      for (const e of m.endpoints) {
        const x = actuator.expectedScaleOutMs(m.model, e.gpu);
        if (x !== undefined) expectedMs = Math.max(expectedMs ?? 0, x);
      }
      return { ...m, cold: { held: cold.hold.held(m.model), ...(expectedMs === undefined ? {} : { expectedMs }) } };
    }),
  };
}

function listing(region: RegionName, actuator: RuntimeActuator, actions: readonly ControllerAction[], gateway: Gateway, nowMs: number, coldStarts: readonly ColdStartRecord[], cold: RegionRuntimeOptions["cold"], holding: readonly HoldingEntry[]): RegionListing {
  const l = actuator.listing();
  const views = new Map(gateway.instances().map((i) => [i.instanceId, i]));
  const serving = (id: string, detail: string) => {
    const v = views.get(id);
    const health = v?.down !== undefined ? `; engine down (${v.down}): takes no request` : v?.stale === true ? "; stats stale: its /metrics cannot be read, routed around" : "";
    return `${detail}; ${v?.inFlight ?? 0} in flight${health}${pipelineDetail(gateway.engine(id))}`;
  };
  return {
    region,
    actuator: actuator.kind,
    instances: l.instances.map((i) => ({
      id: i.id,
      model: i.model,
      gpu: i.gpu,
      gpus: i.gpus,
      state: i.state,
      node: i.node,
      enteredAtMs: i.enteredAtMs,
      forMs: Math.max(0, nowMs - i.enteredAtMs),
      detail: i.state === "serving" || i.state === "draining" ? serving(i.id, i.detail) : i.detail,
      url: i.engine?.url ?? "",
      // Its pool's role from the start (a scale-out not serving yet has no engine in the gateway), else its engine's.
      role: i.role ?? views.get(i.id)?.role ?? "both",
    })),
    nodes: l.nodes.map((n) => ({ ...n, models: n.copies.map((c) => c.model), completeModels: n.copies.filter((c) => c.complete).map((c) => c.model) })),
    failures: l.failures.map((f) => ({ atMs: f.atMs, model: f.model, gpu: f.gpu, node: f.node ?? "", instanceId: f.instanceId ?? "", message: f.message })),
    actions: actions.map((a) => ({ atMs: a.atMs, model: a.model, gpu: a.gpu, ...(a.role === undefined ? {} : { role: a.role }), kind: a.kind, instanceId: a.instanceId, reason: a.reason, from: a.from, desired: a.desired })),
    slo: gateway.sloSummaries(),
    ...(holding.length === 0 ? {} : { holding: holding.map((h) => ({ ...h })) }),
    ...(cold === undefined ? {} : { cold: { models: cold.hold.view().filter((v) => cold.models.has(v.model)), starts: coldStarts.map((c) => ({ ...c })) } }),
  };
}


/**
 * A pipelined instance (region/keystage/pipeline-engine.ts in this process, or a pipelined engine-sim as its /metrics show it
 * to the openai-http adapter, or the head of stage processes, region/keystage/staged-engine.ts) in words for the listing:
 * its scaling mode, replicas and queue per stage, the key stages and the GPUs it holds of its budget, and its stage
 * processes (stage@node pid) when it has them. "" for any other engine.
 */
function pipelineDetail(engine: (Engine & { pipelineSummary?: () => PipelineSummary | undefined }) | undefined): string {
  const st = engine?.pipelineSummary?.();
  if (st === undefined) return "";
  const key = st.stages.flatMap((s, i) => (s.key ? [i] : []));
  return `; pipeline ${st.mode}: replicas per stage [${st.stages.map((s) => s.replicas + s.starting).join(",")}], queue per stage [${st.stages.map((s) => s.queue).join(",")}], key stages [${key.join(",")}], ${st.heldGpus} of ${st.budgetGpus} GPUs held, ${st.scaler.added} replicas added, ${st.scaler.removed} removed${st.scaler.removedStarting === undefined ? "" : ` (${st.scaler.removedStarting} while starting)`}${processesDetail(st)}`;
}

/** Stage processes in words: "stage processes [0@node pid 4242, 1@node pid 4243 starting]"; "" when there are none. */
function processesDetail(st: PipelineSummary): string {
  if (st.processes === undefined) return "";
  return `, stage processes [${st.processes.map((p) => `${p.stage}@${p.node} pid ${p.pid}${p.state === "serving" ? "" : ` ${p.state}`}`).join(", ")}]`;
}

/** The parameters of every model `region` hosts (config `parameters`). */
export function modelSources(config: TidegateConfig, region: RegionName): Map<ModelName, ModelSource> {
  const rc = config.regions.find((r) => r.name === region)!;
  const out = new Map<ModelName, ModelSource>();
  for (const m of new Set(rc.endpoints.map((e) => e.model))) {
    const p = config.parameters.models[m]!;
    out.set(m, { model: m, totalBytes: p.bytes, blockCount: config.parameters.blockCount, origin: p.origin, ...(p.origin === "pattern" ? { seed: p.seed } : {}) });
  }
  return out;
}

/** The multicast policy of config `parameters`. */
export function multicastPolicy(config: TidegateConfig): MulticastPolicy {
  const p = config.parameters;
  return { ...DEFAULT_MULTICAST, algorithm: p.multicast, binomialMinTargets: p.binomialMinTargets, linkBytesPerS: p.linkBytesPerS, stallMs: p.stallMs, connectMs: p.connectMs };
}

/** One line per model: the parameter bytes used and their scale against the real weights (2 bytes per parameter). */
export function parameterScaleLines(config: TidegateConfig): string[] {
  return config.models.map((m) => {
    const bytes = config.parameters.models[m.name]!.bytes;
    const real = (MODEL_SPECS[m.name]?.params ?? 0) * 2;
    return `${m.name}: ${(bytes / 2 ** 20).toFixed(1)} MiB in ${config.parameters.blockCount} blocks (1/${Math.round(real / bytes)} of ${(real / 1e9).toFixed(1)} GB of fp16 weights)`;
  });
}
