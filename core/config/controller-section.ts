/** The `controller` section: each region's scaling strategy, reconcile loop, actuator and its retry and loss timers. */
import { DEFAULT_PD_SWITCH, DEFAULT_STRATEGY } from "../defaults.js";
import type { ObjectReader } from "../validate.js";
import { readRegionSettings, type RegionSettings } from "./region-settings.js";

/**
 * The region controller's settings. Tiers above core add per-region settings (RegionSettings, e.g. region's
 * `loading`): here they apply to every region without its own (`regions[].<key>`).
 */
export interface ControllerConfig extends RegionSettings {
  /**
   * The scaling strategy (region/strategies/strategy-registry.ts). "keystage" holds the planner's target like LT-I and has
   * each instance of a pipelined endpoint (`keystage.pipelines`) split its GPUs over its stages by key-stage scaling;
   * under any other strategy a pipelined instance scales all its stages together (region/keystage/pipeline-engine.ts).
   */
  strategy: "reactive" | "reactive-hpa" | "demand" | "lt-i" | "lt-u" | "lt-ua" | "lt-hpa" | "predictive-hpa" | "keystage";
  /**
   * The strategy's parameters by name (each strategy's typed schema, region/strategies; e.g. lt-hpa's
   * `targetUtilization`); absent keys take the strategy's defaults. Core reads numbers; region checks names and ranges
   * when the config is parsed (region/strategies/strategy-config.ts).
   */
  strategyParams: Record<string, number>;
  reconcileIntervalMs: number;
  /**
   * How a region's instances come and go: "agents" (default) — engine processes that node agents start and stop,
   * parameters over the data plane (region/actuator/agents.ts); "static" — the fixed engines of the config
   * (regions[].endpoints[].instances, engines.urls or --spawn-engines), which the controller cannot change;
   * "sim" — `tidegate dev` only: the region runtime on the simulated actuator the replays run (region/actuator/sim.ts,
   * SageServe §7.1 deploy delays) with in-process simulated engines, no data plane (region/runtime/sim-region.ts).
   */
  actuator: "agents" | "static" | "sim";
  /** Most scale steps one endpoint takes in one pass (a jump to the target starts every instance at once). */
  maxStepsPerPass: number;
  /** Backoff of a failing scale-out: first delay, doubling up to the max. */
  retryInitialMs: number;
  retryMaxMs: number;
  /** A node agent silent this long is lost: its instances go, the parameter pool restores its invariant. */
  agentLostAfterMs: number;
  /** Scale to zero and back (issue 33; region/controller/zero.ts, region/gateway/cold-hold.ts). */
  scaleToZero: ScaleToZeroConfig;
  /**
   * A decode pool short of instances first switches a serving prefill instance to decode (BlitzScale §5.2; default
   * true: bench:burst's disaggregated setting judges it against loading a decode instance over the network).
   */
  pdSwitch: boolean;
}

/**
 * Scale to zero and back. Whatever these say, a request for a model whose every endpoint in a region has
 * `minInstances` 0 and no serving instance there is held at the region's gateway (at most `maxHeld` per model, each at
 * most `holdMs`) while the controller brings one up (issue 50); a request beyond either bound is refused with 503
 * `model_cold`, one the region cannot start with 503 `no_capacity` / `not_placed` / `cold_start_failed`, each with
 * `Retry-After: retryAfterS`. `idleMs` > 0 turns on the idle drain: such an endpoint drains its last instance once its
 * model has been idle that long. `idleMs` 0 (default): no idle drain, a model that came up stays up.
 */
export interface ScaleToZeroConfig {
  idleMs: number;
  holdMs: number;
  maxHeld: number;
  retryAfterS: number;
}

/** Every key of `r` as a number (names are the strategy's to check). */
function readNumbers(r: ObjectReader): Record<string, number> {
  const out: Record<string, number> = {};
  for (const key of Object.keys(r.value)) out[key] = r.number(key);
  r.done();
  return out;
}

/** Reads the `controller` object, with the registered per-region settings (sections.ts) as fleet-wide defaults. */
export function parseController(cr: ObjectReader): ControllerConfig {
  const controller: ControllerConfig = {
    strategy: cr.string("strategy", DEFAULT_STRATEGY, { oneOf: ["reactive", "reactive-hpa", "demand", "lt-i", "lt-u", "lt-ua", "lt-hpa", "predictive-hpa", "keystage"] }) as ControllerConfig["strategy"],
    strategyParams: readNumbers(cr.object("strategyParams")),
    reconcileIntervalMs: cr.number("reconcileIntervalMs", 1000, { gt: 0 }),
    actuator: cr.string("actuator", "agents", { oneOf: ["agents", "static", "sim"] }) as ControllerConfig["actuator"],
    maxStepsPerPass: cr.number("maxStepsPerPass", 8, { integer: true, min: 1, max: 1000 }),
    retryInitialMs: cr.number("retryInitialMs", 1000, { gt: 0 }),
    retryMaxMs: cr.number("retryMaxMs", 60_000, { gt: 0 }),
    agentLostAfterMs: cr.number("agentLostAfterMs", 3000, { gt: 0 }),
    scaleToZero: readScaleToZero(cr.object("scaleToZero")),
    pdSwitch: cr.boolean("pdSwitch", DEFAULT_PD_SWITCH),
  };
  Object.assign(controller, readRegionSettings(cr));
  if (controller.retryMaxMs < controller.retryInitialMs) cr.fail("retryMaxMs", `must be ≥ retryInitialMs (${controller.retryInitialMs})`);
  cr.done();
  return controller;
}

/** Reads `controller.scaleToZero` (ScaleToZeroConfig; every key optional). */
function readScaleToZero(r: ObjectReader): ScaleToZeroConfig {
  const out = {
    idleMs: r.number("idleMs", 0, { min: 0 }),
    holdMs: r.number("holdMs", 60_000, { gt: 0 }),
    maxHeld: r.number("maxHeld", 256, { integer: true, min: 1 }),
    retryAfterS: r.number("retryAfterS", 5, { integer: true, min: 1 }),
  };
  r.done();
  return out;
}
