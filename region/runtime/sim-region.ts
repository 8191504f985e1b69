/**
 * The `simulated` engine host (build-region.ts; the replays and `tidegate dev` with controller.actuator "sim"; DESIGN
 * "The one rule that keeps the simulator honest"): the same region runtime `tidegate region` and `tidegate dev` run
 * (buildRegion: gateway → runtime → TargetsStore → controller → actuator), with the simulated actuator
 * (region/actuator/sim.ts: SageServe §7.1 delays on the clock) standing in for node agents and the data plane. What
 * the agents do live — start an engine when an instance comes up, stop routing to a draining one and stop its engine
 * once idle — this host does for simulated engines in the same process: an instance that starts serving gets a fresh
 * engine from the shared builder (build-sim-engine.ts: engines.timeScale, engines.models, engines.kvCapacityTokens,
 * keystage pipelines; a caller's `engine(model)` replaces the per-model batch cap and KV cache) in the gateway; a
 * draining one takes no new work and becomes spot once its engine is idle (checked every `drainCheckMs`). With a
 * loading source — `loading`, else the config's `regions[].loading` / `controller.loading` — loads follow it and
 * loading instances serve partially (sim-loading.ts).
 */
import type { EngineSettings } from "../../core/engine-settings.js";
import type { Timer } from "../../core/clock.js";
import { instanceGpus, regionModels, type TidegateConfig } from "../../core/config.js";
import { TidegateError } from "../../core/errors.js";
import type { Clock } from "../../core/clock.js";
import type { Logger } from "../../core/log.js";
import type { GpuType, ModelName, RegionName } from "../../core/models.js";
import type { GenerateRequest } from "../../core/ports.js";
import type { InstanceListener, InstanceRecord } from "../actuator/port.js";
import { SimActuator, type ActuatorDelays } from "../actuator/sim.js";
import type { ControllerAction } from "../controller/reconciler.js";
import { SimEngine } from "../../engines/sim/sim-engine.js";
import type { PipelineEngine } from "../keystage/pipeline-engine.js";
import type { Gateway } from "../gateway/gateway.js";
import type { InProcessRegionLink } from "../link/in-process-link.js";
import type { Solver } from "../../core/solver.js";
import { regionLoading, schedulerOf } from "../liveload/liveload-config.js";
import type { BoundStrategy } from "../strategies/strategy-registry.js";
import type { RegionRuntime } from "./runtime.js";
import { buildRegion, type EngineHost, type RegionMetricsHooks } from "./build-region.js";
import { buildLinkedRegions } from "./linked-regions.js";
import { newEngine, newSimEngine, regionKvFabric, simEngineParams, type SimEngineParams } from "./build-sim-engine.js";
import { SimRegionLoading, type SimLoadingSettings } from "./sim-loading.js";

/** The simulated host's settings: the actuator's delays and randomness, the engines' event mode, loading, spot. */
export interface SimulatedHostOptions {
  delays: ActuatorDelays;
  /** Models whose weights the region stores (others load from another region). */
  weightsInRegion: readonly ModelName[];
  /** Deterministic uniform [0, 1) source for the actuator's delays. */
  random: () => number;
  /** Engine settings per model, over config engines.models / engines.kvCapacityTokens (default: those, else the profile's). */
  engine?(model: ModelName): EngineSettings;
  /** How engines stream when read through `generate` (default per token, as live). */
  events?: "coalesced" | "per-token";
  /** Spot instances at start (capacity not in the plan). Endpoints start with their configured `instances` serving. */
  spot?: readonly { model: ModelName; gpu: GpuType; count: number }[];
  /** Every instance state change (after the engines are updated), e.g. a GPU-time ledger. */
  onChange?: InstanceListener;
  /** How often idle draining instances are handed to spot (default 1000 ms). */
  drainCheckMs?: number;
  /**
   * Where loads come from and what loading instances do (sim-loading.ts); default: the config's (`regions[].loading`,
   * else `controller.loading`), else the configured delays.
   */
  loading?: SimLoadingSettings;
  /** HiGHS, when the loading runs the zigzag scheduler without a solver of its own. */
  solver?: Solver;
}

export interface SimRegionOptions extends SimulatedHostOptions {
  config: TidegateConfig;
  region: RegionName;
  clock: Clock;
  log?: Logger;
  strategy?: BoundStrategy;
  onAction?: (a: ControllerAction) => void;
  /** Gateway stats refresh (default: the Gateway's, as `tidegate region`). */
  statsRefreshMs?: number;
  /** Each routing decision of the region's gateway (Gateway onRouted). */
  onRouted?: (req: GenerateRequest, instanceId: string) => void;
  /** Scaling actions and failures (the region metrics `tidegate region` exports), and request outcomes. */
  metrics?: RegionMetricsHooks;
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

/** What the simulated host adds to its Region. */
export interface SimulatedExtras {
  /** The simulated engine of a serving or draining instance (a PipelineEngine for a pipelined endpoint). */
  engine(instanceId: string): SimEngine | PipelineEngine | undefined;
  /** The loading source in use, when one is configured. */
  readonly loading?: SimRegionLoading;
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
   * `controller.loading`; liveload/liveload-config.ts regionLoading). Neither = the configured delays.
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
  engine?(model: ModelName): EngineSettings;
  events?: "coalesced" | "per-token";
  statsRefreshMs?: number;
  strategy?: BoundStrategy;
  onChange?(index: number, inst: Readonly<InstanceRecord>, from: InstanceRecord["state"] | undefined): void;
  onAction?(index: number, a: ControllerAction): void;
  onRouted?(region: RegionName, req: GenerateRequest, instanceId: string): void;
  /** Region `name`'s metrics sink (SimRegionOptions.metrics). */
  metrics?(region: RegionName): RegionMetricsHooks;
}

