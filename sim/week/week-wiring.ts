/**
 * The week replay's wiring (DESIGN "The one rule that keeps the simulator honest"): per region the same region
 * runtime `tidegate region` runs — gateway → TargetsStore → controller → actuator — on the `sim` actuator
 * (region/runtime/sim-region.ts), reached through the in-process RegionLink as `tidegate dev` reaches its regions
 * (telemetry every second, targets by `sendTargets`, scaling listed by `instances`); the global router's
 * RegionSelector fed by those links; and the planner's demand history written by the live recorders
 * (planner/recorder.ts from telemetry, forecasts/niw-recorder.ts for batch dispatches). A GPU-time ledger per
 * region listens to the actuator for the run's books.
 */
import type { VirtualClock } from "../../core/clock.js";
import type { ModelName, RegionName } from "../../core/models.js";
import { TidegateError } from "../../core/errors.js";
import type { EngineEvent, GenerateRequest, RegionInstances, RegionLink, RegionTargets, RegionTelemetry, RequestCallbacks, TargetsAck, Unsubscribe } from "../../core/ports.js";
import { MemoryHistory, type DemandHistory, type DemandSample, type SeriesKey } from "../../forecasts/history.js";
import { TelemetryRecorder } from "../../planner/recorder.js";
import { Ledger } from "../../region/actuator/ledger.js";
import type { ControllerAction } from "../../region/controller/reconciler.js";
import type { InProcessRegionLink } from "../../region/link/in-process-link.js";
import { startSimFleet, type SimRegion } from "../../region/runtime/sim-region.js";
import type { BoundStrategy } from "../../region/strategies/strategy-registry.js";
import type { Solver } from "../../core/solver.js";
import { createBatchService, type BatchService } from "../../router/batch/service.js";
import { DirFileStore } from "../../router/queue/dir-files.js";
import { EmbeddedQueueStore } from "../../router/queue/embedded.js";
import { RegionSelector, instanceKvBytesFrom } from "../../router/selector.js";
import type { Gateway } from "../../region/gateway/gateway.js";
import { seededRandom } from "../workload/rng.js";
import { fleetConfig, type FleetSpec } from "./fleet.js";
import type { RegionBooks } from "./state.js";

/** One region of the replay. */
export interface WeekRegion extends RegionBooks {
  readonly name: RegionName;
  readonly sim: SimRegion;
  readonly link: ReplayLink;
  readonly ledger: Ledger;
  readonly actions: ControllerAction[];
}

export interface WeekWiring {
  regions: WeekRegion[];
  regionIndex: Map<RegionName, number>;
  selector: RegionSelector;
  /** Each region's latest telemetry (the planner's live fleet). */
  telemetry: Map<RegionName, RegionTelemetry>;
  /** The planner's demand history, in history time (replay time + `historyShiftMs`). */
  history: MemoryHistory;
  historyShiftMs: number;
  /**
   * The batch tier as a router process composes it (router/batch/service.ts): the queue store and file store (in
   * memory here), the Dispatcher on the regions' links with its leases, expiry and maintenance, and the NiwRecorder
   * that writes batch demand into the planner's history.
   */
  batch: BatchService;
  /** KV tokens one instance of the model holds (prompt + output of one request must fit). */
  capacityTokens(model: ModelName): number;
  /** Adds a telemetry subscriber (after the selector and the recorder). */
  onTelemetry(f: (ri: number, t: RegionTelemetry) => void): void;
  close(): Promise<void>;
}

export interface WeekWiringOptions {
  fleet: FleetSpec;
  clock: VirtualClock;
  strategy: BoundStrategy;
  seed: number;
  historyShiftMs: number;
  /**
   * How the Dispatcher reaches the regions: by callbacks (`RegionLink.submit`, the replay's default) or by streaming
   * every token as over a live link (two-shapes.test.ts).
   */
  batchShape?: "callbacks" | "stream";
  /** HiGHS, when the fleet's loading (config `controller.loading` / `regions[].loading`) runs zigzag. */
  solver?: Solver;
}

/** The history as seen from replay time: samples are written `shiftMs` later (whole minutes). */
class ShiftedHistory implements DemandHistory {
  readonly retentionMs: number;
  constructor(
    private readonly inner: DemandHistory,
    private readonly shiftMs: number,
  ) {
    this.retentionMs = inner.retentionMs;
  }

  add(samples: readonly DemandSample[]): Promise<void> {
    return this.inner.add(samples.map((s) => ({ ...s, minuteMs: s.minuteMs + this.shiftMs })));
  }

  series(key: SeriesKey, fromMs: number, toMs: number): Promise<number[]> {
    return this.inner.series(key, fromMs + this.shiftMs, toMs + this.shiftMs);
  }

  keys(): Promise<SeriesKey[]> {
    return this.inner.keys();
  }

  close(): Promise<void> {
    return Promise.resolve();
  }
}

/**
 * The in-process link of a replay region, with the callback shape of dispatch (`RegionLink.submit`: the region's
 * gateway `submit`) so the Dispatcher sends batch requests without a promise chain per token. `onDone` sees every
 * request it carried by callbacks finish (the replay's books).
 */
