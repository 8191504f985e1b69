/**
 * The one configuration file (JSON), validated once at start-up. Every error names the exact path
 * (`regions[1].gpus[0].count`); bad values are rejected, never replaced. Units are in the names.
 *
 * This is the public entry; the code lives in core/config/ (README there), one file per section: `models`,
 * `regions` (fleet), `router`, `queue`, `planner`, `controller`, `engines`, `parameters`, `slo` (per-model interactive SLOs). Sections a tier above core
 * owns (region's `keystage`, and its per-region `loading` at `controller.loading` / `regions[].loading`) are
 * registered by that tier (core/config/sections.ts, region-settings.ts; region/config-sections.ts), so core imports no tier.
 * `DEFAULT_CONFIG_JSON` is the embedded default `tidegate dev` runs on (3 regions, 4 models, simulated engines).
 */
export type { ModelConfig } from "./config/models-section.js";
export type { EndpointConfig, RegionConfig } from "./config/regions-section.js";
export type { RouterConfig } from "./config/router-section.js";
export { DEFAULT_SLO, meetsSlo, sloFor, type ModelSlo, type SloConfig } from "./config/slo-section.js";
export type { QueueConfig } from "./config/queue-section.js";
export type { PlannerConfig } from "./config/planner-section.js";
export type { ControllerConfig } from "./config/controller-section.js";
export type { EnginesConfig } from "./config/engines-section.js";
export { engineSettingsLookup, modelEngineSettings } from "./config/engines-section.js";
export { DEFAULT_PARAMETER_BYTES, type ModelParametersConfig, type ParametersConfig } from "./config/parameters-section.js";
export { parseConfig, type TidegateConfig } from "./config/parse.js";
export { DEFAULT_CONFIG_JSON } from "./config/defaults.js";
export { loadConfig, mergeOverDefault, validateConfig } from "./config/load.js";
export { gpusPerInstanceOf, instanceGpus, regionModels } from "./config/lookups.js";
export type { ConfigSection, ConfigSections } from "./config/sections.js";
export type { RegionSetting, RegionSettings } from "./config/region-settings.js";