/** One region of a sim fleet and the in-process link the router (or a replay) reaches it by. */
export interface SimFleetRegion {
  readonly name: RegionName;
  readonly sim: SimRegion;
  readonly link: InProcessRegionLink;
}

/**
 * Every region of `config` on the sim actuator, each behind an InProcessRegionLink: the one wiring of the trace replay
 * (sim/replay/replay-wiring.ts) and the week replay (sim/week/week-wiring.ts); `tidegate dev` with controller.actuator
 * "sim" builds its regions on the same host (`simulatedFleetHost`).
 */
export function startSimFleet(o: SimFleetOptions): SimFleetRegion[] {
  return buildLinkedRegions({ ...o, host: (index) => simulatedFleetHost(o, index) }).map(({ region, link }) => ({ name: region.name, sim: region, link }));
}

/**
 * The simulated host of region `index` of `o.config` with a fleet's settings: its weights (default: the models it
 * serves), its spot instances, its random source `o.random(index)` (drawn once, when called).
 */
export function simulatedFleetHost(o: SimFleetSettings & Pick<SimFleetOptions, "config" | "engine" | "events" | "onChange">, index: number): EngineHost<SimActuator, SimulatedExtras> {
  const rc = o.config.regions[index]!;
  return simulated({
    delays: o.delays,
    weightsInRegion: o.weights?.[rc.name] ?? regionModels(rc),
    random: o.random(index),
    ...(o.engine === undefined ? {} : { engine: o.engine }),
    ...(o.events === undefined ? {} : { events: o.events }),
    spot: (o.spot ?? []).filter((x) => x.region === rc.name),
    ...(o.onChange === undefined ? {} : { onChange: (inst: Readonly<InstanceRecord>, from: InstanceRecord["state"] | undefined) => o.onChange!(index, inst, from) }),
    ...(o.loading === undefined ? {} : { loading: o.loading }),
    ...(o.solver === undefined ? {} : { solver: o.solver }),
  });
}

