/**
 * The global router's region choice as one object (DESIGN "Request path" step 1): the RegionSelector built from
 * configuration (SageServe §6.2 selection with the router's in-flight estimate, selector.ts), fed by every region
 * link's telemetry — a link that reports its region down makes it unavailable at once — and the links requests go
 * out on. The live router (server.ts → completions.ts → relay.ts `dispatchWithRetry`) and the replays (sim/replay,
 * sim/week → `submitWithRetry`, the callback shape) build this same object from their links; nothing else builds
 * a RegionSelector.
 */
import type { Clock } from "../core/clock.js";
import { regionModels, sloFor, type TidegateConfig } from "../core/config.js";
import type { RegionName } from "../core/models.js";
import type { GenerateRequest, LinkCallbacks, RegionLink, RegionTelemetry, Unsubscribe } from "../core/ports.js";
import { tokenPaceFrom } from "./pace.js";
import { submitWithRetry } from "./relay.js";
import { RegionSelector, instanceKvBytesFrom } from "./selector.js";
import { RegionPrefixes } from "./prefix-regions.js";

/** The selector `config` describes: its regions, their proximity and models, router thresholds, KV per instance. */
export function selectorFromConfig(config: TidegateConfig, clock: Clock): RegionSelector {
  return new RegionSelector({
    clock,
    regions: config.regions.map((r) => ({ name: r.name, proximity: r.proximity, models: regionModels(r) })),
    memoryThreshold: config.router.memoryThreshold,
    telemetryStaleMs: config.router.telemetryStaleMs,
    instanceKvBytes: instanceKvBytesFrom(config),
    pace: tokenPaceFrom(config),
    // Prefix affinity between regions (issue 34): the `routing` section (registered by region) turns it on.
    // SLO-aware spill (issue 46 item 5): on unless router.spill is false / "off".
    ...(config.router.spill ? { spill: { sloTtftMs: (m: string) => sloFor(config.slo, m).ttftMs } } : {}),
    ...(config.routing?.regionPrefix === true ? { prefixes: new RegionPrefixes(config.routing.blockTokens) } : {}),
  });
}

export interface RouterCoreOptions {
  config: TidegateConfig;
  clock: Clock;
  /** One link per configured region (regions without one are never selected). */
  links: readonly RegionLink[];
  /** Also told of every snapshot, after the selector (a replay's books, the planner's history recorder). */
  observe?: (t: RegionTelemetry) => void;
}

/** The selector, fed by the links, and the links (see the file comment). */
export class RouterCore {
  readonly selector: RegionSelector;
  readonly links: ReadonlyMap<RegionName, RegionLink>;
  private readonly unsubscribes: Unsubscribe[];

  constructor(o: RouterCoreOptions) {
    this.selector = selectorFromConfig(o.config, o.clock);
    this.links = new Map(o.links.map((l) => [l.region, l]));
    const observe = o.observe;
    this.unsubscribes = o.links.map((link) =>
      link.subscribe(
        (t) => {
          this.selector.onTelemetry(t);
          observe?.(t);
        },
        () => this.selector.markDown(link.region),
      ),
    );
  }

  /**
   * Sends `req` in callback shape to the region the selector picks (relay.ts `submitWithRetry`): a region that
   * refuses it at once is excluded and the next one tried. Returns the region, or undefined when none took it.
   */
  submit(req: GenerateRequest, clientRegion: RegionName | undefined, callbacks: LinkCallbacks): RegionName | undefined {
    return submitWithRetry({ selector: this.selector, links: this.links, req, clientRegion, callbacks });
  }

  /** Stops feeding the selector (does not close the links). */
  close(): void {
    for (const u of this.unsubscribes.splice(0)) u();
  }
}