export class ReplayLink implements RegionLink {
  readonly region: string;
  onDone: ((req: GenerateRequest, atMs: number) => void) | undefined;

  constructor(
    private readonly inner: InProcessRegionLink,
    gateway: Gateway,
    shape: "callbacks" | "stream",
  ) {
    this.region = inner.region;
    if (shape === "callbacks") this.submit = (req, callbacks) => this.submitTo(gateway, req, callbacks);
  }

  private submitTo(gateway: Gateway, req: GenerateRequest, callbacks: RequestCallbacks): void {
    const onDone = this.onDone;
    const hooks: RequestCallbacks =
      onDone === undefined
        ? callbacks
        : {
            onFirstToken: (t) => callbacks.onFirstToken?.(t),
            onDone: (t, n) => {
              onDone(req, t);
              callbacks.onDone?.(t, n);
            },
            onError: (t, err) => callbacks.onError?.(t, err),
          };
    if (gateway.submit(req, hooks) === undefined) throw new TidegateError("no_region_available", `no serving instance of ${req.model} in region ${this.region}`);
  }

  subscribe(onTelemetry: (t: RegionTelemetry) => void): Unsubscribe {
    return this.inner.subscribe(onTelemetry);
  }

  dispatch(req: GenerateRequest, signal?: AbortSignal): AsyncIterable<EngineEvent> {
    return this.inner.dispatch(req, signal);
  }

  /** The gateway's `submit` (absent in the stream shape: the Dispatcher then streams, as over any live link). */
  readonly submit?: (req: GenerateRequest, callbacks: RequestCallbacks) => void;

  sendTargets(targets: RegionTargets): Promise<TargetsAck> {
    return this.inner.sendTargets(targets);
  }

  instances(): Promise<RegionInstances> {
    return this.inner.instances();
  }

  close(): Promise<void> {
    return this.inner.close();
  }
}

/** Builds every region of `fleet` on `clock` and the global pieces that read them. */
export function wireWeek(o: WeekWiringOptions): WeekWiring {
  const { fleet, clock } = o;
  const cfg = fleetConfig(fleet);
  const capacityTokens = (model: ModelName) => fleet.engines[model]!.maxBatch * fleet.engines[model]!.kvTokensPerSeq;
  const ledgers = cfg.regions.map(() => new Ledger());
  const actions: ControllerAction[][] = cfg.regions.map(() => []);
  const fleetRegions = startSimFleet({
    config: cfg,
    clock,
    delays: fleet.delays,
    weights: fleet.weights,
    spot: fleet.spot,
    random: (ri) => seededRandom(o.seed, 1000 + ri),
    strategy: o.strategy,
    onChange: (ri, inst, from) => ledgers[ri]!.record(inst, clock.now(), from),
    onAction: (ri, a) => actions[ri]!.push(a),
    ...(o.solver === undefined ? {} : { solver: o.solver }),
  });
  const regions: WeekRegion[] = fleetRegions.map((r, ri) => ({ name: r.name, sim: r.sim, link: new ReplayLink(r.link, r.sim.gateway, o.batchShape ?? "callbacks"), ledger: ledgers[ri]!, actions: actions[ri]!, ...(r.sim.loading === undefined ? {} : { loading: r.sim.loading }) }));
  const selector = new RegionSelector({
    clock,
    regions: cfg.regions.map((r) => ({ name: r.name, proximity: r.proximity, models: [...new Set(r.endpoints.map((e) => e.model))] })),
    memoryThreshold: cfg.router.memoryThreshold,
    telemetryStaleMs: cfg.router.telemetryStaleMs,
    instanceKvBytes: instanceKvBytesFrom(cfg),
  });
  const history = new MemoryHistory();
  const shifted = new ShiftedHistory(history, o.historyShiftMs);
  const recorder = new TelemetryRecorder(shifted);
  const batch = createBatchService({ config: cfg, clock, niwHistory: shifted, stores: { store: new EmbeddedQueueStore(null), files: new DirFileStore(null) }, });
  const telemetry = new Map<RegionName, RegionTelemetry>();
  const subscribers: ((ri: number, t: RegionTelemetry) => void)[] = [];
  const unsubscribes = regions.map((r, ri) =>
    r.link.subscribe((t) => {
      telemetry.set(r.name, t);
      selector.onTelemetry(t);
      void recorder.observe(t);
      for (const f of subscribers) f(ri, t);
    }),
  );
  batch.start(regions.map((r) => r.link));
  return {
    regions,
    regionIndex: new Map(regions.map((r, i) => [r.name, i])),
    selector,
    telemetry,
    history,
    historyShiftMs: o.historyShiftMs,
    batch,
    capacityTokens,
    onTelemetry: (f) => void subscribers.push(f),
    close: async () => {
      for (const u of unsubscribes) u();
      await batch.close();
      for (const r of regions) {
        await r.link.close();
        await r.sim.close();
      }
    },
  };
}