/** The region's loading settings: the caller's, else the config's, with the caller's solver when they bring none. */
function loadingOf(o: SimulatedHostOptions & { config: TidegateConfig; region: RegionName }): SimLoadingSettings | undefined {
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

/** Builds the region on the simulated host (buildRegion), its starting instances seeded, the runtime started on `clock`. */
export function startSimRegion(o: SimRegionOptions): SimRegion {
  return buildRegion({
    config: o.config,
    region: o.region,
    clock: o.clock,
    ...(o.log === undefined ? {} : { log: o.log }),
    ...(o.metrics === undefined ? {} : { metrics: o.metrics }),
    ...(o.statsRefreshMs === undefined ? {} : { statsRefreshMs: o.statsRefreshMs }),
    ...(o.onRouted === undefined ? {} : { onRouted: o.onRouted }),
    ...(o.strategy === undefined ? {} : { strategy: o.strategy }),
    ...(o.onAction === undefined ? {} : { onAction: o.onAction }),
    host: simulated(o),
  });
}

/** The simulated engine host: the sim actuator, and engines started in the gateway as its instances serve (file comment). */
export function simulated(o: SimulatedHostOptions): EngineHost<SimActuator, SimulatedExtras> {
  return {
    start: ({ config, region, clock, gateway, metrics }) => {
      const rc = config.regions.find((r) => r.name === region)!;
      // A prefill or decode pool's engines (endpoints with a role) move their KV over one fabric (build-sim-engine.ts).
      const fabricFor = regionKvFabric(clock, metrics);
      const engines = new Map<string, SimEngine | PipelineEngine>();
      // SimEngines only: serve-while-loading pairs and hands off through the engine core, which pipelines do not have.
      const simEngineOf = (id: string) => {
        const e = engines.get(id);
        return e instanceof SimEngine ? e : undefined;
      };
      const draining = new Set<string>();
      const gpusOf = (model: ModelName, gpu: GpuType) => instanceGpus(config, model, gpu);
      const idle = (id: string) => {
        const e = engines.get(id);
        if (e === undefined) return true;
        const s = e.stats();
        return s.running === 0 && s.waiting === 0;
      };
      const paramsOf = (model: ModelName, gpu: GpuType): SimEngineParams => {
        const p = simEngineParams(config, model, gpu);
        return { ...p, settings: { ...p.settings, ...o.engine?.(model) } };
      };
      const events = o.events === undefined ? {} : { events: o.events };
      // The loading source's engines (a λScale execution pipeline, a pairing's target) are whole-model SimEngines.
      const newLoadingEngine = (id: string, model: ModelName, gpu: GpuType, passOverheadMs = 0, kvScale = 1) =>
        newSimEngine({ instanceId: id, model, gpu, tp: gpusOf(model, gpu) }, paramsOf(model, gpu), clock, { ...events, passOverheadMs, kvScale });
      let actuatorRef: SimActuator | undefined;
      // Serving engines per model/gpu, rebuilt only after a state change: every telemetry report asks (expectedScaleOutMs).
      let servingCache: { version: number; engines: number; byKey: Map<string, SimEngine[]> } | undefined;
      const servingEngines = (): Map<string, SimEngine[]> => {
        const version = actuatorRef?.version ?? -1;
        if (servingCache?.version === version && servingCache.engines === engines.size) return servingCache.byKey;
        const byKey = new Map<string, SimEngine[]>();
        for (const i of actuatorRef?.instances() ?? []) {
          // A prefill or decode pool's engines are no pairing's partner (sim-loading.ts serves them once loaded).
          const e = i.state === "serving" && i.role === undefined ? simEngineOf(i.id) : undefined;
          if (e === undefined) continue;
          const key = `${i.model}/${i.gpu}`;
          const list = byKey.get(key);
          if (list === undefined) byKey.set(key, [e]);
          else list.push(e);
        }
        servingCache = { version, engines: engines.size, byKey };
        return byKey;
      };
      const loadingSettings = loadingOf({ ...o, config, region });
      const loading =
        loadingSettings === undefined
          ? undefined
          : newRegionLoading(region, loadingSettings, {
              clock,
              gateway,
              gpusOf,
              servingEngines: (model, gpu) => servingEngines().get(`${model}/${gpu}`) ?? [],
              // A disaggregated model's prefill instances send KV on their outbound links: no multicast source
              // (pool/transfer.ts line 2); its decode instances are. Colocated models: the serving engines, as before.
              multicastSources: (model, gpu) => {
                const serving = (actuatorRef?.instances() ?? []).filter((i) => i.model === model && i.gpu === gpu && i.state === "serving");
                return serving.some((i) => i.role !== undefined) ? serving.filter((i) => i.role === "decode").length : (servingEngines().get(`${model}/${gpu}`)?.length ?? 0);
              },
              engineOf: simEngineOf,
              newEngine: newLoadingEngine,
            });
      const onChange = (inst: Readonly<InstanceRecord>, from: InstanceRecord["state"] | undefined) => {
        const running = engines.get(inst.id);
        if (inst.state === "serving" && from === "serving" && running !== undefined) {
          // A role switch (SimActuator.switchRole; BlitzScale §5.2): the same engine, its new role from the next request.
          if (inst.role !== undefined && running instanceof SimEngine) void running.switchRole(inst.role);
          o.onChange?.(inst, from);
          return;
        }
        if (inst.state === "serving") {
          // A pipelined endpoint (config keystage.pipelines) serves through a PipelineEngine on the same clock.
          // One that served behind its blocks while it loaded keeps that engine (sim-loading.ts), already in the gateway.
          const early = loading?.takeEarlyEngine(inst.id);
          const params = paramsOf(inst.model, inst.gpu);
          const engine = early ?? (inst.role === undefined ? newEngine({ instanceId: inst.id, model: inst.model, gpu: inst.gpu, tp: gpusOf(inst.model, inst.gpu) }, params, clock, events) : newSimEngine({ instanceId: inst.id, model: inst.model, gpu: inst.gpu, tp: gpusOf(inst.model, inst.gpu) }, { ...params, settings: { ...params.settings, role: inst.role } }, clock, { ...events, ...fabricFor(inst.role) }));
          engines.set(inst.id, engine);
          // After the engine exists: a pairing that ends here hands the KV its target holds to that engine.
          loading?.onChange(inst);
          if (early === undefined) gateway.addInstance(inst.gpu, engine, "serving");
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
        region,
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
      for (const e of rc.endpoints) for (let i = 0; i < e.instances; i++) actuator.seed(e.model, e.gpu, gpusOf(e.model, e.gpu), "serving", e.role);
      for (const s of o.spot ?? []) for (let i = 0; i < s.count; i++) actuator.seed(s.model, s.gpu, gpusOf(s.model, s.gpu), "spot");
      // What an agent does live when a draining engine has no more streams: stop it; the instance becomes spot.
      const drainCheck: Timer = clock.every(o.drainCheckMs ?? 1000, () => {
        for (const id of draining) if (idle(id)) actuator.finishDrain(id);
        loading?.tick();
      });
      return {
        actuator,
        extras: { engine: (id: string) => engines.get(id), ...(loading === undefined ? {} : { loading }) },
        // The configured instances are seeded serving: nothing to wait for.
        ready: () => Promise.resolve(),
        close: async () => {
          drainCheck.cancel();
          loading?.close();
          actuator.close();
        },
      };
    },
  };
}
