/**
 * parseConfig: the whole configuration, section by section, each by its own parser (core's in *-section.ts, the
 * tiers' registered in sections.ts). Errors name the exact path; bad values are rejected, never replaced.
 */
import { ObjectReader, ValidationError } from "../validate.js";
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
  checkPools(config);
  readConfigSections(root, config);
  root.done();
  return config;
}

/**
 * Endpoints with a prefill/decode `role` (issue 48) are pools the controller scales: their engines are started with
 * that role, so they need engines the region starts itself (engine-sim, in process or on agents). Fixed engines take
 * their roles from engines.roles instead; a command template (a real engine) has no role flag tidegate could set.
 */
function checkPools(config: TidegateConfig): void {
  config.regions.forEach((r, i) =>
    r.endpoints.forEach((e, j) => {
      if (e.role === undefined) return;
      const path = `regions[${i}].endpoints[${j}].role`;
      if (config.controller.actuator === "static") throw new ValidationError(path, "a static region's engines are fixed: give each its role with engines.roles (a pool with a role is scaled by the agents or sim actuator)");
      if (config.engines.kind === "openai-http") throw new ValidationError(path, "engines of kind openai-http are fixed URLs: give each its role with engines.roles");
      if (config.engines.commandTemplate !== undefined) throw new ValidationError(path, "engines.commandTemplate starts real engines, which take no role from tidegate: start prefill and decode engines yourself and name their roles in engines.roles");
    }),
  );
}
