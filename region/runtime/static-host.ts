/**
 * The `fixedEngines` engine host (build-region.ts): a static region — controller.actuator "static", `tidegate region
 * --spawn-engines`, engines.kind "openai-http" — whose instances are the configured engines, made once at start by
 * a factory (region/actuator/static.ts StaticActuator: one per `instanceSlots` slot, scaling refused). The runtime
 * runs over it like any other actuator; it acknowledges and holds the planner's targets and runs no controller pass.
 * `ready()` resolves once every engine is made and serving; if one cannot be made, the ones made are closed and it
 * rejects with that error. `simEngineFactory` makes in-process simulated engines with the config's engines.*
 * (build-sim-engine.ts); spawned engine-sim processes and engines.urls are region/process/spawn.ts's.
 */
import type { Clock } from "../../core/clock.js";
import type { TidegateConfig } from "../../core/config.js";
import { StaticActuator, type EngineFactory } from "../actuator/static.js";
import type { EngineHost } from "./build-region.js";
import { TidegateError } from "../../core/errors.js";
import type { KvTransferObserver } from "../../engines/sim/kv-fabric.js";
import { buildSimEngine, newSimEngine, regionKvFabric, simEngineParams } from "./build-sim-engine.js";

/** The static host over `engines` (one engine per slot). `statsRefreshMs` 0 suits in-process engines (exact stats at every decision). */
export function fixedEngines(engines: EngineFactory, o: { statsRefreshMs?: number } = {}): EngineHost<StaticActuator> {
  return {
    ...(o.statsRefreshMs === undefined ? {} : { statsRefreshMs: o.statsRefreshMs }),
    start: ({ config, region, clock, gateway }) => {
      const actuator = new StaticActuator({ config, region, clock, gateway, engines });
      const started = actuator.start();
      // A failure is the caller's through ready(); never an unhandled rejection when nobody asks.
      started.catch(() => {});
      return {
        actuator,
        extras: {},
        ready: () => started,
        close: async () => {
          actuator.close();
          // Engines made after close are closed by the actuator; the gateway closes those it holds.
          await started.catch(() => {});
        },
      };
    },
  };
}

/**
 * In-process simulated engines on `clock` with the config's engines.* (and keystage pipelines), one per slot; a slot
 * named in engines.roles serves that prefill/decode role, its KV moved over one fabric per factory (a region's), whose
 * pulls `kvObserver` hears (the region's metrics).
 */
export function simEngineFactory(config: TidegateConfig, clock: Clock, kvObserver?: KvTransferObserver): EngineFactory {
  const fabricFor = regionKvFabric(clock, kvObserver);
  return async (s) => {
    const inst = { instanceId: s.instanceId, model: s.model, gpu: s.gpu, tp: s.tp };
    const role = config.engines.roles[s.instanceId];
    if (role === undefined) return buildSimEngine(config, inst, clock);
    const params = simEngineParams(config, s.model, s.gpu);
    if (params.pipeline !== undefined) throw new TidegateError("invalid_config", `engines.roles.${s.instanceId}: a pipeline (keystage.pipelines) takes no prefill/decode role`, { param: "engines.roles" });
    return newSimEngine(inst, { ...params, settings: { ...params.settings, role } }, clock, fabricFor(role));
  };
}
