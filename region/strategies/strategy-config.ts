/**
 * Region's rule over core's `controller` section (core/config/sections.ts registerConfigCheck): the configured
 * strategy's parameters (`controller.strategyParams`) must be known to its schema and in range, checked when the
 * config is parsed so a typo fails at start-up naming `controller.strategyParams.<key>`. Loaded by
 * region/config-sections.ts.
 */
import { registerConfigCheck } from "../../core/config/sections.js";
import { resolveStrategy } from "./strategy-registry.js";

registerConfigCheck((config) => {
  resolveStrategy(config.controller.strategy, config.controller.strategyParams, "controller.strategy", "controller.strategyParams");
});
