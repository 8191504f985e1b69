/**
 * Every region of a config built in one process, each behind the in-process link the global router (or a replay)
 * reaches it by: the one loop `tidegate dev` (bin/dev-stack.ts, whichever host `controller.actuator` names) and the
 * replays (sim-region.ts startSimFleet, on the simulated host) share. Regions are built in the config's order, each
 * link right after its region, so a replay's event order is the same whoever builds the fleet.
 */
import type { Clock } from "../../core/clock.js";
import type { TidegateConfig } from "../../core/config.js";
import type { Logger } from "../../core/log.js";
import type { RegionName } from "../../core/models.js";
import type { GenerateRequest } from "../../core/ports.js";
import type { RuntimeActuator } from "../actuator/port.js";
import type { ControllerAction } from "../controller/reconciler.js";
import { InProcessRegionLink } from "../link/in-process-link.js";
import type { BoundStrategy } from "../strategies/strategy-registry.js";
import { buildRegion, type EngineHost, type Region, type RegionMetricsHooks } from "./build-region.js";

export interface LinkedRegionsOptions<A extends RuntimeActuator, X> {
  config: TidegateConfig;
  clock: Clock;
  /** Region `index`'s engine host (config.regions order). */
  host(index: number): EngineHost<A, X>;
  /** The process's logger: each region logs under a child naming it; the links log here. */
  log?: Logger;
  /** Telemetry period of the in-process links (ms, default 1000: DESIGN, at least once a second). */
  telemetryIntervalMs?: number;
  /** Region `name`'s metrics sink. */
  metrics?(region: RegionName): RegionMetricsHooks;
  statsRefreshMs?: number;
  strategy?: BoundStrategy;
  onRouted?(region: RegionName, req: GenerateRequest, instanceId: string): void;
  onAction?(index: number, a: ControllerAction): void;
}

/** One region and its link. */
export interface LinkedRegion<A extends RuntimeActuator, X> {
  readonly region: Region<A, X>;
  readonly link: InProcessRegionLink;
}

export function buildLinkedRegions<A extends RuntimeActuator, X>(o: LinkedRegionsOptions<A, X>): LinkedRegion<A, X>[] {
  return o.config.regions.map((rc, index) => {
    const region = buildRegion({
      config: o.config,
      region: rc.name,
      clock: o.clock,
      ...(o.log === undefined ? {} : { log: o.log.child({ region: rc.name }) }),
      ...(o.metrics === undefined ? {} : { metrics: o.metrics(rc.name) }),
      ...(o.statsRefreshMs === undefined ? {} : { statsRefreshMs: o.statsRefreshMs }),
      ...(o.onRouted === undefined ? {} : { onRouted: (req: GenerateRequest, id: string) => o.onRouted!(rc.name, req, id) }),
      ...(o.strategy === undefined ? {} : { strategy: o.strategy }),
      ...(o.onAction === undefined ? {} : { onAction: (a: ControllerAction) => o.onAction!(index, a) }),
      host: o.host(index),
    });
    const link = new InProcessRegionLink(region.service, { clock: o.clock, telemetryIntervalMs: o.telemetryIntervalMs ?? 1000, ...(o.log === undefined ? {} : { log: o.log }) });
    return { region, link };
  });
}
