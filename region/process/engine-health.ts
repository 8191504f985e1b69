/**
 * Engine liveness for a static region (issue 15, item 1): an engine that dies or hangs under a live region must stop
 * being reported as serving within 2 s, and come back when it answers again.
 *
 * Every `intervalMs` (Clock) each instance whose engine reports `healthy() === false` (openai-http: its last /metrics
 * scrape got no HTTP answer — refused, reset or over `scrapeTimeoutMs`) is moved from `serving` to `draining` — the gateway stops routing to
 * it and telemetry stops counting it, so the global router stops sending the model there when it was the last one.
 * When the engine says `true` again, an instance this watcher drained goes back to `serving`. Instances drained by
 * anyone else are left alone. Pure over the Gateway and a Clock; no HTTP.
 */
import type { Clock, Timer } from "../../core/clock.js";
import type { Logger } from "../../core/log.js";
import type { Engine } from "../../core/ports.js";
import type { Gateway } from "../gateway/gateway.js";

export interface EngineHealthWatch {
  /** Instance ids this watcher holds drained now. */
  readonly down: ReadonlySet<string>;
  /** One pass now (the timer calls it). */
  check(): void;
  stop(): void;
}

/** Starts watching `engines` (those added to `gateway`) every `intervalMs` (default 250 ms). */
export function watchEngineHealth(gateway: Gateway, engines: readonly Engine[], clock: Clock, log: Logger, intervalMs = 250): EngineHealthWatch {
  const down = new Set<string>();
  const check = () => {
    const states = new Map(gateway.instances().map((i) => [i.instanceId, i.state]));
    for (const e of engines) {
      const h = e.healthy?.();
      const state = states.get(e.instanceId);
      if (state === undefined) continue;
      if (h === false && state === "serving") {
        gateway.setInstanceState(e.instanceId, "draining");
        down.add(e.instanceId);
        log.warn("engine stopped answering; instance taken out of service", { instanceId: e.instanceId });
      } else if (h === true && down.has(e.instanceId)) {
        down.delete(e.instanceId);
        if (state === "draining") {
          gateway.setInstanceState(e.instanceId, "serving");
          log.info("engine answers again; instance back in service", { instanceId: e.instanceId });
        }
      }
    }
  };
  const timer: Timer = clock.every(intervalMs, check);
  return { down, check, stop: () => timer.cancel() };
}
