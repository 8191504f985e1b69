/**
 * The config sections a tier above core owns (issue 30: core imports no tier). Core parses its own sections
 * (models, regions, router, queue, planner, controller, engines, parameters); a tier that owns a section registers
 * its parser here, and adds the section to the config's type by declaration merging:
 *
 *   declare module "../../core/config/sections.js" { interface ConfigSections { keystage?: KeystageConfig | undefined } }
 *   registerConfigSection({ key: "keystage", parse: parseKeystageConfig, check: checkPipelinedEndpoints });
 *
 * Two kinds of extension: a top-level section (`ConfigSections`, e.g. region's `keystage`) and a per-region setting
 * (`RegionSettings`, e.g. region's `loading`), read at `controller.<key>` (every region) and at `regions[i].<key>`
 * (that region's own, over the controller's). parseConfig (parse.ts) calls the registered parsers where the keys sit,
 * so their errors name the same paths and come in the same order as core's own. A key nobody registered is an
 * unknown field ("keystage: is not a known field"): a process must load the owning tier's registrations (region:
 * region/config-sections.ts) before it parses a config; region/config-sections.test.ts checks every entry point does.
 * Per-region settings live in region-settings.ts. `TidegateConfig` is declared here, beside the sections it extends,
 * so that nothing this file imports imports it back.
 */
import type { ObjectReader } from "../validate.js";
import type { ControllerConfig } from "./controller-section.js";
import type { RoutingConfig } from "./routing-section.js";
import type { EnginesConfig } from "./engines-section.js";
import type { ModelConfig } from "./models-section.js";
import type { ParametersConfig } from "./parameters-section.js";
import type { PlannerConfig } from "./planner-section.js";
import type { QueueConfig } from "./queue-section.js";
import { addOnce } from "./region-settings.js";
import type { RegionConfig } from "./regions-section.js";
import type { RouterConfig } from "./router-section.js";
import type { SloConfig } from "./slo-section.js";

/**
 * Top-level sections whose parser a tier above core registers (each optional: absent in the file = undefined). A
 * section another tier reads has its type declared here, in core (`routing`, which the global router reads); one
 * only its owning tier and the tiers above it read may be added by that tier (test/layers.ts hiddenConfigReads).
 */
export interface ConfigSections {
  /** Instance routing in the region gateway (region/gateway/scoring/routing-config.ts parses it). */
  routing?: RoutingConfig | undefined;
}

/** The validated configuration: core's sections, and the sections tiers above core register (ConfigSections). */
export interface TidegateConfig extends ConfigSections {
  models: ModelConfig[];
  regions: RegionConfig[];
  router: RouterConfig;
  queue: QueueConfig;
  planner: PlannerConfig;
  controller: ControllerConfig;
  engines: EnginesConfig;
  parameters: ParametersConfig;
  slo: SloConfig;
}

/** A top-level section a tier owns. */
export interface ConfigSection<K extends keyof ConfigSections> {
  readonly key: K;
  /** Reads the section at `path` (= `key`); `raw` undefined = absent. Throws a ValidationError naming the exact path. */
  parse(raw: unknown, path: string): ConfigSections[K] | undefined;
  /** Rules between this section and the rest, run once every section is parsed (the section may be absent). */
  check?(config: TidegateConfig): void;
}

interface AnySection {
  readonly key: string;
  parse(raw: unknown, path: string): unknown;
  check?(config: TidegateConfig): void;
}

const sections: AnySection[] = [];

/** Registers a top-level section (once per key; registering the same object again is a no-op). Parsed in registration order. */
export function registerConfigSection<K extends keyof ConfigSections>(section: ConfigSection<K>): void {
  addOnce(sections, "section", section as unknown as AnySection);
}

/** The registered top-level sections' keys, in registration order. */
export function registeredSections(): string[] {
  return sections.map((s) => s.key);
}

const checks: ((config: TidegateConfig) => void)[] = [];

/**
 * Registers a rule a tier adds over core's own sections (once per function), e.g. region checking
 * `controller.strategyParams` against the strategy's schema. Runs after the sections' checks; throws a
 * ValidationError naming the path.
 */
export function registerConfigCheck(check: (config: TidegateConfig) => void): void {
  if (!checks.includes(check)) checks.push(check);
}

/** Reads every registered top-level section from the root reader into `config`, then runs each section's check and the registered checks. */
export function readConfigSections(root: ObjectReader, config: TidegateConfig): void {
  for (const s of sections) {
    const v = s.parse(root.raw(s.key), s.key);
    if (v !== undefined) (config as unknown as Record<string, unknown>)[s.key] = v;
  }
  for (const s of sections) s.check?.(config);
  for (const c of checks) c(config);
}
