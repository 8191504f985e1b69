/**
 * The week replay's wiring (DESIGN "The one rule that keeps the simulator honest"): per region the same region
 * runtime `tidegate region` runs — gateway → TargetsStore → controller → actuator — on the `sim` actuator
 * (region/runtime/sim-region.ts), reached through the in-process RegionLink as `tidegate dev` reaches its regions
 * (telemetry every second, targets by `sendTargets`, scaling listed by `instances`; requests in the links' callback
 * shape, sim/replay/callback-link.ts); the global router's region choice (router/router-core.ts `RouterCore`, the
 * object the live router builds) fed by those links; and the planner's demand history written by the live
 * recorders (planner/recorder.ts from telemetry, forecasts/niw-recorder.ts for batch dispatches). A GPU-time ledger
 * per region listens to the actuator for the run's books.
 */
import type { VirtualClock } from "../../core/clock.js";
import type { ModelName, RegionName } from "../../core/models.js";
import type { GenerateRequest, RegionTelemetry } from "../../core/ports.js";
import { MemoryHistory, type DemandHistory, type DemandSample, type SeriesKey } from "../../forecasts/history.js";
import { TelemetryRecorder } from "../../planner/recorder.js";
import { Ledger } from "../../region/actuator/ledger.js";
import type { ControllerAction } from "../../region/controller/reconciler.js";
import { startSimFleet, type SimRegion } from "../../region/runtime/sim-region.js";
import type { BoundStrategy } from "../../region/strategies/strategy-registry.js";
import type { Solver } from "../../core/solver.js";
import { createBatchService, type BatchService } from "../../router/batch/service.js";
import { DirFileStore } from "../../router/queue/dir-files.js";
import { EmbeddedQueueStore } from "../../router/queue/embedded.js";
import { RouterCore } from "../../router/router-core.js";
import type { RegionSelector } from "../../router/selector.js";
import { CallbackLink, type SubmitShape } from "../replay/callback-link.js";
import { seededRandom } from "../workload/rng.js";
import { fleetConfig, type FleetSpec } from "./fleet.js";
import type { RegionBooks } from "./state.js";

/** One region of the replay. */
export interface WeekRegion extends RegionBooks {
  readonly name: RegionName;
  readonly sim: SimRegion;
  readonly link: CallbackLink;
  readonly ledger: Ledger;
  readonly actions: ControllerAction[];
}

export interface WeekWiring {
  regions: WeekRegion[];
  regionIndex: Map<RegionName, number>;
  /** The global router's region choice over the regions' links (router-core.ts). */
  router: RouterCore;
  /** `router.selector`. */
  selector: RegionSelector;
  /** Each region's latest telemetry (the planner's live fleet). */
  telemetry: Map<RegionName, RegionTelemetry>;
  /** The planner's demand history, in history time (replay time + `historyShiftMs`). */
  history: MemoryHistory;
  historyShiftMs: number;
  /** The same history as seen from replay time (what the recorders write to and the planner's round reads). */
  plannerHistory: DemandHistory;
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
   * What the links' `submit` (the Dispatcher's one path) does: enter the gateway by callbacks (the replay's default)
   * or stream every token as over a live link (two-shapes.test.ts).
   */
  batchShape?: SubmitShape;
  /** Every routing decision of a region's gateway (the instance a request went to; tests). */
  onRouted?(region: RegionName, req: GenerateRequest, instanceId: string): void;
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
    ...(o.onRouted === undefined ? {} : { onRouted: o.onRouted }),
  });
  const regions: WeekRegion[] = fleetRegions.map((r, ri) => ({ name: r.name, sim: r.sim, link: new CallbackLink(r.link, r.sim.gateway, o.batchShape ?? "callbacks", () => clock.now()), ledger: ledgers[ri]!, actions: actions[ri]!, ...(r.sim.loading === undefined ? {} : { loading: r.sim.loading }) }));
  const regionIndex = new Map(regions.map((r, i) => [r.name, i]));
  const history = new MemoryHistory();
  const shifted = new ShiftedHistory(history, o.historyShiftMs);
  const recorder = new TelemetryRecorder(shifted);
  const batch = createBatchService({ config: cfg, clock, niwHistory: shifted, stores: { store: new EmbeddedQueueStore(null), files: new DirFileStore(null) }, });
  const telemetry = new Map<RegionName, RegionTelemetry>();
  const subscribers: ((ri: number, t: RegionTelemetry) => void)[] = [];
  // One subscription per link, the router's: the selector first, then the planner's fleet and history recorder
  // and the replay's subscribers (RouterCore.observe).
  const router = new RouterCore({
    config: cfg,
    clock,
    links: regions.map((r) => r.link),
    observe: (t) => {
      telemetry.set(t.region, t);
      void recorder.observe(t);
      const ri = regionIndex.get(t.region)!;
      for (const f of subscribers) f(ri, t);
    },
  });
  batch.start(regions.map((r) => r.link));
  return {
    regions,
    regionIndex,
    router,
    selector: router.selector,
    telemetry,
    history,
    historyShiftMs: o.historyShiftMs,
    plannerHistory: shifted,
    batch,
    capacityTokens,
    onTelemetry: (f) => void subscribers.push(f),
    close: async () => {
      router.close();
      await batch.close();
      for (const r of regions) {
        await r.link.close();
        await r.sim.close();
      }
    },
  };
}
