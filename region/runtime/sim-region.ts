/**
 * A region on the `sim` actuator (the week replay; DESIGN "The one rule that keeps the simulator honest"): the same
 * region runtime `tidegate region` and `tidegate dev` run (region/runtime/runtime.ts: gateway → TargetsStore →
 * controller → actuator), with the simulated actuator (region/actuator/sim.ts: SageServe §7.1 delays on the clock)
 * standing in for node agents and the data plane. What the agents do live — start an engine when an instance comes
 * up, stop routing to a draining one and stop its engine once idle — this file does for simulated engines
 * (region/engines/sim) in the same process: an instance that starts serving gets a fresh SimEngine in the gateway;
 * a draining one takes no new work and becomes spot once its engine is idle (checked every `drainCheckMs`). With a
 * loading source — `loading`, else the config's `regions[].loading` / `controller.loading` — loads follow it and
 * loading instances serve partially (sim-loading.ts).
 */
import type { Clock, Timer } from "../../core/clock.js";
import { regionLoading, regionModels, type TidegateConfig } from "../../core/config.js";
import { TidegateError } from "../../core/errors.js";
import { silentLogger, type Logger } from "../../core/log.js";
import type { GpuType, ModelName, RegionName } from "../../core/models.js";
import type { GenerateRequest } from "../../core/ports.js";
import type { InstanceListener, InstanceRecord } from "../actuator/port.js";
import { SimActuator, type ActuatorDelays } from "../actuator/sim.js";
import type { ControllerAction } from "../controller/reconciler.js";
import { getProfile } from "../../core/perf/model.js";
import { SimEngine } from "../engines/sim/sim-engine.js";
import { PipelineEngine, pipelineSpecFor } from "../keystage/pipeline-engine.js";
import { Gateway, type RequestOutcome } from "../gateway/gateway.js";
import { InProcessRegionLink } from "../link/in-process-link.js";
import type { Solver } from "../../core/solver.js";
import { schedulerOf } from "../liveload/liveload-config.js";
import type { BoundStrategy } from "../strategies/strategy-registry.js";
import { startRegionRuntime, type RegionRuntime, type RuntimeMetricsSink } from "./runtime.js";
import { SimRegionLoading, type SimLoadingSettings } from "./sim-loading.js";

/** Engine settings of one model (vLLM max_num_seqs and the KV cache it is given, in tokens). */
export interface SimEngineSettings {
  maxBatch: number;
  kvCapacityTokens: number;
}

export interface SimRegionOptions {
  config: TidegateConfig;
  region: RegionName;
  clock: Clock;
  log?: Logger;
  delays: ActuatorDelays;
  /** Models whose weights the region stores (others load from another region). */
  weightsInRegion: readonly ModelName[];
  /** Deterministic uniform [0, 1) source for the actuator's delays. */
  random: () => number;
  /** Engine settings per model (default: the performance profile's: max batch 256, the profile's KV capacity). */
  engine?(model: ModelName): SimEngineSettings;
  /** How engines stream when read through `generate` (default per token, as live). */
  events?: "coalesced" | "per-token";
  /** Spot instances at start (capacity not in the plan). Endpoints start with their configured `instances` serving. */
  spot?: readonly { model: ModelName; gpu: GpuType; count: number }[];
  strategy?: BoundStrategy;
  /** Every instance state change (after the engines are updated), e.g. a GPU-time ledger. */
  onChange?: InstanceListener;
  onAction?: (a: ControllerAction) => void;
  /** Gateway stats refresh (default: the Gateway's, as `tidegate region`). */
  statsRefreshMs?: number;
  /** How often idle draining instances are handed to spot (default 1000 ms). */
  drainCheckMs?: number;
  /** Each routing decision of the region's gateway (Gateway onRouted). */
  onRouted?: (req: GenerateRequest, instanceId: string) => void;
  /** Scaling actions and failures (the region metrics `tidegate region` exports), and request outcomes. */
  metrics?: RuntimeMetricsSink & { outcome?(model: string, outcome: RequestOutcome): void };
  /**
   * Where loads come from and what loading instances do (sim-loading.ts); default: the config's (`regions[].loading`,
   * else `controller.loading`), else the configured delays.
   */
  loading?: SimLoadingSettings;
  /** HiGHS, when the loading runs the zigzag scheduler without a solver of its own. */
  solver?: Solver;
}

