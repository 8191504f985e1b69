/**
 * The replay's in-process fleet: the same classes `tidegate dev` wires (bin/commands/dev.ts buildDevStack), on a
 * VirtualClock and without HTTP — per region a `Gateway` (region/gateway/gateway.ts: endpoint by effective memory,
 * JSQ instance) over `SimEngine`s, an `InProcessRegionLink` carrying its telemetry every second, and the global
 * router's `RegionSelector` (router/selector.ts: SageServe §6.2 selection with the in-flight estimate) fed by those
 * links. run.ts drives requests through these objects synchronously (see there).
 *
 * Gateways keep their default stats refresh (100 ms, as `tidegate dev`): requests enter by `Gateway.submit`, the
 * callback shape of the gateway's one entry point, which keeps the same in-flight estimate between refreshes as
 * `Gateway.generate` — so a replayed burst spreads over instances exactly as a streamed one (replay.test.ts).
 */
import type { VirtualClock } from "../../core/clock.js";
import { regionModels, type TidegateConfig } from "../../core/config.js";
import type { RegionName } from "../../core/models.js";
import type { RegionLink } from "../../core/ports.js";
import { SimEngine } from "../../region/engines/sim/engine.js";
import { Gateway } from "../../region/gateway/gateway.js";
import { InProcessRegionLink } from "../../region/link/in-process.js";
import { RegionSelector, instanceKvBytesFrom } from "../../router/selector.js";

export interface ReplayWiring {
  clock: VirtualClock;
  config: TidegateConfig;
  gateways: Map<RegionName, Gateway>;
  engines: Map<string, SimEngine>;
  links: Map<RegionName, RegionLink>;
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
}

/** Builds the fleet of `config` on `clock`: instances as configured at start (endpoints[].instances), all serving. */
export function buildReplayWiring(config: TidegateConfig, clock: VirtualClock, opts: ReplayWiringOptions = {}): ReplayWiring {
  const gateways = new Map<RegionName, Gateway>();
  const engines = new Map<string, SimEngine>();
  const links = new Map<RegionName, RegionLink>();
  for (const region of config.regions) {
    const gateway = new Gateway({ region: region.name, clock, ...(opts.statsRefreshMs === undefined ? {} : { statsRefreshMs: opts.statsRefreshMs }) });
    for (const ep of region.endpoints) {
      const tp = config.models.find((m) => m.name === ep.model)?.gpusPerInstance[ep.gpu];
      if (tp === undefined) throw new Error(`config: ${ep.model} has no gpusPerInstance for ${ep.gpu}`);
      gateway.addEndpoint(ep.model, ep.gpu);
      for (let i = 0; i < ep.instances; i++) {
        const engine = new SimEngine({
          instanceId: `${region.name}/${ep.model}/${ep.gpu}/${i}`,
          model: ep.model,
          gpu: ep.gpu,
          tp,
          clock,
          timeScale: 1,
          events: opts.events ?? "per-token",
        });
        engines.set(engine.instanceId, engine);
        gateway.addInstance(ep.gpu, engine, "serving");
      }
    }
    gateways.set(region.name, gateway);
    links.set(region.name, new InProcessRegionLink(gateway, { clock, telemetryIntervalMs: opts.telemetryIntervalMs ?? 1000 }));
  }
  const selector = new RegionSelector({
    clock,
    regions: config.regions.map((r) => ({ name: r.name, proximity: r.proximity, models: regionModels(r) })),
    memoryThreshold: config.router.memoryThreshold,
    telemetryStaleMs: config.router.telemetryStaleMs,
    instanceKvBytes: instanceKvBytesFrom(config),
  });
  const unsubscribes = [...links.values()].map((l) => l.subscribe((t) => selector.onTelemetry(t)));
  return {
    clock,
    config,
    gateways,
    engines,
    links,
    selector,
    close: async () => {
      for (const u of unsubscribes) u();
      await Promise.all([...links.values()].map((l) => l.close()));
      await Promise.all([...gateways.values()].map((g) => g.close()));
    },
  };
}
