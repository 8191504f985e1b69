/**
 * parseConfig: the whole configuration, section by section, each by its own parser (core's in *-section.ts, the
 * tiers' registered in sections.ts). Errors name the exact path; bad values are rejected, never replaced.
 */
import { ObjectReader } from "../validate.js";
import { parseController } from "./controller-section.js";
import { parseEngines } from "./engines-section.js";
import { parseModels } from "./models-section.js";
import { parseParameters } from "./parameters-section.js";
import { parsePlanner } from "./planner-section.js";
import { parseQueue } from "./queue-section.js";
import { parseRegions } from "./regions-section.js";
import { parseRouter } from "./router-section.js";
import { parseSlo } from "./slo-section.js";
import { readConfigSections, type TidegateConfig } from "./sections.js";

export type { TidegateConfig };

/**
 * Validates a whole config document (no merging: see load.ts for files over the default) and returns it typed, or
 * throws the first ValidationError. Sections are read in this order: models, regions, router, queue, planner,
 * controller, engines, parameters, slo, then the registered sections (each followed by its cross-section check); a key
 * no parser read is an unknown field.
 */
export function parseConfig(json: unknown): TidegateConfig {
  const root = new ObjectReader(json, "");
  const models = parseModels(root);
  const regions = parseRegions(root, models);
  const router = parseRouter(root.object("router"), new Set(regions.map((r) => r.name)), new Set(models.map((m) => m.name)));
  const queue = parseQueue(root.object("queue"));
  const planner = parsePlanner(root.object("planner"));
  const controller = parseController(root.object("controller"));
  const engines = parseEngines(root.object("engines"), models, regions);
  const parameters = parseParameters(root.object("parameters"), models);
  const slo = parseSlo(root.object("slo"), models);
  const config: TidegateConfig = { models, regions, router, queue, planner, controller, engines, parameters, slo };
  readConfigSections(root, config);
  root.done();
  return config;
}