export interface SimRegion {
  readonly gateway: Gateway;
  readonly actuator: SimActuator;
  readonly runtime: RegionRuntime<SimActuator>;
  /** The simulated engine of a serving or draining instance (a PipelineEngine for a pipelined endpoint). */
  engine(instanceId: string): SimEngine | PipelineEngine | undefined;
  /** The loading source in use, when one is configured. */
  readonly loading?: SimRegionLoading;
  close(): Promise<void>;
}

/** A model's simulated-engine settings from config (engines.models, else engines.kvCapacityTokens; unset = the profile's). */
export function simEngineSettingsFrom(config: TidegateConfig, model: ModelName): Partial<SimEngineSettings> {
  const m = config.engines.models[model];
  const kv = m?.kvCapacityTokens ?? config.engines.kvCapacityTokens;
  return { ...(m?.maxBatch === undefined ? {} : { maxBatch: m.maxBatch }), ...(kv === undefined ? {} : { kvCapacityTokens: kv }) };
}

/**
 * What a fleet of sim regions needs beyond the config: the actuator's deploy delays, where weights are stored,
 * spot instances at start and each region's random source for the delays.
 */
export interface SimFleetSettings {
  delays: ActuatorDelays;
  /** Region → models whose weights it stores (default: the models it serves). */
  weights?: Readonly<Record<string, readonly ModelName[]>>;
  spot?: readonly { region: string; model: ModelName; gpu: GpuType; count: number }[];
  /** Region `index`'s deterministic uniform [0, 1) source. */
  random(index: number): () => number;
  /**
   * Every region's loading source (SimRegionOptions.loading), over the config's (`regions[].loading`, else
   * `controller.loading`; core/config.ts regionLoading). Neither = the configured delays.
   */
  loading?: SimLoadingSettings;
  /** HiGHS, for a config whose loading runs the zigzag scheduler (sim-loading.ts needs it per loading episode). */
  solver?: Solver;
}

export interface SimFleetOptions extends SimFleetSettings {
  config: TidegateConfig;
  clock: Clock;
  log?: Logger;
  /** Telemetry period of the in-process links (ms, default 1000: DESIGN, at least once a second). */
  telemetryIntervalMs?: number;
  engine?(model: ModelName): SimEngineSettings;
  events?: "coalesced" | "per-token";
  statsRefreshMs?: number;
  strategy?: BoundStrategy;
  onChange?(index: number, inst: Readonly<InstanceRecord>, from: InstanceRecord["state"] | undefined): void;
  onAction?(index: number, a: ControllerAction): void;
  onRouted?(region: RegionName, req: GenerateRequest, instanceId: string): void;
  /** Region `name`'s metrics sink (SimRegionOptions.metrics). */
  metrics?(region: RegionName): SimRegionOptions["metrics"];
}

/** One region of a sim fleet and the in-process link the router (or a replay) reaches it by. */
export interface SimFleetRegion {
  readonly name: RegionName;
  readonly sim: SimRegion;
  readonly link: InProcessRegionLink;
}

/**
 * Every region of `config` on the sim actuator, each behind an InProcessRegionLink: the one wiring of `tidegate dev`
 * (controller.actuator "sim"), the trace replay (sim/replay/replay-wiring.ts) and the week replay (sim/week/week-wiring.ts).
 */
export function startSimFleet(o: SimFleetOptions): SimFleetRegion[] {
  return o.config.regions.map((rc, ri) => {
    const sim = startSimRegion({
      config: o.config,
      region: rc.name,
      clock: o.clock,
      ...(o.log === undefined ? {} : { log: o.log.child({ region: rc.name }) }),
      delays: o.delays,
      weightsInRegion: o.weights?.[rc.name] ?? regionModels(rc),
      random: o.random(ri),
      ...(o.engine === undefined ? {} : { engine: o.engine }),
      ...(o.events === undefined ? {} : { events: o.events }),
      ...(o.statsRefreshMs === undefined ? {} : { statsRefreshMs: o.statsRefreshMs }),
      spot: (o.spot ?? []).filter((x) => x.region === rc.name),
      ...(o.strategy === undefined ? {} : { strategy: o.strategy }),
      ...(o.onChange === undefined ? {} : { onChange: (inst: Readonly<InstanceRecord>, from: InstanceRecord["state"] | undefined) => o.onChange!(ri, inst, from) }),
      ...(o.onAction === undefined ? {} : { onAction: (a: ControllerAction) => o.onAction!(ri, a) }),
      ...(o.onRouted === undefined ? {} : { onRouted: (req: GenerateRequest, id: string) => o.onRouted!(rc.name, req, id) }),
      ...(o.metrics === undefined ? {} : { metrics: o.metrics(rc.name) }),
      ...(o.loading === undefined ? {} : { loading: o.loading }),
      ...(o.solver === undefined ? {} : { solver: o.solver }),
    });
    const link = new InProcessRegionLink(sim.runtime.service, { clock: o.clock, telemetryIntervalMs: o.telemetryIntervalMs ?? 1000, ...(o.log === undefined ? {} : { log: o.log }) });
    return { name: rc.name, sim, link };
  });
}

