/**
 * The trace replay's in-process fleet: `startSimFleet` (region/runtime/sim-region.ts), the wiring `tidegate dev`
 * uses with `controller.actuator: "sim"` and the week replay uses — per region the same region runtime `tidegate
 * region` runs (gateway, TargetsStore, controller, actuator) on the `sim` actuator, starting with each endpoint's
 * configured `instances` serving, an
 * `InProcessRegionLink` carrying its telemetry every second (callback-link.ts: requests enter the gateway by its
 * callback form), and the global router's region choice (router/router-core.ts `RouterCore`: the RegionSelector,
 * SageServe §6.2 selection with the in-flight estimate, fed by those links — the object the live router builds) on
 * a VirtualClock and without HTTP. No plan reaches these regions, so the forecast-paced strategies hold the configured count (a
 * reactive `controller.strategy` would scale); run.ts drives requests through these objects synchronously.
 *
 * Gateways keep their default stats refresh (100 ms, as `tidegate dev`): requests enter by `Gateway.submit`, the
 * callback shape of the gateway's one entry point, which keeps the same in-flight estimate between refreshes as
 * `Gateway.generate` — so a replayed burst spreads over instances exactly as a streamed one (replay.test.ts).
 */
import type { VirtualClock } from "../../core/clock.js";
import type { TidegateConfig } from "../../core/config.js";
import type { RegionName } from "../../core/models.js";
import type { GenerateRequest } from "../../core/ports.js";
import type { InstanceRecord } from "../../region/actuator/port.js";
import type { ControllerAction } from "../../region/controller/reconciler.js";
import { SAGESERVE_DELAYS, type ActuatorDelays } from "../../region/actuator/sim.js";
import type { SimLoadingSettings } from "../../region/runtime/sim-loading.js";
import type { BoundStrategy } from "../../region/strategies/strategy-registry.js";
import type { Gateway } from "../../region/gateway/gateway.js";
import { startSimFleet, type SimRegion } from "../../region/runtime/sim-region.js";
import { RouterCore } from "../../router/router-core.js";
import type { RegionSelector } from "../../router/selector.js";
import { seededRandom } from "../workload/rng.js";
import { CallbackLink } from "./callback-link.js";

export interface ReplayWiring {
  clock: VirtualClock;
  config: TidegateConfig;
  regions: Map<RegionName, SimRegion>;
  gateways: Map<RegionName, Gateway>;
  links: Map<RegionName, CallbackLink>;
  /** The global router's region choice over `links` (router-core.ts). */
  router: RouterCore;
  /** `router.selector`. */
  selector: RegionSelector;
  close(): Promise<void>;
}

export interface ReplayWiringOptions {
  /** Telemetry period of the in-process links (default 1000 ms, as dev). */
  telemetryIntervalMs?: number;
  /** Engine event mode for callers that stream through Gateway.generate (default "per-token", as live). */
  events?: "coalesced" | "per-token";
  /** Gateway stats refresh period (default: the Gateway's, 100 ms, as dev; 0 reads exact stats at every decision). */
  statsRefreshMs?: number;
  /** The controller's strategy (default: config controller.strategy; no plan reaches a replay). */
  strategy?: BoundStrategy;
  /** Deploy delays of the sim actuator (default SageServe §7.1's). */
  delays?: ActuatorDelays;
  /** Every region's loading source (sim-loading.ts; default: the delays' constant loads). */
  loading?: SimLoadingSettings;
  /** Every controller action of region `index` (as SimFleetOptions.onAction). */
  onAction?(index: number, a: ControllerAction): void;
  /** Every routing decision of a region's gateway (the instance a request went to). */
  onRouted?(region: RegionName, req: GenerateRequest, instanceId: string): void;
  /** Every instance state change, e.g. a GPU-time ledger. */
  onChange?(region: RegionName, inst: Readonly<InstanceRecord>, from: InstanceRecord["state"] | undefined): void;
}

/** Builds the fleet of `config` on `clock`: instances as configured at start (endpoints[].instances), all serving. */
export function buildReplayWiring(config: TidegateConfig, clock: VirtualClock, opts: ReplayWiringOptions = {}): ReplayWiring {
  const fleet = startSimFleet({
    config,
    clock,
    delays: opts.delays ?? SAGESERVE_DELAYS,
    random: (ri) => seededRandom(1, ri),
    ...(opts.strategy === undefined ? {} : { strategy: opts.strategy }),
    ...(opts.loading === undefined ? {} : { loading: opts.loading }),
    ...(opts.onAction === undefined ? {} : { onAction: opts.onAction }),
    ...(opts.onRouted === undefined ? {} : { onRouted: opts.onRouted }),
    ...(opts.onChange === undefined ? {} : { onChange: (ri: number, inst: Readonly<InstanceRecord>, from: InstanceRecord["state"] | undefined) => opts.onChange!(config.regions[ri]!.name, inst, from) }),
    events: opts.events ?? "per-token",
    telemetryIntervalMs: opts.telemetryIntervalMs ?? 1000,
    ...(opts.statsRefreshMs === undefined ? {} : { statsRefreshMs: opts.statsRefreshMs }),
  });
  const regions = new Map<RegionName, SimRegion>(fleet.map((r) => [r.name, r.sim]));
  const gateways = new Map<RegionName, Gateway>(fleet.map((r) => [r.name, r.sim.gateway]));
  const links = new Map<RegionName, CallbackLink>(fleet.map((r) => [r.name, new CallbackLink(r.link, r.sim.gateway, "callbacks", () => clock.now())]));
  const router = new RouterCore({ config, clock, links: [...links.values()] });
  return {
    clock,
    config,
    regions,
    gateways,
    links,
    router,
    selector: router.selector,
    close: async () => {
      router.close();
      await Promise.all([...links.values()].map((l) => l.close()));
      await Promise.all([...regions.values()].map((r) => r.close()));
    },
  };
}