/** The region's loading settings: the caller's, else the config's, with the caller's solver when they bring none. */
function loadingOf(o: SimRegionOptions): SimLoadingSettings | undefined {
  const loading: SimLoadingSettings | undefined = o.loading ?? regionLoading(o.config, o.region);
  if (loading === undefined || loading.solver !== undefined || o.solver === undefined) return loading;
  return { ...loading, solver: o.solver };
}

/** Whether any region of `config` loads with the zigzag scheduler (whose episodes HiGHS plans: pass a solver). */
export function configNeedsSolver(config: TidegateConfig): boolean {
  return config.regions.some((r) => {
    const l = regionLoading(config, r.name);
    return l !== undefined && schedulerOf(l) === "zigzag";
  });
}

/** The region's SimRegionLoading; a setting it cannot run (zigzag without HiGHS) is a config error naming the region. */
function newRegionLoading(region: RegionName, settings: SimLoadingSettings, deps: ConstructorParameters<typeof SimRegionLoading>[1]): SimRegionLoading {
  try {
    return new SimRegionLoading(settings, deps);
  } catch (err) {
    throw new TidegateError("invalid_config", `region ${region} loading (${settings.source}): ${(err as Error).message}`, { cause: err });
  }
}

/** Builds the region, seeds its starting instances and starts the runtime on `clock`. */
export function startSimRegion(o: SimRegionOptions): SimRegion {
  const rc = o.config.regions.find((r) => r.name === o.region);
  if (rc === undefined) throw new RangeError(`unknown region ${o.region}`);
  const { clock } = o;
  const gateway = new Gateway({ region: o.region, clock, ...(o.statsRefreshMs === undefined ? {} : { statsRefreshMs: o.statsRefreshMs }), ...(o.log === undefined ? {} : { log: o.log }), ...(o.onRouted === undefined ? {} : { onRouted: o.onRouted }), ...(o.metrics?.outcome === undefined ? {} : { onOutcome: (m: ModelName, x: RequestOutcome) => o.metrics!.outcome!(m, x) }) });
  for (const e of rc.endpoints) gateway.addEndpoint(e.model, e.gpu);
  const engines = new Map<string, SimEngine | PipelineEngine>();
  // SimEngines only: serve-while-loading pairs and hands off through the engine core, which pipelines do not have.
  const simEngineOf = (id: string) => {
    const e = engines.get(id);
    return e instanceof SimEngine ? e : undefined;
  };
  const draining = new Set<string>();
  const gpusOf = (model: ModelName, gpu: GpuType) => o.config.models.find((m) => m.name === model)!.gpusPerInstance[gpu]!;
  const idle = (id: string) => {
    const e = engines.get(id);
    if (e === undefined) return true;
    const s = e.stats();
    return s.running === 0 && s.waiting === 0;
  };
  const newEngine = (id: string, model: ModelName, gpu: GpuType, passOverheadMs = 0, kvScale = 1) => {
    const settings: Partial<SimEngineSettings> = { ...(o.engine?.(model) ?? simEngineSettingsFrom(o.config, model)) };
    if (kvScale !== 1) settings.kvCapacityTokens = Math.floor((settings.kvCapacityTokens ?? getProfile(model, gpu, gpusOf(model, gpu)).kvCapacityTokens) * kvScale);
    return new SimEngine({ instanceId: id, model, gpu, tp: gpusOf(model, gpu), clock, ...settings, ...(o.events === undefined ? {} : { events: o.events }), ...(passOverheadMs > 0 ? { passOverheadMs } : {}) });
  };
  let actuatorRef: SimActuator | undefined;
  // Serving engines per model/gpu, rebuilt only after a state change: every telemetry report asks (expectedScaleOutMs).
  let servingCache: { version: number; engines: number; byKey: Map<string, SimEngine[]> } | undefined;
  const servingEngines = (): Map<string, SimEngine[]> => {
    const version = actuatorRef?.version ?? -1;
    if (servingCache?.version === version && servingCache.engines === engines.size) return servingCache.byKey;
    const byKey = new Map<string, SimEngine[]>();
    for (const i of actuatorRef?.instances() ?? []) {
      const e = i.state === "serving" ? simEngineOf(i.id) : undefined;
      if (e === undefined) continue;
      const key = `${i.model}/${i.gpu}`;
      const list = byKey.get(key);
      if (list === undefined) byKey.set(key, [e]);
      else list.push(e);
    }
    servingCache = { version, engines: engines.size, byKey };
    return byKey;
  };
  const loadingSettings = loadingOf(o);
  const loading =
    loadingSettings === undefined
      ? undefined
      : newRegionLoading(o.region, loadingSettings, {
          clock,
          gateway,
          gpusOf,
          servingEngines: (model, gpu) => servingEngines().get(`${model}/${gpu}`) ?? [],
          engineOf: simEngineOf,
          newEngine,
        });
  const onChange = (inst: Readonly<InstanceRecord>, from: InstanceRecord["state"] | undefined) => {
    if (inst.state === "serving") {
      // A pipelined endpoint (config keystage.pipelines) serves through a PipelineEngine on the same clock.
      const pipeline = pipelineSpecFor(o.config.keystage, o.config.controller.strategy, inst.model, inst.gpu);
      const engine = pipeline !== undefined
        ? new PipelineEngine({ instanceId: inst.id, model: inst.model, gpu: inst.gpu, gpus: gpusOf(inst.model, inst.gpu), spec: pipeline, clock, ...(o.events === undefined ? {} : { events: o.events }) })
        : newEngine(inst.id, inst.model, inst.gpu);
      engines.set(inst.id, engine);
      // After the engine exists: a pairing that ends here hands the KV its target holds to that engine.
      loading?.onChange(inst);
      gateway.addInstance(inst.gpu, engine, "serving");
      o.onChange?.(inst, from);
      return;
    }
    loading?.onChange(inst);
    if (inst.state === "draining" && from === "serving") {
      gateway.setInstanceState(inst.id, "draining");
      draining.add(inst.id);
    } else if (inst.state === "spot" && engines.has(inst.id)) {
      draining.delete(inst.id);
      gateway.removeInstance(inst.id);
      void engines.get(inst.id)!.close();
      engines.delete(inst.id);
    }
    o.onChange?.(inst, from);
  };
  const actuator = new SimActuator({
    region: o.region,
    clock,
    delays: o.delays,
    capacity: Object.fromEntries(rc.gpus.map((g) => [g.type, g.count])),
    weightsInRegion: o.weightsInRegion,
    random: o.random,
    drainDoneAtMs: (id) => (idle(id) ? clock.now() : undefined),
    onChange,
    ...(loading === undefined ? {} : { loading }),
  });
  actuatorRef = actuator;
  for (const e of rc.endpoints) for (let i = 0; i < e.instances; i++) actuator.seed(e.model, e.gpu, gpusOf(e.model, e.gpu), "serving");
  for (const s of o.spot ?? []) for (let i = 0; i < s.count; i++) actuator.seed(s.model, s.gpu, gpusOf(s.model, s.gpu), "spot");
  // What an agent does live when a draining engine has no more streams: stop it; the instance becomes spot.
  const drainCheck: Timer = clock.every(o.drainCheckMs ?? 1000, () => {
    for (const id of draining) if (idle(id)) actuator.finishDrain(id);
    loading?.tick();
  });
  const runtime = startRegionRuntime({
    config: o.config,
    region: o.region,
    clock,
    log: o.log ?? silentLogger,
    gateway,
    actuator,
    ...(o.strategy === undefined ? {} : { strategy: o.strategy }),
    ...(o.onAction === undefined ? {} : { onAction: o.onAction }),
    ...(o.metrics === undefined ? {} : { metrics: o.metrics }),
  });
  return {
    gateway,
    actuator,
    runtime,
    engine: (id) => engines.get(id),
    ...(loading === undefined ? {} : { loading }),
    close: async () => {
      drainCheck.cancel();
      loading?.close();
      runtime.close();
      actuator.close();
      await gateway.close();
    },
  };
}
